// The stage loop: stages, model calls and how a run ends; a fresh run.
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

void load_run_state(Store& store, RunCtx& ctx, std::vector<LedgerEntry>* known_ledger,
                    std::vector<MessageRecord>* known_history) {
  ctx.history = known_history ? std::move(*known_history) : store.messages(ctx.turn.thread_id);
  ctx.ledger = known_ledger ? std::move(*known_ledger) : store.ledger(ctx.turn.id);
  for (const auto& m : ctx.history)
    for (const auto& c : m.message.tool_calls) ctx.used_tool_call_ids.insert(c.id);
  for (const auto& l : ctx.ledger) {
    ctx.used_tool_call_ids.insert(l.tool_call_id);
    if (!l.has_output()) continue;
    try {
      ctx.note_outcome(l.tool_call_id, parse_json(l.output).get<ToolAgentOutput>());
    } catch (const std::exception&) {
      // An unreadable stored output: the call still counts as answered; its summary is in the history.
      ctx.outcomes[l.tool_call_id] = RunCtx::Outcome{ToolStatus::failed, ""};
    }
  }
}

TurnRunner::TurnRunner(Runtime::Impl& rt, RunCtx& ctx) : rt_(rt), ctx_(ctx), committed_status_(ctx.turn.status) {
  turn_usage_ = usage_from_json(ctx.turn.usage);
}

void TurnRunner::run_stages(int start) {
  std::string intent = ctx_.turn.intent;
  std::string draft;
  for (int i = start; i < 3; ++i) {
    const std::string stage = kStageOrder[i];
    const StagePolicy& policy = policy_of(rt_.cfg.stages, stage);
    if (ctx_.open_step != stage) begin_step(stage);
    const bool org_writes = rt_.cfg.stages.organization.call_model;
    if (stage == kIntent) {
      if (policy.call_model) {
        std::string text;
        if (!stage_loop(stage, policy, Visibility::hidden, false, text)) return;
        ctx_.turn.intent = text;
        ctx_.em->emit(events::custom("agentrt.intent", json{{"text", text}}));
      }
    } else if (stage == kExecution) {
      if (!stage_loop(stage, policy, org_writes ? Visibility::reasoning : Visibility::text, !org_writes, draft)) return;
    } else if (policy.call_model) {
      draft_ = draft;
      std::string answer;
      if (!stage_loop(stage, policy, Visibility::text, true, answer)) return;
    }
    end_step();
  }
  finish_completed();
}

void TurnRunner::begin_step(const std::string& stage) {
  check_cancel();
  ctx_.em->emit_json(wire::step_started(stage, now_ms()));
  ctx_.open_step = stage;
  ctx_.turn.stage = stage;
}

void TurnRunner::end_step() {
  if (ctx_.open_step.empty()) return;
  ctx_.em->emit_json(wire::step_finished(ctx_.open_step, now_ms()));
  ctx_.open_step.clear();
}

void TurnRunner::check_cancel() {
  if (ctx_.handle && ctx_.handle->cancel.cancelled()) throw Error(ErrorCode::cancelled, "the turn was cancelled");
}

void TurnRunner::stage_turn() {
  ctx_.turn.usage = usage_json(turn_usage_);
  ctx_.em->set_turn(ctx_.turn);
}

bool TurnRunner::stage_loop(const std::string& stage, const StagePolicy& policy, Visibility vis, bool final_candidate,
                            std::string& final_text) {
  for (;;) {
    check_cancel();
    if (ctx_.turn.steps >= rt_.cfg.max_steps)
      throw Error(ErrorCode::invalid_state,
                  fmt::format("step limit reached: {} model calls in this turn", rt_.cfg.max_steps));
    auto defs = rt_.tools.definitions(stage, policy.tools);
    ModelRequest req = build_request(stage, policy, defs);
    auto [result, msg_id] = call_model(req, vis, final_candidate);
    if (result.tool_calls.empty()) {
      final_text = result.text;
      return true;
    }
    if (!process_tool_calls(stage, result)) return false;
  }
}

