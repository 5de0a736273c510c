// The turn runner: one run of a turn on the calling worker thread. The stage loop, its model calls and how
// a run ends are in turn_runner.cpp, tool calls and the jobs they start in tool_executor.cpp, pauses for a
// person and the decisions that end them in interrupts.cpp. Not thread-safe: one run, one thread (the
// run's emitter is thread-safe; the group-commit flusher commits beside it).
#pragma once

#include <exception>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentrt/model.hpp"
#include "agentrt/stages.hpp"
#include "agentrt/tools.hpp"
#include "runtime/runtime_impl.hpp"
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
  ModelRequest build_request(Stage stage, const StagePolicy& policy, std::vector<ToolDefinition> defs);
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

  // Runs approved calls. A call to a tool that is not idempotent is durable as `started` before it runs
  // and as finished right after, so a crash never runs it twice. Returns the calls whose tool asked for a
  // job confirmation (they wait for the person, like calls that need approval).
  std::vector<std::string> execute(const std::vector<std::string>& ids);

  // The runtime's record of jobs being started by the calls running now (see Runtime::Impl::jobs_in_flight).
  // Destroyed after the commit that writes their records: an outcome the host reported after the run took
  // the early ones is applied then, to the committed record.
  class JobsInFlight;

  // A result or ui card nested deeper than the limit (its copies and dumps would overflow the stack).
  static std::optional<std::string> invalid_result(const ToolResult& r, size_t max_depth);
  static std::optional<std::string> invalid_job_start(const JobStart& js, size_t max_depth);
  JobRecord new_job(const LedgerEntry& l, const std::string& job_id) const;
  // The job's change as one of the run's events (job_change): `j` gets its new version.
  void stage_job(JobRecord& j, int64_t expected_version);

  // The tool asked for a confirmation: the job is recorded queued, and the call waits for the person.
  void ask_confirmation(LedgerEntry& l, const std::string& job_id, const JobStart& js);
  JobRecord start_job(const LedgerEntry& l, const std::string& job_id, bool confirmed, const JobStart& js,
                      const std::optional<JobRecord>& early, const JobProgress& progress);

  // After a confirmation the tool answered with a plain result or an error: the job ends with it (the tool
  // result carries the outcome, so nothing more is delivered). Returns whether a job was changed.
  bool end_confirmed_job(const std::string& job_id, const ToolCompletion::Outcome& oc);

  // Writes a tool call's outcome: payload object, TOOL_CALL_RESULT, tool message, ledger. `summary`: the
  // result's summary when the runtime writes it itself (a started job), else the summarizer's.
  void record_result(const std::string& id, ToolAgentOutput out, const std::string& summary = {});
  void pause(const std::vector<std::string>& ids);
  void finish_completed();

  // Gives every call of this turn that has no outcome yet one, so the history never holds an assistant
  // tool call without its result: the ledger's open calls, and calls of the turn's assistant messages that
  // have no ledger entry (a group commit may have stored the message before the run staged the entries).
  // A call this run has an outcome for (`ctx_.recorded`: its result was in a batch that was lost) gets that
  // outcome again; a call found `started` has an unknown outcome (it may have taken effect: it is not run
  // again); any other call was not run.
  void close_unanswered(const std::string& code, const std::string& message, ToolStatus not_run_status);
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
  std::string draft_;
  bool decision_pending_ = false;  // the deferred start is a resume's decision
  DeferredStart* deferred_ = nullptr;

 private:
  Runtime::Impl& rt_;
  RunCtx& ctx_;
  TurnStatus committed_status_;
};

// Reads the thread's history and the turn's ledger into `ctx` (or takes the ones the caller has).
void load_run_state(Store& store, RunCtx& ctx, std::vector<LedgerEntry>* known_ledger = nullptr,
                    std::vector<MessageRecord>* known_history = nullptr);

// Sets up a run's context: its turn, its handle and its emitter (the deferred start's, or a new live one).
void open_run(Runtime::Impl& rt, RunCtx& ctx, TurnRecord turn, std::shared_ptr<RunHandle> handle,
              DeferredStart* deferred);
// After a run: unregisters it, delivers the jobs that waited for it to end, and gives its record (an empty
// one when its deferred start could not be stored).
TurnRecord close_run(Runtime::Impl& rt, RunCtx& ctx, DeferredStart* deferred);

}  // namespace v1
}  // namespace agentrt
