// Storage interfaces: Store (threads, turns, messages, events, tool ledger, approvals, jobs) and ObjectStore.
// The event log is the source of truth; messages, turn state and the ledger are projections written in
// the same transaction as the events that change them (Store::commit).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentrt/content.hpp"
#include "agentrt/jobs.hpp"
#include "agentrt/json.hpp"
#include "agentrt/ledger_state.hpp"
#include "agentrt/model.hpp"
#include "agentrt/turn_state.hpp"

namespace agentrt {
inline namespace v1 {

struct ThreadRecord {
  std::string id;
  std::string user_id;
  std::string title;
  bool deleted = false;
  int64_t created_at = 0;  // ms
  int64_t updated_at = 0;
  int64_t last_seq = 0;  // highest committed event sequence number (read-only for writers)
};

struct TurnRecord {
  std::string id;
  std::string thread_id;
  std::string user_id;
  TurnStatus status = TurnStatus::running;
  int64_t version = 0;  // bumped by every committed change; compare-and-set key
  std::string client_message_id;
  std::string run_id;               // the current (or last) run
  std::string parent_run_id;        // set on resumed runs
  std::string stage;                // the stage the turn is in (or paused in)
  std::string approval_request_id;  // the open (or last) approval request
  json interrupts = json::array();  // the open interrupts (AG-UI Interrupt objects)
  int64_t expires_at = 0;           // approval deadline, ms; 0 = none
  std::string owner;                // runtime instance that runs it (RUNNING/RESUMING)
  std::string intent;               // the intent stage's output
  std::string error;                // why it failed / expired / was cancelled
  json usage = json::array();       // TokenUsage[] over the whole turn
  int steps = 0;                    // model calls made in the execution stage
  // While it waits (for approval, input, a client's tools): the W3C trace context of its wait's span when tracing
  // is on, so that whichever process resumes it, after a restart too, continues the same trace ("" otherwise;
  // opaque to stores: a text column).
  std::string trace;
  int64_t created_at = 0;
  int64_t updated_at = 0;
};

// What stored turns spent (budgets and reports): model calls (TurnRecord::steps summed), tool calls (their
// ledger entries) and token usage summed per provider and model.
struct StoredSpend {
  int64_t model_calls = 0;
  int64_t tool_calls = 0;
  std::vector<TokenUsage> usage;
};

// One history message as stored: the AG-UI message plus where it came from.
struct MessageRecord {
  std::string thread_id;
  int64_t index = 0;  // position in the thread (assigned by the store on commit)
  std::string turn_id;
  std::string run_id;
  Message message;
};

// The tool ledger: one durable record per tool call; what makes execution exactly-once.
struct LedgerEntry {
  std::string tool_call_id;
  std::string turn_id;
  std::string thread_id;
  std::string run_id;  // the run that requested it
  std::string tool_name;
  std::string stage;
  int ordinal = 0;        // position among the calls of its model response
  std::string arguments;  // JSON text as the model sent it (or as edited on approval)
  LedgerStatus status = LedgerStatus::requested;
  bool needs_approval = false;
  bool idempotent = false;
  bool client = false;  // a client tool's call: the client runs it and answers it (a resume's ToolAnswer)
  std::string interrupt_id;
  json decision;       // the person's decision, when there was one
  std::string output;  // ToolAgentOutput JSON text once the call has an outcome; "" = none yet
  int64_t updated_at = 0;
  bool has_output() const { return !output.empty(); }
  // A client tool call that waits for the client's answer (a resume's ToolAnswer).
  bool awaits_client() const { return client && status == LedgerStatus::requested && !has_output(); }
};
// The one way a ledger entry's status changes: through the table of ledger_state.hpp (Error(invalid_state) for
// a move it refuses, and for started -> started unless the call is idempotent; the entry is left as it was).
void advance(LedgerEntry& entry, LedgerStatus to);

// The answer to a resume, kept so that the same approval request id gets the same answer.
struct ApprovalRecord {
  std::string approval_request_id;
  std::string turn_id;
  std::string thread_id;
  json decisions;  // as submitted
  json answer;     // what resume() returned
  int64_t created_at = 0;
};

struct StoredEvent {
  int64_t seq = 0;
  std::string run_id;
  std::string json;  // the AG-UI event JSON
};

// A job row to write: an insert (expected_version < 0) or a compare-and-set update.
struct JobWrite {
  JobRecord job;
  int64_t expected_version = -1;
};

// Everything one transaction writes. Events get consecutive sequence numbers after the thread's last
// one, messages consecutive indexes; both are written back into the batch by commit().
struct CommitBatch {
  std::string thread_id;
  std::optional<ThreadRecord> create_thread;  // insert if absent (owner checked: conflict if another user's)
  std::optional<TurnRecord> turn;             // insert (expected_version < 0) or compare-and-set update
  int64_t expected_version = -1;
  std::vector<StoredEvent> events;
  std::vector<MessageRecord> messages;
  std::vector<LedgerEntry> ledger;         // upserts by (turn_id, tool_call_id)
  std::optional<ApprovalRecord> approval;  // insert; conflict if the id exists
  std::vector<JobWrite> jobs;              // versions written back on commit
  // The thread's shared state (AG-UI state: JSON text) as this batch's events leave it, written whole.
  std::optional<std::string> thread_state;
  // Conflict unless the thread has no RUNNING or RESUMING turn (no run is open on it): how a batch that is
  // a whole run by itself (a job's outcome) avoids landing inside another run's events.
  bool require_idle = false;
  bool empty() const {
    return !create_thread && !turn && events.empty() && messages.empty() && ledger.empty() && !approval &&
           jobs.empty() && !thread_state;
  }
};

// Thread-safe: every method may be called from any thread. Implementations serialise writers as their
// database does (SQLite: one writer; PostgreSQL: row locks), and make commit() all-or-nothing.
class Store {
 public:
  virtual ~Store() = default;

  // Applies the batch atomically. Throws Error(conflict) when a turn insert would make a second active
  // turn on the thread, when the turn's version is not `expected_version`, when the turn's
  // client_message_id repeats on the thread, when the approval id exists, when a job insert repeats an id or
  // a job update's version is not its expected_version, or when require_idle finds a run open. On success the turn's
  // version is expected_version + 1 (0 for an insert) and seq/index fields in the batch are filled in.
  virtual void commit(CommitBatch& batch) = 0;

  virtual std::optional<ThreadRecord> get_thread(std::string_view thread_id) = 0;
  // Newest first; soft-deleted threads are left out unless include_deleted.
  virtual std::vector<ThreadRecord> list_threads(std::string_view user_id, bool include_deleted = false) = 0;
  virtual void set_thread_title(std::string_view thread_id, std::string_view title) = 0;
  // The thread's shared state as its last commit with one left it (JSON text); nullopt when none was ever
  // written.
  virtual std::optional<std::string> thread_state(std::string_view thread_id) = 0;
  // Marks the thread deleted. Error(conflict) while it has an active (RUNNING, WAITING_APPROVAL, WAITING_CLIENT,
  // RESUMING) turn, checked in the same transaction; a commit that would create or continue a deleted thread's row
  // (CommitBatch::create_thread) is refused with Error(conflict) too, so a start and a delete never interleave.
  virtual void soft_delete_thread(std::string_view thread_id) = 0;

  virtual std::optional<TurnRecord> get_turn(std::string_view turn_id) = 0;
  virtual std::optional<TurnRecord> find_turn_by_client_message(std::string_view thread_id,
                                                                std::string_view client_message_id) = 0;
  virtual std::optional<TurnRecord> active_turn(std::string_view thread_id) = 0;  // non-terminal turn
  virtual std::optional<TurnRecord> last_turn(std::string_view thread_id) = 0;
  virtual std::vector<TurnRecord> turns_in_status(TurnStatus status) = 0;
  // Waiting turns (WAITING_APPROVAL, WAITING_CLIENT) whose deadline (expires_at > 0) is at or before now_ms: what
  // the sweeper expires. A backend should answer it from an index rather than read every waiting turn.
  virtual std::vector<TurnRecord> turns_expired(int64_t now_ms) {
    std::vector<TurnRecord> out;
    for (TurnStatus s : {TurnStatus::waiting_approval, TurnStatus::waiting_client})
      for (auto& t : turns_in_status(s))
        if (t.expires_at > 0 && t.expires_at <= now_ms) out.push_back(std::move(t));
    return out;
  }

  virtual std::vector<MessageRecord> messages(std::string_view thread_id) = 0;
  // The thread's messages alone, in order: what a history read needs of messages(). This default takes them
  // from messages(); a store may read them without the records' other fields.
  virtual std::vector<Message> thread_messages(std::string_view thread_id) {
    auto records = messages(thread_id);
    std::vector<Message> out;
    out.reserve(records.size());
    for (auto& r : records) out.push_back(std::move(r.message));
    return out;
  }
  virtual std::vector<StoredEvent> events_after(std::string_view thread_id, int64_t after_seq, size_t limit) = 0;
  virtual std::vector<LedgerEntry> ledger(std::string_view turn_id) = 0;
  // A turn with what a run that continues it reads (the resume of a pause): the turn and, when it waits (only a
  // waiting turn is continued), its ledger and its thread's history and state. nullopt turn: no such turn. This
  // default reads them one after the other; a store that can reads them as one snapshot (SQLite: one read
  // transaction).
  struct TurnSnapshot {
    std::optional<TurnRecord> turn;
    std::vector<LedgerEntry> ledger;
    std::vector<MessageRecord> history;
    std::optional<std::string> thread_state;
  };
  virtual TurnSnapshot turn_snapshot(std::string_view turn_id) {
    TurnSnapshot s;
    s.turn = get_turn(turn_id);
    if (!s.turn || !is_waiting(s.turn->status)) return s;
    s.ledger = ledger(s.turn->id);
    s.history = messages(s.turn->thread_id);
    s.thread_state = thread_state(s.turn->thread_id);
    return s;
  }
  // What the thread's turns spent (thread_id set), or the turns of every thread of the user's, deleted ones
  // too (thread_id empty), the turn `except_turn_id` left out ("" = none): what is committed.
  virtual StoredSpend spend(std::string_view thread_id, std::string_view user_id, std::string_view except_turn_id) = 0;
  virtual std::optional<ApprovalRecord> get_approval(std::string_view approval_request_id) = 0;

  virtual std::optional<JobRecord> get_job(std::string_view job_id) = 0;
  virtual std::vector<JobRecord> thread_jobs(std::string_view thread_id) = 0;  // in creation order
  // The jobs that need the runtime: finished but not yet in history (delivered = false), and queued or
  // running ones whose expires_at (> 0) is at or before now_ms (unless waiting for a confirmation).
  virtual std::vector<JobRecord> jobs_due(int64_t now_ms) = 0;

  // Liveness of runtime instances sharing the store (turn ownership after a crash).
  virtual void heartbeat(std::string_view instance_id, int64_t now_ms) = 0;
  virtual void remove_instance(std::string_view instance_id) = 0;
  // The instance's last heartbeat, or nullopt when it is unknown (stopped cleanly or never seen).
  virtual std::optional<int64_t> instance_heartbeat(std::string_view instance_id) = 0;

  // Write transactions committed since the store was opened (for benchmarks and tests).
  virtual int64_t write_transactions() const = 0;

  // A number that changes when another process (another connection) commits to the store, so a runtime
  // can tell its live subscribers to read events it did not write itself. -1: the store cannot tell (the
  // runtime then treats every look as a change).
  virtual int64_t external_version() { return -1; }
  // Blocks until another process may have committed (true: external_version() is worth reading now), until
  // `timeout` passes or wake_external() is called (false). A store that cannot tell returns false at once
  // (waits_external() is false), and its runtime looks at every sweep instead.
  virtual bool wait_external(std::chrono::milliseconds timeout) {
    (void)timeout;
    return false;
  }
  virtual bool waits_external() const { return false; }
  // Ends a wait_external() in progress (or the next one) at once: the runtime's shutdown.
  virtual void wake_external() {}
};

struct ObjectInfo {
  std::string key;
  uint64_t size = 0;
  std::string content_type;
  std::string sha256;       // hex
  int64_t modified_at = 0;  // ms
};

// Thread-safe. Keys are relative paths ("a/b/c"); implementations refuse keys that could escape their
// root or namespace ("..", absolute, backslash, NUL, empty segments) with Error(invalid_argument).
class ObjectStore {
 public:
  virtual ~ObjectStore() = default;
  virtual std::string bucket() const = 0;
  virtual void put(std::string_view key, std::string_view bytes, std::string_view content_type) = 0;
  // Writes only when the key does not exist; returns false (and writes nothing) when it does.
  virtual bool put_if_absent(std::string_view key, std::string_view bytes, std::string_view content_type) = 0;
  virtual std::optional<std::string> get(std::string_view key) = 0;
  // At most `max_bytes` of the object's bytes from `offset` (fewer only at its end, "" at or past it), or
  // nullopt when the key does not exist: how a host streams a large object without holding all of it. The
  // default reads the whole object with get(); stores that can read a part of one override it.
  virtual std::optional<std::string> read(std::string_view key, uint64_t offset, size_t max_bytes) {
    auto all = get(key);
    if (!all) return std::nullopt;
    if (offset >= all->size()) return std::string();
    return all->substr(static_cast<size_t>(offset), max_bytes);
  }
  virtual std::optional<ObjectInfo> head(std::string_view key) = 0;
  virtual bool remove(std::string_view key) = 0;  // true when something was deleted
  virtual std::vector<ObjectInfo> list(std::string_view prefix) = 0;
  // A URL that grants GET on `key` until `expires_at_ms`.
  virtual std::string sign_url(std::string_view key, int64_t expires_at_ms) const = 0;
  // The key a URL grants, when it is this store's own, untampered, unexpired signed URL. Throws
  // Error(expired) for an expired one and Error(invalid_argument) for anything else.
  virtual std::string verify_url(std::string_view url, int64_t now_ms) const = 0;
};

}  // namespace v1
}  // namespace agentrt
