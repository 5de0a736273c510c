// The PostgreSQL store: opening, and the commit of a batch (events with the rows they change, in one transaction
// that holds the thread's tail row).
#include "store/postgres/postgres_store.hpp"

#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "agentrt/clock.hpp"
#include "store/postgres/connection.hpp"
#include "store/postgres/listener.hpp"
#include "store/postgres/pool.hpp"
#include "store/record_rows.hpp"

namespace agentrt {
inline namespace v1 {

using namespace pg;
using store_rows::dump;

PostgresStore::PostgresStore(PostgresStoreOptions options, std::unique_ptr<MessageLayout> messages)
    : options_(std::move(options)), layout_(std::move(messages)) {
  check_url(options_.url, "postgres store");
  if (options_.pool_size < 1 || options_.pool_size > 64)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("postgres store: pool_size must be between 1 and 64, not {}", options_.pool_size));
  if (options_.connect_timeout_s < 1) options_.connect_timeout_s = 1;
  target_ = describe_target(options_.url);
  pool_ = std::make_unique<Pool>(options_.url, target_, options_.pool_size, options_.connect_timeout_s);
  listener_ = std::make_unique<Listener>(options_.url, target_, options_.connect_timeout_s);
  migrate();
}

PostgresStore::~PostgresStore() = default;

void PostgresStore::commit(CommitBatch& b) {
  if (b.empty()) return;
  if (!layout_) return commit_rows(b);
  layout_->commit(*this, b, [this](CommitBatch& rest) { commit_rows(rest); });
}

int64_t PostgresStore::write_transactions() const {
  return write_txns_.load(std::memory_order_relaxed) + (layout_ ? layout_->write_transactions() : 0);
}

int64_t PostgresStore::external_version() {
  return listener_->version([this](int pid) { return pool_->owns_backend(pid); });
}

bool PostgresStore::wait_external(std::chrono::milliseconds timeout) { return listener_->wait(timeout); }

void PostgresStore::wake_external() { listener_->interrupt(); }

void PostgresStore::commit_rows(CommitBatch& b) {
  if (b.empty()) return;  // a layout took all there was (messages alone)
  // A retry (a pooled connection found closed) starts over: everything written into the batch is written again.
  pool_->with([&](Connection& c) { transact(c, b); });
  write_txns_.fetch_add(1, std::memory_order_relaxed);
}

namespace {
constexpr size_t kKnownTails = 4096;
}  // namespace

std::optional<ThreadTail> PostgresStore::known_tail(const std::string& thread_id) {
  std::lock_guard lock(tails_mutex_);
  auto it = tails_.find(thread_id);
  if (it == tails_.end()) return std::nullopt;
  return it->second;
}

void PostgresStore::remember_tail(const std::string& thread_id, const ThreadTail* tail) {
  std::lock_guard lock(tails_mutex_);
  if (!tail) {
    tails_.erase(thread_id);
    return;
  }
  if (tails_.size() >= kKnownTails && !tails_.count(thread_id)) tails_.clear();
  tails_[thread_id] = ThreadTail{tail->last_seq, tail->last_idx, {}};
}

void PostgresStore::transact(Connection& c, CommitBatch& b) {
  // A thread this store committed to last is usually where it left it (one process runs a thread at a time):
  // two round trips (the lock with the rows, the commit). Otherwise three (the lock, the rows, the commit).
  if (auto guess = known_tail(b.thread_id); guess && transact_once(c, b, &*guess)) return;
  transact_once(c, b, nullptr);
}

bool PostgresStore::transact_once(Connection& c, CommitBatch& b, const ThreadTail* guess) {
  bool committing = false;
  try {
    const int64_t now = now_ms();
    const auto n_events = static_cast<int64_t>(b.events.size());
    const auto n_messages = static_cast<int64_t>(b.messages.size());
    ThreadTail tail;
    Pipeline p(c);
    p.add("BEGIN", Params(), "begin a commit");
    // First, in every commit: the thread's tail row, locked until the end of this transaction. Commits of one
    // thread (in any process) take their turn here, so what they check below (an active turn, a deleted thread,
    // a run open) holds until they commit, and their sequence numbers follow each other without gaps.
    lock_thread(p, b.thread_id, n_events, n_messages, tail);
    if (b.require_idle) require_idle(p, b.thread_id);
    if (!guess) p.run();  // the rows are numbered from the tail the lock returns
    const int64_t last_seq = guess ? guess->last_seq : tail.last_seq - n_events;
    const int64_t last_idx = guess ? guess->last_idx : tail.last_idx - n_messages;
    if (b.create_thread) create_thread(p, c, *b.create_thread, now);
    if (b.thread_state)
      p.add(
          "INSERT INTO thread_states(thread_id,state) VALUES($1,$2) ON CONFLICT(thread_id) DO UPDATE SET "
          "state=EXCLUDED.state",
          Params().add(b.thread_id).add(*b.thread_state), "write the thread's state");
    if (b.turn) write_turn(p, b, now);
    for (const auto& row : store_rows::event_rows(b.events, last_seq))
      p.add("INSERT INTO events(thread_id,first_seq,last_seq,run_id,body) VALUES($1,$2,$3,$4,$5)",
            Params().add(b.thread_id).add(row.first_seq).add(row.last_seq).add(row.run_id).add(row.body),
            "append events");
    int64_t idx = last_idx;
    for (auto& m : b.messages) {
      m.index = ++idx;
      m.thread_id = b.thread_id;
      p.add("INSERT INTO messages(thread_id,idx,turn_id,run_id,body) VALUES($1,$2,$3,$4,$5)",
            Params().add(b.thread_id).add(m.index).add(m.turn_id).add(m.run_id).add(to_json_string(m.message)),
            "append a message");
    }
    for (auto& l : b.ledger) write_ledger(p, l, now);
    if (b.approval) {
      auto& a = *b.approval;
      if (a.created_at == 0) a.created_at = now;
      p.add("INSERT INTO approvals(id,turn_id,thread_id,decisions,answer,created_at) VALUES($1,$2,$3,$4,$5,$6)",
            Params()
                .add(a.approval_request_id)
                .add(a.turn_id)
                .add(a.thread_id)
                .add(dump(a.decisions))
                .add(dump(a.answer))
                .add(a.created_at),
            "record an approval");
    }
    for (auto& j : b.jobs) write_job(p, j, now);
    p.run();
    if (tail.last_seq - n_events != last_seq || tail.last_idx - n_messages != last_idx) {
      c.rollback();  // a guess, and another commit came between: numbered wrong
      remember_tail(b.thread_id, nullptr);
      return false;
    }
    committing = true;  // from here, never tried again: the COMMIT may have landed
    finish_commit(c, tail.xid);
    remember_tail(b.thread_id, &tail);
    return true;
  } catch (const Error& e) {
    c.rollback();
    remember_tail(b.thread_id, nullptr);
    // With a guess, an error may come of it (a sequence number taken): the attempt without one tells.
    if (guess && !committing && !c.broken()) return false;
    if (e.code() == ErrorCode::conflict && !c.broken()) explain_conflict(c, b, e);
    throw;
  } catch (...) {
    c.rollback();
    remember_tail(b.thread_id, nullptr);
    throw;
  }
}

void PostgresStore::lock_thread(Pipeline& p, std::string_view thread_id, int64_t events, int64_t messages,
                                ThreadTail& tail) {
  // The insert makes the row of a thread's first commit; ON CONFLICT updates (and so locks) it. A commit with
  // events also notifies listeners (pg::Listener; delivered when it commits) of the thread's new last seq.
#define AGENTRT_PG_TAIL                                                                                        \
  "WITH t AS (INSERT INTO thread_tails(thread_id,last_seq,last_idx) VALUES($1::text,$2::bigint,$3::bigint-1) " \
  "ON CONFLICT(thread_id) DO UPDATE SET last_seq=thread_tails.last_seq+EXCLUDED.last_seq,"                     \
  "last_idx=thread_tails.last_idx+EXCLUDED.last_idx+1 RETURNING last_seq,last_idx) "                           \
  "SELECT last_seq,last_idx,pg_current_xact_id()::text"
  Params params;
  params.add(thread_id).add(events).add(messages);
  auto read = [&tail](const Result& r) { tail = ThreadTail{r.row(0).i64(0), r.row(0).i64(1), r.row(0).text(2)}; };
  if (events > 0)
    p.add(AGENTRT_PG_TAIL ",pg_notify('agentrt_events',last_seq::text||' '||$1::text) FROM t", params,
          "lock the thread", read);
  else
    p.add(AGENTRT_PG_TAIL " FROM t", params, "lock the thread", read);
#undef AGENTRT_PG_TAIL
  static_assert(std::string_view(kEventsChannel) == "agentrt_events");
}

void PostgresStore::create_thread(Pipeline& p, Connection& c, const ThreadRecord& t, int64_t now) {
  p.add(
      "INSERT INTO threads(id,user_id,title,deleted,created_at,updated_at) VALUES($1,$2,$3,false,$4,$4) "
      "ON CONFLICT(id) DO UPDATE SET updated_at=EXCLUDED.updated_at "
      "WHERE threads.user_id=EXCLUDED.user_id AND NOT threads.deleted",
      Params().add(t.id).add(t.user_id).add(t.title).add(now), "create the thread",
      [&c, id = t.id, user = t.user_id](const Result& up) {
        if (up.affected() > 0) return;
        // In this transaction, after the thread's lock: a delete that committed before it is seen, none can come
        // between.
        Result who = c.exec("SELECT user_id FROM threads WHERE id=$1", Params().add(id), "read the thread's owner");
        const bool mine = who.rows() > 0 && who.row(0).text(0) == user;
        throw Error(ErrorCode::conflict, mine ? fmt::format("thread {} was deleted", id)
                                              : fmt::format("thread {} belongs to another user", id));
      });
}

void PostgresStore::write_turn(Pipeline& pipe, CommitBatch& b, int64_t now) {
  auto& t = *b.turn;
  t.updated_at = now;
  // What an insert and an update both write, as $1..$15.
  Params p;
  p.add(to_string(t.status)).add(t.run_id).add(t.parent_run_id).add(t.stage).add(t.approval_request_id);
  p.add(dump(t.interrupts)).add(t.expires_at).add(t.owner).add(t.intent).add(t.error).add(dump(t.usage));
  p.add(t.steps).add(now).add(t.id).add(t.trace);
  if (b.expected_version >= 0) {
    p.add(b.expected_version);
    swap_version(pipe,
                 "UPDATE turns SET status=$1,run_id=$2,parent_run_id=$3,stage=$4,approval_request_id=$5,"
                 "interrupts=$6,expires_at=$7,owner=$8,intent=$9,error=$10,usage=$11,steps=$12,"
                 "updated_at=$13,trace=$15,version=version+1 WHERE id=$14 AND version=$16",
                 p, "turn", t.id, b.expected_version, t.version);
    return;
  }
  t.version = 0;
  if (t.created_at == 0) t.created_at = now;
  // A turn inserted already ended (a run that commits once, at its end) is outside the partial index: it still
  // may not land beside another active turn (the thread's lock makes this check hold until the commit).
  if (is_terminal(t.status))
    pipe.add("SELECT id FROM turns WHERE thread_id=$1 AND " AGENTRT_ACTIVE, Params().add(t.thread_id),
             "look for an active turn", [thread = t.thread_id](const Result& act) {
               if (act.rows() > 0)
                 throw Error(ErrorCode::conflict,
                             fmt::format("thread {} already has an active turn ({})", thread, act.row(0).text(0)));
             });
  p.add(t.thread_id).add(t.user_id).add(t.client_message_id).add(t.created_at);
  pipe.add(
      "INSERT INTO turns(status,run_id,parent_run_id,stage,approval_request_id,interrupts,expires_at,owner,intent,"
      "error,usage,steps,updated_at,id,trace,thread_id,user_id,client_message_id,created_at,version) "
      "VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,0)",
      p, "insert the turn");
}

void PostgresStore::write_ledger(Pipeline& p, LedgerEntry& l, int64_t now) {
  l.updated_at = now;
  p.add(
      "INSERT INTO ledger(turn_id,tool_call_id,thread_id,run_id,tool_name,stage,ordinal,arguments,status,"
      "needs_approval,idempotent,interrupt_id,decision,output,updated_at,client) "
      "VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16) ON CONFLICT(turn_id,tool_call_id) DO UPDATE SET "
      "run_id=EXCLUDED.run_id,arguments=EXCLUDED.arguments,status=EXCLUDED.status,"
      "needs_approval=EXCLUDED.needs_approval,idempotent=EXCLUDED.idempotent,interrupt_id=EXCLUDED.interrupt_id,"
      "decision=EXCLUDED.decision,output=EXCLUDED.output,updated_at=EXCLUDED.updated_at",
      Params()
          .add(l.turn_id)
          .add(l.tool_call_id)
          .add(l.thread_id)
          .add(l.run_id)
          .add(l.tool_name)
          .add(l.stage)
          .add(l.ordinal)
          .add(l.arguments)
          .add(to_string(l.status))
          .add(l.needs_approval)
          .add(l.idempotent)
          .add(l.interrupt_id)
          .add(l.decision.is_null() ? std::string() : dump(l.decision))
          .add(l.output)
          .add(l.updated_at)
          .add(l.client),
      "record a tool call");
}

void PostgresStore::finish_commit(Connection& c, const std::string& xid) {
  try {
    c.run("COMMIT", "commit");
    return;
  } catch (const DbError& e) {
    if (!e.lost()) throw;
    // The connection went while COMMIT was on its way: the transaction may have committed or not. Ask the server
    // (on a new connection) instead of guessing: a retry of a batch that did commit would write it twice.
    std::string status;
    try {
      // A connection of its own: the pool may have no other to lend while this caller holds the lost one.
      Connection probe(options_.url, target_, options_.connect_timeout_s);
      // "in progress" while the server has not yet noticed the lost client (its backend ends the transaction
      // one way or the other as it goes): asked again for a while.
      for (int i = 0; i < 40 && (status.empty() || status == "in progress"); ++i) {
        if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(25));
        status = probe.exec("SELECT pg_xact_status($1::text::xid8)", Params().add(xid), "ask whether a commit landed")
                     .row(0)
                     .text(0);
      }
    } catch (const Error&) {
      // The server cannot be asked: the outcome stays unknown.
    }
    if (status == "committed") return;
    if (status == "aborted") throw Error(ErrorCode::io, e.message() + " (the commit was rolled back)");
    throw Error(ErrorCode::io, e.message() + " (whether the commit landed cannot be told)");
  }
}

