// Interrupts (interrupts.hpp): pauses for a person (approvals, job confirmations, tools asking for input) and the
// decisions that end
// them; the continuation of a resumed turn.
#include "runtime/interrupts.hpp"

#include "runtime/turn_runner.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "agentrt/records.hpp"
#include "agentrt/summary.hpp"
#include "runtime/context_builder.hpp"
#include "runtime/event_wire.hpp"
#include "util/crypto.hpp"
#include "util/json_fast.hpp"

namespace agentrt {
inline namespace v1 {

using namespace turn;

Interrupts::Interrupts(TurnRunner& runner, Runtime::Impl& rt, RunCtx& ctx) : runner_(runner), rt_(rt), ctx_(ctx) {}

void Interrupts::pause(const std::vector<std::string>& ids, const std::vector<std::string>& client_ids) {
  RunEmitter::Unit unit(*ctx_.em);  // the run's end commits with the turn's state
  const int64_t expires = now_ms() + rt_.cfg.approval_timeout.count();
  const std::string apr = new_id("apr");
  json interrupts = json::array();
  for (const auto& id : ids) {
    LedgerEntry* l = ctx_.find_ledger(id);
    l->interrupt_id = "int_" + id;  // the projector reads it from the interrupt
    json args = parse_args(l->arguments);
    auto job = ctx_.jobs.find(id);
    if (job != ctx_.jobs.end() && job->second.confirmation == JobConfirmation::pending) {
      const JobRecord& j = job->second;
      json meta = {{"approvalRequestId", apr}, {"toolName", l->tool_name}, {"arguments", args}, {"jobId", j.id}};
      if (j.metadata.is_object()) meta["job"] = j.metadata;
      interrupts.push_back(
          {{"id", l->interrupt_id},
           {"reason", "confirmation"},
           {"toolCallId", id},
           {"message",
            j.confirm_message.empty() ? fmt::format("Start job {} ({})?", j.id, l->tool_name) : j.confirm_message},
           {"expiresAt", iso8601_ms(expires)},
           {"responseSchema",
            {{"type", "object"},
             {"properties", {{"approved", {{"type", "boolean"}}}, {"reason", {{"type", "string"}}}}}}},
           {"metadata", meta}});
      continue;
    }
    if (auto in = ctx_.inputs.find(id); in != ctx_.inputs.end()) {
      const InputRequest& req = in->second;
      json meta = {{"approvalRequestId", apr}, {"toolName", l->tool_name}, {"arguments", args}};
      if (!req.state.is_null()) meta["inputState"] = req.state;
      interrupts.push_back(
          {{"id", l->interrupt_id},
           {"reason", "input_required"},
           {"toolCallId", id},
           {"message", req.message.empty() ? fmt::format("{} asks for input", l->tool_name) : req.message},
           {"expiresAt", iso8601_ms(expires)},
           {"responseSchema", req.schema},
           {"metadata", meta}});
      continue;
    }
    // Member by member: an initializer list builds every pair twice, and this runs for every approval.
    auto entry = rt_.tools.find(l->tool_name);
    auto typed = [](const char* type) {
      json t = json::object();
      t.get_ref<json::object_t&>().emplace("type", type);
      return t;
    };
    json props = json::object();
    auto& p = props.get_ref<json::object_t&>();
    p.emplace("approved", typed("boolean"));
    p.emplace("reason", typed("string"));
    p.emplace("editedArgs", entry ? entry->spec.parameters : typed("object"));
    json schema = typed("object");
    schema.get_ref<json::object_t&>().emplace("properties", std::move(props));
    json meta = json::object();
    auto& m = meta.get_ref<json::object_t&>();
    m.emplace("approvalRequestId", apr);
    m.emplace("toolName", l->tool_name);
    m.emplace("arguments", std::move(args));
    json interrupt = json::object();
    auto& i = interrupt.get_ref<json::object_t&>();
    i.emplace("id", l->interrupt_id);
    i.emplace("reason", "tool_call");
    i.emplace("toolCallId", id);
    i.emplace("message", fmt::format("Approve {}?", l->tool_name));
    i.emplace("expiresAt", iso8601_ms(expires));
    i.emplace("responseSchema", std::move(schema));
    i.emplace("metadata", std::move(meta));
    interrupts.push_back(std::move(interrupt));
  }
  runner_.end_step();
  // Client tool calls alone: the run is complete as far as this server goes (AG-UI: success, with the calls
  // the application is to answer); with an interrupt, the interrupt outcome (the client calls' START/END went out).
  const TurnStatus to = ids.empty() ? TurnStatus::waiting_client : TurnStatus::waiting_approval;
  check_transition(ctx_.turn.id, ctx_.turn.status, to);
  ctx_.turn.status = to;
  ctx_.turn.approval_request_id = apr;
  json outcome = json::object();
  if (ids.empty()) {
    outcome.get_ref<json::object_t&>().emplace("type", "success");
    outcome.get_ref<json::object_t&>().emplace("pendingToolCallIds", client_ids);
  } else {
    outcome.get_ref<json::object_t&>().emplace("type", "interrupt");
    outcome.get_ref<json::object_t&>().emplace("interrupts", interrupts);
  }
  ctx_.turn.interrupts = std::move(interrupts);
  ctx_.turn.expires_at = expires;
  ctx_.turn.owner.clear();
  // Before the commit (a resume may come as soon as the pause is seen); its ids travel with the pause, for the
  // process that resumes it.
  ctx_.turn.trace = trace::begin_approval_wait(rt_.tracer, ctx_.span, ctx_.turn);
  runner_.stage_turn();
  Event end = events::run_finished(ctx_.turn.thread_id, ctx_.turn.run_id, std::move(outcome),
                                   ctx_.run_usage.empty() ? json(nullptr) : usage_json(ctx_.run_usage));
  runner_.end_facts(end);
  ctx_.em->emit(end);
  runner_.commit();
}

std::vector<std::string> Interrupts::decided() {
  // The decisions: rejected calls get their result now, approved ones run (only TOOL_CALL_RESULT is
  // emitted for them: their START/ARGS/END went out in the paused run). A call found `started` was cut
  // off by a crash: it runs again only if idempotent.
  std::vector<std::string> to_run;
  for (auto& l : ctx_.ledger) {
    if (l.has_output()) continue;
    if (l.status == LedgerStatus::rejected) {
      ToolAgentOutput out;
      out.tool_call_id = l.tool_call_id;
      out.tool_name = l.tool_name;
      out.args = parse_args(l.arguments);
      out.status = ToolStatus::rejected;
      std::string action = l.decision.is_object() ? l.decision.value("action", "reject") : "reject";
      std::string reason = l.decision.is_object() ? l.decision.value("reason", "") : "";
      std::string job_id = l.decision.is_object() ? l.decision.value("jobId", "") : "";
      if (!job_id.empty()) {
        // A declined job confirmation: resume() ended the job; the model learns it was not started.
        // (The job's record, declined, is one of the decision's events.)
        out.error = ToolError{"declined", fmt::format("the person declined job {}; it was not started{}", job_id,
                                                      reason.empty() ? "" : ": " + reason)};
      } else {
        out.error = ToolError{
            action == "cancel" ? "cancelled" : "rejected",
            reason.empty() ? (action == "cancel" ? "the person cancelled this call" : "the person rejected this call")
                           : "the person rejected this call: " + reason};
      }
      runner_.tools().record_result(l.tool_call_id, std::move(out));
    } else if (l.awaits_client() && l.decision.is_object() && l.decision.value("action", "") == "answer") {
      answered(l);
    } else if (l.status == LedgerStatus::approved) {
      to_run.push_back(l.tool_call_id);
    } else if (l.status == LedgerStatus::started) {
      if (l.idempotent) {
        to_run.push_back(l.tool_call_id);
      } else {
        ToolAgentOutput out;
        out.tool_call_id = l.tool_call_id;
        out.tool_name = l.tool_name;
        out.args = parse_args(l.arguments);
        out.status = ToolStatus::interrupted;
        out.error = ToolError{"outcome_unknown", kOutcomeUnknown};
        runner_.tools().record_result(l.tool_call_id, std::move(out),
                                      fmt::format("{}: outcome unknown: {}", l.tool_name, kOutcomeUnknown));
      }
    }
  }
  return to_run;
}

void Interrupts::answered(const LedgerEntry& l) {
  // The client's answer, as resume() checked and committed it: the call's result, as a server tool's would be.
  const std::string content = l.decision.value("content", "");
  const std::string error = l.decision.value("error", "");
  ToolAgentOutput out;
  out.tool_call_id = l.tool_call_id;
  out.tool_name = l.tool_name;
  out.args = parse_args(l.arguments);
  // JSON text is the tool's structured result; anything else is its text.
  json parsed = content.empty() ? json(nullptr) : parse_json_or_discarded(content, rt_.cfg.max_json_depth);
  json result = parsed.is_discarded() || parsed.is_null() ? json(content) : std::move(parsed);
  if (error.empty()) {
    out.status = ToolStatus::succeeded;
    out.result = std::move(result);
  } else {
    out.status = ToolStatus::failed;
    if (!content.empty()) out.result = std::move(result);
    out.error = ToolError{"client_error", error};
  }
  // The client's id for its tool message, when it is a valid id the thread does not use yet.
  std::string message_id = l.decision.value("messageId", "");
  const bool usable = !message_id.empty() && is_valid_id(message_id) &&
                      std::none_of(ctx_.history.begin(), ctx_.history.end(),
                                   [&](const MessageRecord& m) { return m.message.id == message_id; });
  runner_.tools().record_answer(l.tool_call_id, std::move(out), usable ? message_id : new_id("msg"));
}

TurnRecord Runtime::Impl::run_continuation(std::shared_ptr<RunHandle> handle, std::string turn_id,
                                           std::optional<KnownRun> known, DeferredStart* deferred) {
  std::optional<TurnRecord> t =
      known ? std::optional<TurnRecord>(std::move(known->turn)) : cfg.store->get_turn(turn_id);
  if (!t || t->status != TurnStatus::resuming || t->owner != cfg.instance_id) {
    unregister_run(turn_id);
    return t ? *t : TurnRecord{};
  }
  RunCtx ctx;
  open_run(*this, ctx, std::move(*t), handle, deferred);
  TurnRunner runner(*this, ctx);
  runner.decision_pending_ = deferred != nullptr;
  runner.deferred_ = deferred;
  runner.guarded([&] {
    load_run_state(*cfg.store, ctx, known ? &known->ledger : nullptr, known ? &known->history : nullptr);
    start_state(*cfg.store, ctx, false, known ? &known->thread_state : nullptr);
    check_transition(ctx.turn.id, ctx.turn.status, TurnStatus::running);
    ctx.turn.status = TurnStatus::running;
    runner.stage_turn();  // its RUN_STARTED went out with the decision
    const Stage stage = stage_of(ctx.turn.stage);
    runner.begin_step(stage);
    auto confirm = runner.tools().execute(runner.interrupts().decided());
    if (!confirm.empty()) {
      runner.interrupts().pause(confirm);  // a confirmed call's tool asked again, or an approved one asks now
      return;
    }
    runner.run_stages(stage);
  });
  return close_run(*this, ctx, deferred);
}

}  // namespace v1
}  // namespace agentrt
