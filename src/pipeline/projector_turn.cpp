// Events to the turn's row (see projector.hpp for which event carries which change). The row is handed over
// when the turn's status changes, with every field as the log says at that point: a stage or an intent rides
// with the next status change, as the runtime has always written them.
#include "agentrt/stages.hpp"
#include "agentrt/turn_state.hpp"
#include "pipeline/facts.hpp"
#include "pipeline/projector.hpp"

namespace agentrt {
inline namespace v1 {

using projection::member;
using projection::text_of;

namespace {

// metadata.agentrt.turn of an event, or null.
const json* turn_facts(const Event& e) {
  const json* facts = runtime_facts(e);
  return facts ? member(*facts, "turn") : nullptr;
}

}  // namespace

void Projector::seed_turn(const TurnRecord& t) { turns_.emplace(t.id, t); }

std::optional<TurnRecord> Projector::take_turn() {
  if (changed_turn_.empty()) return std::nullopt;
  auto it = turns_.find(changed_turn_);
  changed_turn_.clear();
  if (it == turns_.end()) return std::nullopt;
  return it->second;
}

std::optional<TurnRecord> Projector::turn(const std::string& turn_id) const {
  auto it = turns_.find(turn_id);
  if (it == turns_.end()) return std::nullopt;
  return it->second;
}

TurnRecord* Projector::turn_of_event(const std::string& run_id) {
  auto it = turns_.find(turn_of(run_id));
  return it == turns_.end() ? nullptr : &it->second;
}

// Every status change through the turn table; the row is handed over at every end, a change or not.
void Projector::move_turn(TurnRecord& t, TurnStatus to) {
  if (t.status != to) check_transition(t.id, t.status, to);
  t.status = to;
  changed_turn_ = t.id;
}

// RUN_STARTED: a new turn (metadata.agentrt.turn: userId, owner, stage, clientMessageId), a resumed one (a
// decision: the run resumes it), or a run that closes a waiting turn.
void Projector::turn_started(const std::string& run_id, const std::string& turn_id, const Event& e) {
  if (turn_id.empty()) return;
  const json* facts = turn_facts(e);
  const json* decision = nullptr;
  if (const json* all = runtime_facts(e)) decision = member(*all, "decision");
  auto it = turns_.find(turn_id);
  if (it == turns_.end()) {
    if (!facts || decision) return;  // a turn this projector never saw start, and was not told of
    TurnRecord t;
    t.id = turn_id;
    t.thread_id = thread_id_;
    t.user_id = text_of(*facts, "userId");
    t.client_message_id = text_of(*facts, "clientMessageId");
    t.stage = text_of(*facts, "stage");
    t.owner = text_of(*facts, "owner");
    t.status = TurnStatus::running;
    t.run_id = run_id;
    t.parent_run_id = e.parent_run_id;
    changed_turn_ = turn_id;
    turns_.emplace(turn_id, std::move(t));
    return;
  }
  TurnRecord& t = it->second;
  t.run_id = run_id;
  t.parent_run_id = e.parent_run_id;
  if (decision) {
    move_turn(t, TurnStatus::resuming);
    t.interrupts = json::array();
    t.trace.clear();
    if (facts) t.owner = text_of(*facts, "owner");
  }
}

// STEP_STARTED: the stage; a resumed turn's continuation is running from its first step.
void Projector::turn_step(const std::string& run_id, std::string_view step) {
  TurnRecord* t = turn_of_event(run_id);
  if (!t) return;
  t->stage = step;
  if (t->status == TurnStatus::resuming) move_turn(*t, TurnStatus::running);
}

void Projector::turn_intent(const std::string& run_id, const json& value) {
  if (TurnRecord* t = turn_of_event(run_id)) t->intent = text_of(value, "text");
}

// RUN_FINISHED (completed, paused, cancelled) and RUN_ERROR (failed, or the approval expired); their
// metadata.agentrt.turn: steps, usage (the turn's), error where the turn has one, and a pause's trace (its wait's
// span).
void Projector::turn_ended(const std::string& run_id, const Event& e) {
  TurnRecord* t = turn_of_event(run_id);
  if (!t) return;
  TurnStatus to = TurnStatus::failed;
  if (e.type == EventType::RUN_ERROR) {
    to = e.code == "approval_expired" || e.code == "answer_expired" ? TurnStatus::expired : TurnStatus::failed;
    t->error = e.message;
  } else {
    const std::string outcome = text_of(e.outcome, "type");
    const json* pending = member(e.outcome, "pendingToolCallIds");
    to = outcome == "interrupt"                                ? TurnStatus::waiting_approval
         : outcome == "cancelled"                              ? TurnStatus::cancelled
         : pending && pending->is_array() && !pending->empty() ? TurnStatus::waiting_client
                                                               : TurnStatus::completed;
  }
  if (const json* facts = turn_facts(e)) {
    if (const json* steps = member(*facts, "steps"); steps && steps->is_number_integer()) t->steps = *steps;
    if (const json* usage = member(*facts, "usage")) t->usage = *usage;
    if (const json* error = member(*facts, "error"); error && error->is_string()) t->error = *error;
    if (const json* expires = member(*facts, "expiresAt"); expires && expires->is_number_integer())
      t->expires_at = *expires;
    if (is_waiting(to)) {
      if (const json* apr = member(*facts, "approvalRequestId"); apr && apr->is_string()) t->approval_request_id = *apr;
      t->trace = text_of(*facts, "trace");
    }
  }
  t->owner.clear();
  if (to == TurnStatus::waiting_approval) {
    const json* interrupts = member(e.outcome, "interrupts");
    t->interrupts = interrupts && interrupts->is_array() ? *interrupts : json::array();
    if (!t->interrupts.empty())
      if (const json* meta = member(t->interrupts[0], "metadata"))
        t->approval_request_id = text_of(*meta, "approvalRequestId");
  } else if (to != TurnStatus::failed) {
    t->interrupts = json::array();
  }
  // A failure that comes while the turn cannot fail (it ended already) keeps its status.
  if (to == TurnStatus::failed && !can_transition(t->status, to)) to = t->status;
  if (!is_waiting(to)) t->trace.clear();
  move_turn(*t, to);
}

}  // namespace v1
}  // namespace agentrt
