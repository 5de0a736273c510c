// The stage loop: stages, model calls and how a run ends; a fresh run.
#include "runtime/turn_runner.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "agentrt/records.hpp"
#include "agentrt/summary.hpp"
#include "runtime/budget_guard.hpp"
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

void start_state(Store& store, RunCtx& ctx, bool first_turn) {
  std::optional<json> state;
  if (ctx.handle && ctx.handle->state) {
    state = std::move(*ctx.handle->state);
    ctx.handle->state.reset();
  }
  if (!state) {
    if (first_turn) return;  // no run before it: nothing has given the thread a state
    auto stored = store.thread_state(ctx.turn.thread_id);
    if (!stored) return;
    state = parse_json(*stored);  // written by this runtime's projector from a checked state
  } else if (state->is_object() && state->empty() && (first_turn || !store.thread_state(ctx.turn.thread_id))) {
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
  for (;;) {
    check_cancel();
    if (ctx_.turn.steps >= rt_.cfg.max_steps)
      throw Error(ErrorCode::invalid_state,
                  fmt::format("step limit reached: {} model calls in this turn", rt_.cfg.max_steps));
    if (rt_.mcp) report_changed_mcp_tools(stage);
    auto defs = rt_.tools.definitions(to_string(stage), policy.tools);
    if (stage == Stage::execution && ctx_.handle)
      for (const auto& c : ctx_.handle->client_tools) defs.push_back(c.definition);
    ModelRequest req = build_request(stage, policy, defs);
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

ModelRequest TurnRunner::build_request(Stage stage, const StagePolicy& policy, std::vector<ToolDefinition> defs) {
  ContextInput in;
  in.system_prompt = policy.system_prompt;
  if (stage != Stage::intent && !ctx_.turn.intent.empty())
    in.system_notes.push_back("The user's intent: " + ctx_.turn.intent);
  if (stage == Stage::organization && !draft_.empty()) in.system_notes.push_back("Draft answer:\n" + draft_);
  if (ctx_.handle && !ctx_.handle->context.empty()) in.system_notes.push_back(context_section(ctx_.handle->context));
  in.turn_id = ctx_.turn.id;
  in.budget_chars = rt_.cfg.context_budget_chars;
  ModelRequest req;
  req.messages = build_context(in, ctx_.history, ctx_.full_results);
  rt_.attachments.media_for_model(req.messages, ctx_.media_cache);
  req.stage = to_string(stage);
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
    id = fmt::format("{}_{}", proposed.substr(0, 100), new_id("r").substr(2 + 8, 8));
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
      ctx.em->text_start(msg_id_);
      ctx.open_text = msg_id_;
    }
    ctx.em->text_content(msg_id_, d);
    streamed_text_.append(d);
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
    announced_.push_back({std::string(id), eff, std::string(name), {}, false});
    ctx.em->tool_call_start(eff, name, msg_id_);
    ctx.open_tool_calls.insert(eff);
  }
  void on_tool_call_args(int index, std::string_view d) override {
    auto it = by_index_.find(index);
    if (it == by_index_.end() || d.empty()) return;
    r_.ctx_.em->tool_call_args(it->second, d);
    for (auto& a : announced_)
      if (a.effective == it->second) a.arguments.append(d);
  }
  void on_fallback(const ModelFallback& f) override {
    r_.ctx_.em->emit(events::custom("agentrt.model_fallback",
                                    json{{"stage", r_.ctx_.turn.stage},
                                         {"from", {{"provider", f.from_provider}, {"model", f.from_model}}},
                                         {"to", {{"provider", f.to_provider}, {"model", f.to_model}}},
                                         {"error", {{"code", f.error_code}, {"message", f.error}}}}));
  }
  struct Announced {
    std::string original, effective, name, arguments;  // name and arguments as streamed
    bool taken;
  };
  // The announced call a result's tool call is (the first with its id not taken yet), or null.
  const Announced* take(const std::string& original) {
    for (auto& a : announced_)
      if (!a.taken && a.original == original) {
        a.taken = true;
        return &a;
      }
    return nullptr;
  }
  const std::string& message_id() const { return msg_id_; }
  const std::string& streamed_text() const { return streamed_text_; }

 private:
  TurnRunner& r_;
  Visibility vis_;
  std::string msg_id_;
  std::map<int, std::string> by_index_;
  std::vector<Announced> announced_;
  std::string streamed_text_;  // the text streamed as TEXT_MESSAGE_CONTENT
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

TurnRunner::Answer TurnRunner::call_model(Stage stage, const ModelRequest& req, Visibility vis, bool final_candidate) {
  Sink sink(*this, vis, new_id("msg"));
  ModelResult result = rt_.cfg.model->complete(req, sink, ctx_.handle->cancel);
  rt_.model_calls.fetch_add(1, std::memory_order_relaxed);
  ++ctx_.turn.steps;
  ++run_model_calls_;
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
  // The assistant message is stored once, complete, never half of it: the projector derives it from the
  // events, and the last event of the answer says it is complete (metadata.agentrt.message), with what the
  // model's final answer holds beyond what was streamed (the result is authoritative).
  const bool persist = !is_final || vis == Visibility::text;
  // The provider's state for this answer (thinking blocks and their signatures) travels with the message.
  if (persist && !result.encrypted_value.empty())
    em.emit(events::reasoning_encrypted_value("message", msg_id, result.encrypted_value));
  json facts = json::object();
  std::string streamed = sink.streamed_text();
  // Tool calls: the effective id of each (the announced one, else a new one), what differs from the stream, and
  // the ledger's facts (the projector derives the entries from the message's completion).
  std::vector<bool> announced, restated;
  for (auto& c : result.tool_calls) {
    const auto* a = sink.take(c.id);
    c.id = a ? a->effective : unique_call_id(c.id);
    announced.push_back(a != nullptr);
    restated.push_back(a && (a->name != c.name || a->arguments != c.arguments));
    ctx_.open_tool_calls.erase(c.id);
  }
  const auto& calls = result.tool_calls;
  std::vector<Requested> requested = request(stage, calls);
  json listed = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const LedgerEntry& l = requested[i].entry;
    if (!restated[i] && requested[i].problem) {
      listed.push_back(calls[i].id);
      continue;
    }
    json call = json::object();
    auto& f = call.get_ref<json::object_t&>();
    f.emplace("id", calls[i].id);
    if (restated[i]) {
      f.emplace("name", calls[i].name);
      f.emplace("arguments", calls[i].arguments);
    }
    if (!requested[i].problem) f.emplace("tool", l.client ? "client" : l.needs_approval ? "approve" : "run");
    if (l.idempotent) f.emplace("idempotent", true);
    listed.push_back(std::move(call));
  }
  // Announced calls missing from the result (a provider inconsistency) are closed, not left open.
  std::vector<std::string> missing(ctx_.open_tool_calls.begin(), ctx_.open_tool_calls.end());
  ctx_.open_tool_calls.clear();
  const bool text_open = vis == Visibility::text && (!ctx_.open_text.empty() || !result.text.empty() || is_final);
  if (vis == Visibility::text && text_open && ctx_.open_text.empty()) streamed = result.text;
  if (persist && streamed != result.text) facts["content"] = result.text;
  if (!calls.empty()) facts["toolCalls"] = std::move(listed);
  json complete = json::object();
  complete.get_ref<json::object_t&>().emplace("message", std::move(facts));
  auto marked = [&complete] {
    json meta = json::object();
    meta.get_ref<json::object_t&>().emplace("agentrt", std::move(complete));
    return meta;
  };
  const bool ends = !calls.empty() || !missing.empty();
  if (text_open) {
    if (ctx_.open_text.empty()) {
      em.text_start(msg_id);
      if (!result.text.empty()) em.text_content(msg_id, result.text);
      ctx_.open_text = msg_id;
    }
    json meta = json::object();
    if (is_final && final_candidate)
      meta.get_ref<json::object_t&>().emplace("worker_agent_output", worker_output(result.text));
    if (persist && !ends) meta.get_ref<json::object_t&>().emplace("agentrt", std::move(complete));
    em.emit(events::text_end(ctx_.open_text, meta.empty() ? json(nullptr) : std::move(meta)));
    ctx_.open_text.clear();
  }
  // The last end carries the message's completion.
  auto end_call = [&](const std::string& id, bool last) {
    if (!last || !persist) return em.tool_call_end(id);
    Event end = events::tool_call_end(id);
    end.metadata = marked();
    em.emit(end);
  };
  for (size_t i = 0; i < calls.size(); ++i) {
    const auto& c = calls[i];
    if (!announced[i]) {
      em.tool_call_start(c.id, c.name, msg_id);
      if (!c.arguments.empty()) em.tool_call_args(c.id, c.arguments);
    }
    end_call(c.id, missing.empty() && i + 1 == calls.size());
  }
  for (size_t i = 0; i < missing.size(); ++i) end_call(missing[i], i + 1 == missing.size());
  return Answer{std::move(result), std::move(requested)};
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
  Event end = events::run_finished(ctx_.turn.thread_id, ctx_.turn.run_id, json{{"type", "success"}},
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
