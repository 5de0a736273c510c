#include "store/sqlite_store.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <thread>

#include <fmt/format.h>

#include "agentrt/clock.hpp"
#include "agentrt/error.hpp"
#include "agentrt/events.hpp"
#include "util/json_fast.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

// Migrations, in order; migration i brings the schema from version i to i+1.
const char* const kMigrations[] = {
    R"sql(
CREATE TABLE threads(
  id TEXT PRIMARY KEY, user_id TEXT NOT NULL, title TEXT NOT NULL DEFAULT '',
  deleted INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX threads_by_user ON threads(user_id, updated_at);
CREATE TABLE turns(
  id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, user_id TEXT NOT NULL, status TEXT NOT NULL,
  version INTEGER NOT NULL, client_message_id TEXT NOT NULL, run_id TEXT NOT NULL, parent_run_id TEXT NOT NULL,
  stage TEXT NOT NULL, approval_request_id TEXT NOT NULL, interrupts TEXT NOT NULL, expires_at INTEGER NOT NULL,
  owner TEXT NOT NULL, intent TEXT NOT NULL, error TEXT NOT NULL, usage TEXT NOT NULL, steps INTEGER NOT NULL,
  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);
CREATE UNIQUE INDEX turns_one_active ON turns(thread_id) WHERE status IN ('RUNNING','WAITING_APPROVAL','RESUMING');
CREATE UNIQUE INDEX turns_by_client_message ON turns(thread_id, client_message_id) WHERE client_message_id <> '';
CREATE INDEX turns_by_thread ON turns(thread_id, created_at);
-- The event log. One row holds the events of one commit (JSON lines, seq first_seq..last_seq): a group
-- commit writes one row, not one per token delta. Rows are appended (rowid order), the index finds them.
CREATE TABLE events(
  id INTEGER PRIMARY KEY, thread_id TEXT NOT NULL, first_seq INTEGER NOT NULL, last_seq INTEGER NOT NULL,
  run_id TEXT NOT NULL, body TEXT NOT NULL);
CREATE UNIQUE INDEX events_by_thread ON events(thread_id, first_seq);
CREATE TABLE messages(
  id INTEGER PRIMARY KEY, thread_id TEXT NOT NULL, idx INTEGER NOT NULL, turn_id TEXT NOT NULL,
  run_id TEXT NOT NULL, body TEXT NOT NULL);
CREATE UNIQUE INDEX messages_by_thread ON messages(thread_id, idx);
CREATE TABLE ledger(
  id INTEGER PRIMARY KEY, turn_id TEXT NOT NULL, tool_call_id TEXT NOT NULL, thread_id TEXT NOT NULL,
  run_id TEXT NOT NULL, tool_name TEXT NOT NULL, stage TEXT NOT NULL, ordinal INTEGER NOT NULL,
  arguments TEXT NOT NULL, status TEXT NOT NULL, needs_approval INTEGER NOT NULL, idempotent INTEGER NOT NULL,
  interrupt_id TEXT NOT NULL, decision TEXT NOT NULL, output TEXT NOT NULL, updated_at INTEGER NOT NULL);
CREATE UNIQUE INDEX ledger_by_turn ON ledger(turn_id, tool_call_id);
CREATE TABLE approvals(
  id TEXT PRIMARY KEY, turn_id TEXT NOT NULL, thread_id TEXT NOT NULL, decisions TEXT NOT NULL,
  answer TEXT NOT NULL, created_at INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE instances(id TEXT PRIMARY KEY, heartbeat INTEGER NOT NULL) WITHOUT ROWID;
)sql",
    // 2: external jobs.
    R"sql(
CREATE TABLE jobs(
  id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, turn_id TEXT NOT NULL, run_id TEXT NOT NULL,
  tool_call_id TEXT NOT NULL, tool_name TEXT NOT NULL, user_id TEXT NOT NULL, status TEXT NOT NULL,
  progress REAL NOT NULL, message TEXT NOT NULL, result TEXT NOT NULL, assets TEXT NOT NULL,
  error_code TEXT NOT NULL, error_message TEXT NOT NULL, metadata TEXT NOT NULL, confirmation TEXT NOT NULL,
  confirm_message TEXT NOT NULL, timeout_ms INTEGER NOT NULL, expires_at INTEGER NOT NULL,
  delivered INTEGER NOT NULL, version INTEGER NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
  finished_at INTEGER NOT NULL);
CREATE INDEX jobs_by_thread ON jobs(thread_id, created_at);
-- The jobs the runtime still has to look at (open ones, and finished ones not yet in history).
CREATE INDEX jobs_undelivered ON jobs(expires_at) WHERE delivered = 0;
)sql",
    // 3: the active-turn predicate as ORs. A three-constant IN list builds a temporary table each time a
    // statement evaluates it, and the partial index evaluates it on every write of a turn (~10 us each).
    R"sql(
DROP INDEX turns_one_active;
CREATE UNIQUE INDEX turns_one_active ON turns(thread_id)
  WHERE status='RUNNING' OR status='WAITING_APPROVAL' OR status='RESUMING';
)sql",
};

// The active turns, as the partial index turns_one_active states it: a query names the index's predicate
// word for word, or the planner cannot use the index.
#define AGENTRT_ACTIVE "(status='RUNNING' OR status='WAITING_APPROVAL' OR status='RESUMING')"

// The database holds every user's conversations: a new file is created readable by its owner only (SQLite
// gives its -wal and -shm files the database file's permissions).
void create_private_file(const std::string& path) {
  if (path.empty() || path == ":memory:" || path.rfind("file:", 0) == 0) return;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) ::close(fd);  // EEXIST: an existing file keeps the permissions it has
}