void PostgresStore::explain_conflict(Connection& c, const CommitBatch& b, const Error& e) {
  const auto* db = dynamic_cast<const DbError*>(&e);
  const std::string constraint = db ? db->constraint : "";
  // Names the row the constraint found (after the rollback); "?" when even that read fails.
  auto read_id = [&](const char* sql, const Params& p, const char* what) {
    try {
      Result r = c.exec(sql, p, what);
      return r.rows() > 0 ? r.row(0).text(0) : std::string("?");
    } catch (const Error&) {
      return std::string("?");
    }
  };
  if (b.turn && constraint == "turns_one_active")
    throw Error(ErrorCode::conflict, fmt::format("thread {} already has an active turn ({})", b.turn->thread_id,
                                                 read_id("SELECT id FROM turns WHERE thread_id=$1 AND " AGENTRT_ACTIVE,
                                                         Params().add(b.turn->thread_id), "look for an active turn")));
  if (b.turn && constraint == "turns_by_client_message")
    throw Error(ErrorCode::conflict,
                fmt::format("thread {}: client message {} already started turn {}", b.turn->thread_id,
                            b.turn->client_message_id,
                            read_id("SELECT id FROM turns WHERE thread_id=$1 AND client_message_id=$2",
                                    Params().add(b.turn->thread_id).add(b.turn->client_message_id),
                                    "look for the turn of a client message")));
  if (b.turn && constraint == "turns_pkey")
    throw Error(ErrorCode::conflict, fmt::format("turn {} already exists", b.turn->id));
  if (b.approval && constraint == "approvals_pkey")
    throw Error(ErrorCode::conflict,
                fmt::format("approval request {} was already answered", b.approval->approval_request_id));
  if (constraint == "jobs_pkey") throw Error(ErrorCode::conflict, "a job with this id already exists");
  throw e;
}

}  // namespace v1
}  // namespace agentrt
