// The tool executor: the tool calls of one run. It runs approved calls exactly once (a call to a tool that is
// not idempotent is committed as `started` before it runs, so a crash never runs it twice), checks what each
// tool answers, records the jobs tools start (or the confirmations they ask for), and writes each call's outcome
// (the payload object, TOOL_CALL_RESULT, from which the projector derives the tool message and the ledger's
// outcome). Not thread-safe: one run's, on the run's thread (tools answer from any thread through their
// ToolCompletion, which is).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agentrt/jobs.hpp"
#include "agentrt/outputs.hpp"
#include "agentrt/tools.hpp"
#include "runtime/runtime_impl.hpp"

namespace agentrt {
inline namespace v1 {

class TurnRunner;

class ToolExecutor {
 public:
  // `runner`: the run's commits and cancel checks.
  ToolExecutor(TurnRunner& runner, Runtime::Impl& rt, RunCtx& ctx);

  // Runs approved calls. Returns the calls whose tool asked for a job confirmation (they wait for the
  // person, like calls that need approval). Throws Error(cancelled) when the turn was cancelled while they ran.
  std::vector<std::string> execute(const std::vector<std::string>& ids);
  // The arguments of a call about to run as the model's answer was checked with them (parsed and validated
  // against its tool's schema): execute takes them instead of parsing the ledger's text again.
  void checked_args(const std::string& id, json args) { checked_args_[id] = std::move(args); }

  // Writes a tool call's outcome: payload object, TOOL_CALL_RESULT, tool message, ledger. `summary`: the
  // result's summary when the runtime writes it itself (a started job), else the summarizer's.
  void record_result(const std::string& id, ToolAgentOutput out, const std::string& summary = {});
  // The same for a client tool's answer (the client ran the call): the same records, and CUSTOM
  // "agentrt.tool_answer" in place of TOOL_CALL_RESULT (the client has the answer already: a result event would add
  // a second tool message to its list). `message_id`: the tool message's id in history.
  void record_answer(const std::string& id, ToolAgentOutput out, const std::string& message_id);

  // Gives every call of this turn that has no outcome yet one, so the history never holds an assistant
  // tool call without its result: the ledger's open calls, and calls of the turn's assistant messages that
  // have no ledger entry (a history stored before its ledger). A call this run has an outcome for
  // (`ctx.recorded`: its result was in a batch that was lost) gets that outcome again; a call found `started`
  // has an unknown outcome (it may have taken effect: it is not run again); any other call was not run
  // (`code`, `message`, `not_run_status`).
  void close_unanswered(const std::string& code, const std::string& message, ToolStatus not_run_status);

 private:
  // A call the executor has handed to its tool.
  struct Running {
    std::string id;
    std::shared_ptr<const ToolRegistry::Entry> entry;
    ToolCompletion completion;
    json args;
    int64_t started_ms = 0;
    std::chrono::steady_clock::time_point deadline;
    std::string job_id;
    bool job_confirmed = false;
    trace::Span span;  // execute_tool (empty when tracing is off)
  };
  // Waits for the call, streaming its progress reports; past its deadline or on the turn's cancel, fails it (and
  // tells the tool through on_abandon). False when the turn was cancelled.
  bool wait_for(Running& r, const LedgerEntry& l);
  void abandon(const Running& r, const LedgerEntry& l, std::string_view reason);

  void record(const std::string& id, ToolAgentOutput out, const std::string& summary, const std::string* answer_id);

  // The runtime's record of jobs being started by the calls running now (JobService's in-flight jobs).
  // Destroyed after the commit that writes their records: an outcome the host reported after the run took
  // the early ones is applied then, to the committed record.
  class JobsInFlight;

  // A result or ui card nested deeper than the limit (its copies and dumps would overflow the stack).
  static std::optional<std::string> invalid_result(const ToolResult& r, size_t max_depth);
  // A request for input the interrupt cannot carry (a schema that is not an object schema or does not compile,
  // past the size or nesting limits).
  static std::optional<std::string> invalid_input_request(const InputRequest& r, size_t max_depth);
  // The bytes of a file the tool produced, at `pointer` in its result, replaced by the stored file's ref.
  static void replace_with_ref(json& result, const std::string& pointer, const json& stored);
  static std::optional<std::string> invalid_job_start(const JobStart& js, size_t max_depth);
  // Applies a tool's state_delta to the run's state into `next`; what is wrong with it, if anything (a patch that
  // is malformed, does not apply, or leaves a state over the limits).
  std::optional<std::string> apply_state_delta(const json& delta, json& next) const;
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

  TurnRunner& runner_;
  Runtime::Impl& rt_;
  RunCtx& ctx_;
  std::map<std::string, json> media_;         // the stored files of results about to be recorded (metadata.media)
  std::map<std::string, json> checked_args_;  // by call id, until execute takes them
};

}  // namespace v1
}  // namespace agentrt