[[noreturn]] void throw_sqlite(sqlite3* db, int rc, std::string_view what) {
  int ext = db ? sqlite3_extended_errcode(db) : rc;
  std::string msg = fmt::format("sqlite: {}: {} ({})", what, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc), ext);
  if ((rc & 0xff) == SQLITE_CONSTRAINT) throw Error(ErrorCode::conflict, msg);
  throw Error(ErrorCode::io, msg);
}

json parse_or(const unsigned char* text, json fallback) {
  if (!text || !*text) return fallback;
  return parse_json_or_discarded(reinterpret_cast<const char*>(text));
}

std::string dump(const json& j) {
  std::string out;
  append_json(out, j);
  return out;
}

}  // namespace

// A cached prepared statement, reset and unbound when this handle goes out of scope.
class SqliteStore::Statement {
 public:
  Statement(sqlite3* db, sqlite3_stmt* s) : db_(db), s_(s) {}
  ~Statement() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  Statement(Statement&& o) noexcept : db_(o.db_), s_(o.s_) { o.s_ = nullptr; }

  // Text the caller keeps alive until the statement is reset (this object's end): bound without a copy. A
  // statement's values are fields of the batch or arguments of the call, which outlive it.
  Statement& bind(int i, std::string_view v) {
    check(sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC));
    return *this;
  }
  // A temporary (a JSON text made for this statement): SQLite copies it.
  Statement& bind(int i, std::string&& v) {
    check(sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Statement& bind(int i, int64_t v) {
    check(sqlite3_bind_int64(s_, i, v));
    return *this;
  }
  Statement& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
  Statement& bind(int i, bool v) { return bind(i, static_cast<int64_t>(v ? 1 : 0)); }
  Statement& bind(int i, double v) {
    check(sqlite3_bind_double(s_, i, v));
    return *this;
  }
  // true when a row is available
  bool step() {
    int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw_sqlite(db_, rc, "statement");  // no SQL text: messages may reach clients
  }
  void run() {
    while (step()) {
    }
  }
  std::string text(int col) const {
    auto* p = sqlite3_column_text(s_, col);
    return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(s_, col)) : std::string();
  }
  const unsigned char* raw(int col) const { return sqlite3_column_text(s_, col); }
  sqlite3_stmt* get() const { return s_; }
  int64_t i64(int col) const { return sqlite3_column_int64(s_, col); }
  double f64(int col) const { return sqlite3_column_double(s_, col); }
  bool is_null(int col) const { return sqlite3_column_type(s_, col) == SQLITE_NULL; }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) throw_sqlite(db_, rc, "bind");
  }
  sqlite3* db_;
  sqlite3_stmt* s_;
};

// The WAL's automatic checkpoint, on a thread and a connection of its own: the commit that fills the WAL to
// the mark only wakes it, instead of writing the pages back and waiting for the fsyncs itself. Same mark,
// same kind of checkpoint (PASSIVE, as SQLite's own automatic one), same durability: the checkpointing
// connection has the store's synchronous level, so it fsyncs the WAL before it writes pages back and the
// database after.
//
// Starting the WAL over is the part that cannot be taken off the committing thread. SQLite starts it over
// only when a write transaction finds it wholly written back; while commits go on during a checkpoint it
// never is, so some commit has to write back the last few frames itself, fsyncs included (each fsync costs
// milliseconds on common disks: it flushes the device cache even for a file with nothing dirty). Doing that
// after every checkpoint was one stall of two fsyncs per mark. The thread therefore checkpoints at every
// mark (the database file is as up to date as with SQLite's own automatic checkpoint), and a commit starts
// the WAL over only once it has grown to kRestartMarks marks, while the thread is idle, so the WAL file
// stays under kRestartMarks x the mark (a little more while the thread is still busy there; at twice that
// the commit waits for the thread). With idle moments between commits (any real load) a write finds the WAL
// wholly written back after a thread's checkpoint and SQLite starts it over by itself, without a stall.
struct SqliteStore::Checkpointer {
  Checkpointer(const std::string& path, const SqliteStoreOptions& o) : pages(o.wal_autocheckpoint) {
    int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                             o.vfs.empty() ? nullptr : o.vfs.c_str());
    if (rc == SQLITE_OK) {
      sqlite3_busy_timeout(db, o.busy_timeout_ms);
      rc = sqlite3_exec(db, fmt::format("PRAGMA synchronous={}", o.synchronous).c_str(), nullptr, nullptr, nullptr);
    }
    if (rc != SQLITE_OK) {
      std::string msg =
          fmt::format("sqlite: cannot open '{}' for checkpoints: {}", path, db ? sqlite3_errmsg(db) : "?");
      sqlite3_close_v2(db);
      throw Error(ErrorCode::io, msg);
    }
    try {
      thread = std::thread([this] { run(); });
    } catch (...) {
      sqlite3_close_v2(db);
      throw;
    }
  }
  ~Checkpointer() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
    }
    cv.notify_one();
    thread.join();
    sqlite3_close_v2(db);
  }
  // After each commit, on the committing thread (under the store's lock), with the WAL's frame count.
  static int wal_hook(void* self, sqlite3* db, const char* name, int frames) {
    auto* c = static_cast<Checkpointer*>(self);
    if (frames < c->pages) {  // the WAL was started over: a new round
      c->next_mark = c->pages;
      return SQLITE_OK;
    }
    if (frames >= kRestartMarks * c->pages) {
      std::unique_lock<std::mutex> busy(c->running, std::try_to_lock);
      if (!busy.owns_lock() && frames >= 2 * kRestartMarks * c->pages) busy.lock();
      if (busy.owns_lock()) {
        // Writes back what the thread's checkpoints left (little); the next commit starts the WAL over.
        sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
        return SQLITE_OK;
      }
    }
    if (frames >= c->next_mark) {  // past the next mark: the thread writes the pages back, commits go on
      c->next_mark = (frames / c->pages + 1) * c->pages;
      {
        std::lock_guard<std::mutex> lock(c->mutex);
        c->due = true;
      }
      c->cv.notify_one();
    }
    return SQLITE_OK;
  }

  void run() {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      cv.wait(lock, [&] { return due || stop; });
      if (stop) return;
      due = false;
      lock.unlock();
      {
        std::lock_guard<std::mutex> busy(running);
        sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
      }
      lock.lock();
    }
  }

  const int pages;
  sqlite3* db = nullptr;
  std::mutex mutex;
  std::condition_variable cv;
  bool due = false, stop = false;
  static constexpr int kRestartMarks = 4;
  int next_mark = 0;   // the WAL size (frames) that wakes the thread next (committing thread only)
  std::mutex running;  // held while a checkpoint runs (checkpoint() waits for it)
  std::thread thread;
};