ModelRequest TurnRunner::build_request(const std::string& stage, const StagePolicy& policy,
                                       std::vector<ToolDefinition> defs) {
  ContextInput in;
  in.system_prompt = policy.system_prompt;
  if (stage != kIntent && !ctx_.turn.intent.empty())
    in.system_notes.push_back("The user's intent: " + ctx_.turn.intent);
  if (stage == kOrganization && !draft_.empty()) in.system_notes.push_back("Draft answer:\n" + draft_);
  in.turn_id = ctx_.turn.id;
  in.budget_chars = rt_.cfg.context_budget_chars;
  ModelRequest req;
  req.messages = build_context(in, ctx_.history, ctx_.full_results);
  rt_.media_for_model(req.messages, ctx_.media_cache);
  req.stage = stage;
  req.model = policy.model;
  req.params = policy.params;
  req.tools = std::move(defs);
  req.thread_id = ctx_.turn.thread_id;
  req.turn_id = ctx_.turn.id;
  req.run_id = ctx_.turn.run_id;
  return req;
}

std::string TurnRunner::unique_call_id(std::string_view proposed) {
  std::string id(proposed);
  if (id.empty()) id = new_id("call");
  if (id.size() > 128) id = id.substr(0, 128);
  while (ctx_.used_tool_call_ids.count(id))
    id = fmt::format("{}_{}", proposed.substr(0, 100), new_id("r").substr(2, 8));
  ctx_.used_tool_call_ids.insert(id);
  return id;
}

class TurnRunner::Sink final : public ModelStreamSink {
 public:
  Sink(TurnRunner& r, Visibility vis, std::string msg_id) : r_(r), vis_(vis), msg_id_(std::move(msg_id)) {}
  void on_text(std::string_view d) override {
    if (d.empty()) return;
    if (vis_ == Visibility::hidden) return;
    if (vis_ == Visibility::reasoning) return on_reasoning(d);
    auto& ctx = r_.ctx_;
    if (ctx.open_text.empty()) {
      ctx.em->emit_json(wire::text_start(msg_id_, now_ms()));
      ctx.open_text = msg_id_;
    }
    ctx.em->emit_json(wire::text_content(msg_id_, d, now_ms()));
  }
  void on_reasoning(std::string_view d) override {
    if (d.empty()) return;
    auto& ctx = r_.ctx_;
    if (ctx.open_reasoning.empty()) {
      ctx.open_reasoning = new_id("rsn");
      ctx.em->emit(events::reasoning_start(ctx.open_reasoning));
      ctx.em->emit(events::reasoning_message_start(ctx.open_reasoning));
    }
    ctx.em->emit(events::reasoning_content(ctx.open_reasoning, std::string(d)));
  }
  void on_tool_call_start(int index, std::string_view id, std::string_view name) override {
    auto& ctx = r_.ctx_;
    std::string eff = r_.unique_call_id(id);
    by_index_[index] = eff;
    announced_.push_back({std::string(id), eff, false});
    ctx.em->emit_json(wire::tool_call_start(eff, name, msg_id_, now_ms()));
    ctx.open_tool_calls.insert(eff);
  }
  void on_tool_call_args(int index, std::string_view d) override {
    auto it = by_index_.find(index);
    if (it == by_index_.end() || d.empty()) return;
    r_.ctx_.em->emit_json(wire::tool_call_args(it->second, d, now_ms()));
  }
  // The effective id of a result's tool call: the announced one with the same id, else a new one.
  std::pair<std::string, bool> take(const std::string& original) {
    for (auto& a : announced_)
      if (!a.taken && a.original == original) {
        a.taken = true;
        return {a.effective, true};
      }
    return {r_.unique_call_id(original), false};
  }
  const std::string& message_id() const { return msg_id_; }

 private:
  struct Announced {
    std::string original, effective;
    bool taken;
  };
  TurnRunner& r_;
  Visibility vis_;
  std::string msg_id_;
  std::map<int, std::string> by_index_;
  std::vector<Announced> announced_;
};

