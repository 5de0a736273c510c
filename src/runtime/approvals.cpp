// Approvals (approvals.hpp): decisions read and checked against the pause, committed once, the continuation
// started.
#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "agentrt/records.hpp"
#include "runtime/approvals.hpp"
#include "runtime/runtime_impl.hpp"
#include "runtime/turn_runner.hpp"
#include "util/json_object.hpp"
#include "util/printable.hpp"

namespace agentrt {
inline namespace v1 {

Decision decision_from_json(const json& j, size_t max_depth) {
  check_json_depth(j, max_depth, "decision");
  if (!j.is_object()) throw Error(ErrorCode::invalid_argument, "decision must be an object");
  Decision d;
  if (auto it = j.find("interruptId"); it != j.end() && it->is_string())
    d.interrupt_id = it->get<std::string>();
  else if (auto it2 = j.find("toolCallId"); it2 != j.end() && it2->is_string())
    d.interrupt_id = it2->get<std::string>();
  else
    throw Error(ErrorCode::invalid_argument, "decision: needs a string 'interruptId' (or 'toolCallId')");
  if (auto a = j.find("action"); a != j.end()) {
    if (!a->is_string()) throw Error(ErrorCode::invalid_argument, "decision: 'action' must be a string");
    const auto& s = a->get_ref<const std::string&>();
    if (s == "approve")
      d.action = Decision::Action::approve;
    else if (s == "reject")
      d.action = Decision::Action::reject;
    else if (s == "cancel")
      d.action = Decision::Action::cancel;
    else
      throw Error(ErrorCode::invalid_argument, fmt::format("decision: unknown action '{}'", s));
  } else if (auto ap = j.find("approved"); ap != j.end()) {
    if (!ap->is_boolean()) throw Error(ErrorCode::invalid_argument, "decision: 'approved' must be a boolean");
    d.action = ap->get<bool>() ? Decision::Action::approve : Decision::Action::reject;
  } else {
    throw Error(ErrorCode::invalid_argument, "decision: needs 'action' (approve|reject|cancel) or 'approved'");
  }
  if (auto e = j.find("editedArgs"); e != j.end() && !e->is_null()) {
    if (!e->is_object()) throw Error(ErrorCode::invalid_argument, "decision: 'editedArgs' must be an object");
    d.edited_args = *e;
  }
  if (auto r = j.find("reason"); r != j.end() && !r->is_null()) {
    if (!r->is_string()) throw Error(ErrorCode::invalid_argument, "decision: 'reason' must be a string");
    d.reason = r->get<std::string>();
  }
  if (auto r = j.find("response"); r != j.end() && !r->is_null()) {
    if (!r->is_object()) throw Error(ErrorCode::invalid_argument, "decision: 'response' must be an object");
    d.response = *r;
  }
  return d;
}

void from_json(const json& j, Decision& d) { d = decision_from_json(j, kDefaultMaxJsonDepth); }

Approvals::Approvals(Runtime::Impl& rt) : rt_(rt) {}

json Approvals::resume(const ResumeInput& in, TurnRecord* inline_run) {
  check_context(in.context, input_limits(rt_.cfg));
  if (in.state) check_state(*in.state, input_limits(rt_.cfg));
  auto client_tools = rt_.offer_client_tools(in.client_tools);
  try {
    return resume_once(in, std::move(client_tools), inline_run);
  } catch (const Error&) {
    // A concurrent resume with the same id may have won while this one read a half-old state (the turn
    // before, the ledger after): its answer is the answer.
    if (auto prior = rt_.cfg.store->get_approval(in.approval_request_id); prior && prior->turn_id == in.turn_id)
      return prior->answer;
    throw;
  }
}

// The turn whose pause `approval_request_id` is, checked: waiting on it, within its deadline. nullopt with
// `prior_answer` set when the request was answered before (the first answer is the answer).
std::optional<Store::TurnSnapshot> Approvals::open_pause(std::string_view turn_id, std::string_view approval_request_id,
                                                         std::string_view run_id, std::optional<json>& prior_answer) {
  if (approval_request_id.empty()) throw Error(ErrorCode::invalid_argument, "approval request id is empty");
  if (!run_id.empty()) require_id(run_id, "run id");
  // The turn first (in one snapshot with what the continuation reads when it waits: its ledger, the thread's
  // history and state), the approval second: a resume that lost the race then always finds the winner's answer.
  auto snap = rt_.cfg.store->turn_snapshot(turn_id);
  auto& turn = snap.turn;
  if (!turn) throw Error(ErrorCode::not_found, fmt::format("turn {} not found", turn_id));
  // A turn still waiting on this very request has no answer to it yet (the answer is committed with the
  // turn's move out of WAITING_APPROVAL); a resume that wins meanwhile makes ours a conflict, answered below.
  const bool open = is_waiting(turn->status) && turn->approval_request_id == approval_request_id;
  if (auto prior = open ? std::nullopt : rt_.cfg.store->get_approval(approval_request_id)) {
    if (prior->turn_id != turn->id)
      throw Error(ErrorCode::conflict, fmt::format("approval request {} belongs to another turn", approval_request_id));
    prior_answer = prior->answer;
    return std::nullopt;
  }
  if (turn->status == TurnStatus::expired)
    throw Error(ErrorCode::expired, fmt::format("turn {}: the approval request expired ({})", turn->id, turn->error));
  if (!is_waiting(turn->status))
    throw Error(ErrorCode::invalid_state,
                fmt::format("turn {} is {}, not waiting for approval or for client tool answers", turn->id,
                            to_string(turn->status)));
  if (turn->approval_request_id != approval_request_id)
    throw Error(ErrorCode::not_found, fmt::format("approval request {} is not open on turn {} (the open one is {})",
                                                  approval_request_id, turn->id, turn->approval_request_id));
  const int64_t now = now_ms();
  if (turn->expires_at > 0 && now >= turn->expires_at) {
    rt_.recovery.end_waiting_turn(*turn, TurnStatus::expired, "approval expired");
    throw Error(
        ErrorCode::expired,
        fmt::format("turn {}: the {} expired at {}", turn->id,
                    turn->status == TurnStatus::waiting_client ? "wait for the client's answers" : "approval request",
                    iso8601_ms(turn->expires_at)));
  }

  return snap;
}

// Each open interrupt's decision, checked against the pause (every one answered exactly once; edited
// arguments valid for the tool; a confirmation takes none) and applied to its ledger entry in `ledger`.
Approvals::Decided Approvals::decide(const TurnRecord& paused, std::vector<LedgerEntry>& ledger,
                                     const std::vector<Decision>& decisions, const std::vector<ToolAnswer>& answers) {
  // Every open interrupt must be answered exactly once.
  std::map<std::string, const Decision*> by_interrupt;
  for (const auto& d : decisions) {
    const LedgerEntry* match = nullptr;
    for (const auto& l : ledger)
      if (!l.interrupt_id.empty() && !l.has_output() && l.status == LedgerStatus::requested &&
          (l.interrupt_id == d.interrupt_id || l.tool_call_id == d.interrupt_id))
        match = &l;
    if (!match)
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("decision for unknown interrupt '{}' on turn {}", d.interrupt_id, paused.id));
    if (by_interrupt.count(match->interrupt_id))
      throw Error(ErrorCode::invalid_argument, fmt::format("two decisions for interrupt '{}'", match->interrupt_id));
    by_interrupt[match->interrupt_id] = &d;
  }
  // Interrupts that ask to confirm a job (reason "confirmation"), by interrupt id: the job ids.
  std::map<std::string, std::string> confirmations;
  for (const auto& i : paused.interrupts)
    if (i.is_object() && i.value("reason", "") == "confirmation" && i.contains("metadata") && i["metadata"].is_object())
      confirmations[i.value("id", "")] = i["metadata"].value("jobId", "");
  // Interrupts of tools asking for input (reason "input_required"), by interrupt id: what the answer must be, and the
  // state the tool kept.
  std::map<std::string, std::pair<json, json>> inputs;
  for (const auto& i : paused.interrupts)
    if (i.is_object() && i.value("reason", "") == "input_required") {
      const json meta = i.contains("metadata") && i["metadata"].is_object() ? i["metadata"] : json::object();
      inputs[i.value("id", "")] = {i.value("responseSchema", json{{"type", "object"}}),
                                   meta.value("inputState", json())};
    }
  std::vector<JobWrite> job_updates;
  std::vector<LedgerEntry> updates;
  for (auto& l : ledger) {
    if (l.interrupt_id.empty() || l.has_output() || l.status != LedgerStatus::requested) continue;
    auto it = by_interrupt.find(l.interrupt_id);
    if (it == by_interrupt.end())
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("interrupt '{}' ({}) has no decision: a resume must answer every open interrupt",
                              l.interrupt_id, l.tool_name));
    const Decision& d = *it->second;
    json dj = {{"action", d.action == Decision::Action::approve  ? "approve"
                          : d.action == Decision::Action::reject ? "reject"
                                                                 : "cancel"}};
    if (!d.reason.empty()) dj["reason"] = d.reason;
    if (auto in = inputs.find(l.interrupt_id); in != inputs.end()) {
      // The call runs again whatever the person says: it tells its tool (accept, decline or cancel).
      if (d.edited_args)
        throw Error(
            ErrorCode::invalid_argument,
            fmt::format("interrupt '{}' asks for input: it takes a response, not edited arguments", l.interrupt_id));
      json input = {{"action", d.action == Decision::Action::approve  ? "accept"
                               : d.action == Decision::Action::reject ? "decline"
                                                                      : "cancel"},
                    {"state", in->second.second}};
      if (d.action == Decision::Action::approve) {
        json content = d.response.value_or(json::object());
        if (json_depth(content, rt_.cfg.max_json_depth) > rt_.cfg.max_json_depth)
          throw Error(ErrorCode::invalid_argument,
                      fmt::format("the response to interrupt '{}' is nested deeper than {} "
                                  "levels",
                                  l.interrupt_id, rt_.cfg.max_json_depth));
        if (content.dump().size() > input_limits(rt_.cfg).max_answer_bytes)
          throw Error(ErrorCode::too_large, fmt::format("the response to interrupt '{}' is larger than {} bytes",
                                                        l.interrupt_id, input_limits(rt_.cfg).max_answer_bytes));
        if (auto v = JsonSchema(in->second.first).validate(content))
          throw Error(ErrorCode::invalid_argument,
                      fmt::format("the response to interrupt '{}' is invalid: {}{}{}", l.interrupt_id, v->path,
                                  v->path.empty() ? "" : ": ", v->message));
        input["content"] = std::move(content);
      }
      dj["input"] = std::move(input);
      advance(l, LedgerStatus::approved);
      l.decision = dj;
      updates.push_back(l);
      continue;
    }
    if (auto c = confirmations.find(l.interrupt_id); c != confirmations.end()) {
      auto job = rt_.cfg.store->get_job(c->second);
      if (!job)
        throw Error(ErrorCode::not_found, fmt::format("job {} of interrupt '{}' not found", c->second, l.interrupt_id));
      if (d.action == Decision::Action::approve && d.edited_args)
        throw Error(
            ErrorCode::invalid_argument,
            fmt::format("interrupt '{}' confirms job {}: it takes no edited arguments", l.interrupt_id, job->id));
      JobRecord next = *job;
      if (d.action == Decision::Action::approve) {
        next.confirmation = JobConfirmation::confirmed;
        advance(l, LedgerStatus::approved);
      } else {
        decline_job(next, d.reason);
        advance(l, LedgerStatus::rejected);
      }
      dj["jobId"] = job->id;
      l.decision = dj;
      updates.push_back(l);
      job_updates.push_back(JobWrite{next, job->version});
      continue;
    }
    if (d.action == Decision::Action::approve) {
      if (d.edited_args) {
        if (json_depth(*d.edited_args, rt_.cfg.max_json_depth) > rt_.cfg.max_json_depth)
          throw Error(ErrorCode::invalid_argument,
                      fmt::format("edited arguments for {} are nested deeper than {} levels", l.tool_name,
                                  rt_.cfg.max_json_depth));
        auto entry = rt_.tools.find(l.tool_name);
        if (!entry)
          throw Error(ErrorCode::invalid_argument, fmt::format("tool '{}' is no longer registered", l.tool_name));
        if (auto v = entry->schema.validate(*d.edited_args))
          throw Error(ErrorCode::invalid_argument,
                      fmt::format("edited arguments for {} are invalid: {}{}{}", l.tool_name, v->path,
                                  v->path.empty() ? "" : ": ", v->message));
        l.arguments = d.edited_args->dump();
        dj["editedArgs"] = *d.edited_args;
      }
      advance(l, LedgerStatus::approved);
    } else {
      advance(l, LedgerStatus::rejected);
    }
    l.decision = dj;
    updates.push_back(l);
  }
  // Every pending client tool call answered exactly once, by an answer within the limits.
  const InputLimits limits = input_limits(rt_.cfg);
  std::map<std::string, const ToolAnswer*> by_call;
  for (const auto& a : answers) {
    auto pending = std::find_if(ledger.begin(), ledger.end(), [&](const LedgerEntry& l) {
      return l.tool_call_id == a.tool_call_id && l.awaits_client();
    });
    if (pending == ledger.end())
      throw Error(ErrorCode::invalid_argument, fmt::format("answer for '{}': not a client tool call turn {} waits for",
                                                           printable(a.tool_call_id, 140), paused.id));
    if (!by_call.emplace(a.tool_call_id, &a).second)
      throw Error(ErrorCode::invalid_argument, fmt::format("two answers for client tool call '{}'", a.tool_call_id));
    if (a.content.size() + a.error.size() > limits.max_answer_bytes)
      throw Error(ErrorCode::too_large,
                  fmt::format("the answer for client tool call '{}' is {} bytes; the limit is {}", a.tool_call_id,
                              a.content.size() + a.error.size(), limits.max_answer_bytes));
  }
  for (auto& l : ledger) {
    if (!l.awaits_client()) continue;
    auto it = by_call.find(l.tool_call_id);
    if (it == by_call.end())
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("client tool call '{}' ({}) has no answer: a resume must answer every pending call",
                              l.tool_call_id, l.tool_name));
    const ToolAnswer& a = *it->second;
    json dj = json::object();
    auto& d = dj.get_ref<json::object_t&>();
    d.emplace("action", "answer");
    d.emplace("content", a.content);
    if (!a.error.empty()) d.emplace("error", a.error);
    if (!a.message_id.empty()) d.emplace("messageId", a.message_id);
    l.decision = std::move(dj);
    updates.push_back(l);
  }
  if (updates.empty())
    throw Error(ErrorCode::invalid_argument, fmt::format("turn {} waits for nothing this resume answers", paused.id));

  return Decided{std::move(updates), std::move(job_updates)};
}

