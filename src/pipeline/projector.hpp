// The projector: the only code that turns events into history messages. It reads one thread's events in
// order (a run's as the run emits them, or the stored log from its start) and derives each message from the
// events that carry it:
//   - a user message: RUN_STARTED's metadata.agentrt.message (the input as stored);
//   - an assistant message: its TEXT_MESSAGE_* and TOOL_CALL_* events (text and arguments from their deltas),
//     stored when the last of them carries metadata.agentrt.message (the message is complete: which calls it
//     holds, and the text or arguments where the model's final answer differs from what was streamed);
//   - a tool message: TOOL_CALL_RESULT (content, and metadata.agentrt: the message's metadata and error), or for
//     a client tool's answer CUSTOM agentrt.tool_answer {toolCallId, messageId, content} with the same metadata;
//   - the ERROR message of a failed run: RUN_ERROR with metadata.agentrt.messageId.
// and the tool ledger (one entry per tool call, every change through the table of ledger_state.hpp):
//   - requested / approved: the assistant message's completion (metadata.agentrt.message.toolCalls: per call,
//     "tool": "approve" when it waits for a person, "run" when it may run at once, "client" for a client tool's
//     call (the client runs it); a bare id is a call refused before it could run), in the stage of the run's open
//     STEP_STARTED;
//   - approved / rejected by a person, and the approval record: the resumed run's RUN_STARTED
//     (metadata.agentrt.decision: the approval request id, the decisions as submitted, and per call the
//     decision as the ledger keeps it; a client tool's answer is {action: "answer", content, error?, messageId}:
//     the call keeps waiting for its result, which the continuation records);
//   - started: CUSTOM agentrt.started {toolCallIds}, committed before the tools run;
//   - waiting for a person (the interrupt id; a job confirmation moves the call back to requested): the pause's
//     RUN_FINISHED interrupts;
//   - the outcome: TOOL_CALL_RESULT or agentrt.tool_answer (metadata.tool_agent_output: its status and the output).
// and the jobs: CUSTOM agentrt.job carries a job's record as its change commits it (version 0: the job is new;
// else the change compares-and-sets against version - 1). Within a run it is one of the run's events; a change
// no run carries (a host's progress report, an outcome that waits for the thread's open run to end) is a
// record without a run: the log's, never shown to a client (see Runtime::subscribe and events_page).
// and the thread's shared state: STATE_SNAPSHOT replaces it, STATE_DELTA patches it (RFC 6902; a thread without
// a snapshot yet starts from {}).
// metadata.agentrt is the runtime's and is not copied into a message. Replaying a thread's stored log
// rebuilds its stored history and ledger (tests/pipeline/test_replay.cpp).
// Not thread-safe: the emitter that owns it calls it under its lock.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentrt/events.hpp"
#include "agentrt/outputs.hpp"
#include "agentrt/storage.hpp"

