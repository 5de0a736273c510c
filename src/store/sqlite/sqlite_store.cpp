// The SQLite store: opening, write transactions and the commit of a batch (events with the rows they
// change, in one transaction).
#include "store/sqlite_store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <exception>

#include "agentrt/clock.hpp"
#include "agentrt/events.hpp"
#include "store/sqlite/checkpointer.hpp"
#include "store/sqlite/connection.hpp"
#include "store/sqlite/event_body.hpp"
#include "store/sqlite/message_body.hpp"
#include "store/sqlite/rows.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

// The database holds every user's conversations: a new file is created readable by its owner only (SQLite
// gives its -wal and -shm files the database file's permissions).
void create_private_file(const std::string& path) {
  if (path.empty() || path == ":memory:" || path.rfind("file:", 0) == 0) return;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) ::close(fd);  // EEXIST: an existing file keeps the permissions it has
}

}  // namespace

using namespace sqlite;

SqliteStore::SqliteStore(SqliteStoreOptions options, std::unique_ptr<MessageLayout> messages)
    : options_(std::move(options)), layout_(std::move(messages)) {
  if (options_.synchronous != "NORMAL" && options_.synchronous != "FULL" && options_.synchronous != "OFF")
    throw Error(ErrorCode::invalid_argument,
                fmt::format("sqlite: synchronous must be NORMAL, FULL or OFF, not '{}'", options_.synchronous));
  create_private_file(options_.path);
  db_ = std::make_unique<Connection>(options_.path, options_.busy_timeout_ms, true, options_.vfs);
  {
    // The readers take a stored text's bytes as they lie in the row (Statement::bytes): UTF-8 only, which
    // every file this store made is. A file made UTF-16 elsewhere is refused rather than read as bytes.
    // (Read as text, converted: in a UTF-16 database the pragma's answer is UTF-16 too.)
    auto encoding = db_->stmt("PRAGMA encoding");
    const std::string name = encoding.step() ? reinterpret_cast<const char*>(encoding.raw(0)) : "UTF-8";
    if (name != "UTF-8")
      throw Error(ErrorCode::unsupported,
                  fmt::format("sqlite: '{}' is a {} database; the store needs UTF-8", options_.path, name));
  }
  db_->exec("PRAGMA journal_mode=WAL");
  db_->exec(fmt::format("PRAGMA synchronous={}", options_.synchronous).c_str());
  db_->exec("PRAGMA foreign_keys=OFF");
  db_->exec(fmt::format("PRAGMA wal_autocheckpoint={}", options_.wal_autocheckpoint).c_str());
  db_->exec("PRAGMA temp_store=MEMORY");
  migrate();
  // The reads every turn makes (a history, a waiting turn's snapshot), run once on an id no row has: their
  // statements are compiled here, not in the first turn's time (a first history read took ~0.1 ms more).
  if (!layout_) warm_reads(*db_);
  const char* file = sqlite3_db_filename(db_->get(), "main");
  readers_allowed_ = file && *file;
  if (readers_allowed_) file_ = file;
  if (readers_allowed_) {
    // One reader from the start, its statements compiled: the first read that finds the connection held does not
    // pay for opening one (about a millisecond, a dozen reads of the file).
    readers_open_ = 1;
    if (auto r = open_reader()) idle_readers_.push_back(std::move(r));
  }
  if (options_.wal_autocheckpoint > 0 && file && *file) {
    try {
      checkpointer_ = std::make_unique<Checkpointer>(file, options_);
      sqlite3_wal_hook(db_->get(), &Checkpointer::wal_hook, checkpointer_.get());  // in place of the automatic one
    } catch (const std::exception&) {
      // No second connection or thread (a read-only directory, no file handles left): SQLite's automatic
      // checkpoint, set above, stays in place.
      checkpointer_.reset();
    }
  }
}

SqliteStore::~SqliteStore() = default;

Statement SqliteStore::stmt(const char* sql) { return db_->stmt(sql); }

// The reads every turn makes (a history, a waiting turn's snapshot), run once on an id no row has: their
// statements are compiled when a connection opens, not in the first read's time (a first history read took
// ~0.1 ms more).
void SqliteStore::warm_reads(Connection& c) {
  for (bool known : {false, true}) {  // a thread's messages by its span looked up, then by its span known
    if (known) remember_span("", 0);  // rowids 0 .. 2^24 - 1: no thread's (spans start at 1)
    read_messages(c, "");
    read_thread_messages(c, "");
  }
  {
    std::lock_guard<std::mutex> lock(spans_mutex_);
    spans_.erase(std::string());
  }
  read_turn_row(c, "");
  read_ledger(c, "");
  read_thread_state(c, "");
}