json TurnRunner::worker_output(const std::string& answer) {
  WorkerAgentOutput w;
  w.answer = answer;
  w.intent = ctx_.turn.intent;
  w.turn_id = ctx_.turn.id;
  w.run_id = ctx_.turn.run_id;
  for (const auto& l : ctx_.ledger) {
    auto it = ctx_.outcomes.find(l.tool_call_id);
    if (it == ctx_.outcomes.end()) continue;
    WorkerAgentOutput::ToolRef ref;
    ref.tool_call_id = l.tool_call_id;
    ref.tool_name = l.tool_name;
    ref.status = it->second.status;
    ref.result_summary = it->second.summary;
    w.tools.push_back(std::move(ref));
  }
  w.usage = usage_json(turn_usage_);
  return json(w);
}

std::pair<ModelResult, std::string> TurnRunner::call_model(const ModelRequest& req, Visibility vis,
                                                           bool final_candidate) {
  Sink sink(*this, vis, new_id("msg"));
  ModelResult result = rt_.cfg.model->complete(req, sink, ctx_.handle->cancel);
  rt_.model_calls.fetch_add(1, std::memory_order_relaxed);
  ++ctx_.turn.steps;
  if (result.usage) {
    add_usage(ctx_.run_usage, *result.usage);
    add_usage(turn_usage_, *result.usage);
  }
  check_cancel();
  auto& em = *ctx_.em;
  RunEmitter::Unit unit(em);  // the events that end the model's answer commit with its message
  if (!ctx_.open_reasoning.empty()) {
    em.emit(events::reasoning_message_end(ctx_.open_reasoning));
    em.emit(events::reasoning_end(ctx_.open_reasoning));
    ctx_.open_reasoning.clear();
  }
  const bool is_final = result.tool_calls.empty();
  const std::string& msg_id = sink.message_id();
  json wao;  // {"worker_agent_output": ...} of the final answer: the TEXT_MESSAGE_END's and the message's metadata
  if (vis == Visibility::text) {
    if (ctx_.open_text.empty() && (!result.text.empty() || is_final)) {
      em.emit_json(wire::text_start(msg_id, now_ms()));
      if (!result.text.empty()) em.emit_json(wire::text_content(msg_id, result.text, now_ms()));
      ctx_.open_text = msg_id;
    }
    if (!ctx_.open_text.empty()) {
      if (is_final && final_candidate) {
        wao = json::object();
        wao.get_ref<json::object_t&>().emplace("worker_agent_output", worker_output(result.text));
      }
      em.emit(events::text_end(ctx_.open_text, wao));
      ctx_.open_text.clear();
    }
  }
  // Tool calls: the result is authoritative; calls the stream did not announce are announced now.
  std::vector<ToolCall> calls;
  for (auto& c : result.tool_calls) {
    auto [id, announced] = sink.take(c.id);
    if (!announced) {
      em.emit_json(wire::tool_call_start(id, c.name, msg_id, now_ms()));
      if (!c.arguments.empty()) em.emit_json(wire::tool_call_args(id, c.arguments, now_ms()));
    }
    em.emit_json(wire::tool_call_end(id, now_ms()));
    ctx_.open_tool_calls.erase(id);
    c.id = id;
    calls.push_back(ToolCall{id, c.name, c.arguments});
  }
  // Announced calls missing from the result (a provider inconsistency) are closed, not left open.
  for (const auto& open : std::vector<std::string>(ctx_.open_tool_calls.begin(), ctx_.open_tool_calls.end())) {
    em.emit_json(wire::tool_call_end(open, now_ms()));
    ctx_.open_tool_calls.erase(open);
  }
  // The assistant message is written once, complete: never half of it.
  const bool persist = !calls.empty() || (vis == Visibility::text);
  if (persist) {
    Message m;
    m.id = msg_id;
    m.role = Role::assistant;
    m.content = result.text;
    m.has_content = !result.text.empty();
    m.tool_calls = calls;
    if (!wao.is_null()) m.metadata = std::move(wao);
    MessageRecord rec{ctx_.turn.thread_id, 0, ctx_.turn.id, ctx_.turn.run_id, std::move(m)};
    em.add_message(rec);
    ctx_.history.push_back(std::move(rec));
  }
  return {std::move(result), msg_id};
}

