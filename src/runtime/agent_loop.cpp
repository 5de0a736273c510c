// The agent loop: stages, model calls, tool calls, approvals, and how each run ends.
#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "agentrt/records.hpp"
#include "agentrt/summary.hpp"
#include "runtime/context_builder.hpp"
#include "runtime/event_wire.hpp"
#include "runtime/runtime_impl.hpp"
#include "util/crypto.hpp"
#include "util/json_fast.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

const char* const kStageOrder[] = {kIntent, kExecution, kOrganization};

int stage_index(std::string_view s) {
  for (int i = 0; i < 3; ++i)
    if (s == kStageOrder[i]) return i;
  return 1;
}

const StagePolicy& policy_of(const StagePolicies& p, std::string_view s) {
  if (s == kIntent) return p.intent;
  if (s == kOrganization) return p.organization;
  return p.execution;
}

enum class Visibility { hidden, reasoning, text };

// The ledger status a call's outcome moves it to.
LedgerStatus ledger_outcome(ToolStatus s) {
  switch (s) {
    case ToolStatus::succeeded: return LedgerStatus::finished;
    case ToolStatus::failed: return LedgerStatus::failed;
    case ToolStatus::rejected: return LedgerStatus::rejected;
    case ToolStatus::expired: return LedgerStatus::expired;
    case ToolStatus::interrupted: return LedgerStatus::interrupted;
  }
  return LedgerStatus::failed;
}

bool is_size_limit(const std::exception& e) {
  auto* err = dynamic_cast<const Error*>(&e);
  return err && err->code() == ErrorCode::too_large;
}

// What a run that storage stopped tells the client and the next turn's model (the details go to the log).
constexpr const char* kStorageFailed = "storage failed: the run could not be saved and was stopped";
// What history says of a call that was started and whose result was never stored (its runtime stopped).
constexpr const char* kOutcomeUnknown =
    "the runtime stopped while this call was running: its outcome is unknown (it may have taken effect), and it "
    "was not repeated";

void add_usage(std::vector<TokenUsage>& acc, const TokenUsage& u) {
  for (auto& a : acc)
    if (a.provider == u.provider && a.model == u.model) {
      a += u;
      return;
    }
  acc.push_back(u);
}

// A call's arguments as an object: what the model sent, or {} when that was not a JSON object.
json parse_args(const std::string& arguments) {
  json args = arguments.empty() ? json::object() : parse_json_or_discarded(arguments);
  return args.is_object() ? args : json::object();
}

json usage_json(const std::vector<TokenUsage>& u) {
  json out = json::array();
  for (const auto& x : u) out.push_back(x);
  return out;
}

std::vector<TokenUsage> usage_from_json(const json& j) {
  std::vector<TokenUsage> out;
  if (!j.is_array()) return out;
  for (const auto& x : j) {
    try {
      out.push_back(x.get<TokenUsage>());
    } catch (...) {
    }
  }
  return out;
}

// Runs one run of a turn on the calling worker thread.
class TurnRunner {
 public:
  TurnRunner(Runtime::Impl& rt, RunCtx& ctx) : rt_(rt), ctx_(ctx), committed_status_(ctx.turn.status) {
    turn_usage_ = usage_from_json(ctx.turn.usage);
  }

