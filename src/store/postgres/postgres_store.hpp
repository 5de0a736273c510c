// PostgresStore: the Store on PostgreSQL (libpq), for several host processes on several machines sharing one
// database.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "agentrt/storage.hpp"
#include "store/message_layout.hpp"

// The active turns, as the partial index turns_one_active states it (the schema's predicate, word for word).
#define AGENTRT_ACTIVE "(status='RUNNING' OR status='WAITING_APPROVAL' OR status='RESUMING' OR status='WAITING_CLIENT')"

namespace agentrt {
inline namespace v1 {

namespace pg {
class Connection;
class Listener;
class Pipeline;
class Pool;
// A thread's tail after a commit's share of it, and that commit's transaction id.
struct ThreadTail {
  int64_t last_seq = 0;
  int64_t last_idx = -1;
  std::string xid;
};
}  // namespace pg

struct PostgresStoreOptions {
  std::string url;            // postgresql://user:password@host:port/dbname?options (libpq's URL)
  int pool_size = 4;          // connections at most (1..64), opened when first needed
  int connect_timeout_s = 5;  // how long opening a connection may take (the URL's connect_timeout wins)
};

// Thread-safe: every call borrows a connection of the pool. Several processes (on several machines) may share
// one database: a thread's commits are serialised by a lock on its tail row (its last event sequence number
// and message index, updated in each commit's transaction), so sequence numbers have no gaps and are seen in
// order; a turn's changes are compare-and-sets on its version; one active turn per thread is a partial unique
// index. The schema is migrated in one transaction when a store opens (the first of several processes
// migrates, the others wait for it). Failures are Error(io) naming the database (never its password) and what
// failed: a server that is down, a read-only database, a connection lost mid-transaction (that transaction is
// rolled back; the next call reconnects). A commit whose COMMIT got no answer asks the server, on a new
// connection, whether it landed, and reports io only if it did not or that cannot be told.
class PostgresStore final : public Store {
 public:
  // Error(invalid_argument) for a URL libpq cannot read or a pool size outside 1..64, Error(io) when the
  // database cannot be reached or migrated, Error(unsupported) when its schema is newer than this build's.
  // `messages`: as SqliteStore's (nullptr: the messages table).
  explicit PostgresStore(PostgresStoreOptions options, std::unique_ptr<MessageLayout> messages = nullptr);
  ~PostgresStore() override;
  PostgresStore(const PostgresStore&) = delete;
  PostgresStore& operator=(const PostgresStore&) = delete;

  static constexpr int kSchemaVersion = 5;

  void commit(CommitBatch& batch) override;
  std::optional<ThreadRecord> get_thread(std::string_view thread_id) override;
  std::vector<ThreadRecord> list_threads(std::string_view user_id, bool include_deleted) override;
  std::optional<std::string> thread_state(std::string_view thread_id) override;
  void set_thread_title(std::string_view thread_id, std::string_view title) override;
  void soft_delete_thread(std::string_view thread_id) override;
  std::optional<TurnRecord> get_turn(std::string_view turn_id) override;
  std::optional<TurnRecord> find_turn_by_client_message(std::string_view thread_id,
                                                        std::string_view client_message_id) override;
  std::optional<TurnRecord> active_turn(std::string_view thread_id) override;
  std::optional<TurnRecord> last_turn(std::string_view thread_id) override;
  std::vector<TurnRecord> turns_in_status(TurnStatus status) override;
  std::vector<TurnRecord> turns_expired(int64_t now_ms) override;
  std::vector<MessageRecord> messages(std::string_view thread_id) override;
  std::vector<StoredEvent> events_after(std::string_view thread_id, int64_t after_seq, size_t limit) override;
  std::vector<LedgerEntry> ledger(std::string_view turn_id) override;
  StoredSpend spend(std::string_view thread_id, std::string_view user_id, std::string_view except_turn_id) override;
  std::optional<ApprovalRecord> get_approval(std::string_view approval_request_id) override;
  std::optional<JobRecord> get_job(std::string_view job_id) override;
  std::vector<JobRecord> thread_jobs(std::string_view thread_id) override;
  std::vector<JobRecord> jobs_due(int64_t now_ms) override;
  void heartbeat(std::string_view instance_id, int64_t now_ms) override;
  void remove_instance(std::string_view instance_id) override;
  std::optional<int64_t> instance_heartbeat(std::string_view instance_id) override;
  // The store's own write transactions plus its message layout's.
  int64_t write_transactions() const override;
  // Counts the commits with events that other connections (other stores, other processes) made, as
  // notifications on pg::kEventsChannel tell them; -1 while it cannot listen.
  int64_t external_version() override;
  // Waits on the listening connection: another process's commit wakes it as the notification arrives.
  bool wait_external(std::chrono::milliseconds timeout) override;
  bool waits_external() const override { return true; }
  void wake_external() override;

  // The version the database's schema is at (the highest in its agentrt_schema table).
  int schema_version();
  // postgresql://user@host:port/dbname: where it is, without the password.
  const std::string& target() const { return target_; }

 private:
  void migrate();
  void commit_rows(CommitBatch& batch);
  void transact(pg::Connection& c, CommitBatch& batch);
  // One attempt. With `guess` (the thread's tail as this store's last commit of it left it), the rows go in the
  // lock's round trip; false (rolled back) when the lock found another tail, or when anything failed before the
  // COMMIT: the caller tries again without a guess.
  bool transact_once(pg::Connection& c, CommitBatch& batch, const pg::ThreadTail* guess);
  std::optional<pg::ThreadTail> known_tail(const std::string& thread_id);
  void remember_tail(const std::string& thread_id, const pg::ThreadTail* tail);  // nullptr: forget it
  // Each queues its statements on the commit's pipeline, with the checks of their results.
  void lock_thread(pg::Pipeline& p, std::string_view thread_id, int64_t events, int64_t messages, pg::ThreadTail& tail);
  void create_thread(pg::Pipeline& p, pg::Connection& c, const ThreadRecord& t, int64_t now);
  void write_turn(pg::Pipeline& p, CommitBatch& b, int64_t now);
  void write_ledger(pg::Pipeline& p, LedgerEntry& l, int64_t now);
  void write_job(pg::Pipeline& p, JobWrite& w, int64_t now);
  void require_idle(pg::Pipeline& p, std::string_view thread_id);
  void finish_commit(pg::Connection& c, const std::string& xid);
  [[noreturn]] void explain_conflict(pg::Connection& c, const CommitBatch& b, const Error& e);
  std::vector<TurnRecord> query_turns(const char* sql, std::string_view a, std::string_view b = {});

  PostgresStoreOptions options_;
  std::string target_;
  std::unique_ptr<MessageLayout> layout_;
  std::unique_ptr<pg::Pool> pool_;
  std::unique_ptr<pg::Listener> listener_;
  std::atomic<int64_t> write_txns_{0};
  std::mutex tails_mutex_;
  std::unordered_map<std::string, pg::ThreadTail> tails_;  // bounded: emptied when it reaches kKnownTails
};

}  // namespace v1
}  // namespace agentrt