bool TurnRunner::process_tool_calls(const std::string& stage, const ModelResult& result) {
  const StagePolicy& policy = policy_of(rt_.cfg.stages, stage);
  std::vector<std::string> run_now, need_approval;
  int ordinal = 0;
  for (const auto& c : result.tool_calls) {
    LedgerEntry l;
    l.tool_call_id = c.id;
    l.turn_id = ctx_.turn.id;
    l.thread_id = ctx_.turn.thread_id;
    l.run_id = ctx_.turn.run_id;
    l.tool_name = c.name;
    l.stage = stage;
    l.ordinal = ordinal++;
    l.arguments = c.arguments;
    l.status = LedgerStatus::requested;
    std::optional<ToolError> problem;
    json args;
    std::shared_ptr<const ToolRegistry::Entry> entry;
    for (const auto& offered : rt_.tools.offered(stage, policy.tools))
      if (offered->spec.name == c.name) entry = offered;
    if (!entry) {
      std::string names;
      for (const auto& offered : rt_.tools.offered(stage, policy.tools))
        names += (names.empty() ? "" : ", ") + offered->spec.name;
      problem = ToolError{"unknown_tool", fmt::format("unknown tool '{}'; the tools available are: {}", c.name,
                                                      names.empty() ? "none" : names)};
    } else {
      const size_t max_depth = rt_.cfg.max_json_depth;
      args = c.arguments.empty() ? json::object() : parse_json_or_discarded(c.arguments, max_depth);
      if (args.is_discarded() && json_text_depth(c.arguments, max_depth) > max_depth) {
        problem = ToolError{"invalid_arguments",
                            fmt::format("the arguments of {} are nested deeper than {} levels", c.name, max_depth)};
        args = json::object();
      } else if (args.is_discarded() || !args.is_object()) {
        problem = ToolError{"invalid_arguments", fmt::format("the arguments of {} are not a JSON object", c.name)};
        args = json::object();
      } else if (auto v = entry->schema.validate(args)) {
        problem = ToolError{"invalid_arguments", fmt::format("invalid arguments for {}: {}{}{}", c.name, v->path,
                                                             v->path.empty() ? "" : ": ", v->message)};
      } else {
        l.idempotent = entry->spec.idempotent;
        try {
          l.needs_approval = entry->spec.approval.requires_approval(args);
        } catch (...) {
          l.needs_approval = true;  // a failing predicate errs on the side of asking
        }
        if (!l.needs_approval) advance(l, LedgerStatus::approved);
      }
    }
    ctx_.ledger.push_back(l);
    ctx_.em->put_ledger(l);
    if (problem) {
      ToolAgentOutput out;
      out.tool_call_id = l.tool_call_id;
      out.tool_name = l.tool_name;
      out.args = args.is_object() ? args : json::object();
      out.status = ToolStatus::failed;
      out.error = problem;
      record_result(l.tool_call_id, std::move(out));
    } else if (l.needs_approval) {
      need_approval.push_back(l.tool_call_id);
    } else {
      run_now.push_back(l.tool_call_id);
    }
  }
  auto confirm = execute(run_now);
  need_approval.insert(need_approval.end(), confirm.begin(), confirm.end());
  if (!need_approval.empty()) {
    pause(need_approval);
    return false;
  }
  return true;
}

void TurnRunner::finish_completed() {
  RunEmitter::Unit unit(*ctx_.em);  // the run's end commits with the turn's state
  check_transition(ctx_.turn.id, ctx_.turn.status, TurnStatus::completed);
  ctx_.turn.status = TurnStatus::completed;
  ctx_.turn.owner.clear();
  ctx_.turn.interrupts = json::array();
  stage_turn();
  ctx_.em->emit(events::run_finished(ctx_.turn.thread_id, ctx_.turn.run_id, json{{"type", "success"}},
                                     ctx_.run_usage.empty() ? json(nullptr) : usage_json(ctx_.run_usage)));
  commit();
}

