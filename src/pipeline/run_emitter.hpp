// The run emitter: a run's write buffer. It takes events, stages the history messages, ledger entries, approval
// records, turn rows and job rows the projector derives from them, commits (Store::commit: the only code that does) and
// then publishes to the event hub.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentrt/error.hpp"
#include "agentrt/events.hpp"
#include "agentrt/storage.hpp"
#include "pipeline/event_hub.hpp"
#include "pipeline/projector.hpp"

namespace agentrt {
inline namespace v1 {

// How a commit that fails for a transient reason (I/O, a busy database) is tried again before the run gives up.
struct CommitRetry {
  int retries = 2;                        // further attempts after the first
  std::chrono::milliseconds backoff{20};  // before the first retry; doubled before each further one
};

// A run's write buffer: events with the rows they change, committed in order, all or nothing per batch.
// Thread-safe: the run's thread stages and flushes; the group-commit flusher may flush too.
//
// A batch that cannot be committed (after CommitRetry's attempts) is dropped, and the emitter is failed for
// good: nothing staged later is committed by it, so no later event commits past a lost one (a subscriber
// never sees a gap), and every flush() after that throws the same error to the run, whichever thread's flush
// failed first. The run then records its end from what is durable (Recovery::fail_from_store).
class RunEmitter {
 public:
  // What a flush committed: the batch as the store wrote it (seq numbers, indexes and versions filled in), but for
  // its events, which went to the hub as they are, in one shared, immutable copy: `events`.
  struct Flushed {
    CommitBatch batch;  // its `events` empty: see `events`
    EventBatch events;  // null when the batch had none
    int64_t first_seq() const { return events && !events->empty() ? events->front().seq : 0; }
    int64_t emitter_first_seq = 0;  // the first event this emitter ever committed (this flush's or an earlier one's)
  };
  // Called after each commit on the committing thread, once the emitter's lock is released (it may call the
  // runtime; the flusher's calls may overlap or come in either order: emitter_first_seq is the same in each). A
  // run's own flush() commits only once every call begun before it has returned (the flusher's too).
  using Committed = std::function<void(const Flushed&)>;
  // Called once, on the thread whose flush failed for good (the flusher's too): how the run learns at once.
  using Failed = std::function<void()>;
  // An empty `run_id`: what it commits are the log's own records, of no run (a job's change outside a run),
  // which subscribers and event pages skip.
  RunEmitter(Store& store, EventHub& hub, std::string thread_id, std::string run_id, Committed on_commit = {},
             CommitRetry retry = {}, Failed on_failed = {});

  // Takes an event: stages it, and the history message it completes (the projector derives it).
  void emit(const Event& e);
  void emit(Event&& e);  // the same; what the projector keeps of it is moved, not copied
  // The events a run emits most often, written straight from their fields (wire::), projected the same way.
  void step_started(std::string_view step);
  void step_finished(std::string_view step);
  void text_start(std::string_view message_id);
  void text_content(std::string_view message_id, std::string_view delta);
  void tool_call_start(std::string_view tool_call_id, std::string_view name, std::string_view parent_message_id);
  void tool_call_args(std::string_view tool_call_id, std::string_view delta);
  void tool_call_end(std::string_view tool_call_id);
  // A TOOL_CALL_RESULT whose JSON the caller wrote (the ToolAgentOutput is serialised once, for the event and
  // the ledger); `facts` is the event's metadata.agentrt, which `event_json` holds too.
  void emit_tool_call_result(std::string event_json, const std::string& message_id, const std::string& tool_call_id,
                             std::string content, json facts, const ToolOutcome& outcome);
  // RUN_STARTED of turn `turn_id` carrying `input` in its metadata.agentrt (the message is not read back).
  void emit_run_started(const Event& e, const std::string& turn_id, const Message& input);
  // The turn the run's messages belong to, for a run whose RUN_STARTED (which names it) was emitted earlier.
  void begin_run(const std::string& turn_id);
  // Called (under the emitter's lock, on the emitting thread) with each message the projector derives.
  void on_message(std::function<void(const MessageRecord&)> sink);
  // The ledger entries of the run's turn committed before (a continuing run's), for the projector.
  void seed_ledger(const std::vector<LedgerEntry>& entries);
  // The turn's committed version (-1: the turn is inserted by the first commit).
  void set_turn_version(int64_t version);
  int64_t turn_version() const;
  // The turn row's created_at/updated_at as the store last committed them (0 before that).
  std::pair<int64_t, int64_t> turn_times() const;
  // The turn's row as committed before (a continuing run's), for the projector.
  void seed_turn(const TurnRecord& t);
  // Stages a change of the turn's lease (its owner), which no event carries; the commit compares-and-sets
  // against the last committed version. Every other change of the row is the projector's.
  void set_turn(const TurnRecord& t);
  void create_thread(ThreadRecord t);
  // Objects written for this batch, deleted again if the commit fails (compensation).
  void add_compensation(std::function<void()> undo);
  void set_run_id(std::string run_id);
  const std::string& run_id() const { return run_id_; }  // the run's thread only (set_run_id is its too)
  // The batch commits only while no run is open on the thread (a job's delivery, which is a run by itself).
  void require_idle();
  // Drops what is staged and not committed (and undoes its objects).
  void discard();

  // Commits everything pending in one transaction, then publishes the events. Returns what it committed.
  // Throws Error: the store's (after the retries, for transient ones), or, once a commit failed, that failure
  // again; nothing is published then.
  Flushed flush();
  // The group-commit flusher's flush: the same, but a failure is left for the run (failure(), the next
  // flush(), the Failed callback) instead of thrown. It commits nothing while a Unit is open: it leaves the
  // batch for its next tick or the run's own flush.
  void flush_in_background() noexcept;

  // What the run stages while a Unit is open (nested units count as one) commits in one transaction with
  // everything before it, never split by the group-commit flusher: a tool result with its message and ledger
  // outcome, an assistant message with the events that end it, a run's end with the turn's state, a start or
  // a decision with its records. The run's own flush() inside a unit commits as usual.
  class Unit {
   public:
    explicit Unit(RunEmitter& em);
    ~Unit();
    Unit(const Unit&) = delete;
    Unit& operator=(const Unit&) = delete;

   private:
    RunEmitter& em_;
  };
  // Set once a commit failed for good: why (the store's code: io for storage, conflict when the turn changed
  // under the run, too_large for a size limit).
  std::optional<Error> failure() const;
  bool has_pending() const;
  std::chrono::steady_clock::time_point pending_since() const;
  const std::string& thread_id() const { return thread_id_; }

 private:
  template <class E>
  void take(E&& e);                              // emit()'s body, for an event read (const&) or taken (&&)
  void drop_batch();                             // undoes the batch's objects and empties it (under mutex_)
  bool staging() const { return !failure_; }     // under mutex_: a failed emitter takes nothing more
  void note_pending();                           // under mutex_
  void note_content();                           // under mutex_: the batch is about to hold something
  static constexpr size_t kEventsReserved = 64;  // a batch's room for events, made as its first one comes
  void stage_event(std::string body);            // under mutex_
  void project(std::optional<MessageRecord> m);  // under mutex_
  CommitBatch commit_locked();                   // under mutex_; throws
  Flushed flush(bool background);
  Store& store_;
  EventHub& hub_;
  std::string thread_id_;
  std::string run_id_;
  Committed on_commit_;
  CommitRetry retry_;
  Failed on_failed_;
  mutable std::mutex mutex_;
  // On the heap, apart: with it inline the emitter is over 1 KiB, a size glibc's malloc serves only after
  // consolidating every small chunk freed since its last such request (measurably, once per run).
  std::unique_ptr<CommitBatch> batch_ = std::make_unique<CommitBatch>();
  std::vector<std::function<void()>> undo_;
  std::chrono::steady_clock::time_point pending_since_{};
  // pending_since_ while the batch holds something to commit, else 0 (set under mutex_): the group-commit flusher
  // asks has_pending() and pending_since() of every live run each tick without taking the lock that a commit
  // holds throughout.
  std::atomic<int64_t> due_since_{0};
  int64_t turn_version_ = -1;
  bool projected_turn_ = false;  // the batch's turn row is the projector's, taken as it commits
  int64_t turn_created_at_ = 0, turn_updated_at_ = 0;
  Projector projector_;  // under mutex_
  std::function<void(const MessageRecord&)> on_message_;
  int open_units_ = 0;  // under mutex_
  std::optional<Error> failure_;
  int64_t first_seq_ = 0;  // under mutex_
  int callbacks_ = 0;      // on_commit_ calls under way (under mutex_)
  std::condition_variable callbacks_done_;
};

}  // namespace v1
}  // namespace agentrt
