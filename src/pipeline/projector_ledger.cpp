// Events to the tool ledger (see projector.hpp for which event carries which change). Every status change goes
// through advance(), the ledger's transition table: an event that asks for a move the table refuses throws.
#include <algorithm>
#include <tuple>

#include "agentrt/records.hpp"
#include "pipeline/facts.hpp"
#include "pipeline/projector.hpp"

namespace agentrt {
inline namespace v1 {

using projection::member;
using projection::text_of;

LedgerStatus ledger_status_of(ToolStatus s) {
  switch (s) {
    case ToolStatus::succeeded: return LedgerStatus::finished;
    case ToolStatus::failed: return LedgerStatus::failed;
    case ToolStatus::rejected: return LedgerStatus::rejected;
    case ToolStatus::expired: return LedgerStatus::expired;
    case ToolStatus::interrupted: return LedgerStatus::interrupted;
  }
  return LedgerStatus::failed;
}

LedgerEntry* Projector::entry(const std::string& turn_id, const std::string& tool_call_id) {
  auto it = ledger_.find(std::make_pair(turn_id, tool_call_id));
  return it == ledger_.end() ? nullptr : &it->second;
}

void Projector::changed(const LedgerEntry& l) {
  const bool listed = std::any_of(changed_.begin(), changed_.end(), [&](const auto& key) {
    return key.first == l.turn_id && key.second == l.tool_call_id;
  });
  if (!listed) changed_.emplace_back(l.turn_id, l.tool_call_id);
}

void Projector::seed_ledger(const std::vector<LedgerEntry>& entries) {
  for (const auto& l : entries) ledger_.emplace(std::make_pair(l.turn_id, l.tool_call_id), l);
}

std::vector<LedgerEntry> Projector::take_ledger_changes() {
  std::vector<LedgerEntry> out;
  out.reserve(changed_.size());
  for (const auto& key : changed_) out.push_back(ledger_.at(key));
  changed_.clear();
  return out;
}

std::optional<ApprovalRecord> Projector::take_approval() {
  auto out = std::move(approval_);
  approval_.reset();
  return out;
}

std::vector<std::string> Projector::turns() const {
  std::vector<std::string> out;
  for (const auto& [run, turn] : turn_of_run_)
    if (std::find(out.begin(), out.end(), turn) == out.end()) out.push_back(turn);
  return out;
}

std::vector<LedgerEntry> Projector::ledger(const std::string& turn_id) const {
  std::vector<LedgerEntry> out;
  for (const auto& [key, l] : ledger_)
    if (key.first == turn_id) out.push_back(l);
  std::sort(out.begin(), out.end(), [](const LedgerEntry& a, const LedgerEntry& b) {
    return std::tie(a.run_id, a.ordinal, a.tool_call_id) < std::tie(b.run_id, b.ordinal, b.tool_call_id);
  });
  return out;
}

// The completed assistant message's calls: one entry each, requested (and approved at once when the call
// needs no person: "tool": "run").
void Projector::requested(const std::string& run_id, const Message& m, const json& listed) {
  const std::string& turn_id = turn_of(run_id);
  if (turn_id.empty()) return;
  auto step = step_of_run_.find(run_id);
  for (size_t i = 0; i < m.tool_calls.size() && i < listed.size(); ++i) {
    const ToolCall& c = m.tool_calls[i];
    const json& facts = listed[i];
    LedgerEntry l;
    l.tool_call_id = c.id;
    l.turn_id = turn_id;
    l.thread_id = thread_id_;
    l.run_id = run_id;
    l.tool_name = c.name;
    l.stage = step == step_of_run_.end() ? std::string() : step->second;
    l.ordinal = static_cast<int>(i);
    l.arguments = c.arguments;
    const std::string tool = text_of(facts, "tool");
    const json* idempotent = member(facts, "idempotent");
    l.idempotent = idempotent && idempotent->is_boolean() && idempotent->get<bool>();
    l.needs_approval = tool == "approve";
    l.client = tool == "client";
    if (tool == "run") advance(l, LedgerStatus::approved);
    changed(l);
    ledger_[std::make_pair(turn_id, c.id)] = std::move(l);
  }
}

// A person's decisions: {approvalRequestId, decisions (as submitted), calls: {tool call id: the decision as the
// ledger keeps it}}. The approval record's answer is the one resume() gives.
void Projector::decided(const std::string& run_id, const std::string& turn_id, const json& decision) {
  if (const json* calls = member(decision, "calls"); calls && calls->is_object()) {
    for (const auto& [id, d] : calls->items()) {
      LedgerEntry* l = entry(turn_id, id);
      if (!l) continue;
      const std::string action = text_of(d, "action");
      if (action == "approve" || member(d, "input")) {  // an answer to an input request: the call goes on
        advance(*l, LedgerStatus::approved);
        if (const json* edited = member(d, "editedArgs")) l->arguments = edited->dump();
      } else if (action == "answer") {
        // A client tool's answer: the call waits on (requested) until the continuation records it as the result.
      } else {
        advance(*l, LedgerStatus::rejected);
      }
      l->decision = d;
      changed(*l);
    }
  }
  const std::string apr = text_of(decision, "approvalRequestId");
  if (apr.empty()) return;
  const json* decisions = member(decision, "decisions");
  approval_ = ApprovalRecord{apr,
                             turn_id,
                             thread_id_,
                             decisions ? *decisions : json::array(),
                             resume_answer_to_json(turn_id, thread_id_, run_id, apr),
                             0};
}

void Projector::started(const std::string& run_id, const json& value) {
  const std::string& turn_id = turn_of(run_id);
  const json* ids = member(value, "toolCallIds");
  if (turn_id.empty() || !ids || !ids->is_array()) return;
  for (const auto& id : *ids) {
    if (!id.is_string()) continue;
    LedgerEntry* l = entry(turn_id, id.get<std::string>());
    if (!l) continue;
    advance(*l, LedgerStatus::started);
    changed(*l);
  }
}

// A pause: each interrupt names its call; a job confirmation sends the call back to wait for the person.
void Projector::interrupted(const std::string& run_id, const json& outcome) {
  if (text_of(outcome, "type") != "interrupt") return;
  const std::string& turn_id = turn_of(run_id);
  const json* interrupts = member(outcome, "interrupts");
  if (turn_id.empty() || !interrupts || !interrupts->is_array()) return;
  for (const auto& i : *interrupts) {
    LedgerEntry* l = entry(turn_id, text_of(i, "toolCallId"));
    if (!l) continue;
    l->interrupt_id = text_of(i, "id");
    if (text_of(i, "reason") == "confirmation" || text_of(i, "reason") == "input_required") {
      advance(*l, LedgerStatus::requested);
      l->needs_approval = true;
    }
    changed(*l);
  }
}

void Projector::outcome(const std::string& run_id, const std::string& tool_call_id, const ToolOutcome& o) {
  const std::string& turn_id = turn_of(run_id);
  if (turn_id.empty()) return;  // a job's delivery: its call's entry ended when the job started
  LedgerEntry* l = entry(turn_id, tool_call_id);
  if (!l) {
    // A call of a history stored before its ledger entry: the entry starts with its outcome.
    LedgerEntry fresh;
    fresh.tool_call_id = tool_call_id;
    fresh.turn_id = turn_id;
    fresh.thread_id = thread_id_;
    fresh.run_id = run_id;
    fresh.tool_name = o.tool_name;
    fresh.stage = o.stage;
    fresh.arguments = o.arguments;
    l = &(ledger_[std::make_pair(turn_id, tool_call_id)] = std::move(fresh));
  }
  advance(*l, ledger_status_of(o.status));
  l->output = o.output;
  changed(*l);
}

std::optional<ToolOutcome> Projector::outcome_of(const Event& e) {
  const json* out = member(e.metadata, "tool_agent_output");
  if (!out || !out->is_object()) return std::nullopt;
  ToolOutcome o;
  try {
    o.status = tool_status_from_string(text_of(*out, "status"));
  } catch (const Error&) {
    return std::nullopt;  // not an outcome the runtime wrote
  }
  o.output = out->dump();
  o.tool_name = text_of(*out, "tool_name");
  if (const json* args = member(*out, "args")) o.arguments = args->dump();
  if (const json* facts = member(e.metadata, "agentrt"))
    if (const json* index = member(*facts, "metadata")) o.stage = text_of(*index, "stage");
  return o;
}

}  // namespace v1
}  // namespace agentrt