SqliteStore::Read::Read(SqliteStore& s) : s_(s), main_(s.mutex_, std::try_to_lock) {
  if (main_.owns_lock()) {
    c_ = s.db_.get();
    return;
  }
  bool open = false;
  {
    std::lock_guard<std::mutex> lock(s.readers_mutex_);
    if (!s.idle_readers_.empty()) {
      reader_ = std::move(s.idle_readers_.back());
      s.idle_readers_.pop_back();
    } else if (s.readers_allowed_ && s.readers_open_ < kMaxReaders) {
      ++s.readers_open_;
      open = true;
    }
  }
  if (open) reader_ = s.open_reader();
  if (reader_) {
    c_ = reader_.get();
    s.reader_reads_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  main_.lock();
  c_ = s.db_.get();
}

std::unique_ptr<Connection> SqliteStore::open_reader() {
  try {
    auto c = std::make_unique<Connection>(file_, options_.busy_timeout_ms, false, options_.vfs);
    c->exec("PRAGMA query_only=1");
    c->exec("PRAGMA temp_store=MEMORY");
    if (!layout_) warm_reads(*c);
    return c;
  } catch (const std::exception&) {
    std::lock_guard<std::mutex> lock(readers_mutex_);
    --readers_open_;
    readers_allowed_ = false;  // no file handles left, or no access: the store's own connection serves
    return nullptr;
  }
}

size_t SqliteStore::readers_open() {
  std::lock_guard<std::mutex> lock(readers_mutex_);
  return readers_open_;
}

int64_t SqliteStore::reader_reads() const { return reader_reads_.load(std::memory_order_relaxed); }

int64_t SqliteStore::wal_writebacks() const {
  return checkpointer_ ? checkpointer_->writebacks.load(std::memory_order_relaxed) : 0;
}

SqliteStore::Read::~Read() {
  if (!reader_) return;
  std::lock_guard<std::mutex> lock(s_.readers_mutex_);
  s_.idle_readers_.push_back(std::move(reader_));
}

void SqliteStore::begin_write() {
  stmt("BEGIN IMMEDIATE").run();
  // The pager's data version moves with every commit, ours and other connections'. Unchanged since our
  // last commit: nobody else wrote, and what we remember of the threads' tails still holds.
  if (db_->data_version() != data_version_) {
    tails_.clear();
    next_span_ = 0;
  }
}

void SqliteStore::end_write(bool commit) {
  if (commit) {
    stmt("COMMIT").run();
    data_version_ = db_->data_version();  // our commit only: the write lock was ours until now
    write_txns_.fetch_add(1, std::memory_order_relaxed);
  } else {
    db_->rollback();
  }
}

void SqliteStore::commit(CommitBatch& b) {
  if (b.empty()) return;
  if (!layout_) return commit_rows(b);
  layout_->commit(*this, b, [this](CommitBatch& rest) { commit_rows(rest); });
}

int64_t SqliteStore::write_transactions() const {
  return write_txns_.load(std::memory_order_relaxed) + (layout_ ? layout_->write_transactions() : 0);
}

void SqliteStore::remember_tails(const Tails& written) {
  for (const auto& [thread, tail] : written) {
    if (tails_.size() >= kMaxTails) tails_.clear();
    tails_[thread] = tail;
    if (tail.base) remember_span(thread, *tail.base);
  }
}

// A span for a thread that has none, one past the highest any row uses: the caller writes the thread's first row in
// it before this transaction gives another thread one (a span no row uses yet is never left behind: the transaction
// ends with its row or not at all).
int64_t SqliteStore::new_span(std::string_view thread_id) {
  static_assert(kSpanMessages == 16777216 && std::string_view(AGENTRT_SPAN_SIZE) == "16777216" &&
                    std::string_view(AGENTRT_SPAN_LAST) == "16777215" && kSpanEvents == 4294967296 &&
                    std::string_view(AGENTRT_EVENT_SPAN_SIZE) == "4294967296" &&
                    std::string_view(AGENTRT_EVENT_SPAN_LAST) == "4294967295",
                "AGENTRT_*SPAN_SIZE and AGENTRT_*SPAN_LAST name the spans' sizes and last offsets");
  // The next span is read from the rows once, then counted here while nobody else writes (begin_write forgets it
  // when another connection has committed). A span given in a transaction or savepoint that is then rolled back
  // is skipped, not given again: spans need only be unique and past every row.
  int64_t base = next_span_;
  if (base == 0) {
    auto top = stmt("SELECT max(coalesce((SELECT max(id) FROM messages), 0) / " AGENTRT_SPAN_SIZE
                    ", coalesce((SELECT max(id) FROM events), 0) / " AGENTRT_EVENT_SPAN_SIZE
                    ", coalesce((SELECT max(span) FROM turns), 0)) + 1");
    base = top.step() ? top.i64(0) : 0;
  }
  if (base <= 0 || base > kMaxSpan)
    throw Error(ErrorCode::too_large, fmt::format("thread_spans: no span left for thread {}", thread_id));
  stmt("INSERT INTO thread_spans(thread_id, base) VALUES(?,?)").bind(1, thread_id).bind(2, base).run();
  next_span_ = base + 1;
  return base;
}

SqliteStore::Tail SqliteStore::write_rows(CommitBatch& b, const Tails& written) {
  const int64_t now = now_ms();
  if (b.require_idle) require_idle(b.thread_id);
  if (b.thread_state) {
    auto up = stmt(
        "INSERT INTO thread_states(thread_id,state) VALUES(?,?) ON CONFLICT(thread_id) DO UPDATE SET "
        "state=excluded.state");
    up.bind(1, b.thread_id).bind(2, *b.thread_state).run();
  }
  if (b.create_thread) {
    const auto& t = *b.create_thread;
    auto ins = stmt(
        "INSERT INTO threads(id,user_id,title,deleted,created_at,updated_at) VALUES(?,?,?,0,?,?) "
        "ON CONFLICT(id) DO UPDATE SET updated_at=excluded.updated_at "
        "WHERE threads.user_id=excluded.user_id AND threads.deleted=0");
    ins.bind(1, t.id).bind(2, t.user_id).bind(3, t.title).bind(4, now).bind(5, now).run();
    if (db_->changes() == 0) {
      // In this transaction: a delete that committed before it is seen, and none can come between.
      auto who = stmt("SELECT user_id FROM threads WHERE id=?");
      who.bind(1, t.id);
      const bool mine = who.step() && who.text(0) == t.user_id;
      throw Error(ErrorCode::conflict, mine ? fmt::format("thread {} was deleted", t.id)
                                            : fmt::format("thread {} belongs to another user", t.id));
    }
  }
  // The thread's last event seq and message index: remembered from this connection's own commits while
  // no other connection has written (data version), else read.
  Tail tail;
  if (auto w = written.find(b.thread_id); w != written.end()) {
    tail = w->second;
  } else if (auto known = tails_.find(b.thread_id); known != tails_.end()) {
    tail = known->second;
  }
  // The thread's span, known, read, or given now (a new span holds no rows yet: nothing to read in it). A new turn's
  // row names its thread's span too (schema 14).
  const bool new_turn = b.turn && b.expected_version < 0;
  bool given = false;
  if (!tail.base && (!b.events.empty() || !b.messages.empty() || (new_turn && b.turn->thread_id == b.thread_id))) {
    tail.base = span_of(*db_, b.thread_id);
    if (!tail.base) {
      tail.base = new_span(b.thread_id);
      given = true;
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
      // Its thread's span: the batch's (above), or, for a turn of another thread, that one's.
      int64_t span = 0;
      if (t.thread_id == b.thread_id) {
        span = *tail.base;
      } else if (auto known = span_of(*db_, t.thread_id)) {
        span = *known;
      } else {
        span = new_span(t.thread_id);
      }
      auto ins = stmt(
          "INSERT INTO turns(id,thread_id,user_id,status,version,client_message_id,run_id,parent_run_id,stage,"
          "approval_request_id,expires_at,owner,intent,error,usage,steps,created_at,updated_at,active,span) "
          "VALUES(?,?,?,?,0,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
      ins.bind(1, t.id).bind(2, t.thread_id).bind(3, t.user_id).bind(4, to_string(t.status));
      ins.bind(5, t.client_message_id).bind(6, t.run_id).bind(7, t.parent_run_id).bind(8, t.stage);
      ins.bind(9, t.approval_request_id).bind(10, t.expires_at).bind(11, t.owner);
      ins.bind(12, t.intent).bind(13, t.error).bind(14, dump(t.usage)).bind(15, t.steps);
      ins.bind(16, t.created_at).bind(17, t.updated_at).bind(18, !is_terminal(t.status)).bind(19, span);
      try {
        ins.run();
      } catch (const Error& e) {
        // The unique indexes refused it (a repeated client message id, a second active turn): say which.
        if (e.code() != ErrorCode::conflict) throw;
        if (!t.client_message_id.empty()) {
          auto dup = stmt("SELECT id FROM turns WHERE span=? AND client_message_id=? AND thread_id=?");
          dup.bind(1, span).bind(2, t.client_message_id).bind(3, t.thread_id);
          if (dup.step())
            throw Error(ErrorCode::conflict, fmt::format("thread {}: client message {} already started turn {}",
                                                         t.thread_id, t.client_message_id, dup.text(0)));
        }
        refuse_beside_active();
        throw;
      }
    } else {
      // A move between two active statuses (or two ended ones) leaves `active`, and so the one-active
      // index, alone: the first form does not set it and matches only a row whose flag already holds. A
      // start or an end (or a version conflict) finds no such row; the second form sets the flag.
      const bool active = !is_terminal(t.status);
      auto bind_row = [&](Statement& up) {
        up.bind(1, to_string(t.status)).bind(2, t.run_id).bind(3, t.parent_run_id).bind(4, t.stage);
        up.bind(5, t.approval_request_id).bind(6, t.expires_at).bind(7, t.owner);
        up.bind(8, t.intent).bind(9, t.error).bind(10, dump(t.usage)).bind(11, t.steps).bind(12, now);
        up.bind(13, t.id).bind(14, b.expected_version).bind(15, active);
      };
      auto same = stmt(
          "UPDATE turns SET status=?1,version=version+1,run_id=?2,parent_run_id=?3,stage=?4,approval_request_id=?5,"
          "expires_at=?6,owner=?7,intent=?8,error=?9,usage=?10,steps=?11,updated_at=?12 "
          "WHERE id=?13 AND version=?14 AND active=?15");
      bind_row(same);
      same.run();
      if (db_->changes() == 0) {
        auto moved = stmt(
            "UPDATE turns SET status=?1,version=version+1,run_id=?2,parent_run_id=?3,stage=?4,"
            "approval_request_id=?5,expires_at=?6,owner=?7,intent=?8,error=?9,usage=?10,steps=?11,"
            "updated_at=?12,active=?15 WHERE id=?13 AND version=?14");
        bind_row(moved);
        moved.run();
        if (db_->changes() == 0)
          throw Error(ErrorCode::conflict,
                      fmt::format("turn {} changed concurrently (expected version {})", t.id, b.expected_version));
      }
      t.version = b.expected_version + 1;
    }
    // The wait's row: written while the turn has one, deleted once it has not (a new turn cannot have one yet).
    if (has_wait(t)) {
      auto w = stmt("INSERT OR REPLACE INTO turn_waits(turn_id,interrupts,trace) VALUES(?,?,?)");
      w.bind(1, t.id).bind(2, dump(t.interrupts)).bind(3, t.trace).run();
    } else if (b.expected_version >= 0) {
      stmt("DELETE FROM turn_waits WHERE turn_id=?").bind(1, t.id).run();
    }
  }
  if (!b.events.empty()) {
    const int64_t first = *tail.base * kSpanEvents;
    int64_t seq = 0;
    if (tail.seq) {
      seq = *tail.seq;
    } else if (!given) {
      auto q = stmt("SELECT last_seq FROM events WHERE id BETWEEN ?1 AND ?1 + " AGENTRT_EVENT_SPAN_LAST
                    " ORDER BY id DESC LIMIT 1");
      q.bind(1, first);
      if (q.step()) seq = q.i64(0);
    }
    if (seq + static_cast<int64_t>(b.events.size()) >= kSpanEvents)
      throw Error(ErrorCode::too_large,
                  fmt::format("thread {} cannot hold more than {} events", b.thread_id, kSpanEvents - 1));
    // A run's events of the commit are one row, packed (W1's to a third of their text): one statement a commit, and
    // rows small enough for several to share a page. A row is text only when packing does not shorten it (events
    // are JSON, whose keys repeat: only a fault in the encoder leaves one so).
    for (const auto& row : store_rows::event_rows(b.events, seq)) {
      auto ins = stmt("INSERT INTO events(id,thread_id,first_seq,last_seq,run_id,body) VALUES(?,?,?,?,?,?)");
      ins.bind(1, first + row.first_seq).bind(2, b.thread_id).bind(3, row.first_seq).bind(4, row.last_seq);
      ins.bind(5, row.run_id);
      if (const auto packed = packer_.pack(row.body)) {
        ins.bind_blob(6, *packed);
      } else {
        ins.bind(6, row.body);
      }
      ins.run();
      seq = row.last_seq;
    }
    tail.seq = seq;
    packer_.trim();
  }
  if (!b.messages.empty()) {
    const int64_t first = *tail.base * kSpanMessages;
    int64_t idx = -1;
    if (tail.idx) {
      idx = *tail.idx;
    } else if (!given) {
      // The last row's rowid holds the index of its last message (schema 13).
      auto q = stmt("SELECT id - ?1 FROM messages WHERE id BETWEEN ?1 AND ?1 + " AGENTRT_SPAN_LAST
                    " ORDER BY id DESC LIMIT 1");
      q.bind(1, first);
      if (q.step()) idx = q.i64(0);
    }
    if (idx + static_cast<int64_t>(b.messages.size()) >= kSpanMessages)
      throw Error(ErrorCode::too_large,
                  fmt::format("thread {} cannot hold more than {} messages", b.thread_id, kSpanMessages));
    // The consecutive messages of one run (and turn) are one row: its rowid the span plus its last message's index,
    // `idx` its first's (sqlite/message_body.hpp).
    for (size_t i = 0; i < b.messages.size();) {
      const size_t j = sqlite::row_end(b.messages, i);
      for (size_t k = i; k < j; ++k) {
        b.messages[k].index = ++idx;
        b.messages[k].thread_id = b.thread_id;
      }
      const MessageRecord& head = b.messages[i];
      auto ins = stmt("INSERT INTO messages(id,thread_id,idx,turn_id,run_id,body) VALUES(?,?,?,?,?,?)");
      ins.bind(1, first + idx).bind(2, b.thread_id).bind(3, head.index).bind(4, head.turn_id).bind(5, head.run_id);
      message_body_.clear();
      if (sqlite::pack_row(std::span<const MessageRecord>(b.messages).subspan(i, j - i), message_body_)) {
        ins.bind_blob(6, message_body_);
      } else {
        ins.bind(6, std::string_view(message_body_));
      }
      ins.run();
      i = j;
    }
    if (message_body_.capacity() > sqlite::EventPacker::kKeepBytes) std::string().swap(message_body_);
    tail.idx = idx;
  }
  for (auto& l : b.ledger) {
    l.updated_at = now;
    auto up = stmt(
        "INSERT INTO ledger(turn_id,tool_call_id,thread_id,run_id,tool_name,stage,ordinal,arguments,"
        "status,needs_approval,idempotent,interrupt_id,decision,output,updated_at,client) "
        "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(turn_id,tool_call_id) DO UPDATE SET "
        "run_id=excluded.run_id,arguments=excluded.arguments,status=excluded.status,"
        "needs_approval=excluded.needs_approval,idempotent=excluded.idempotent,interrupt_id=excluded.interrupt_id,"
        "decision=excluded.decision,output=excluded.output,updated_at=excluded.updated_at");
    up.bind(1, l.turn_id).bind(2, l.tool_call_id).bind(3, l.thread_id).bind(4, l.run_id).bind(5, l.tool_name);
    up.bind(6, l.stage).bind(7, l.ordinal).bind(8, l.arguments).bind(9, to_string(l.status));
    up.bind(10, l.needs_approval).bind(11, l.idempotent).bind(12, l.interrupt_id);
    up.bind(13, l.decision.is_null() ? std::string() : dump(l.decision));
    up.bind(14, l.output).bind(15, l.updated_at).bind(16, l.client);
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
  return tail;
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
  db_->exec("PRAGMA wal_checkpoint(TRUNCATE)");
}

}  // namespace v1
}  // namespace agentrt
