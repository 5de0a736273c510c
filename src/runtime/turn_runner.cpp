// The stage loop: stages, tool calls and how a run ends; a fresh run (model calls are in model_call.cpp).
#include "runtime/turn_runner.hpp"

#include <algorithm>
#include <chrono>
#include <optional>

#include <fmt/format.h>

#include "agentrt/records.hpp"
#include "agentrt/summary.hpp"
#include "runtime/budget_guard.hpp"
#include "runtime/context_builder.hpp"
#include "runtime/event_wire.hpp"
#include "util/crypto.hpp"
#include "util/json_fast.hpp"
#include "util/json_object.hpp"

namespace agentrt {
inline namespace v1 {

using namespace turn;

void load_run_state(Store& store, RunCtx& ctx, std::vector<LedgerEntry>* known_ledger,
                    std::vector<MessageRecord>* known_history) {
  ctx.history = known_history ? std::move(*known_history) : store.messages(ctx.turn.thread_id);
  ctx.ledger = known_ledger ? std::move(*known_ledger) : store.ledger(ctx.turn.id);
  if (ctx.em) {
    ctx.em->seed_turn(ctx.turn);
    ctx.em->seed_ledger(ctx.ledger);
  }
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

void start_state(Store& store, RunCtx& ctx, bool first_turn, const std::optional<std::string>* known_state) {
  auto stored_state = [&] { return known_state ? *known_state : store.thread_state(ctx.turn.thread_id); };
  std::optional<json> state;
  if (ctx.handle && ctx.handle->state) {
    state = std::move(*ctx.handle->state);
    ctx.handle->state.reset();
  }
  if (!state) {
    if (first_turn) return;  // no run before it: nothing has given the thread a state
    auto stored = stored_state();
    if (!stored) return;
    state = parse_json(*stored);  // written by this runtime's projector from a checked state
  } else if (state->is_object() && state->empty() && (first_turn || !stored_state())) {
    return;  // what a client that keeps no state sends (AG-UI's default): a thread without one stays so
  }
  ctx.state = *state;
  ctx.em->emit(events::state_snapshot(std::move(*state)));
}

TurnRunner::TurnRunner(Runtime::Impl& rt, RunCtx& ctx)
    : rt_(rt), ctx_(ctx), committed_status_(ctx.turn.status), tools_(*this, rt, ctx), interrupts_(*this, rt, ctx) {
  turn_usage_ = usage_from_json(ctx.turn.usage);
}

void TurnRunner::run_stages(Stage start) {
  std::string intent = ctx_.turn.intent;
  std::string draft;
  for (Stage stage : kStages) {
    if (stage < start) continue;
    const StagePolicy& policy = rt_.cfg.stages.of(stage);
    if (ctx_.open_step != to_string(stage)) begin_step(stage);
    const bool org_writes = rt_.cfg.stages.organization.call_model;
    if (stage == Stage::intent) {
      if (policy.call_model) {
        std::string text;
        if (!stage_loop(stage, policy, Visibility::hidden, false, text)) return;
        ctx_.turn.intent = text;
        ctx_.em->emit(events::custom("agentrt.intent", json{{"text", text}}));
      }
    } else if (stage == Stage::execution) {
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

void TurnRunner::begin_step(Stage stage) {
  check_cancel();
  const std::string_view name = to_string(stage);
  ctx_.em->step_started(name);
  ctx_.open_step = name;
  ctx_.turn.stage = name;
}

void TurnRunner::end_step() {
  if (ctx_.open_step.empty()) return;
  ctx_.em->step_finished(ctx_.open_step);
  ctx_.open_step.clear();
}

void TurnRunner::check_cancel() {
  if (ctx_.handle && ctx_.handle->cancel.cancelled()) throw Error(ErrorCode::cancelled, "the turn was cancelled");
}

void TurnRunner::stage_turn() { ctx_.turn.usage = usage_json(turn_usage_); }

void TurnRunner::end_facts(Event& e) {
  json row = json::object();
  auto& r = row.get_ref<json::object_t&>();
  r.emplace("steps", ctx_.turn.steps);
  if (!ctx_.turn.usage.empty()) r.emplace("usage", ctx_.turn.usage);
  if (!ctx_.turn.error.empty()) r.emplace("error", ctx_.turn.error);
  if (is_waiting(ctx_.turn.status)) {
    r.emplace("expiresAt", ctx_.turn.expires_at);
    r.emplace("approvalRequestId", ctx_.turn.approval_request_id);
    if (!ctx_.turn.trace.empty()) r.emplace("trace", ctx_.turn.trace);
  }
  if (!e.metadata.is_object()) e.metadata = json::object();
  e.metadata["agentrt"]["turn"] = std::move(row);
  // What the run spent (its tool calls: those its model made, whatever their outcome); the turn's is its row's.
  int64_t run_tool_calls = 0;
  for (const auto& l : ctx_.ledger) run_tool_calls += l.run_id == ctx_.turn.run_id;
  e.metadata["agentrt"]["spend"] =
      spend_totals_json(spend_of(run_model_calls_, run_tool_calls, ctx_.run_usage, rt_.cfg.prices));
}

bool TurnRunner::stage_loop(Stage stage, const StagePolicy& policy, Visibility vis, bool final_candidate,
                            std::string& final_text) {
  // One request for all of the stage's model calls, rebuilt before each in the same memory (build_context). Its
  // tools are copied out of the registry again only when it has changed: each call offers the same ones.
  ModelRequest req;
  std::optional<uint64_t> defs_generation;
  size_t offered = 0;  // req.tools' first ones: the stage's set from rt_.offers (the client's tools follow)
  // The set goes back for the next turn's stage however this one ends.
  struct GiveBack {
    ToolOffers& offers;
    Stage stage;
    const StagePolicy& policy;
    ModelRequest& req;
    const std::optional<uint64_t>& generation;
    const size_t& offered;
    ~GiveBack() {
      if (!generation || req.tools.size() < offered) return;
      req.tools.resize(offered);
      try {
        offers.give_back(stage, policy.tools, *generation, std::move(req.tools));
      } catch (...) {  // no room to keep it (bad_alloc): the set is dropped, as it was before it was kept
      }
    }
  } give_back{rt_.offers, stage, policy, req, defs_generation, offered};
  for (;;) {
    check_cancel();
    if (ctx_.turn.steps >= rt_.cfg.max_steps)
      throw Error(ErrorCode::invalid_state,
                  fmt::format("step limit reached: {} model calls in this turn", rt_.cfg.max_steps));
    if (rt_.mcp) report_changed_mcp_tools(stage);
    const uint64_t generation = rt_.tools.generation();  // read first: a change after it is seen next time
    if (defs_generation != generation) {
      req.tools = rt_.offers.take(stage, policy.tools, generation);
      offered = req.tools.size();
      if (stage == Stage::execution && ctx_.handle)
        for (const auto& c : ctx_.handle->client_tools) req.tools.push_back(c.definition);
      defs_generation = generation;
    }
    build_request(stage, policy, req);
    check_budgets(1);
    trace::ModelCallSpan chat(rt_.tracer, ctx_.span, req, *rt_.cfg.model);  // sets req.traceparent
    Answer answer = chat.run([&] { return call_model(stage, req, vis, final_candidate); });
    if (answer.result.tool_calls.empty()) {
      final_text = answer.result.text;
      return true;
    }
    if (!process_tool_calls(std::move(answer.calls))) return false;
  }
}

void TurnRunner::report_changed_mcp_tools(Stage stage) {
  for (const auto& t : rt_.mcp->changed(to_string(stage))) {
    if (!reported_mcp_changes_.insert(t.name + "@" + t.changed_hash).second) continue;
    ctx_.em->emit(events::custom("agentrt.mcp_tool_changed", json{{"name", t.name},
                                                                  {"server", t.server},
                                                                  {"tool", t.tool},
                                                                  {"approvedHash", t.hash},
                                                                  {"hash", t.changed_hash},
                                                                  {"definition", t.changed_definition}}));
  }
}

std::vector<TurnRunner::Requested> TurnRunner::request(Stage stage_id, const std::vector<ModelToolCall>& calls) {
  const StagePolicy& policy = rt_.cfg.stages.of(stage_id);
  const std::string stage(to_string(stage_id));
  std::vector<Requested> out;
  int ordinal = 0;
  for (const auto& c : calls) {
    Requested r;
    LedgerEntry& l = r.entry;
    l.tool_call_id = c.id;
    l.turn_id = ctx_.turn.id;
    l.thread_id = ctx_.turn.thread_id;
    l.run_id = ctx_.turn.run_id;
    l.tool_name = c.name;
    l.stage = stage;
    l.ordinal = ordinal++;
    l.arguments = c.arguments;
    l.status = LedgerStatus::requested;
    std::shared_ptr<const ToolRegistry::Entry> entry;
    const ClientToolOffer* client = nullptr;
    const auto offered_tools = rt_.tools.offered(stage, policy.tools);
    for (const auto& offered : offered_tools)
      if (offered->spec.name == c.name) entry = offered;
    // The client's tools, in the stage they are offered in (their names never clash with a registered tool's).
    if (!entry && stage_id == Stage::execution && ctx_.handle)
      for (const auto& offered : ctx_.handle->client_tools)
        if (offered.definition.name == c.name) client = &offered;
    const JsonSchema* schema = entry ? &entry->schema : client ? client->schema.get() : nullptr;
    if (!schema) {
      std::string names;
      for (const auto& offered : offered_tools) names += (names.empty() ? "" : ", ") + offered->spec.name;
      if (stage_id == Stage::execution && ctx_.handle)
        for (const auto& offered : ctx_.handle->client_tools)
          names += (names.empty() ? "" : ", ") + offered.definition.name;
      r.problem = ToolError{"unknown_tool", fmt::format("unknown tool '{}'; the tools available are: {}", c.name,
                                                        names.empty() ? "none" : names)};
    } else {
      const size_t max_depth = rt_.cfg.max_json_depth;
      r.args = c.arguments.empty() ? json::object() : parse_json_or_discarded(c.arguments, max_depth);
      if (r.args.is_discarded() && json_text_depth(c.arguments, max_depth) > max_depth) {
        r.problem = ToolError{"invalid_arguments",
                              fmt::format("the arguments of {} are nested deeper than {} levels", c.name, max_depth)};
        r.args = json::object();
      } else if (r.args.is_discarded() || !r.args.is_object()) {
        r.problem = ToolError{"invalid_arguments", fmt::format("the arguments of {} are not a JSON object", c.name)};
        r.args = json::object();
      } else if (auto v = schema->validate(r.args)) {
        r.problem = ToolError{"invalid_arguments", fmt::format("invalid arguments for {}: {}{}{}", c.name, v->path,
                                                               v->path.empty() ? "" : ": ", v->message)};
      } else if (client) {
        l.client = true;  // the client runs it: the call waits for its answer (requested) when the run pauses
      } else {
        l.idempotent = entry->spec.idempotent;
        try {
          l.needs_approval = entry->spec.approval.requires_approval(r.args);
        } catch (...) {
          l.needs_approval = true;  // a failing predicate errs on the side of asking
        }
        if (!l.needs_approval) advance(l, LedgerStatus::approved);
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

bool TurnRunner::process_tool_calls(std::vector<Requested> calls) {
  std::vector<std::string> run_now, need_approval, client;
  for (auto& r : calls) {
    const LedgerEntry& l = ctx_.ledger.emplace_back(std::move(r.entry));
    if (r.problem) {
      ToolAgentOutput out;
      out.tool_call_id = l.tool_call_id;
      out.tool_name = l.tool_name;
      out.args = r.args.is_object() ? r.args : json::object();
      out.status = ToolStatus::failed;
      out.error = r.problem;
      tools_.record_result(l.tool_call_id, std::move(out));
    } else if (l.client) {
      client.push_back(l.tool_call_id);
    } else if (l.needs_approval) {
      need_approval.push_back(l.tool_call_id);
    } else {
      run_now.push_back(l.tool_call_id);
      tools_.checked_args(l.tool_call_id, std::move(r.args));
    }
  }
  // The calls count once the model has made them: a batch that would pass a limit runs none of its calls (the
  // run's end gives each an outcome).
  check_budgets(0);
  auto confirm = tools_.execute(run_now);
  need_approval.insert(need_approval.end(), confirm.begin(), confirm.end());
  if (!need_approval.empty() || !client.empty()) {
    interrupts_.pause(need_approval, client);
    return false;
  }
  return true;
}

Spend TurnRunner::turn_spend() const {
  return spend_of(ctx_.turn.steps, static_cast<int64_t>(ctx_.ledger.size()), turn_usage_, rt_.cfg.prices);
}

void TurnRunner::check_budgets(int64_t more_model_calls) {
  if (rt_.cfg.budgets.empty()) return;
  Spend next = turn_spend();
  next.model_calls += more_model_calls;
  agentrt::check_budgets(rt_.cfg.budgets, rt_.cfg.prices, *rt_.cfg.store, ctx_.turn, next);
}

void TurnRunner::finish_completed() {
  RunEmitter::Unit unit(*ctx_.em);  // the run's end commits with the turn's state
  check_transition(ctx_.turn.id, ctx_.turn.status, TurnStatus::completed);
  ctx_.turn.status = TurnStatus::completed;
  ctx_.turn.owner.clear();
  ctx_.turn.interrupts = json::array();
  stage_turn();
  Event end = events::run_finished(ctx_.turn.thread_id, ctx_.turn.run_id, json_object("type", "success"),
                                   ctx_.run_usage.empty() ? json(nullptr) : usage_json(ctx_.run_usage));
  end_facts(end);
  ctx_.em->emit(end);
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
  for (const auto& id : ctx_.open_tool_calls) em.tool_call_end(id);
  ctx_.open_tool_calls.clear();
}

void TurnRunner::finish_cancelled() {
  RunEmitter::Unit unit(*ctx_.em);  // the run's end commits with the turn's state
  close_open_streams();
  tools_.close_unanswered("cancelled", "not run: the turn was cancelled", ToolStatus::rejected);
  end_step();
  check_transition(ctx_.turn.id, ctx_.turn.status, TurnStatus::cancelled);
  ctx_.turn.status = TurnStatus::cancelled;
  ctx_.turn.owner.clear();
  ctx_.turn.error = "cancelled";
  stage_turn();
  Event end = events::run_finished(ctx_.turn.thread_id, ctx_.turn.run_id, json{{"type", "cancelled"}},
                                   ctx_.run_usage.empty() ? json(nullptr) : usage_json(ctx_.run_usage));
  end_facts(end);
  ctx_.em->emit(end);
  commit();
}

void TurnRunner::fail(const std::string& code, const std::string& message) {
  trace::run_failed(ctx_.span, code, message);
  RunEmitter::Unit unit(*ctx_.em);  // the run's end commits with the turn's state
  // Events still open stay as they are: RUN_ERROR may end a run at any point.
  ctx_.open_text.clear();
  ctx_.open_reasoning.clear();
  ctx_.open_tool_calls.clear();
  tools_.close_unanswered("not_run", "not run: " + message, ToolStatus::failed);
  // RUN_ERROR, and the ERROR message the projector derives from it ("ERROR code: message").
  Event err = events::run_error(message, code);
  if (!ctx_.run_usage.empty()) err.usage = usage_json(ctx_.run_usage);
  err.metadata = json{{"agentrt", {{"messageId", new_id("msg")}}}};
  if (can_transition(ctx_.turn.status, TurnStatus::failed)) ctx_.turn.status = TurnStatus::failed;
  ctx_.turn.owner.clear();
  ctx_.turn.error = message;
  stage_turn();
  end_facts(err);
  ctx_.em->emit(err);
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
    } catch (const BudgetExceeded& e) {
      fail("budget_exceeded", e.message());
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
    if (auto ended = rt_.recovery.fail_from_store(ctx_.turn.id, size ? "too_large" : "storage",
                                                  size ? f.message() : std::string(kStorageFailed), &ctx_.recorded))
      ctx_.turn = std::move(*ended);
  } catch (const std::exception& e) {
    rt_.log(LogLevel::error, "pipeline",
            fmt::format("turn {}: its failure could not be recorded yet (the sweeper tries again): {}", ctx_.turn.id,
                        e.what()));
    // Storage may work again (a full disk): the sweeper tries again. A size limit would refuse it every time.
    if (!is_size_limit(e)) rt_.recovery.remember_unrecorded(ctx_.turn.id);
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
  ctx.watch_history();
  ctx.span = trace::start_run(rt.tracer, ctx.turn, handle->traceparent, handle->follows, *rt.cfg.model);
}

TurnRecord close_run(Runtime::Impl& rt, RunCtx& ctx, DeferredStart* deferred) {
  trace::end_run(ctx.span, ctx.turn, ctx.run_usage);
  rt.unregister_run(ctx.turn.id);
  rt.jobs.deliver_waiting(ctx.turn.thread_id);
  if (deferred && deferred->error) return TurnRecord{};
  if (ctx.em) {
    // The version and the times are the store's, set as it committed the row.
    if (const int64_t v = ctx.em->turn_version(); v >= 0) ctx.turn.version = v;
    const auto [created_at, updated_at] = ctx.em->turn_times();
    if (updated_at > 0) ctx.turn.updated_at = updated_at;
    if (ctx.turn.created_at == 0) ctx.turn.created_at = created_at;
  }
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
    // Every run adds messages: a history of this turn's alone means no run came before (and no state).
    const bool first_turn = std::all_of(ctx.history.begin(), ctx.history.end(),
                                        [&](const MessageRecord& m) { return m.turn_id == ctx.turn.id; });
    start_state(*cfg.store, ctx, first_turn);
    runner.check_cancel();
    runner.run_stages(Stage::intent);
  });
  return close_run(*this, ctx, deferred);
}

}  // namespace v1
}  // namespace agentrt
