// SqliteStore: the embedded default Store (one file, WAL, synchronous=NORMAL, prepared statements only).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agentrt/storage.hpp"
#include "store/message_layout.hpp"
#include "store/sqlite/event_body.hpp"

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
  // 8000 (32 MiB of 4 KiB pages; the WAL file grows to about 128 MiB under writes that never pause): at 1000, a
  // server's sustained turns (~10 pages each, thousands a second) had the WAL started over ~9 times a second,
  // each time with every commit waiting for those fsyncs (~7% more turns a second at 8000, 16 clients).
  int wal_autocheckpoint = 8000;
  // The SQLite VFS the connections open the file with ("": SQLite's default). Tests name a fault-injecting one.
  std::string vfs{};
  // Batches handed in while a commit is under way are committed together, one savepoint each (see
  // SqliteStore::commit_rows); false: each batch in a transaction of its own, as the committing threads take
  // the connection's lock in turn.
  bool group_commit = true;
};

// Thread-safe: one connection for writes behind one mutex (SQLite serialises writers anyway); commits handed in
// while one is under way are committed together (group commit, see commit_rows). A read runs on that connection
// when no one holds it, else on a reader of its own (see Read), so reads do not queue behind commits. Several
// processes may open the same file; writers then wait on each other up to busy_timeout_ms.
class SqliteStore final : public Store {
 public:
  // `messages`: where history messages are kept; nullptr keeps them as rows of the messages table, written
  // in the transaction of their batch.
  explicit SqliteStore(SqliteStoreOptions options, std::unique_ptr<MessageLayout> messages = nullptr);
  ~SqliteStore() override;
  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  static constexpr int kSchemaVersion = 14;
  // The group commit: batches in one transaction, and groups one committing thread commits before it hands
  // the queue to the first batch still waiting.
  static constexpr size_t kMaxGroup = 64;
  static constexpr int kMaxRounds = 4;

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
  TurnSnapshot turn_snapshot(std::string_view turn_id) override;
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

  // The group commit's queue (tests, stats): batches waiting for a commit, and whether one is under way.
  size_t commits_waiting();
  bool commit_under_way();
  // Reader connections open (one from the start, on a file), and the reads that ran on them because the store's
  // own connection was held (tests, stats).
  size_t readers_open();
  int64_t reader_reads() const;
  // How many times the checkpointer started the WAL's writeback ahead of a checkpoint (tests, stats; see
  // store/sqlite/checkpointer.hpp): with synchronous=NORMAL on SQLite's own VFS, once per ~1 MiB of WAL.
  int64_t wal_writebacks() const;

  // Runs PRAGMA wal_checkpoint(TRUNCATE) (benchmarks measure the file after it).
  void checkpoint();
  int schema_version();

 private:
  sqlite::Statement stmt(const char* sql);
  void migrate();
  void begin_write();
  void end_write(bool commit);
  // The batch (messages included, when they are still in it) in one write transaction, with the batches
  // other threads hand in while a commit is under way (a group commit: see commit_rows).
  void commit_rows(CommitBatch& batch);
  struct Pending;
  void commit_group(const std::vector<Pending*>& group);  // under mutex_
  bool commit_together(const std::vector<Pending*>& group);
  void commit_alone(Pending& p);
  void require_idle(std::string_view thread_id);
  void write_job(JobWrite& w, int64_t now);
  // The connection a read runs on, held for the Read's life: the store's own when no one holds it (its page cache
  // is the warmest), else an idle reader, a connection of its own opened on demand (at most kMaxReaders) that WAL
  // lets read beside a commit and other reads, and sees every commit that returned before the read began. Past
  // kMaxReaders, for a database in memory (a connection of its own would be another database) or when a reader
  // cannot be opened, the read waits for the store's own connection as before.
  class Read {
   public:
    explicit Read(SqliteStore& s);
    ~Read();
    Read(const Read&) = delete;
    Read& operator=(const Read&) = delete;
    sqlite::Connection& db() { return *c_; }

