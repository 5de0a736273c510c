// Runtime internals: the state the facade (runtime.cpp) wires together and the parts share. The parts are
// classes with their own headers (and locks where they keep state): the run registry, group commit, worker pool,
// sweeper, job service, approvals, recovery, the history view and the attachment flow here; the turn runner with its
// tool executor and interrupts per run (turn_runner.hpp).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agentrt/clock.hpp"
#include "agentrt/runtime.hpp"
#include "core/ids.hpp"
#include "mcp/mcp_tools.hpp"
#include "pipeline/run_emitter.hpp"
#include "runtime/approvals.hpp"
#include "runtime/attachment_flow.hpp"
#include "runtime/group_commit.hpp"
#include "runtime/history_view.hpp"
#include "runtime/job_service.hpp"
#include "runtime/live_tail.hpp"
#include "runtime/recovery.hpp"
#include "runtime/run_registry.hpp"
#include "runtime/sweeper.hpp"
#include "runtime/tool_offers.hpp"
#include "runtime/worker_pool.hpp"
#include "tracing/run_spans.hpp"

namespace agentrt {
inline namespace v1 {

// One run of a turn, on one worker thread. Not thread-safe (the emitter is).
struct RunCtx {
  TurnRecord turn;
  std::shared_ptr<RunEmitter> em;
  std::shared_ptr<RunHandle> handle;
  std::vector<MessageRecord> history;  // the thread's messages, kept current by this run
  std::vector<LedgerEntry> ledger;     // this turn's tool calls, kept current by this run
  json state = json::object();         // the thread's shared state, kept current by this run
  std::vector<TokenUsage> run_usage;   // per provider/model, this run
  std::string open_step;
  trace::Span span;  // the run's span (empty when tracing is off)
  // Streaming state, so a cancelled run can close what it opened.
  std::string open_text, open_reasoning;
  std::set<std::string> open_tool_calls;
  std::map<std::string, std::string> media_cache;  // object key -> base64, for this run's model calls
  std::set<std::string> used_tool_call_ids;        // ids taken in this thread (a model may repeat ids)
  // What the run needs of each answered call of this turn, kept so outputs are not parsed again.
  struct Outcome {
    ToolStatus status = ToolStatus::failed;
    std::string summary;
  };
  std::map<std::string, Outcome> outcomes;          // by tool call id
  std::map<std::string, std::string> full_results;  // the whole result as the model reads it, this turn
  std::map<std::string, JobRecord> jobs;            // jobs this run started or asked to confirm, by tool call id
  std::map<std::string, InputRequest> inputs;       // what calls of this run ask a person, by tool call id
  // Every outcome this run recorded, whole, by tool call id: what a run whose batch was lost writes again.
  std::map<std::string, ToolAgentOutput> recorded;
  void note_outcome(const std::string& id, const ToolAgentOutput& out);

  LedgerEntry* find_ledger(const std::string& id);
  // The messages the run's events make (the projector derives them, filed under this turn) join `history`
  // as they are emitted.
  void watch_history() {
    em->begin_run(turn.id);
    em->on_message([this](const MessageRecord& m) { history.push_back(m); });
  }
  RunCtx() = default;
  RunCtx(const RunCtx&) = delete;
  RunCtx& operator=(const RunCtx&) = delete;
  ~RunCtx() {
    if (em) em->on_message({});
  }

  // Set when the run's start (run_turn: the turn insert; resume_turn: the decision) was not committed by
  // the call but rides on the run's first commit: the emitter's turn version until that commit lands.
  std::optional<int64_t> deferred_start;
  bool start_pending() const { return deferred_start && em->turn_version() == *deferred_start; }
};

// A run whose start the blocking calls (run_turn, resume_turn) did not commit on their own: it is staged in
// `em` and rides on the run's first commit (see start_turn and Approvals::resume).
struct DeferredStart {
  std::shared_ptr<RunEmitter> em;  // live; holds the staged start
  // run_turn: the thread's history with the new user message (read before the start was staged).
  std::optional<std::vector<MessageRecord>> history;
  // The start could not be committed (nothing of the run was stored), or the run failed and its end could
  // not be stored yet: what the blocking call throws.
  std::exception_ptr error;
};

struct Runtime::Impl {
  explicit Impl(RuntimeConfig c);
  ~Impl();

  RuntimeConfig cfg;
  trace::Tracer tracer;  // the spans of runs, calls, waits and jobs, and their export thread (cfg.tracing)
  ToolRegistry tools;
  ToolOffers offers{tools};            // the definitions stages offer their models, kept between turns
  std::unique_ptr<mcp::McpTools> mcp;  // the MCP servers' tools (registered in `tools`); null without servers
  EventHub hub;

  RunRegistry runs;                           // what runs here; turn changes wake wait()
  std::unique_ptr<GroupCommit> group_commit;  // commits what live runs stage, in time
  std::unique_ptr<WorkerPool> workers;        // runs queued jobs (fresh runs and continuations)
  JobService jobs;                            // jobs tools start and the host ends
  Approvals approvals{*this};                 // decisions on paused turns (resume)
  Recovery recovery{*this};                   // turns whose run cannot go on
  HistoryView history_view{*this};            // stored messages as hosts read them
  AttachmentFlow attachments{*this};          // user attachments: stored, re-signed, given to the model
  std::unique_ptr<Sweeper> sweeper;           // heartbeat, expiry, recovery, live tail
  std::unique_ptr<LiveTail> live_tail;        // other processes' commits as they arrive (stores that can wait)

  std::atomic<int64_t> model_calls{0}, tool_executions{0}, runs_started{0};

  void log(LogLevel level, std::string_view component, std::string_view message) const;
  // A job refused because the runtime is stopping is logged; its turn is left to the next process's recovery.
  void enqueue(std::function<void()> job) {
    if (!workers->post(std::move(job)))
      log(LogLevel::warn, "runtime", "a run was not started: the runtime is stopping (recovery takes it over)");
  }
  // `live`: the group-commit flusher commits what it stages in time. `run`: the run it writes for, cancelled
  // when a commit fails for good (so that the run ends at once, not at its next commit).
  // `committed`: called after each of its commits too (unlocked, as RunEmitter::Committed).
  std::shared_ptr<RunEmitter> make_emitter(const std::string& thread_id, const std::string& run_id,
                                           int64_t turn_version, bool live,
                                           const std::shared_ptr<RunHandle>& run = nullptr,
                                           RunEmitter::Committed committed = {});
  void on_commit(const CommitBatch& b);
  std::shared_ptr<RunHandle> register_run(const std::string& turn_id) { return runs.add(turn_id); }
  void unregister_run(const std::string& turn_id) { runs.remove(turn_id); }

  // `inline_run`: when set, the run executes on the calling thread and its final record lands there.
  // `inline_run`: run_turn's (the run on this thread, its record there); `async`: start_turn_async's callback.
  TurnHandle start_turn(const TurnInput& input, TurnRecord* inline_run = nullptr, Runtime::Started* async = nullptr);
  // A start refused at commit time (`e`): the turn a concurrent start with the same client message id won the race
  // with, or nullopt (the error stands); Error(not_found) when the thread turned out not to be the user's.
  std::optional<TurnHandle> refused_start(const Error& e, const std::string& thread_id, const std::string& user_id,
                                          const std::string& client_id);
  // A run's client tools, checked (the limits, no clash with a registered tool) and their schemas compiled.
  std::vector<ClientToolOffer> offer_client_tools(const std::vector<ToolDefinition>& offered);
  TurnHandle repeated_start(const TurnRecord& t);           // a start whose client message id is known
  std::vector<Message> turn_messages(const TurnRecord& t);  // as history() shows them
  void cancel(std::string_view turn_id);

  // turn_runner.cpp, interrupts.cpp, recovery.cpp, history_view.cpp
  // `deferred`: the run's start is not committed yet (see DeferredStart); when it cannot be, the run
  // stores nothing, returns an empty record and sets deferred->error.
  TurnRecord run_fresh(std::shared_ptr<RunHandle> handle, TurnRecord turn, DeferredStart* deferred = nullptr);
  // `known`: the turn as resume() committed (or staged) it, with what resume() read with it (saves reading all
  // of it again). The thread's history and state cannot change meanwhile: the turn is its thread's active one.
  struct KnownRun {
    TurnRecord turn;
    std::vector<LedgerEntry> ledger;
    std::vector<MessageRecord> history;
    std::optional<std::string> thread_state;
  };
  TurnRecord run_continuation(std::shared_ptr<RunHandle> handle, std::string turn_id,
                              std::optional<KnownRun> known = std::nullopt, DeferredStart* deferred = nullptr);
};

}  // namespace v1
}  // namespace agentrt
