// The turn runner: one run of a turn on the calling worker thread. The stage loop, its model calls and how
// a run ends are in turn_runner.cpp; its tool calls go through its ToolExecutor (tool_executor.hpp), its pauses
// for a person and the decisions that end them through its Interrupts (interrupts.hpp). Not thread-safe: one run, one
// thread (the run's emitter is thread-safe; the group-commit flusher commits beside it).
#pragma once

#include <exception>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentrt/model.hpp"
#include "agentrt/stages.hpp"
#include "agentrt/tools.hpp"
#include "runtime/interrupts.hpp"
#include "runtime/runtime_impl.hpp"
#include "runtime/tool_executor.hpp"
#include "util/json_fast.hpp"

namespace agentrt {
inline namespace v1 {

// What the runner's parts share (inline: one definition for the three files).
namespace turn {
// The stage a stored turn is in (a row's text, which may be damaged: execution when it names no stage).
inline Stage stage_of(std::string_view s) {
  for (Stage st : kStages)
    if (s == to_string(st)) return st;
  return Stage::execution;
}

inline bool is_size_limit(const std::exception& e) {
  auto* err = dynamic_cast<const Error*>(&e);
  return err && err->code() == ErrorCode::too_large;
}

// What a run that storage stopped tells the client and the next turn's model (the details go to the log).
inline constexpr const char* kStorageFailed = "storage failed: the run could not be saved and was stopped";
// What history says of a call that was started and whose result was never stored (its runtime stopped).
inline constexpr const char* kOutcomeUnknown =
    "the runtime stopped while this call was running: its outcome is unknown (it may have taken effect), and it "
    "was not repeated";

inline void add_usage(std::vector<TokenUsage>& acc, const TokenUsage& u) {
  for (auto& a : acc)
    if (a.provider == u.provider && a.model == u.model) {
      a += u;
      return;
    }
  acc.push_back(u);
}

// A call's arguments as an object: what the model sent, or {} when that was not a JSON object.
inline json parse_args(const std::string& arguments) {
  json args = arguments.empty() ? json::object() : parse_json_or_discarded(arguments);
  return args.is_object() ? args : json::object();
}

inline json usage_json(const std::vector<TokenUsage>& u) {
  json out = json::array();
  for (const auto& x : u) out.push_back(x);
  return out;
}

inline std::vector<TokenUsage> usage_from_json(const json& j) {
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

// RUN_STARTED of a run of turn `t`. metadata.agentrt names the turn (the projector files the run's messages
// under it) and carries the input message of a fresh turn, from which the projector derives the user message,
// and what its row holds that no event says (turn: userId, owner, stage, clientMessageId).
inline Event run_started(const TurnRecord& t, const Message* input = nullptr) {
  Event e = events::run_started(t.thread_id, t.run_id, t.parent_run_id);
  json facts = json::object();
  facts.get_ref<json::object_t&>().emplace("turnId", t.id);
  if (input) {
    facts.get_ref<json::object_t&>().emplace("message", json(*input));
    json row = json::object();
    auto& r = row.get_ref<json::object_t&>();
    r.emplace("userId", t.user_id);
    r.emplace("owner", t.owner);
    r.emplace("stage", t.stage);
    if (!t.client_message_id.empty()) r.emplace("clientMessageId", t.client_message_id);
    facts.get_ref<json::object_t&>().emplace("turn", std::move(row));
  }
  e.metadata = json::object();
  e.metadata.get_ref<json::object_t&>().emplace("agentrt", std::move(facts));
  return e;
}

}  // namespace turn

class TurnRunner {
 public:
  enum class Visibility { hidden, reasoning, text };
  TurnRunner(Runtime::Impl& rt, RunCtx& ctx);

  // Runs the stages from `start` on. `step_open`: the continuation already opened the stage's step.
  void run_stages(Stage start);
  void begin_step(Stage stage);
  void end_step();
  void check_cancel();
  // The turn's usage, into ctx_.turn (its row is the projector's, from the events).
  void stage_turn();
  // metadata.agentrt.turn of the event that ends a run: what the turn's row holds that the event does not say
  // (steps, usage, error, the approval deadline).
  void end_facts(Event& e);

  // The model/tool loop of one stage. Returns false when the run paused for approval.
  bool stage_loop(Stage stage, const StagePolicy& policy, Visibility vis, bool final_candidate,
                  std::string& final_text);
  // The stage's request for its next model call, written over `req` (all but its tools, which the stage loop
  // keeps).
  void build_request(Stage stage, const StagePolicy& policy, ModelRequest& req);
  // CUSTOM agentrt.mcp_tool_changed for each MCP tool of the stage held back for a changed definition (once a run).
  void report_changed_mcp_tools(Stage stage);
  std::string unique_call_id(std::string_view proposed);
  class Sink;
  json worker_output(const std::string& answer);
  // A call of a model response, validated: its ledger entry (requested, or approved when it needs no person)
  // and what keeps it from running, if anything.
  struct Requested {
    LedgerEntry entry;
    std::optional<ToolError> problem;
    json args;
  };
  struct Answer {
    ModelResult result;
    std::vector<Requested> calls;  // one per result.tool_calls
  };
  // Calls the model and emits its answer; the message's completion carries its calls' ledger facts.
  Answer call_model(Stage stage, const ModelRequest& req, Visibility vis, bool final_candidate);
  std::vector<Requested> request(Stage stage, const std::vector<ModelToolCall>& calls);

  // Records the calls of one model response (their entries came with the message), runs those that need no
  // approval, and pauses for the rest. Returns false when the run paused.
  bool process_tool_calls(std::vector<Requested> calls);
  // The turn's spend so far (its model calls, the tool calls its model made, its usage), priced.
  Spend turn_spend() const;
  // Checks the budgets with `more_model_calls` more model calls counted in (budget_guard.hpp).
  void check_budgets(int64_t more_model_calls);

  // The run's tool calls: execution, results, the jobs they start (tool_executor.hpp).
  ToolExecutor& tools() { return tools_; }
  // Its pauses for a person and the decisions that end them (interrupts.hpp).
  Interrupts& interrupts() { return interrupts_; }
  void finish_completed();

  void close_open_streams();
  void finish_cancelled();
  void fail(const std::string& code, const std::string& message);
  void commit();

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
  void end_after(std::exception_ptr thrown);

  // A commit of this run failed for good (after its retries); its batch is gone. A start that was never
  // committed leaves nothing (the blocking call that deferred it reports the error). Otherwise the run's end
  // is recorded from what is durable, with the outcomes of the calls this run has (their results were in the
  // lost batch); if even that cannot be written now, the sweeper writes it later.
  void commit_failed(const Error& f);
  std::vector<TokenUsage> turn_usage_;
  int64_t run_model_calls_ = 0;
  std::string draft_;
  std::set<std::string> reported_mcp_changes_;
  bool decision_pending_ = false;  // the deferred start is a resume's decision
  DeferredStart* deferred_ = nullptr;

 private:
  Runtime::Impl& rt_;
  RunCtx& ctx_;
  TurnStatus committed_status_;
  ToolExecutor tools_;
  Interrupts interrupts_;
};

// Reads the thread's history and the turn's ledger into `ctx` (or takes the ones the caller has).
void load_run_state(Store& store, RunCtx& ctx, std::vector<LedgerEntry>* known_ledger = nullptr,
                    std::vector<MessageRecord>* known_history = nullptr);

// The run's shared state, as its first event after RUN_STARTED: the client's (TurnInput::state), else the thread's
// stored one; nothing when the thread has none and the client sent none or {} (the client's state wins: {} on
// a thread with a state clears it).
// `first_turn`: the thread had no run before this turn's (its state is not read: it has none). `known_state`:
// the thread's stored state as the caller read it (not read again).
void start_state(Store& store, RunCtx& ctx, bool first_turn, const std::optional<std::string>* known_state = nullptr);

// Sets up a run's context: its turn, its handle and its emitter (the deferred start's, or a new live one).
void open_run(Runtime::Impl& rt, RunCtx& ctx, TurnRecord turn, std::shared_ptr<RunHandle> handle,
              DeferredStart* deferred);
// After a run: unregisters it, delivers the jobs that waited for it to end, and gives its record (an empty
// one when its deferred start could not be stored).
TurnRecord close_run(Runtime::Impl& rt, RunCtx& ctx, DeferredStart* deferred);

}  // namespace v1
}  // namespace agentrt