void TurnRunner::close_open_streams() {
  auto& em = *ctx_.em;
  if (!ctx_.open_reasoning.empty()) {
    em.emit(events::reasoning_message_end(ctx_.open_reasoning));
    em.emit(events::reasoning_end(ctx_.open_reasoning));
    ctx_.open_reasoning.clear();
  }
  if (!ctx_.open_text.empty()) {
    em.emit(events::text_end(ctx_.open_text));
    ctx_.open_text.clear();
  }
  for (const auto& id : ctx_.open_tool_calls) em.emit_json(wire::tool_call_end(id, now_ms()));
  ctx_.open_tool_calls.clear();
}

void TurnRunner::finish_cancelled() {
  RunEmitter::Unit unit(*ctx_.em);  // the run's end commits with the turn's state
  close_open_streams();
  close_unanswered("cancelled", "not run: the turn was cancelled", ToolStatus::rejected);
  end_step();
  check_transition(ctx_.turn.id, ctx_.turn.status, TurnStatus::cancelled);
  ctx_.turn.status = TurnStatus::cancelled;
  ctx_.turn.owner.clear();
  ctx_.turn.error = "cancelled";
  stage_turn();
  ctx_.em->emit(events::run_finished(ctx_.turn.thread_id, ctx_.turn.run_id, json{{"type", "cancelled"}},
                                     ctx_.run_usage.empty() ? json(nullptr) : usage_json(ctx_.run_usage)));
  commit();
}

void TurnRunner::fail(const std::string& code, const std::string& message) {
  RunEmitter::Unit unit(*ctx_.em);  // the run's end commits with the turn's state
  // Events still open stay as they are: RUN_ERROR may end a run at any point.
  ctx_.open_text.clear();
  ctx_.open_reasoning.clear();
  ctx_.open_tool_calls.clear();
  close_unanswered("not_run", "not run: " + message, ToolStatus::failed);
  Event err = events::run_error(message, code);
  if (!ctx_.run_usage.empty()) err.usage = usage_json(ctx_.run_usage);
  ctx_.em->emit(err);
  Message sys;
  sys.id = new_id("msg");
  sys.role = Role::system;
  sys.content = fmt::format("ERROR {}: {}", code, message);
  ctx_.em->add_message(MessageRecord{ctx_.turn.thread_id, 0, ctx_.turn.id, ctx_.turn.run_id, sys});
  if (can_transition(ctx_.turn.status, TurnStatus::failed)) ctx_.turn.status = TurnStatus::failed;
  ctx_.turn.owner.clear();
  ctx_.turn.error = message;
  stage_turn();
  commit();
}

void TurnRunner::commit() {
  ctx_.em->flush();
  committed_status_ = ctx_.turn.status;
}

void TurnRunner::end_after(std::exception_ptr thrown) {
  if (auto f = ctx_.em->failure()) return commit_failed(*f);
  // A status set in memory whose commit failed never happened.
  ctx_.turn.status = committed_status_;
  try {
    try {
      std::rethrow_exception(thrown);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::cancelled && ctx_.handle->cancel.cancelled()) {
        finish_cancelled();
      } else if (e.code() == ErrorCode::conflict) {
        rt_.log(LogLevel::warn, "runtime", fmt::format("turn {} changed under its run: {}", ctx_.turn.id, e.what()));
      } else if (e.code() == ErrorCode::io) {
        // Storage failed outside a commit (a read): the details are for the log, not for the client.
        rt_.log(LogLevel::error, "runtime", fmt::format("turn {}: storage failed: {}", ctx_.turn.id, e.what()));
        fail("storage", kStorageFailed);
      } else {
        std::string code = e.code() == ErrorCode::model           ? "model_error"
                           : e.code() == ErrorCode::timeout       ? "timeout"
                           : e.code() == ErrorCode::invalid_state ? "step_limit"
                                                                  : std::string(to_string(e.code()));
        fail(code, e.message());
      }
    } catch (const std::exception& e) {
      fail("internal", e.what());  // host code's own exception (a tool, a model provider): its words
    } catch (...) {
      rt_.log(LogLevel::error, "runtime", fmt::format("turn {}: a non-standard exception", ctx_.turn.id));
      fail("internal", "the run failed with an internal error");
    }
  } catch (const std::exception& e2) {
    if (auto f = ctx_.em->failure()) return commit_failed(*f);
    rt_.log(LogLevel::error, "runtime",
            fmt::format("turn {}: could not record the end of the run: {}", ctx_.turn.id, e2.what()));
  }
}