  // Runs the stages from `start` on. `step_open`: the continuation already opened the stage's step.
  void run_stages(int start) {
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
        if (!stage_loop(stage, policy, org_writes ? Visibility::reasoning : Visibility::text, !org_writes, draft))
          return;
      } else if (policy.call_model) {
        draft_ = draft;
        std::string answer;
        if (!stage_loop(stage, policy, Visibility::text, true, answer)) return;
      }
      end_step();
    }
    finish_completed();
  }

  void begin_step(const std::string& stage) {
    check_cancel();
    ctx_.em->emit_json(wire::step_started(stage, now_ms()));
    ctx_.open_step = stage;
    ctx_.turn.stage = stage;
  }

  void end_step() {
    if (ctx_.open_step.empty()) return;
    ctx_.em->emit_json(wire::step_finished(ctx_.open_step, now_ms()));
    ctx_.open_step.clear();
  }

  void check_cancel() {
    if (ctx_.handle && ctx_.handle->cancel.cancelled()) throw Error(ErrorCode::cancelled, "the turn was cancelled");
  }

  void stage_turn() {
    ctx_.turn.usage = usage_json(turn_usage_);
    ctx_.em->set_turn(ctx_.turn);
  }

  // The model/tool loop of one stage. Returns false when the run paused for approval.
  bool stage_loop(const std::string& stage, const StagePolicy& policy, Visibility vis, bool final_candidate,
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

  ModelRequest build_request(const std::string& stage, const StagePolicy& policy, std::vector<ToolDefinition> defs) {
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

  std::string unique_call_id(std::string_view proposed) {
    std::string id(proposed);
    if (id.empty()) id = new_id("call");
    if (id.size() > 128) id = id.substr(0, 128);
    while (ctx_.used_tool_call_ids.count(id))
      id = fmt::format("{}_{}", proposed.substr(0, 100), new_id("r").substr(2, 8));
    ctx_.used_tool_call_ids.insert(id);
    return id;
  }

  class Sink final : public ModelStreamSink {
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

  json worker_output(const std::string& answer) {
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

  std::pair<ModelResult, std::string> call_model(const ModelRequest& req, Visibility vis, bool final_candidate) {
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

  // Validates and records the calls of one model response, runs those that need no approval, and pauses
  // for the rest. Returns false when the run paused.
  bool process_tool_calls(const std::string& stage, const ModelResult& result) {
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

  // Runs approved calls. A call to a tool that is not idempotent is durable as `started` before it runs
  // and as finished right after, so a crash never runs it twice. Returns the calls whose tool asked for a
  // job confirmation (they wait for the person, like calls that need approval).
  std::vector<std::string> execute(const std::vector<std::string>& ids) {
    if (ids.empty()) return {};
    struct Running {
      std::string id;
      std::shared_ptr<const ToolRegistry::Entry> entry;
      ToolCompletion completion;
      json args;
      int64_t started_ms = 0;
      std::chrono::steady_clock::time_point deadline;
      std::string job_id;
      bool job_confirmed = false;
    };
    std::vector<Running> running;
    bool durable = false;
    for (const auto& id : ids) {
      LedgerEntry* l = ctx_.find_ledger(id);
      if (!l) continue;
      Running r;
      r.id = id;
      r.entry = rt_.tools.find(l->tool_name);
      r.args = parse_args(l->arguments);
      if (!r.entry) {
        ToolAgentOutput out;
        out.tool_call_id = id;
        out.tool_name = l->tool_name;
        out.args = r.args;
        out.status = ToolStatus::failed;
        out.error = ToolError{"unknown_tool", fmt::format("tool '{}' is no longer registered", l->tool_name)};
        record_result(id, std::move(out));
        continue;
      }
      advance(*l, LedgerStatus::started);
      ctx_.em->put_ledger(*l);
      if (!r.entry->spec.idempotent) durable = true;
      running.push_back(std::move(r));
    }
    if (running.empty()) return {};
    // A start still pending (resume_turn's decision, run_turn's insert) is committed with the `started`
    // records. A decision always is, even for idempotent tools: the version compare-and-set in that commit
    // is what keeps two concurrent resumes from both running a tool.
    if (durable || (decision_pending_ && ctx_.start_pending())) commit();
    // Cancelled after the `started` commit but before any tool ran: the calls are recorded as not run.
    check_cancel();
    // Each call may start a job: its id is known before the tool runs, so the host can report on it at once.
    JobsInFlight in_flight(rt_);
    for (auto& r : running) {
      LedgerEntry* l = ctx_.find_ledger(r.id);
      if (l->decision.is_object() && l->decision.contains("jobId") && l->decision["jobId"].is_string()) {
        r.job_id = l->decision["jobId"].get<std::string>();
        r.job_confirmed = true;
      } else {
        r.job_id = new_id("job");
      }
      in_flight.add(r.job_id, ctx_.turn, *l);
    }
    for (auto& r : running) {
      LedgerEntry* l = ctx_.find_ledger(r.id);
      ToolCallContext call{ctx_.turn.thread_id,
                           ctx_.turn.id,
                           ctx_.turn.run_id,
                           ctx_.turn.user_id,
                           l->stage,
                           r.id,
                           l->tool_name,
                           r.args,
                           rt_.attachments_named(r.args, ctx_.history),
                           r.job_id,
                           r.job_confirmed};
      r.started_ms = now_ms();
      r.deadline = std::chrono::steady_clock::now() + r.entry->spec.timeout;
      rt_.tool_executions.fetch_add(1, std::memory_order_relaxed);
      try {
        r.entry->spec.handler(call, r.completion);
      } catch (const Error& e) {
        r.completion.fail("tool_error", e.message());
      } catch (const std::exception& e) {
        r.completion.fail("tool_error", e.what());
      } catch (...) {
        r.completion.fail("tool_error", "the tool threw a non-standard exception");
      }
    }
    bool cancelled = false;
    bool jobs_touched = false;
    std::vector<std::string> confirm;
    for (auto& r : running) {
      LedgerEntry* l = ctx_.find_ledger(r.id);
      ToolAgentOutput out;
      out.tool_call_id = r.id;
      out.tool_name = l->tool_name;
      out.args = r.args;
      if (!r.completion.wait_until(r.deadline, ctx_.handle->cancel)) {
        if (ctx_.handle->cancel.cancelled()) {
          r.completion.fail("cancelled", "the turn was cancelled while the tool ran");
          cancelled = true;
        } else {
          r.completion.fail("timeout",
                            fmt::format("{} did not finish within {} ms", l->tool_name, r.entry->spec.timeout.count()));
        }
      }
      auto oc = r.completion.take_outcome();
      std::string summary;
      if (oc.ok && oc.job) {
        if (auto problem = invalid_job_start(*oc.job, rt_.cfg.max_json_depth)) {
          oc.ok = false;
          oc.error = ToolError{"invalid_job", *problem};
        }
      } else if (oc.ok) {
        if (auto problem = invalid_result(oc.result, rt_.cfg.max_json_depth)) {
          oc.ok = false;
          oc.result = ToolResult{};
          oc.error = ToolError{"invalid_result", *problem};
        }
      }
      if (oc.ok && oc.job) {
        jobs_touched = true;
        std::optional<JobRecord> early = in_flight.early(r.job_id);
        if (oc.job->confirm && !r.job_confirmed && !early) {
          ask_confirmation(*l, r.job_id, *oc.job);
          confirm.push_back(r.id);
          continue;  // no result yet: the person decides first
        }
        JobRecord j = start_job(*l, r.job_id, r.job_confirmed, *oc.job, early, in_flight.progress(r.job_id));
        out.status = ToolStatus::succeeded;
        out.result = json{{"jobId", j.id}, {"status", to_string(j.status)}};
        if (!oc.job->message.empty()) out.result["message"] = oc.job->message;
        summary = fmt::format("Started job {} ({}): {}{}", j.id, l->tool_name, to_string(j.status),
                              oc.job->message.empty() ? "" : ". " + oc.job->message);
      } else if (oc.ok) {
        out.status = ToolStatus::succeeded;
        out.result = oc.result.result;  // its depth is checked above; end_confirmed_job reads it too
        out.ui = oc.result.ui;
      } else {
        out.status = oc.error.code == "cancelled" ? ToolStatus::interrupted : ToolStatus::failed;
        out.error = oc.error;
      }
      // A confirmed job whose tool answered with a result (or failed) instead of starting it ends with that.
      if (r.job_confirmed && !(oc.ok && oc.job)) jobs_touched |= end_confirmed_job(r.job_id, oc);
      out.timings.started_at_ms = r.started_ms;
      out.timings.finished_at_ms = now_ms();
      out.timings.duration_ms = out.timings.finished_at_ms - r.started_ms;
      const bool started_job = oc.ok && oc.job;
      record_result(r.id, std::move(out), summary);
      // A started job's record goes with the result: if that commit is lost, so is the job's record, and the
      // call's outcome is not known to the store (it is not written again from memory).
      if (started_job) ctx_.recorded.erase(r.id);
    }
    // The results are not a commit of their own: they go with the run's next one (the next pause or end,
    // or the group-commit flusher's within flush_interval while the model works). Dying before that
    // leaves the calls `started`, which recovery records as interrupted: never run twice. A started job is
    // the exception: it is durable before the run goes on (the host may report on it any time now).
    if (jobs_touched) commit();
    if (cancelled) throw Error(ErrorCode::cancelled, "the turn was cancelled");
    return confirm;
  }

  // The runtime's record of jobs being started by the calls running now (see Runtime::Impl::jobs_in_flight).
  // Destroyed after the commit that writes their records: an outcome the host reported after the run took
  // the early ones is applied then, to the committed record.
  class JobsInFlight {
   public:
    explicit JobsInFlight(Runtime::Impl& rt) : rt_(rt) {}
    ~JobsInFlight() {
      std::vector<JobRecord> late;
      {
        std::lock_guard<std::mutex> lock(rt_.jobs_mutex);
        for (const auto& id : ids_) {
          auto it = rt_.jobs_in_flight.find(id);
          if (it == rt_.jobs_in_flight.end()) continue;
          if (it->second.outcome) late.push_back(*it->second.outcome);
          rt_.jobs_in_flight.erase(it);
        }
      }
      for (const auto& o : late) {
        try {
          rt_.finish_job(
              o.id, o.status,
              [&](JobRecord& j) {
                j.result = o.result;
                j.assets = o.assets;
                j.progress = o.progress;
                if (!o.message.empty()) j.message = o.message;
                j.error_code = o.error_code;
                j.error_message = o.error_message;
              },
              false);
        } catch (const std::exception& e) {
          rt_.log(LogLevel::warn, "jobs",
                  fmt::format("job {}: the outcome reported while its tool answered was not "
                              "applied: {}",
                              o.id, e.what()));
        }
      }
    }
    void add(const std::string& id, const TurnRecord& turn, const LedgerEntry& call) {
      std::lock_guard<std::mutex> lock(rt_.jobs_mutex);
      ids_.push_back(id);
      Runtime::Impl::InFlightJob f;
      f.turn = &turn;
      f.call = &call;
      rt_.jobs_in_flight.emplace(id, std::move(f));
    }
    // Progress the host reported before the job's record existed.
    JobProgress progress(const std::string& id) {
      std::lock_guard<std::mutex> lock(rt_.jobs_mutex);
      auto it = rt_.jobs_in_flight.find(id);
      return it == rt_.jobs_in_flight.end() ? JobProgress{} : it->second.progress;
    }
    // The outcome the host reported before the job's record existed, taken: the run writes it with the record.
    std::optional<JobRecord> early(const std::string& id) {
      std::lock_guard<std::mutex> lock(rt_.jobs_mutex);
      auto it = rt_.jobs_in_flight.find(id);
      if (it == rt_.jobs_in_flight.end()) return std::nullopt;
      std::optional<JobRecord> out = std::move(it->second.outcome);
      it->second.outcome.reset();
      return out;
    }

   private:
    Runtime::Impl& rt_;
    std::vector<std::string> ids_;
  };

  // A result or ui card nested deeper than the limit (its copies and dumps would overflow the stack).
  static std::optional<std::string> invalid_result(const ToolResult& r, size_t max_depth) {
    if (json_depth(r.result, max_depth) > max_depth)
      return fmt::format("the tool's result is nested deeper than {} levels", max_depth);
    // The card's JSON: {type, version, data, actions}.
    if (r.ui &&
        (1 + json_depth(r.ui->data, max_depth) > max_depth || 1 + json_depth(r.ui->actions, max_depth) > max_depth))
      return fmt::format("the tool's ui card is nested deeper than {} levels", max_depth);
    return std::nullopt;
  }

  static std::optional<std::string> invalid_job_start(const JobStart& js, size_t max_depth) {
    if (js.status != JobStatus::queued && js.status != JobStatus::running)
      return fmt::format("a job starts queued or running, not {}", to_string(js.status));
    if (js.message.size() > 4096 || js.confirm_message.size() > 4096)
      return std::string("a job's message is longer than 4096 bytes");
    if (!js.metadata.is_object()) return std::string("a job's metadata must be a JSON object");
    if (json_depth(js.metadata, max_depth) > max_depth)
      return fmt::format("a job's metadata is nested deeper than {} levels", max_depth);
    if (js.metadata.dump().size() > 65536) return std::string("a job's metadata is larger than 64 KiB");
    if (js.timeout && js.timeout->count() <= 0) return std::string("a job's timeout must be positive");
    return std::nullopt;
  }

  JobRecord new_job(const LedgerEntry& l, const std::string& job_id) const {
    JobRecord j;
    j.id = job_id;
    j.thread_id = ctx_.turn.thread_id;
    j.turn_id = ctx_.turn.id;
    j.run_id = ctx_.turn.run_id;
    j.tool_call_id = l.tool_call_id;
    j.tool_name = l.tool_name;
    j.user_id = ctx_.turn.user_id;
    return j;
  }

  void stage_job(const JobRecord& j, int64_t expected_version) {
    ctx_.em->put_job(JobWrite{j, expected_version});
    ctx_.em->emit(events::custom("agentrt.job", job_to_json(j)));
    ctx_.jobs[j.tool_call_id] = j;
  }

  // The tool asked for a confirmation: the job is recorded queued, and the call waits for the person.
  void ask_confirmation(LedgerEntry& l, const std::string& job_id, const JobStart& js) {
    JobRecord j = new_job(l, job_id);
    j.status = JobStatus::queued;
    j.confirmation = JobConfirmation::pending;
    j.confirm_message = js.confirm_message;
    j.message = js.message;
    j.metadata = js.metadata;
    if (js.timeout) j.timeout_ms = js.timeout->count();  // kept for the start after the confirmation
    stage_job(j, -1);
    advance(l, LedgerStatus::requested);
    l.needs_approval = true;
    ctx_.em->put_ledger(l);
  }

  JobRecord start_job(const LedgerEntry& l, const std::string& job_id, bool confirmed, const JobStart& js,
                      const std::optional<JobRecord>& early, const JobProgress& progress) {
    JobRecord j = new_job(l, job_id);
    int64_t expected = -1;
    if (confirmed) {
      if (auto cur = rt_.cfg.store->get_job(job_id)) {
        j = *cur;
        expected = cur->version;
      }
    }
    if (is_terminal(j.status)) {  // the host ended the confirmed job already
      ctx_.jobs[l.tool_call_id] = j;
      return j;
    }
    const int64_t timeout = js.timeout         ? js.timeout->count()
                            : j.timeout_ms > 0 ? j.timeout_ms
                                               : rt_.cfg.job_timeout.count();
    if (!j.metadata.is_object()) j.metadata = json::object();
    for (auto& [k, v] : js.metadata.items()) j.metadata[k] = v;
    j.status = js.status;
    j.message = js.message;
    // What the host reported while the tool answered wins over the tool's answer.
    if (progress.status) j.status = *progress.status;
    if (progress.progress) j.progress = *progress.progress;
    if (progress.message) j.message = *progress.message;
    j.timeout_ms = timeout;
    j.expires_at = now_ms() + timeout;
    if (early) {
      // The host finished it while the tool was still answering: the job is recorded finished; its outcome
      // reaches history when this run ends.
      j.status = early->status;
      j.result = early->result;
      j.assets = early->assets;
      j.progress = early->progress;
      if (!early->message.empty()) j.message = early->message;
      j.error_code = early->error_code;
      j.error_message = early->error_message;
      j.finished_at = early->finished_at;
      std::lock_guard<std::mutex> lock(rt_.jobs_mutex);
      rt_.undelivered_threads.insert(j.thread_id);
    }
    stage_job(j, expected);
    return j;
  }

  // After a confirmation the tool answered with a plain result or an error: the job ends with it (the tool
  // result carries the outcome, so nothing more is delivered). Returns whether a job was changed.
  bool end_confirmed_job(const std::string& job_id, const ToolCompletion::Outcome& oc) {
    auto cur = rt_.cfg.store->get_job(job_id);
    if (!cur || is_terminal(cur->status)) return false;
    JobRecord j = *cur;
    if (oc.ok) {
      j.status = JobStatus::succeeded;
      j.result = oc.result.result;
      j.progress = 1;
    } else {
      j.status = JobStatus::failed;
      j.error_code = oc.error.code;
      j.error_message = oc.error.message;
    }
    j.finished_at = now_ms();
    j.delivered = true;
    stage_job(j, cur->version);
    return true;
  }

  // Writes a tool call's outcome: payload object, TOOL_CALL_RESULT, tool message, ledger. `summary`: the
  // result's summary when the runtime writes it itself (a started job), else the summarizer's.
  void record_result(const std::string& id, ToolAgentOutput out, const std::string& summary = {}) {
    // TOOL_CALL_RESULT commits with the tool message and the ledger's outcome: after a crash, a result that is
    // in the log is in history and the ledger too, so recovery never gives the call a second one.
    RunEmitter::Unit unit(*ctx_.em);
    LedgerEntry* l = ctx_.find_ledger(id);
    const ToolSummaryError err = out.error ? ToolSummaryError{out.error->code, out.error->message} : ToolSummaryError{};
    out.result_summary = !summary.empty() ? summary
                                          : rt_.cfg.summarizer->summarize(out.tool_name, out.args, out.result,
                                                                          out.error ? &err : nullptr);
    out.summary_version = kSummaryVersion;
    ctx_.recorded[id] = out;
    const std::string out_str = to_json_string(out);
    // Filled key by key: an initializer list builds every pair twice (as arrays, then as members).
    json index = json::object();
    auto& fields = index.get_ref<json::object_t&>();
    fields.emplace("tool_call_id", id);
    fields.emplace("tool_name", out.tool_name);
    fields.emplace("run_id", ctx_.turn.run_id);
    fields.emplace("stage", l ? l->stage : ctx_.turn.stage);
    fields.emplace("storage_bucket", "");
    fields.emplace("storage_path", "");
    fields.emplace("payload_sha256", "");
    fields.emplace("summary_version", out.summary_version);
    if (rt_.cfg.objects) {
      // The full payload goes to the object store first; the index (in this batch's commit) second.
      std::string bytes = out_str;
      bytes.pop_back();
      bytes += ",\"thread_id\":";
      append_json_string(bytes, ctx_.turn.thread_id);
      bytes += ",\"turn_id\":";
      append_json_string(bytes, ctx_.turn.id);
      bytes += ",\"run_id\":";
      append_json_string(bytes, ctx_.turn.run_id);
      bytes += '}';
      std::string key = fmt::format("agent-outputs/{}/{}/{}.json", ctx_.turn.thread_id, ctx_.turn.run_id, id);
      try {
        rt_.cfg.objects->put(key, bytes, "application/json");
        index["storage_bucket"] = rt_.cfg.objects->bucket();
        index["storage_path"] = key;
        index["payload_sha256"] = crypto::sha256_hex(bytes);
        auto objects = rt_.cfg.objects;
        ctx_.em->add_compensation([objects, key] { objects->remove(key); });
      } catch (const std::exception& e) {
        index["payload_missing"] = true;
        rt_.log(LogLevel::warn, "objects", fmt::format("tool payload {} not stored: {}", key, e.what()));
      }
    }
    // TOOL_CALL_RESULT: the summary as content, ToolAgentOutput and the ui card in metadata.
    const std::string msg_id = new_id("msg");
    std::string ev = to_json_string(events::tool_call_result(msg_id, id, out.result_summary));
    ev.pop_back();
    ev += ",\"metadata\":{\"tool_agent_output\":";
    ev += out_str;
    if (out.ui) {
      ev += ",\"ui\":";
      append_json(ev, json(*out.ui));
    }
    ev += "}}";
    ctx_.em->emit_json(std::move(ev));
    ctx_.note_outcome(id, out);
    Message m;
    m.id = msg_id;
    m.role = Role::tool;
    m.content = out.result_summary;
    m.tool_call_id = id;
    if (out.error) m.error = out.error->message;
    m.metadata = std::move(index);
    MessageRecord rec{ctx_.turn.thread_id, 0, ctx_.turn.id, ctx_.turn.run_id, std::move(m)};
    ctx_.em->add_message(rec);
    ctx_.history.push_back(std::move(rec));
    if (l) {
      advance(*l, ledger_outcome(out.status));
      l->output = out_str;
      ctx_.em->put_ledger(*l);
    }
  }

  void pause(const std::vector<std::string>& ids) {
    RunEmitter::Unit unit(*ctx_.em);  // the run's end commits with the turn's state
    const int64_t expires = now_ms() + rt_.cfg.approval_timeout.count();
    const std::string apr = new_id("apr");
    json interrupts = json::array();
    for (const auto& id : ids) {
      LedgerEntry* l = ctx_.find_ledger(id);
      l->interrupt_id = "int_" + id;
      ctx_.em->put_ledger(*l);
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
    end_step();
    check_transition(ctx_.turn.id, ctx_.turn.status, TurnStatus::waiting_approval);
    ctx_.turn.status = TurnStatus::waiting_approval;
    ctx_.turn.approval_request_id = apr;
    json outcome = json::object();
    outcome.get_ref<json::object_t&>().emplace("type", "interrupt");
    outcome.get_ref<json::object_t&>().emplace("interrupts", interrupts);
    ctx_.turn.interrupts = std::move(interrupts);
    ctx_.turn.expires_at = expires;
    ctx_.turn.owner.clear();
    stage_turn();
    ctx_.em->emit(events::run_finished(ctx_.turn.thread_id, ctx_.turn.run_id, std::move(outcome),
                                       ctx_.run_usage.empty() ? json(nullptr) : usage_json(ctx_.run_usage)));
    commit();
  }

  void finish_completed() {
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

  // Gives every call of this turn that has no outcome yet one, so the history never holds an assistant
  // tool call without its result: the ledger's open calls, and calls of the turn's assistant messages that
  // have no ledger entry (a group commit may have stored the message before the run staged the entries).
  // A call this run has an outcome for (`ctx_.recorded`: its result was in a batch that was lost) gets that
  // outcome again; a call found `started` has an unknown outcome (it may have taken effect: it is not run
  // again); any other call was not run.
  void close_unanswered(const std::string& code, const std::string& message, ToolStatus not_run_status) {
    std::set<std::string> answered;
    for (const auto& m : ctx_.history)
      if (m.turn_id == ctx_.turn.id && m.message.role == Role::tool) answered.insert(m.message.tool_call_id);
    for (const auto& m : ctx_.history) {
      if (m.turn_id != ctx_.turn.id || m.message.role != Role::assistant) continue;
      for (const auto& c : m.message.tool_calls) {
        if (answered.count(c.id) || ctx_.find_ledger(c.id)) continue;
        LedgerEntry l;
        l.tool_call_id = c.id;
        l.turn_id = ctx_.turn.id;
        l.thread_id = ctx_.turn.thread_id;
        l.run_id = m.run_id;
        l.tool_name = c.name;
        l.stage = ctx_.turn.stage;
        l.arguments = c.arguments;
        ctx_.ledger.push_back(std::move(l));
        ctx_.em->put_ledger(ctx_.ledger.back());
      }
    }
    std::vector<std::string> open;
    for (const auto& l : ctx_.ledger)
      if (!l.has_output() && !answered.count(l.tool_call_id)) open.push_back(l.tool_call_id);
    for (const auto& id : open) {
      LedgerEntry* l = ctx_.find_ledger(id);
      if (auto known = ctx_.recorded.find(id); known != ctx_.recorded.end()) {
        ToolAgentOutput out = known->second;
        record_result(id, std::move(out));
        continue;
      }
      ToolAgentOutput out;
      out.tool_call_id = id;
      out.tool_name = l->tool_name;
      out.args = parse_args(l->arguments);
      if (l->status == LedgerStatus::started) {
        out.status = ToolStatus::interrupted;
        out.error = ToolError{"outcome_unknown", kOutcomeUnknown};
        record_result(id, std::move(out), fmt::format("{}: outcome unknown: {}", l->tool_name, kOutcomeUnknown));
      } else {
        out.status = not_run_status;
        out.error = ToolError{code, message};
        record_result(id, std::move(out));
      }
    }
  }

  void close_open_streams() {
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

  void finish_cancelled() {
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

  void fail(const std::string& code, const std::string& message) {
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

  void commit() {
    ctx_.em->flush();
    committed_status_ = ctx_.turn.status;
  }

  // Runs the body and ends the run the way its outcome says.
  template <class F>
  void guarded(F&& body) {
    try {
      body();
      return;
    } catch (...) {
      end_after(std::current_exception());
    }
  }

  // Ends a run whose body threw. A commit of the run that failed for good comes first, whatever the body
  // threw after it (a flush, or the cancel the failed group commit sent): the run cannot go on as if the lost
  // batch were stored.
  void end_after(std::exception_ptr thrown) {
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

  // A commit of this run failed for good (after its retries); its batch is gone. A start that was never
  // committed leaves nothing (the blocking call that deferred it reports the error). Otherwise the run's end
  // is recorded from what is durable, with the outcomes of the calls this run has (their results were in the
  // lost batch); if even that cannot be written now, the sweeper writes it later.
  void commit_failed(const Error& f) {
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

  std::vector<TokenUsage> turn_usage_;
  std::string draft_;
  bool decision_pending_ = false;  // the deferred start is a resume's decision
  DeferredStart* deferred_ = nullptr;

 private:
  Runtime::Impl& rt_;
  RunCtx& ctx_;
  TurnStatus committed_status_;
};

void load_run_state(Store& store, RunCtx& ctx, std::vector<LedgerEntry>* known_ledger = nullptr,
                    std::vector<MessageRecord>* known_history = nullptr) {
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

}  // namespace

TurnRecord Runtime::Impl::run_fresh(std::shared_ptr<RunHandle> handle, TurnRecord turn, DeferredStart* deferred) {
  RunCtx ctx;
  ctx.turn = std::move(turn);
  ctx.handle = handle;
  if (deferred) {
    ctx.em = deferred->em;
    ctx.deferred_start = ctx.em->turn_version();
  } else {
    ctx.em = make_emitter(ctx.turn.thread_id, ctx.turn.run_id, ctx.turn.version, true, handle);
  }
  TurnRunner runner(*this, ctx);
  runner.deferred_ = deferred;
  runner.guarded([&] {
    std::vector<LedgerEntry> none;  // a new turn has no tool calls yet
    load_run_state(*cfg.store, ctx, &none, deferred && deferred->history ? &*deferred->history : nullptr);
    runner.check_cancel();
    runner.run_stages(0);
  });
  unregister_run(ctx.turn.id);
  deliver_jobs(ctx.turn.thread_id);
  if (deferred && deferred->error) return TurnRecord{};
  return std::move(ctx.turn);  // ctx dies here; the caller gets the record without a copy
}

TurnRecord Runtime::Impl::run_continuation(std::shared_ptr<RunHandle> handle, std::string turn_id,
                                           std::optional<std::pair<TurnRecord, std::vector<LedgerEntry>>> known,
                                           DeferredStart* deferred) {
  std::optional<TurnRecord> t =
      known ? std::optional<TurnRecord>(std::move(known->first)) : cfg.store->get_turn(turn_id);
  if (!t || t->status != TurnStatus::resuming || t->owner != cfg.instance_id) {
    unregister_run(turn_id);
    return t ? *t : TurnRecord{};
  }
  RunCtx ctx;
  ctx.turn = std::move(*t);
  ctx.handle = handle;
  if (deferred) {
    ctx.em = deferred->em;
    ctx.deferred_start = ctx.em->turn_version();
  } else {
    ctx.em = make_emitter(ctx.turn.thread_id, ctx.turn.run_id, ctx.turn.version, true, handle);
  }
  TurnRunner runner(*this, ctx);
  runner.decision_pending_ = deferred != nullptr;
  runner.deferred_ = deferred;
  runner.guarded([&] {
    load_run_state(*cfg.store, ctx, known ? &known->second : nullptr);
    check_transition(ctx.turn.id, ctx.turn.status, TurnStatus::running);
    ctx.turn.status = TurnStatus::running;
    runner.stage_turn();
    ctx.em->emit(events::run_started(ctx.turn.thread_id, ctx.turn.run_id, ctx.turn.parent_run_id));
    const std::string stage = ctx.turn.stage.empty() ? std::string(kExecution) : ctx.turn.stage;
    runner.begin_step(stage);
    // The decisions: rejected calls get their result now, approved ones run (only TOOL_CALL_RESULT is
    // emitted for them: their START/ARGS/END went out in the paused run). A call found `started` was cut
    // off by a crash: it runs again only if idempotent.
    std::vector<std::string> to_run;
    for (auto& l : ctx.ledger) {
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
          out.error = ToolError{"declined", fmt::format("the person declined job {}; it was not started{}", job_id,
                                                        reason.empty() ? "" : ": " + reason)};
          if (auto j = cfg.store->get_job(job_id)) {
            // resume_turn commits the decision with this run's first commit: show the job as it decided.
            if (!is_terminal(j->status)) decline_job(*j, reason);
            ctx.em->emit(events::custom("agentrt.job", job_to_json(*j)));
          }
        } else {
          out.error = ToolError{
              action == "cancel" ? "cancelled" : "rejected",
              reason.empty() ? (action == "cancel" ? "the person cancelled this call" : "the person rejected this call")
                             : "the person rejected this call: " + reason};
        }
        runner.record_result(l.tool_call_id, std::move(out));
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
          runner.record_result(l.tool_call_id, std::move(out),
                               fmt::format("{}: outcome unknown: {}", l.tool_name, kOutcomeUnknown));
        }
      }
    }
    auto confirm = runner.execute(to_run);
    if (!confirm.empty()) {
      runner.pause(confirm);  // a confirmed call's tool asked again, or an approved one asks now
      return;
    }
    runner.run_stages(stage_index(stage));
  });
  unregister_run(ctx.turn.id);
  deliver_jobs(ctx.turn.thread_id);
  if (deferred && deferred->error) return TurnRecord{};
  return std::move(ctx.turn);  // ctx dies here; the caller gets the record without a copy
}

void Runtime::Impl::end_waiting_turn(TurnRecord turn, TurnStatus to, const std::string& reason) {
  check_transition(turn.id, turn.status, to);
  RunCtx ctx;
  ctx.turn = turn;
  ctx.handle = std::make_shared<RunHandle>();
  ctx.turn.parent_run_id = turn.run_id;
  ctx.turn.run_id = new_id("run");
  ctx.em = make_emitter(turn.thread_id, ctx.turn.run_id, turn.version, false);
  load_run_state(*cfg.store, ctx);
  TurnRunner runner(*this, ctx);
  ctx.em->emit(events::run_started(turn.thread_id, ctx.turn.run_id, turn.run_id));
  const bool expired = to == TurnStatus::expired;
  const std::string msg = expired
                              ? fmt::format("not run: the approval request expired at {}", iso8601_ms(turn.expires_at))
                              : "not run: the turn was cancelled";
  runner.close_unanswered(expired ? "approval_expired" : "cancelled", msg,
                          expired ? ToolStatus::expired : ToolStatus::rejected);
  // Jobs that waited for a confirmation end with the pause: never started.
  for (const auto& i : turn.interrupts) {
    if (!i.is_object() || i.value("reason", "") != "confirmation" || !i.contains("metadata")) continue;
    auto j = cfg.store->get_job(i["metadata"].value("jobId", ""));
    if (!j || is_terminal(j->status)) continue;
    JobRecord next = *j;
    next.status = expired ? JobStatus::failed : JobStatus::cancelled;
    next.error_code = expired ? "timeout" : "cancelled";
    next.error_message = expired ? fmt::format("the confirmation request expired at {}", iso8601_ms(turn.expires_at))
                                 : "the turn was cancelled before the job was confirmed";
    next.finished_at = now_ms();
    next.delivered = true;  // the call's tool result above says it
    ctx.em->put_job(JobWrite{next, j->version});
    ctx.em->emit(events::custom("agentrt.job", job_to_json(next)));
  }
  ctx.turn.status = to;
  ctx.turn.error = expired ? msg.substr(9) : reason;
  ctx.turn.interrupts = json::array();
  ctx.turn.owner.clear();
  runner.stage_turn();
  if (expired) {
    ctx.em->emit(events::run_error(
        fmt::format("approval request {} expired at {}", turn.approval_request_id, iso8601_ms(turn.expires_at)),
        "approval_expired"));
  } else {
    ctx.em->emit(events::run_finished(turn.thread_id, ctx.turn.run_id, json{{"type", "cancelled"}}));
  }
  ctx.em->flush();
  deliver_jobs(turn.thread_id);
}

void Runtime::Impl::recover_running_turn(TurnRecord turn) {
  if (turn.status == TurnStatus::resuming) {
    // The decision is durable: take the turn over and run the continuation here.
    TurnRecord mine = turn;
    mine.owner = cfg.instance_id;
    auto handle = register_run(turn.id);
    auto em = make_emitter(turn.thread_id, turn.run_id, turn.version, false);
    em->set_turn(mine);
    try {
      em->flush();
    } catch (...) {
      unregister_run(turn.id);
      throw;
    }
    log(LogLevel::info, "recovery", fmt::format("turn {}: continuing a resume its runtime did not finish", turn.id));
    std::string tid = turn.id;
    enqueue([this, handle, tid] { run_continuation(handle, tid); });
    return;
  }
  log(LogLevel::warn, "recovery",
      fmt::format("turn {}: its runtime ({}) stopped while it ran; failing it", turn.id,
                  turn.owner.empty() ? "unknown" : turn.owner));
  // A tool that was started and not finished is recorded with an unknown outcome and not run again.
  fail_from_store(turn.id, "runtime_restarted", "the runtime running this turn stopped before the turn finished");
}

std::optional<TurnRecord> Runtime::Impl::fail_from_store(const std::string& turn_id, const std::string& code,
                                                         const std::string& message,
                                                         const std::map<std::string, ToolAgentOutput>* known) {
  auto turn = cfg.store->get_turn(turn_id);
  if (!turn || (turn->status != TurnStatus::running && turn->status != TurnStatus::resuming)) return std::nullopt;
  RunCtx ctx;
  ctx.turn = std::move(*turn);
  ctx.handle = std::make_shared<RunHandle>();
  ctx.em = make_emitter(ctx.turn.thread_id, ctx.turn.run_id, ctx.turn.version, false);
  load_run_state(*cfg.store, ctx);
  if (known) ctx.recorded = *known;
  TurnRunner runner(*this, ctx);
  runner.fail(code, message);
  return std::move(ctx.turn);
}

void Runtime::Impl::remember_unrecorded(const std::string& turn_id) {
  std::lock_guard<std::mutex> lock(unrecorded_mutex);
  unrecorded.insert(turn_id);
}

void Runtime::Impl::record_unrecorded() {
  std::set<std::string> pending;
  {
    std::lock_guard<std::mutex> lock(unrecorded_mutex);
    pending.swap(unrecorded);
  }
  for (const auto& id : pending) {
    try {
      fail_from_store(id, "storage", kStorageFailed);
      log(LogLevel::info, "recovery", fmt::format("turn {}: its failure is recorded now", id));
    } catch (const std::exception& e) {
      remember_unrecorded(id);
      throw;
    }
  }
}

std::vector<Message> Runtime::Impl::history(std::string_view thread_id) {
  std::vector<Message> out;
  for (auto& rec : cfg.store->messages(thread_id)) out.push_back(history_view(std::move(rec.message)));
  return out;
}

Message Runtime::Impl::history_view(Message m) {
  {
    if (m.role == Role::user) resign_parts(m);
    if (m.role == Role::tool && m.metadata.is_object() && cfg.objects) {
      const std::string path = m.metadata.value("storage_path", "");
      const std::string sha = m.metadata.value("payload_sha256", "");
      if (!path.empty()) {
        try {
          auto bytes = cfg.objects->get(path);
          if (bytes && crypto::sha256_hex(*bytes) == sha) {
            json payload = parse_json_or_discarded(*bytes);
            if (payload.is_object() && payload.contains("ui") && payload["ui"].is_object())
              m.metadata["ui"] = payload["ui"];
          } else {
            log(LogLevel::warn, "history",
                fmt::format("tool payload {} is missing or does not match its sha256", path));
          }
        } catch (const std::exception& e) {
          log(LogLevel::warn, "history", fmt::format("tool payload {} unreadable: {}", path, e.what()));
        }
      }
    }
  }
  return m;
}

}  // namespace v1
}  // namespace agentrt