SqliteStore::SqliteStore(SqliteStoreOptions options) : options_(std::move(options)) {
  if (options_.synchronous != "NORMAL" && options_.synchronous != "FULL" && options_.synchronous != "OFF")
    throw Error(ErrorCode::invalid_argument,
                fmt::format("sqlite: synchronous must be NORMAL, FULL or OFF, not '{}'", options_.synchronous));
  create_private_file(options_.path);
  int rc =
      sqlite3_open_v2(options_.path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      options_.vfs.empty() ? nullptr : options_.vfs.c_str());
  if (rc != SQLITE_OK) {
    std::string msg = fmt::format("sqlite: cannot open '{}': {}", options_.path, db_ ? sqlite3_errmsg(db_) : "?");
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw Error(ErrorCode::io, msg);
  }
  try {
    sqlite3_busy_timeout(db_, options_.busy_timeout_ms);
    exec("PRAGMA journal_mode=WAL");
    exec(fmt::format("PRAGMA synchronous={}", options_.synchronous).c_str());
    exec("PRAGMA foreign_keys=OFF");
    exec(fmt::format("PRAGMA wal_autocheckpoint={}", options_.wal_autocheckpoint).c_str());
    exec("PRAGMA temp_store=MEMORY");
    migrate();
    const char* file = sqlite3_db_filename(db_, "main");
    if (options_.wal_autocheckpoint > 0 && file && *file) {
      try {
        checkpointer_ = std::make_unique<Checkpointer>(file, options_);
        sqlite3_wal_hook(db_, &Checkpointer::wal_hook, checkpointer_.get());  // in place of the automatic one
      } catch (const std::exception&) {
        // No second connection or thread (a read-only directory, no file handles left): SQLite's automatic
        // checkpoint, set above, stays in place.
        checkpointer_.reset();
      }
    }
  } catch (...) {
    checkpointer_.reset();
    for (auto& [k, s] : cache_) sqlite3_finalize(s);
    sqlite3_close_v2(db_);
    throw;
  }
}

SqliteStore::~SqliteStore() {
  checkpointer_.reset();  // first: the last connection to close checkpoints what is left
  for (auto& [k, s] : cache_) sqlite3_finalize(s);
  sqlite3_close_v2(db_);
}

void SqliteStore::exec(const char* sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    if ((rc & 0xff) == SQLITE_CONSTRAINT) throw Error(ErrorCode::conflict, "sqlite: " + msg);
    throw Error(ErrorCode::io, fmt::format("sqlite: {}: {}", std::string_view(sql).substr(0, 60), msg));
  }
}

SqliteStore::Statement SqliteStore::stmt(const char* sql) {
  auto it = cache_.find(sql);
  if (it == cache_.end()) {
    sqlite3_stmt* s = nullptr;
    int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr);
    if (rc != SQLITE_OK) throw_sqlite(db_, rc, "prepare");
    it = cache_.emplace(sql, s).first;
  }
  return Statement(db_, it->second);
}

int SqliteStore::schema_version() {
  std::lock_guard<std::mutex> lock(mutex_);
  auto s = stmt("PRAGMA user_version");
  return s.step() ? static_cast<int>(s.i64(0)) : 0;
}