void TurnRunner::commit_failed(const Error& f) {
  ctx_.em->discard();
  rt_.log(LogLevel::error, "pipeline",
          fmt::format("turn {}: a commit of run {} failed: {}", ctx_.turn.id, ctx_.turn.run_id, f.what()));
  if (ctx_.start_pending()) {
    if (deferred_)
      deferred_->error = std::make_exception_ptr(
          f.code() == ErrorCode::conflict || f.code() == ErrorCode::too_large
              ? f
              : Error(ErrorCode::io, std::string("the turn could not be stored: ") + kStorageFailed));
    return;
  }
  if (f.code() == ErrorCode::conflict) {
    rt_.log(LogLevel::warn, "runtime", fmt::format("turn {} changed under its run: {}", ctx_.turn.id, f.what()));
    return;
  }
  try {
    const bool size = f.code() == ErrorCode::too_large;
    if (auto ended = rt_.fail_from_store(ctx_.turn.id, size ? "too_large" : "storage",
                                         size ? f.message() : std::string(kStorageFailed), &ctx_.recorded))
      ctx_.turn = std::move(*ended);
  } catch (const std::exception& e) {
    rt_.log(LogLevel::error, "pipeline",
            fmt::format("turn {}: its failure could not be recorded yet (the sweeper tries again): {}", ctx_.turn.id,
                        e.what()));
    // Storage may work again (a full disk): the sweeper tries again. A size limit would refuse it every time.
    if (!is_size_limit(e)) rt_.remember_unrecorded(ctx_.turn.id);
    if (deferred_)
      deferred_->error = std::make_exception_ptr(Error(
          ErrorCode::io, fmt::format("turn {} failed and its end could not be stored yet: {}; it is recorded failed "
                                     "once storage works again",
                                     ctx_.turn.id, kStorageFailed)));
  }
}

void open_run(Runtime::Impl& rt, RunCtx& ctx, TurnRecord turn, std::shared_ptr<RunHandle> handle,
              DeferredStart* deferred) {
  ctx.turn = std::move(turn);
  ctx.handle = handle;
  if (deferred) {
    ctx.em = deferred->em;
    ctx.deferred_start = ctx.em->turn_version();
  } else {
    ctx.em = rt.make_emitter(ctx.turn.thread_id, ctx.turn.run_id, ctx.turn.version, true, handle);
  }
}

TurnRecord close_run(Runtime::Impl& rt, RunCtx& ctx, DeferredStart* deferred) {
  rt.unregister_run(ctx.turn.id);
  rt.jobs.deliver_waiting(ctx.turn.thread_id);
  if (deferred && deferred->error) return TurnRecord{};
  return std::move(ctx.turn);  // ctx dies with the caller's frame; the caller gets the record without a copy
}

TurnRecord Runtime::Impl::run_fresh(std::shared_ptr<RunHandle> handle, TurnRecord turn, DeferredStart* deferred) {
  RunCtx ctx;
  open_run(*this, ctx, std::move(turn), handle, deferred);
  TurnRunner runner(*this, ctx);
  runner.deferred_ = deferred;
  runner.guarded([&] {
    std::vector<LedgerEntry> none;  // a new turn has no tool calls yet
    load_run_state(*cfg.store, ctx, &none, deferred && deferred->history ? &*deferred->history : nullptr);
    runner.check_cancel();
    runner.run_stages(0);
  });
  return close_run(*this, ctx, deferred);
}

}  // namespace v1
}  // namespace agentrt