json Approvals::resume_once(const ResumeInput& in, std::vector<ClientToolOffer> client_tools, TurnRecord* inline_run) {
  const std::string_view turn_id = in.turn_id, approval_request_id = in.approval_request_id, run_id = in.run_id;
  const auto& decisions = in.decisions;
  std::optional<json> prior_answer;
  auto snap = open_pause(turn_id, approval_request_id, run_id, prior_answer);
  if (!snap) return *prior_answer;
  auto& turn = snap->turn;
  auto ledger = std::move(snap->ledger);
  const auto stored_ledger = ledger;  // as committed: the projector applies the decisions to it
  auto [updates, job_updates] = decide(*turn, ledger, decisions, in.answers);

  const std::string new_run = run_id.empty() ? new_id("run") : std::string(run_id);
  json answer = resume_answer_to_json(turn->id, turn->thread_id, new_run, approval_request_id);
  json decisions_json = json::array();
  for (const auto& d : decisions) {
    json dj = json_object("interruptId", d.interrupt_id, "action",
                          d.action == Decision::Action::approve  ? "approve"
                          : d.action == Decision::Action::reject ? "reject"
                                                                 : "cancel");
    if (d.edited_args) dj["editedArgs"] = *d.edited_args;
    if (!d.reason.empty()) dj["reason"] = d.reason;
    if (d.response) dj["response"] = *d.response;
    decisions_json.push_back(std::move(dj));
  }

  turn->interrupts = json::array();  // read above; the next state has none: nothing to copy
  TurnRecord next = *turn;
  check_transition(next.id, next.status, TurnStatus::resuming);
  next.status = TurnStatus::resuming;
  next.parent_run_id = turn->run_id;
  next.run_id = new_run;
  next.owner = rt_.cfg.instance_id;
  next.interrupts = json::array();

  auto handle = rt_.register_run(turn->id);
  handle->context = in.context;
  handle->client_tools = std::move(client_tools);
  handle->traceparent = in.traceparent;
  trace::DecidedWait wait(rt_.tracer, *turn, in.traceparent);
  handle->follows = wait.traceparent();
  handle->state = in.state;
  auto em = rt_.make_emitter(turn->thread_id, new_run, turn->version, inline_run != nullptr, handle);
  {
    // The decision commits whole: the resumed run's RUN_STARTED, which carries the decision (the projector
    // derives the turn's move, the ledger's decisions and the approval record from it), and the jobs it changes.
    RunEmitter::Unit unit(*em);
    json calls = json::object();
    for (const auto& l : updates) calls[l.tool_call_id] = l.decision;
    json decision = json::object();
    auto& d = decision.get_ref<json::object_t&>();
    d.emplace("approvalRequestId", std::string(approval_request_id));
    d.emplace("decisions", std::move(decisions_json));
    d.emplace("calls", std::move(calls));
    Event started = turn::run_started(next);
    started.metadata["agentrt"]["decision"] = std::move(decision);
    started.metadata["agentrt"]["turn"] = json{{"owner", next.owner}};
    em->seed_turn(*turn);
    em->seed_ledger(stored_ledger);
    em->emit(started);
    // The confirmations' jobs, confirmed or declined: changes of the resumed run.
    for (auto& j : job_updates) em->emit(events::custom("agentrt.job", job_change(j.job, j.expected_version)));
  }
  auto lost = [&](const Error& e) -> json {
    if (e.code() == ErrorCode::conflict) {
      // Another resume (or the sweeper) changed the turn first; the first answer wins.
      if (auto prior = rt_.cfg.store->get_approval(approval_request_id)) return prior->answer;
      auto now_turn = rt_.cfg.store->get_turn(turn_id);
      if (now_turn && now_turn->status == TurnStatus::expired)
        throw Error(ErrorCode::expired, fmt::format("turn {}: the approval request expired", turn->id));
      throw Error(ErrorCode::invalid_state, fmt::format("turn {} changed while resuming: it is now {}", turn->id,
                                                        now_turn ? to_string(now_turn->status) : "gone"));
    }
    throw e;
  };
  std::string tid = turn->id;
  for (const auto& u : updates)
    for (auto& l : ledger)
      if (l.tool_call_id == u.tool_call_id) l = u;
  if (inline_run) {
    // resume_turn: the continuation runs here, so the decision need not be a commit of its own before it
    // starts. It rides on the run's first commit, which comes before any approved tool runs (with the
    // `started` records), or at the run's pause or end. Refused there (another resume won, the turn was
    // cancelled or expired), the run stores nothing and this call answers as a lost race does.
    rt_.runs_started.fetch_add(1, std::memory_order_relaxed);
    DeferredStart deferred{em, std::nullopt, nullptr};
    *inline_run = rt_.run_continuation(handle, tid,
                                       Runtime::Impl::KnownRun{std::move(next), std::move(ledger),
                                                               std::move(snap->history), std::move(snap->thread_state)},
                                       &deferred);
    if (!deferred.error) {
      wait.committed();
      return answer;
    }
    rt_.runs_started.fetch_sub(1, std::memory_order_relaxed);
    try {
      std::rethrow_exception(deferred.error);
    } catch (const Error& e) {
      return lost(e);
    }
  }
  RunEmitter::Flushed committed;
  try {
    committed = em->flush();
  } catch (const Error& e) {
    rt_.unregister_run(turn->id);
    return lost(e);
  }
  wait.committed();
  rt_.runs_started.fetch_add(1, std::memory_order_relaxed);
  next.version = committed.batch.turn ? committed.batch.turn->version : next.version + 1;
  auto known = std::make_optional(Runtime::Impl::KnownRun{std::move(next), std::move(ledger), std::move(snap->history),
                                                          std::move(snap->thread_state)});
  rt_.enqueue([&rt = rt_, handle, tid, known = std::move(known)]() mutable {
    rt.run_continuation(handle, tid, std::move(known));
  });
  return answer;
}

}  // namespace v1
}  // namespace agentrt