namespace agentrt {
inline namespace v1 {

// The CUSTOM event that records a client tool's answer (see above).
inline constexpr std::string_view kToolAnswerEvent = "agentrt.tool_answer";
// A running tool's progress report (ToolCompletion::progress): {toolCallId, ...the report}. Shown, not projected.
inline constexpr std::string_view kToolProgressEvent = "agentrt.tool_progress";

// A tool call's outcome as the run records it (the live path hands it over instead of the event's JSON).
struct ToolOutcome {
  ToolStatus status = ToolStatus::failed;
  std::string output;  // the ToolAgentOutput JSON text
  // Where the call comes from, for a call the projector has no entry of (a history stored before its ledger).
  std::string tool_name, arguments, stage;
};

class Projector {
 public:
  explicit Projector(std::string thread_id);

  // The turn a run's messages belong to. Learnt from RUN_STARTED's metadata.agentrt.turnId, or told by the
  // emitter of a run that continues a run started earlier (whose RUN_STARTED is in the log already).
  void begin_run(const std::string& run_id, const std::string& turn_id);

  // Applies one event of run `run_id`; returns the message it completes, if any.
  std::optional<MessageRecord> apply(const std::string& run_id, const Event& e);
  // The same, for an event nobody reads afterwards: a TEXT_MESSAGE_END's metadata moves into its message.
  std::optional<MessageRecord> apply(const std::string& run_id, Event&& e);

  // The events the run emits most often, without an Event (apply() dispatches to these).
  void text_start(std::string_view message_id);
  void text_content(std::string_view message_id, std::string_view delta);
  void tool_call_start(std::string_view tool_call_id, std::string_view name, std::string_view parent_message_id);
  void tool_call_args(std::string_view tool_call_id, std::string_view delta);
  // RUN_STARTED of a run of `turn_id`, with the input message it carries (or null).
  std::optional<MessageRecord> run_started(const std::string& run_id, const std::string& turn_id, const Message* input);
  // TOOL_CALL_RESULT: `facts` is its metadata.agentrt (or null).
  MessageRecord tool_call_result(const std::string& run_id, const std::string& message_id,
                                 const std::string& tool_call_id, std::string content, json facts,
                                 const ToolOutcome* outcome);
  void step_started(const std::string& run_id, std::string_view step);

  // Ledger entries committed before (a continuing run's): known from then on, unless known already.
  void seed_ledger(const std::vector<LedgerEntry>& entries);
  // The entries changed since the last call, each once (the emitter stages them).
  std::vector<LedgerEntry> take_ledger_changes();
  void drop_ledger_changes() noexcept { changed_.clear(); }  // the batch they were for is gone
  // The approval record a decision made, once (the emitter stages it).
  std::optional<ApprovalRecord> take_approval();
  // The turn's row: committed before (a continuing run's), unless known; the row to stage when its status
  // changed since the last take; the row as the events say (the replay).
  void seed_turn(const TurnRecord& t);
  std::optional<TurnRecord> take_turn();
  // Whether take_turn() has a row to give (a status changed since the last take); drop_turn_change() forgets it
  // (the row staged is another's).
  bool turn_changed() const noexcept { return !changed_turn_.empty(); }
  void drop_turn_change() noexcept { changed_turn_.clear(); }
  std::optional<TurnRecord> turn(const std::string& turn_id) const;
  // The turn-changing events, without an Event where the run emits them on its fast path.
  void turn_started(const std::string& run_id, const std::string& turn_id, const Event& e);
  void turn_step(const std::string& run_id, std::string_view step);

  // The job writes of the agentrt.job events since the last call, in order (the emitter stages them; the
  // replay keeps each job's last).
  std::vector<JobWrite> take_job_writes();

  // The thread's state as JSON text when an event changed it since the last call (the emitter stages it whole).
  std::optional<std::string> take_state();

  // The turns whose runs it has seen.
  std::vector<std::string> turns() const;
  // Every entry of a turn, by run, ordinal and call id.
  std::vector<LedgerEntry> ledger(const std::string& turn_id) const;

 private:
  struct OpenCall {
    std::string id, name, arguments;
  };
  struct OpenMessage {
    std::string content;
    std::string encrypted_value;
    std::vector<OpenCall> calls;
  };
  OpenMessage& open(std::string_view message_id);
  // `metadata`: the message's own (the event's, without the runtime's facts), or null.
  std::optional<MessageRecord> complete(const std::string& run_id, const std::string& message_id, const json& facts,
                                        json metadata);
  MessageRecord record(const std::string& run_id, Message m) const;
  // The turn a run writes for ("" for a run begin_run did not name); entries live as long as the projector.
  const std::string& turn_of(const std::string& run_id) const;
  LedgerEntry* entry(const std::string& turn_id, const std::string& tool_call_id);
  void changed(const LedgerEntry& l);
  // The ledger's part of each event (projector_ledger.cpp).
  void requested(const std::string& run_id, const Message& m, const json& listed);
  void decided(const std::string& run_id, const std::string& turn_id, const json& decision);
  void started(const std::string& run_id, const json& value);
  void interrupted(const std::string& run_id, const json& outcome);
  void outcome(const std::string& run_id, const std::string& tool_call_id, const ToolOutcome& o);
  static std::optional<ToolOutcome> outcome_of(const Event& e);
  void job_changed(const json& value);  // projector_jobs.cpp
  // The turn's part (projector_turn.cpp).
  TurnRecord* turn_of_event(const std::string& run_id);
  void move_turn(TurnRecord& t, TurnStatus to);
  void turn_intent(const std::string& run_id, const json& value);
  void turn_ended(const std::string& run_id, const Event& e);

  std::string thread_id_;
  std::map<std::string, std::string, std::less<>> turn_of_run_;
  std::map<std::string, OpenMessage, std::less<>> open_;               // assistant messages being streamed
  std::map<std::string, std::string, std::less<>> message_of_call_;    // tool call id -> its message id
  std::map<std::string, std::string, std::less<>> step_of_run_;        // the run's open STEP_STARTED
  std::map<std::pair<std::string, std::string>, LedgerEntry> ledger_;  // (turn, tool call) -> entry
  std::vector<std::pair<std::string, std::string>> changed_;           // keys changed since the last take
  std::optional<ApprovalRecord> approval_;
  std::map<std::string, TurnRecord, std::less<>> turns_;
  std::string changed_turn_;          // the turn whose status changed since the last take
  std::vector<JobWrite> job_writes_;  // since the last take
  json state_ = json::object();
  bool state_changed_ = false;
};

// The ledger status a call's outcome moves it to.
LedgerStatus ledger_status_of(ToolStatus s);

// The runtime's part of an event's metadata (metadata.agentrt), or null.
const json* runtime_facts(const Event& e);

}  // namespace v1
}  // namespace agentrt