void SqliteStore::migrate() {
  exec("BEGIN IMMEDIATE");
  try {
    int version = 0;
    {
      auto s = stmt("PRAGMA user_version");
      if (s.step()) version = static_cast<int>(s.i64(0));
    }
    constexpr int known = static_cast<int>(std::size(kMigrations));
    static_assert(known == kSchemaVersion);
    if (version > known)
      throw Error(ErrorCode::unsupported,
                  fmt::format("sqlite: '{}' has schema version {}, newer than this agentrt knows ({})", options_.path,
                              version, known));
    for (int v = version; v < known; ++v) exec(kMigrations[v]);
    if (version != known) exec(fmt::format("PRAGMA user_version={}", known).c_str());
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

unsigned SqliteStore::data_version() {
  unsigned v = 0;
  sqlite3_file_control(db_, "main", SQLITE_FCNTL_DATA_VERSION, &v);
  return v;
}

void SqliteStore::begin_write() {
  stmt("BEGIN IMMEDIATE").run();
  // The pager's data version moves with every commit, ours and other connections'. Unchanged since our
  // last commit: nobody else wrote, and what we remember of the threads' tails still holds.
  if (data_version() != data_version_) tails_.clear();
}

void SqliteStore::end_write(bool commit) {
  if (commit) {
    stmt("COMMIT").run();
    data_version_ = data_version();  // our commit only: the write lock was ours until now
    write_txns_.fetch_add(1, std::memory_order_relaxed);
  } else {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
}

void SqliteStore::commit(CommitBatch& b) {
  if (b.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  begin_write();
  try {
    const int64_t now = now_ms();
    if (b.require_idle) require_idle(b.thread_id);
    if (b.create_thread) {
      const auto& t = *b.create_thread;
      auto ins = stmt(
          "INSERT INTO threads(id,user_id,title,deleted,created_at,updated_at) VALUES(?,?,?,0,?,?) "
          "ON CONFLICT(id) DO UPDATE SET updated_at=excluded.updated_at "
          "WHERE threads.user_id=excluded.user_id AND threads.deleted=0");
      ins.bind(1, t.id).bind(2, t.user_id).bind(3, t.title).bind(4, now).bind(5, now).run();
      if (sqlite3_changes(db_) == 0) {
        // In this transaction: a delete that committed before it is seen, and none can come between.
        auto who = stmt("SELECT user_id FROM threads WHERE id=?");
        who.bind(1, t.id);
        const bool mine = who.step() && who.text(0) == t.user_id;
        throw Error(ErrorCode::conflict, mine ? fmt::format("thread {} was deleted", t.id)
                                              : fmt::format("thread {} belongs to another user", t.id));
      }
    }
    if (b.turn) {
      auto& t = *b.turn;
      t.updated_at = now;
      if (b.expected_version < 0) {
        t.version = 0;
        if (t.created_at == 0) t.created_at = now;
        auto refuse_beside_active = [&] {
          auto act = stmt("SELECT id FROM turns WHERE thread_id=? AND " AGENTRT_ACTIVE);
          act.bind(1, t.thread_id);
          if (act.step())
            throw Error(ErrorCode::conflict,
                        fmt::format("thread {} already has an active turn ({})", t.thread_id, act.text(0)));
        };
        // A turn inserted already ended (a run that commits once, at its end) is outside the partial index:
        // it still may not land beside another active turn.
        if (is_terminal(t.status)) refuse_beside_active();
        auto ins = stmt(
            "INSERT INTO turns(id,thread_id,user_id,status,version,client_message_id,run_id,parent_run_id,stage,"
            "approval_request_id,interrupts,expires_at,owner,intent,error,usage,steps,created_at,updated_at) "
            "VALUES(?,?,?,?,0,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
        ins.bind(1, t.id).bind(2, t.thread_id).bind(3, t.user_id).bind(4, to_string(t.status));
        ins.bind(5, t.client_message_id).bind(6, t.run_id).bind(7, t.parent_run_id).bind(8, t.stage);
        ins.bind(9, t.approval_request_id).bind(10, dump(t.interrupts)).bind(11, t.expires_at).bind(12, t.owner);
        ins.bind(13, t.intent).bind(14, t.error).bind(15, dump(t.usage)).bind(16, t.steps);
        ins.bind(17, t.created_at).bind(18, t.updated_at);
        try {
          ins.run();
        } catch (const Error& e) {
          // The unique indexes refused it (a repeated client message id, a second active turn): say which.
          if (e.code() != ErrorCode::conflict) throw;
          if (!t.client_message_id.empty()) {
            auto dup = stmt("SELECT id FROM turns WHERE thread_id=? AND client_message_id=?");
            dup.bind(1, t.thread_id).bind(2, t.client_message_id);
            if (dup.step())
              throw Error(ErrorCode::conflict, fmt::format("thread {}: client message {} already started turn {}",
                                                           t.thread_id, t.client_message_id, dup.text(0)));
          }
          refuse_beside_active();
          throw;
        }
      } else {
        auto up = stmt(
            "UPDATE turns SET status=?,version=version+1,run_id=?,parent_run_id=?,stage=?,approval_request_id=?,"
            "interrupts=?,expires_at=?,owner=?,intent=?,error=?,usage=?,steps=?,updated_at=? WHERE id=? AND version=?");
        up.bind(1, to_string(t.status)).bind(2, t.run_id).bind(3, t.parent_run_id).bind(4, t.stage);
        up.bind(5, t.approval_request_id).bind(6, dump(t.interrupts)).bind(7, t.expires_at).bind(8, t.owner);
        up.bind(9, t.intent).bind(10, t.error).bind(11, dump(t.usage)).bind(12, t.steps).bind(13, now);
        up.bind(14, t.id).bind(15, b.expected_version);
        up.run();
        if (sqlite3_changes(db_) == 0)
          throw Error(ErrorCode::conflict,
                      fmt::format("turn {} changed concurrently (expected version {})", t.id, b.expected_version));
        t.version = b.expected_version + 1;
      }
    }
    // The thread's last event seq and message index: remembered from this connection's own commits while
    // no other connection has written (data version), else read.
    auto known = tails_.find(b.thread_id);
    Tail tail = known != tails_.end() ? known->second : Tail{};
    if (!b.events.empty()) {
      int64_t seq = 0;
      if (tail.seq) {
        seq = *tail.seq;
      } else {
        auto q = stmt("SELECT last_seq FROM events WHERE thread_id=? ORDER BY first_seq DESC LIMIT 1");
        q.bind(1, b.thread_id);
        if (q.step()) seq = q.i64(0);
      }
      // Consecutive events of one run share a row.
      size_t i = 0;
      std::string body;
      while (i < b.events.size()) {
        const std::string& run = b.events[i].run_id;
        const int64_t first = seq + 1;
        body.clear();
        for (; i < b.events.size() && b.events[i].run_id == run; ++i) {
          auto& e = b.events[i];
          if (e.json.find('\n') != std::string::npos)
            throw Error(ErrorCode::invalid_argument, "event JSON must be a single line");
          if (!body.empty()) body += '\n';
          body += e.json;
          e.seq = ++seq;
        }
        auto ins = stmt("INSERT INTO events(thread_id,first_seq,last_seq,run_id,body) VALUES(?,?,?,?,?)");
        ins.bind(1, b.thread_id).bind(2, first).bind(3, seq).bind(4, run).bind(5, body).run();
      }
      tail.seq = seq;
    }
    if (!b.messages.empty()) {
      int64_t idx = -1;
      if (tail.idx) {
        idx = *tail.idx;
      } else {
        auto q = stmt("SELECT idx FROM messages WHERE thread_id=? ORDER BY idx DESC LIMIT 1");
        q.bind(1, b.thread_id);
        if (q.step()) idx = q.i64(0);
      }
      for (auto& m : b.messages) {
        m.index = ++idx;
        m.thread_id = b.thread_id;
        auto ins = stmt("INSERT INTO messages(thread_id,idx,turn_id,run_id,body) VALUES(?,?,?,?,?)");
        ins.bind(1, b.thread_id).bind(2, m.index).bind(3, m.turn_id).bind(4, m.run_id);
        ins.bind(5, to_json_string(m.message)).run();
      }
      tail.idx = idx;
    }
    for (auto& l : b.ledger) {
      l.updated_at = now;
      auto up = stmt(
          "INSERT INTO ledger(turn_id,tool_call_id,thread_id,run_id,tool_name,stage,ordinal,arguments,"
          "status,needs_approval,idempotent,interrupt_id,decision,output,updated_at) "
          "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(turn_id,tool_call_id) DO UPDATE SET "
          "run_id=excluded.run_id,arguments=excluded.arguments,status=excluded.status,"
          "needs_approval=excluded.needs_approval,idempotent=excluded.idempotent,interrupt_id=excluded.interrupt_id,"
          "decision=excluded.decision,output=excluded.output,updated_at=excluded.updated_at");
      up.bind(1, l.turn_id).bind(2, l.tool_call_id).bind(3, l.thread_id).bind(4, l.run_id).bind(5, l.tool_name);
      up.bind(6, l.stage).bind(7, l.ordinal).bind(8, l.arguments).bind(9, to_string(l.status));
      up.bind(10, l.needs_approval).bind(11, l.idempotent).bind(12, l.interrupt_id);
      up.bind(13, l.decision.is_null() ? std::string() : dump(l.decision));
      up.bind(14, l.output).bind(15, l.updated_at);
      up.run();
    }
    if (b.approval) {
      auto& a = *b.approval;
      if (a.created_at == 0) a.created_at = now;
      auto ins = stmt("INSERT INTO approvals(id,turn_id,thread_id,decisions,answer,created_at) VALUES(?,?,?,?,?,?)");
      ins.bind(1, a.approval_request_id).bind(2, a.turn_id).bind(3, a.thread_id).bind(4, dump(a.decisions));
      ins.bind(5, dump(a.answer)).bind(6, a.created_at);
      ins.run();
    }
    for (auto& j : b.jobs) write_job(j, now);
    end_write(true);
    if (tail.seq || tail.idx) {
      if (tails_.size() >= kMaxTails) tails_.clear();
      tails_[b.thread_id] = tail;
    }
  } catch (...) {
    end_write(false);
    throw;
  }
}

std::optional<ThreadRecord> SqliteStore::get_thread(std::string_view thread_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto s = stmt(
      "SELECT id,user_id,title,deleted,created_at,updated_at,"
      "(SELECT last_seq FROM events WHERE thread_id=threads.id ORDER BY first_seq DESC LIMIT 1) FROM threads WHERE "
      "id=?");
  s.bind(1, thread_id);
  if (!s.step()) return std::nullopt;
  ThreadRecord t{s.text(0), s.text(1), s.text(2), s.i64(3) != 0, s.i64(4), s.i64(5), s.i64(6)};
  return t;
}

std::vector<ThreadRecord> SqliteStore::list_threads(std::string_view user_id, bool include_deleted) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto s = stmt(
      "SELECT id,user_id,title,deleted,created_at,updated_at FROM threads WHERE user_id=? AND (deleted=0 OR ?) "
      "ORDER BY updated_at DESC, id");
  s.bind(1, user_id).bind(2, include_deleted);
  std::vector<ThreadRecord> out;
  while (s.step()) out.push_back(ThreadRecord{s.text(0), s.text(1), s.text(2), s.i64(3) != 0, s.i64(4), s.i64(5), 0});
  return out;
}

void SqliteStore::set_thread_title(std::string_view thread_id, std::string_view title) {
  std::lock_guard<std::mutex> lock(mutex_);
  begin_write();
  try {
    auto s = stmt("UPDATE threads SET title=?, updated_at=? WHERE id=?");
    s.bind(1, title).bind(2, now_ms()).bind(3, thread_id).run();
    if (sqlite3_changes(db_) == 0) throw Error(ErrorCode::not_found, fmt::format("thread {} not found", thread_id));
    end_write(true);
  } catch (...) {
    end_write(false);
    throw;
  }
}

void SqliteStore::soft_delete_thread(std::string_view thread_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  begin_write();
  try {
    // In the same write transaction as the check: no turn can start between them (a start's commit on a
    // deleted thread is refused).
    auto act = stmt("SELECT id FROM turns WHERE thread_id=? AND " AGENTRT_ACTIVE);
    act.bind(1, thread_id);
    if (act.step())
      throw Error(ErrorCode::conflict,
                  fmt::format("thread {} has an active turn ({}): cancel it first", thread_id, act.text(0)));
    auto s = stmt("UPDATE threads SET deleted=1, updated_at=? WHERE id=?");
    s.bind(1, now_ms()).bind(2, thread_id).run();
    if (sqlite3_changes(db_) == 0) throw Error(ErrorCode::not_found, fmt::format("thread {} not found", thread_id));
    end_write(true);
  } catch (...) {
    end_write(false);
    throw;
  }
}

#define AGENTRT_TURN_COLS                                                                                 \
  "id,thread_id,user_id,status,version,client_message_id,run_id,parent_run_id,stage,approval_request_id," \
  "interrupts,expires_at,owner,intent,error,usage,steps,created_at,updated_at"

std::vector<TurnRecord> SqliteStore::query_turns(const char* sql, std::string_view a, std::string_view b) {
  auto s = stmt(sql);
  s.bind(1, a);
  if (!b.empty()) s.bind(2, b);
  return read_turns(s);
}

std::vector<TurnRecord> SqliteStore::read_turns(Statement& s) {
  std::vector<TurnRecord> out;
  while (s.step()) {
    TurnRecord t;
    t.id = s.text(0);
    t.thread_id = s.text(1);
    t.user_id = s.text(2);
    t.status = turn_status_from_string(s.text(3));
    t.version = s.i64(4);
    t.client_message_id = s.text(5);
    t.run_id = s.text(6);
    t.parent_run_id = s.text(7);
    t.stage = s.text(8);
    t.approval_request_id = s.text(9);
    t.interrupts = parse_or(s.raw(10), json::array());
    t.expires_at = s.i64(11);
    t.owner = s.text(12);
    t.intent = s.text(13);
    t.error = s.text(14);
    t.usage = parse_or(s.raw(15), json::array());
    t.steps = static_cast<int>(s.i64(16));
    t.created_at = s.i64(17);
    t.updated_at = s.i64(18);
    out.push_back(std::move(t));
  }
  return out;
}

std::optional<TurnRecord> SqliteStore::get_turn(std::string_view turn_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto v = query_turns("SELECT " AGENTRT_TURN_COLS " FROM turns WHERE id=?", turn_id);
  if (v.empty()) return std::nullopt;
  return std::move(v.front());
}

std::optional<TurnRecord> SqliteStore::find_turn_by_client_message(std::string_view thread_id,
                                                                   std::string_view client_message_id) {
  if (client_message_id.empty()) return std::nullopt;
  std::lock_guard<std::mutex> lock(mutex_);
  auto v = query_turns("SELECT " AGENTRT_TURN_COLS " FROM turns WHERE thread_id=? AND client_message_id=?", thread_id,
                       client_message_id);
  if (v.empty()) return std::nullopt;
  return std::move(v.front());
}

std::optional<TurnRecord> SqliteStore::active_turn(std::string_view thread_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto v = query_turns("SELECT " AGENTRT_TURN_COLS " FROM turns WHERE thread_id=? AND " AGENTRT_ACTIVE, thread_id);
  if (v.empty()) return std::nullopt;
  return std::move(v.front());
}

std::optional<TurnRecord> SqliteStore::last_turn(std::string_view thread_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto v = query_turns("SELECT " AGENTRT_TURN_COLS
                       " FROM turns WHERE thread_id=? ORDER BY created_at DESC, rowid DESC LIMIT 1",
                       thread_id);
  if (v.empty()) return std::nullopt;
  return std::move(v.front());
}

std::vector<TurnRecord> SqliteStore::turns_expired(int64_t now) {
  std::lock_guard<std::mutex> lock(mutex_);
  // The partial index of active turns holds the waiting ones; only the overdue rows are read and parsed.
  auto s = stmt("SELECT " AGENTRT_TURN_COLS " FROM turns WHERE status='WAITING_APPROVAL' AND " AGENTRT_ACTIVE
                " AND expires_at > 0 AND expires_at <= ? "
                "ORDER BY created_at");
  s.bind(1, now);
  return read_turns(s);
}

std::vector<TurnRecord> SqliteStore::turns_in_status(TurnStatus status) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!is_terminal(status))  // the active turns: a scan of the small partial index, not of every turn
    return query_turns("SELECT " AGENTRT_TURN_COLS " FROM turns WHERE status=? AND " AGENTRT_ACTIVE
                       " ORDER BY created_at",
                       to_string(status));
  return query_turns("SELECT " AGENTRT_TURN_COLS " FROM turns WHERE status=? ORDER BY created_at", to_string(status));
}

std::vector<MessageRecord> SqliteStore::messages(std::string_view thread_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto s = stmt("SELECT idx,turn_id,run_id,body FROM messages WHERE thread_id=? ORDER BY idx");
  s.bind(1, thread_id);
  std::vector<MessageRecord> out;
  while (s.step()) {
    MessageRecord m;
    m.thread_id = std::string(thread_id);
    m.index = s.i64(0);
    m.turn_id = s.text(1);
    m.run_id = s.text(2);
    const char* body = reinterpret_cast<const char*>(s.raw(3));
    json j;
    try {
      j = parse_json(std::string_view(body, static_cast<size_t>(sqlite3_column_bytes(s.get(), 3))));
    } catch (const Error& e) {  // nested deeper than any message this build stores
      throw Error(ErrorCode::io,
                  fmt::format("thread {}: stored message {} is unreadable: {}", thread_id, m.index, e.message()));
    }
    // The metadata (a tool message's index, an answer's WorkerAgentOutput) is moved, not copied, out of
    // the parsed document; anything but an object stays for from_json to refuse as before.
    json metadata;
    if (auto it = j.find("metadata"); it != j.end() && it->is_object()) {
      metadata = std::move(*it);
      j.erase(it);
    }
    m.message = message_from_json(j, kMaxStoredJsonDepth);
    if (metadata.is_object()) m.message.metadata = std::move(metadata);
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<StoredEvent> SqliteStore::events_after(std::string_view thread_id, int64_t after_seq, size_t limit) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Start at the row that holds after_seq + 1, then split rows into events.
  auto s = stmt(
      "SELECT first_seq,run_id,body FROM events WHERE thread_id=?1 AND first_seq >= "
      "(SELECT coalesce(max(first_seq),0) FROM events WHERE thread_id=?1 AND first_seq <= ?2 + 1) ORDER BY first_seq");
  s.bind(1, thread_id).bind(2, after_seq);
  std::vector<StoredEvent> out;
  while (out.size() < limit && s.step()) {
    int64_t seq = s.i64(0);
    std::string run = s.text(1);
    const char* p = reinterpret_cast<const char*>(s.raw(2));
    std::string_view body = p ? std::string_view(p) : std::string_view();
    while (!body.empty() && out.size() < limit) {
      size_t nl = body.find('\n');
      std::string_view line = body.substr(0, nl);
      if (seq > after_seq) out.push_back(StoredEvent{seq, run, std::string(line)});
      ++seq;
      if (nl == std::string_view::npos) break;
      body.remove_prefix(nl + 1);
    }
  }
  return out;
}

std::vector<LedgerEntry> SqliteStore::ledger(std::string_view turn_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto s = stmt(
      "SELECT turn_id,tool_call_id,thread_id,run_id,tool_name,stage,ordinal,arguments,status,needs_approval,"
      "idempotent,interrupt_id,decision,output,updated_at FROM ledger WHERE turn_id=? ORDER BY run_id, ordinal");
  s.bind(1, turn_id);
  std::vector<LedgerEntry> out;
  while (s.step()) {
    LedgerEntry l;
    l.turn_id = s.text(0);
    l.tool_call_id = s.text(1);
    l.thread_id = s.text(2);
    l.run_id = s.text(3);
    l.tool_name = s.text(4);
    l.stage = s.text(5);
    l.ordinal = static_cast<int>(s.i64(6));
    l.arguments = s.text(7);
    l.status = ledger_status_from_string(s.text(8));
    l.needs_approval = s.i64(9) != 0;
    l.idempotent = s.i64(10) != 0;
    l.interrupt_id = s.text(11);
    l.decision = parse_or(s.raw(12), nullptr);
    l.output = s.text(13);
    l.updated_at = s.i64(14);
    out.push_back(std::move(l));
  }
  return out;
}

std::optional<ApprovalRecord> SqliteStore::get_approval(std::string_view id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto s = stmt("SELECT id,turn_id,thread_id,decisions,answer,created_at FROM approvals WHERE id=?");
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return ApprovalRecord{
      s.text(0), s.text(1), s.text(2), parse_or(s.raw(3), json::array()), parse_or(s.raw(4), json::object()), s.i64(5)};
}

void SqliteStore::heartbeat(std::string_view instance_id, int64_t now) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto s = stmt(
      "INSERT INTO instances(id,heartbeat) VALUES(?,?) ON CONFLICT(id) DO UPDATE SET heartbeat=excluded.heartbeat");
  s.bind(1, instance_id).bind(2, now).run();
  write_txns_.fetch_add(1, std::memory_order_relaxed);
}

void SqliteStore::remove_instance(std::string_view instance_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  stmt("DELETE FROM instances WHERE id=?").bind(1, instance_id).run();
  write_txns_.fetch_add(1, std::memory_order_relaxed);
}

std::optional<int64_t> SqliteStore::instance_heartbeat(std::string_view instance_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto s = stmt("SELECT heartbeat FROM instances WHERE id=?");
  s.bind(1, instance_id);
  if (!s.step()) return std::nullopt;
  return s.i64(0);
}

// ------------------------------------------------------------------------------------------------- jobs

void SqliteStore::require_idle(std::string_view thread_id) {
  auto q = stmt("SELECT id FROM turns WHERE thread_id=? AND " AGENTRT_ACTIVE " AND status<>'WAITING_APPROVAL'");
  q.bind(1, thread_id);
  if (q.step())
    throw Error(ErrorCode::conflict, fmt::format("thread {} has a run open (turn {})", thread_id, q.text(0)));
}

void SqliteStore::write_job(JobWrite& w, int64_t now) {
  JobRecord& j = w.job;
  j.updated_at = now;
  if (j.created_at == 0) j.created_at = now;
  const std::string result = j.result.is_null() ? std::string() : dump(j.result);
  if (w.expected_version < 0) {
    j.version = 0;
    auto ins = stmt(
        "INSERT INTO jobs(id,thread_id,turn_id,run_id,tool_call_id,tool_name,user_id,status,progress,message,result,"
        "assets,error_code,error_message,metadata,confirmation,confirm_message,timeout_ms,expires_at,delivered,"
        "version,created_at,updated_at,finished_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,0,?,?,?)");
    ins.bind(1, j.id).bind(2, j.thread_id).bind(3, j.turn_id).bind(4, j.run_id).bind(5, j.tool_call_id);
    ins.bind(6, j.tool_name).bind(7, j.user_id).bind(8, to_string(j.status)).bind(9, j.progress).bind(10, j.message);
    ins.bind(11, result).bind(12, dump(j.assets)).bind(13, j.error_code).bind(14, j.error_message);
    ins.bind(15, dump(j.metadata)).bind(16, to_string(j.confirmation)).bind(17, j.confirm_message);
    ins.bind(18, j.timeout_ms).bind(19, j.expires_at).bind(20, j.delivered).bind(21, j.created_at);
    ins.bind(22, j.updated_at).bind(23, j.finished_at);
    ins.run();  // a repeated id violates the primary key: conflict
    return;
  }
  auto up = stmt(
      "UPDATE jobs SET status=?,progress=?,message=?,result=?,assets=?,error_code=?,error_message=?,metadata=?,"
      "confirmation=?,confirm_message=?,timeout_ms=?,expires_at=?,delivered=?,version=version+1,updated_at=?,"
      "finished_at=? WHERE id=? AND version=?");
  up.bind(1, to_string(j.status)).bind(2, j.progress).bind(3, j.message).bind(4, result).bind(5, dump(j.assets));
  up.bind(6, j.error_code).bind(7, j.error_message).bind(8, dump(j.metadata)).bind(9, to_string(j.confirmation));
  up.bind(10, j.confirm_message).bind(11, j.timeout_ms).bind(12, j.expires_at).bind(13, j.delivered);
  up.bind(14, j.updated_at).bind(15, j.finished_at).bind(16, j.id).bind(17, w.expected_version);
  up.run();
  if (sqlite3_changes(db_) == 0)
    throw Error(ErrorCode::conflict,
                fmt::format("job {} changed concurrently (expected version {})", j.id, w.expected_version));
  j.version = w.expected_version + 1;
}

#define AGENTRT_JOB_COLS                                                                                    \
  "id,thread_id,turn_id,run_id,tool_call_id,tool_name,user_id,status,progress,message,result,assets,"       \
  "error_code,error_message,metadata,confirmation,confirm_message,timeout_ms,expires_at,delivered,version," \
  "created_at,updated_at,finished_at"

std::vector<JobRecord> SqliteStore::read_jobs(Statement& s) {
  std::vector<JobRecord> out;
  while (s.step()) {
    JobRecord j;
    j.id = s.text(0);
    j.thread_id = s.text(1);
    j.turn_id = s.text(2);
    j.run_id = s.text(3);
    j.tool_call_id = s.text(4);
    j.tool_name = s.text(5);
    j.user_id = s.text(6);
    j.status = job_status_from_string(s.text(7));
    j.progress = s.f64(8);
    j.message = s.text(9);
    j.result = parse_or(s.raw(10), nullptr);
    j.assets = parse_or(s.raw(11), json::array());
    j.error_code = s.text(12);
    j.error_message = s.text(13);
    j.metadata = parse_or(s.raw(14), json::object());
    j.confirmation = job_confirmation_from_string(s.text(15));
    j.confirm_message = s.text(16);
    j.timeout_ms = s.i64(17);
    j.expires_at = s.i64(18);
    j.delivered = s.i64(19) != 0;
    j.version = s.i64(20);
    j.created_at = s.i64(21);
    j.updated_at = s.i64(22);
    j.finished_at = s.i64(23);
    out.push_back(std::move(j));
  }
  return out;
}

std::optional<JobRecord> SqliteStore::get_job(std::string_view job_id) {
  if (job_id.empty()) return std::nullopt;
  std::lock_guard<std::mutex> lock(mutex_);
  auto s = stmt("SELECT " AGENTRT_JOB_COLS " FROM jobs WHERE id=?");
  s.bind(1, job_id);
  auto v = read_jobs(s);
  if (v.empty()) return std::nullopt;
  return std::move(v.front());
}

std::vector<JobRecord> SqliteStore::thread_jobs(std::string_view thread_id) {
  if (thread_id.empty()) return {};
  std::lock_guard<std::mutex> lock(mutex_);
  auto s = stmt("SELECT " AGENTRT_JOB_COLS " FROM jobs WHERE thread_id=? ORDER BY created_at, rowid");
  s.bind(1, thread_id);
  return read_jobs(s);
}

std::vector<JobRecord> SqliteStore::jobs_due(int64_t now) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto s = stmt("SELECT " AGENTRT_JOB_COLS
                " FROM jobs WHERE delivered=0 AND "
                "(status IN ('succeeded','failed','cancelled') OR "
                "(expires_at > 0 AND expires_at <= ?1 AND confirmation <> 'pending')) ORDER BY created_at");
  s.bind(1, now);
  return read_jobs(s);
}

int64_t SqliteStore::external_version() {
  std::lock_guard<std::mutex> lock(mutex_);
  auto s = stmt("PRAGMA data_version");
  return s.step() ? s.i64(0) : -1;
}

void SqliteStore::checkpoint() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::unique_lock<std::mutex> idle;  // a background checkpoint would make this one give up
  if (checkpointer_) idle = std::unique_lock<std::mutex>(checkpointer_->running);
  exec("PRAGMA wal_checkpoint(TRUNCATE)");
}

}  // namespace v1
}  // namespace agentrt