   private:
    SqliteStore& s_;
    std::unique_lock<std::mutex> main_;
    std::unique_ptr<sqlite::Connection> reader_;
    sqlite::Connection* c_ = nullptr;
  };
  static constexpr size_t kMaxReaders = 4;
  void warm_reads(sqlite::Connection& c);
  // A new reader (readers_open_ already counts it), or null when it cannot be opened: then no more are tried.
  std::unique_ptr<sqlite::Connection> open_reader();
  std::vector<TurnRecord> query_turns(sqlite::Connection& c, const char* sql, std::string_view a,
                                      std::string_view b = {});
  // The reads behind get_turn, ledger, messages and thread_state, on `c` (turn_snapshot makes them one).
  std::optional<TurnRecord> read_turn_row(sqlite::Connection& c, std::string_view turn_id);
  std::vector<LedgerEntry> read_ledger(sqlite::Connection& c, std::string_view turn_id);
  std::vector<MessageRecord> read_messages(sqlite::Connection& c, std::string_view thread_id);
  std::vector<Message> read_thread_messages(sqlite::Connection& c, std::string_view thread_id);
  std::optional<std::string> read_thread_state(sqlite::Connection& c, std::string_view thread_id);

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
    std::optional<int64_t> base;  // the thread's span (thread_spans.base; schema.cpp, migrations 10 and 11)
  };
  using Tails = std::map<std::string, Tail, std::less<>>;
  static constexpr size_t kMaxTails = 4096;
  Tails tails_;
  sqlite::EventPacker packer_;  // under mutex_: event rows packed for write_rows
  std::string message_body_;    // under mutex_: a message packed for write_rows (sqlite/message_body.hpp)
  unsigned data_version_ = 0;
  int64_t next_span_ = 0;  // the span new_span gives next, 0: read it (under mutex_; valid as tails_ are)
  std::atomic<int64_t> write_txns_{0};
  // Writes the batch's rows in the open write transaction and returns the thread's new tail; `written`: the
  // tails of the batches this transaction has written so far (looked at before tails_).
  Tail write_rows(CommitBatch& b, const Tails& written);
  // A thread's span: its message rows are the rowids base x kSpanMessages + the index of the row's last message
  // (schema 13: a row holds one run's messages of a commit) of `messages`, its event rows base x kSpanEvents +
  // first_seq of `events` (rows.hpp).
  static constexpr int64_t kSpanMessages = int64_t{1} << 24;  // a thread's messages at most (AGENTRT_SPAN_LAST + 1)
  static constexpr int64_t kSpanEvents = int64_t{1} << 32;    // a thread's events at most (AGENTRT_EVENT_SPAN_LAST + 1)
  static constexpr int64_t kMaxSpan = INT64_MAX / kSpanEvents;  // the last base a thread may take
  // The thread's span as stored (read on `c`, or known), nullopt when it has none yet; new_span gives one (in the
  // open write transaction, for a thread that has none).
  std::optional<int64_t> span_of(sqlite::Connection& c, std::string_view thread_id);
  int64_t new_span(std::string_view thread_id);
  // Per thread, its span's base, as committed: a span never moves, so what any connection has seen stays true
  // whatever other connections write (at most kMaxTails, then forgotten all at once).
  std::mutex spans_mutex_;  // spans_ only; taken under mutex_ or alone
  std::map<std::string, int64_t, std::less<>> spans_;
  void remember_span(std::string_view thread_id, int64_t base);
  std::optional<int64_t> known_span(std::string_view thread_id);
  // The statement reading a thread's messages on `c`: `known` (?1 the span's first rowid of `messages`) when spans_
  // has its span, else `lookup` (?1 the thread id), whose last column (base_column, else -1) is the span's base.
  sqlite::Statement span_rows(sqlite::Connection& c, std::string_view thread_id, const char* known, const char* lookup,
                              int& base_column);
  void remember_tails(const Tails& written);
  // The batches waiting for a commit (each thread on its own Pending), and whether one is under way.
  std::mutex queue_mutex_;
  std::vector<Pending*> queue_;
  bool committing_ = false;
  // The idle readers (see Read); declared after db_ so that they close before it.
  std::mutex readers_mutex_;
  std::vector<std::unique_ptr<sqlite::Connection>> idle_readers_;
  size_t readers_open_ = 0;
  std::atomic<int64_t> reader_reads_{0};
  bool readers_allowed_ = false;  // a database in a file; false after a reader failed to open
  std::string file_;              // its path as SQLite resolved it (read without the store's connection)
};

}  // namespace v1
}  // namespace agentrt
