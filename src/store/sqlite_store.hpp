// SqliteStore: the embedded default Store (one file, WAL, synchronous=NORMAL, prepared statements only).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "agentrt/storage.hpp"
#include "store/message_layout.hpp"

namespace agentrt {
inline namespace v1 {

namespace sqlite {
class Connection;
class Statement;
}  // namespace sqlite

struct SqliteStoreOptions {
  std::string path;                    // the database file (":memory:" for tests that need no file)
  std::string synchronous = "NORMAL";  // NORMAL | FULL | OFF
  int busy_timeout_ms = 5000;          // how long a writer waits for another process's transaction
  // WAL pages before an automatic checkpoint (SQLite's default is 1000). Each checkpoint writes the changed
  // pages back and fsyncs; a longer interval writes a hot page once instead of many times. On a file, the
  // checkpoint runs on a thread of the store's own (its own connection), at every mark, not in the commit
  // that crossed it; a commit checkpoints the last frames itself (two fsyncs), so that SQLite starts the WAL
  // over, only when the WAL has reached four times the mark (or found idle). 0 = no automatic ones.
  int wal_autocheckpoint = 1000;
  // The SQLite VFS the connections open the file with ("": SQLite's default). Tests name a fault-injecting one.
  std::string vfs{};
};

// Thread-safe: one connection behind one mutex (SQLite serialises writers anyway). Several processes may
// open the same file; writers then wait on each other up to busy_timeout_ms.
class SqliteStore final : public Store {
 public:
  // `messages`: where history messages are kept; nullptr keeps them as rows of the messages table, written
  // in the transaction of their batch.
  explicit SqliteStore(SqliteStoreOptions options, std::unique_ptr<MessageLayout> messages = nullptr);
  ~SqliteStore() override;
  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  static constexpr int kSchemaVersion = 8;

  // As Store::commit, and as the message layout's commit says (DocumentLayout::commit).
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
  std::vector<Message> thread_messages(std::string_view thread_id) override;
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
  int64_t external_version() override;  // PRAGMA data_version

  // Runs PRAGMA wal_checkpoint(TRUNCATE) (benchmarks measure the file after it).
  void checkpoint();
  int schema_version();

 private:
  sqlite::Statement stmt(const char* sql);
  void migrate();
  void begin_write();
  void end_write(bool commit);
  // The batch (messages included, when they are still in it) in one write transaction.
  void commit_rows(CommitBatch& batch);
  void require_idle(std::string_view thread_id);
  void write_job(JobWrite& w, int64_t now);
  std::vector<TurnRecord> query_turns(const char* sql, std::string_view a, std::string_view b = {});

  SqliteStoreOptions options_;
  std::unique_ptr<MessageLayout> layout_;
  std::mutex mutex_;
  std::unique_ptr<sqlite::Connection> db_;
  struct Checkpointer;
  // After db_, so destroyed before it: the last connection to close checkpoints what is left.
  std::unique_ptr<Checkpointer> checkpointer_;
  // Per thread, the last event seq and message index this connection committed (valid while data_version_
  // is the pager's: no other connection has committed since).
  struct Tail {
    std::optional<int64_t> seq, idx;
  };
  static constexpr size_t kMaxTails = 4096;
  std::map<std::string, Tail, std::less<>> tails_;
  unsigned data_version_ = 0;
  std::atomic<int64_t> write_txns_{0};
};

}  // namespace v1
}  // namespace agentrt
