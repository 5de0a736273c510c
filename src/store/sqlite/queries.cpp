// The SQLite store's reads (threads, turns, messages, events, ledger, approvals, instances) and the
// thread writes outside a batch (title, soft delete).
#include <algorithm>

#include "agentrt/clock.hpp"
#include "store/record_rows.hpp"
#include "store/sqlite/connection.hpp"
#include "store/sqlite/event_body.hpp"
#include "store/sqlite/message_body.hpp"
#include "store/sqlite/rows.hpp"
#include "store/sqlite_store.hpp"

namespace agentrt {
inline namespace v1 {

using namespace sqlite;

std::optional<ThreadRecord> SqliteStore::get_thread(std::string_view thread_id) {
  Read r(*this);
  auto s = r.db().stmt("SELECT " AGENTRT_THREAD_COLS "," AGENTRT_THREAD_LAST_SEQ " FROM threads WHERE id=?");
  s.bind(1, thread_id);
  if (!s.step()) return std::nullopt;
  ThreadRecord t = read_thread(s);
  t.last_seq = s.i64(6);
  return t;
}

std::vector<ThreadRecord> SqliteStore::list_threads(std::string_view user_id, bool include_deleted) {
  Read r(*this);
  auto s = r.db().stmt("SELECT " AGENTRT_THREAD_COLS
                       " FROM threads WHERE user_id=? AND (deleted=0 OR ?) ORDER BY updated_at DESC, id");
  s.bind(1, user_id).bind(2, include_deleted);
  return read_rows(s, read_thread);
}

std::optional<std::string> SqliteStore::thread_state(std::string_view thread_id) {
  Read r(*this);
  return read_thread_state(r.db(), thread_id);
}

std::optional<std::string> SqliteStore::read_thread_state(Connection& c, std::string_view thread_id) {
  auto s = c.stmt("SELECT state FROM thread_states WHERE thread_id=?");
  s.bind(1, thread_id);
  if (!s.step()) return std::nullopt;
  return s.text(0);
}

void SqliteStore::set_thread_title(std::string_view thread_id, std::string_view title) {
  std::lock_guard<std::mutex> lock(mutex_);
  begin_write();
  try {
    auto s = stmt("UPDATE threads SET title=?, updated_at=? WHERE id=?");
    s.bind(1, title).bind(2, now_ms()).bind(3, thread_id).run();
    if (db_->changes() == 0) throw Error(ErrorCode::not_found, fmt::format("thread {} not found", thread_id));
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
    if (db_->changes() == 0) throw Error(ErrorCode::not_found, fmt::format("thread {} not found", thread_id));
    end_write(true);
  } catch (...) {
    end_write(false);
    throw;
  }
}

std::vector<TurnRecord> SqliteStore::query_turns(Connection& c, const char* sql, std::string_view a,
                                                 std::string_view b) {
  auto s = c.stmt(sql);
  s.bind(1, a);
  if (!b.empty()) s.bind(2, b);
  return read_rows(s, read_turn);
}

std::optional<TurnRecord> SqliteStore::get_turn(std::string_view turn_id) {
  Read r(*this);
  return read_turn_row(r.db(), turn_id);
}

std::optional<TurnRecord> SqliteStore::read_turn_row(Connection& c, std::string_view turn_id) {
  auto v = query_turns(c, AGENTRT_SQLITE_SELECT_TURNS " WHERE id=?", turn_id);
  if (v.empty()) return std::nullopt;
  return std::move(v.front());
}

std::optional<TurnRecord> SqliteStore::find_turn_by_client_message(std::string_view thread_id,
                                                                   std::string_view client_message_id) {
  if (client_message_id.empty()) return std::nullopt;
  Read r(*this);
  auto v =
      query_turns(r.db(), AGENTRT_SQLITE_SELECT_TURNS " WHERE " AGENTRT_TURNS_OF_THREAD " AND client_message_id=?2",
                  thread_id, client_message_id);
  if (v.empty()) return std::nullopt;
  return std::move(v.front());
}

std::optional<TurnRecord> SqliteStore::active_turn(std::string_view thread_id) {
  Read r(*this);
  auto v = query_turns(r.db(), AGENTRT_SQLITE_SELECT_TURNS " WHERE thread_id=? AND " AGENTRT_ACTIVE, thread_id);
  if (v.empty()) return std::nullopt;
  return std::move(v.front());
}

std::optional<TurnRecord> SqliteStore::last_turn(std::string_view thread_id) {
  Read r(*this);
  auto v = query_turns(r.db(),
                       AGENTRT_SQLITE_SELECT_TURNS " WHERE " AGENTRT_TURNS_OF_THREAD
                                                   " ORDER BY created_at DESC, turns.rowid DESC LIMIT 1",
                       thread_id);
  if (v.empty()) return std::nullopt;
  return std::move(v.front());
}

std::vector<TurnRecord> SqliteStore::turns_expired(int64_t now) {
  Read r(*this);
  // The partial index of active turns holds the waiting ones; only the overdue rows are read and parsed.
  auto s = r.db().stmt(AGENTRT_SQLITE_SELECT_TURNS
                       " WHERE (status='WAITING_APPROVAL' OR status='WAITING_CLIENT') AND " AGENTRT_ACTIVE
                       " AND expires_at > 0 AND expires_at <= ? "
                       "ORDER BY created_at");
  s.bind(1, now);
  return read_rows(s, read_turn);
}

std::vector<TurnRecord> SqliteStore::turns_in_status(TurnStatus status) {
  Read r(*this);
  if (!is_terminal(status))  // the active turns: a scan of the small partial index, not of every turn
    return query_turns(r.db(), AGENTRT_SQLITE_SELECT_TURNS " WHERE status=? AND " AGENTRT_ACTIVE " ORDER BY created_at",
                       to_string(status));
  return query_turns(r.db(), AGENTRT_SQLITE_SELECT_TURNS " WHERE status=? ORDER BY created_at", to_string(status));
}

// A thread's messages in order: the rows of its span (schema 10). With the span's first rowid known (?1), a scan of
// the table; without, one lookup in thread_spans first (?1 the thread id), whose base is the last column.
#define AGENTRT_SPAN_ROWS "FROM messages WHERE id BETWEEN ?1 AND ?1 + " AGENTRT_SPAN_LAST " ORDER BY id"
#define AGENTRT_SPAN_LOOKUP                                                                 \
  ",s.base FROM thread_spans s JOIN messages m ON m.id BETWEEN s.base * " AGENTRT_SPAN_SIZE \
  " AND s.base * " AGENTRT_SPAN_SIZE " + " AGENTRT_SPAN_LAST " WHERE s.thread_id=?1 ORDER BY m.id"

sqlite::Statement SqliteStore::span_rows(Connection& c, std::string_view thread_id, const char* known,
                                         const char* lookup, int& base_column) {
  if (auto span = known_span(thread_id)) {
    base_column = -1;
    auto s = c.stmt(known);
    s.bind(1, *span * kSpanMessages);
    return s;
  }
  auto s = c.stmt(lookup);
  base_column = sqlite3_column_count(s.get()) - 1;
  s.bind(1, thread_id);
  return s;
}

void SqliteStore::remember_span(std::string_view thread_id, int64_t base) {
  std::lock_guard<std::mutex> lock(spans_mutex_);
  if (spans_.size() >= kMaxTails) spans_.clear();
  spans_.emplace(std::string(thread_id), base);
}

std::optional<int64_t> SqliteStore::span_of(Connection& c, std::string_view thread_id) {
  if (auto span = known_span(thread_id)) return span;
  auto q = c.stmt("SELECT base FROM thread_spans WHERE thread_id=?");
  q.bind(1, thread_id);
  if (!q.step()) return std::nullopt;
  remember_span(thread_id, q.i64(0));  // stored: it never moves
  return q.i64(0);
}

std::optional<int64_t> SqliteStore::known_span(std::string_view thread_id) {
  std::lock_guard<std::mutex> lock(spans_mutex_);
  auto span = spans_.find(thread_id);
  if (span == spans_.end()) return std::nullopt;
  return span->second;
}

std::vector<MessageRecord> SqliteStore::messages(std::string_view thread_id) {
  if (layout_) return layout_->messages(*this, thread_id);
  Read r(*this);
  return read_messages(r.db(), thread_id);
}

namespace {

// The bodies of one row's messages (sqlite/message_body.hpp), indexes `first` .. `last` (the row's idx and its
// rowid's offset in the span). Error(io) naming the row's first message when its group is damaged or holds another
// count than its key says. The list is the calling thread's, reused.
const std::vector<std::string_view>& row_parts(std::string_view thread_id, int64_t first, int64_t last,
                                               std::string_view body) {
  thread_local std::vector<std::string_view> parts;
  std::string problem;
  try {
    split_row(body, parts);
    if (last < first || static_cast<uint64_t>(last - first) + 1 != parts.size())
      problem = fmt::format("the row holds {} messages, its key {}", parts.size(), last - first + 1);
  } catch (const Error& e) {
    problem = e.message();
  }
  if (!problem.empty()) throw store_rows::unreadable_message(thread_id, first, problem);
  return parts;
}

}  // namespace

std::vector<MessageRecord> SqliteStore::read_messages(Connection& c, std::string_view thread_id) {
  int base_column = -1;
  auto s =
      span_rows(c, thread_id, "SELECT idx,id % " AGENTRT_SPAN_SIZE ",turn_id,run_id,body " AGENTRT_SPAN_ROWS,
                "SELECT m.idx,m.id % " AGENTRT_SPAN_SIZE ",m.turn_id,m.run_id,m.body" AGENTRT_SPAN_LOOKUP, base_column);
  std::vector<MessageRecord> out;
  while (s.step()) {
    if (out.empty()) {
      // A short thread's messages without growing; each is made where it stays. (Only once there is one: a new
      // thread's empty list allocates nothing.)
      out.reserve(16);
      if (base_column >= 0) remember_span(thread_id, s.i64(base_column));
    }
    const int64_t first = s.i64(0);
    const auto& parts = row_parts(thread_id, first, s.i64(1), s.bytes(4));
    for (size_t k = 0; k < parts.size(); ++k) {
      MessageRecord& m = out.emplace_back();
      m.thread_id = std::string(thread_id);
      m.index = first + static_cast<int64_t>(k);
      m.turn_id = s.text(2);
      m.run_id = s.text(3);
      m.message = store_rows::stored_message(thread_id, m.index, parts[k], unpack_message);
    }
  }
  return out;
}

std::vector<Message> SqliteStore::thread_messages(std::string_view thread_id) {
  if (layout_) return Store::thread_messages(thread_id);
  Read r(*this);
  return read_thread_messages(r.db(), thread_id);
}

std::vector<Message> SqliteStore::read_thread_messages(Connection& c, std::string_view thread_id) {
  int base_column = -1;
  auto s = span_rows(c, thread_id, "SELECT idx,id % " AGENTRT_SPAN_SIZE ",body " AGENTRT_SPAN_ROWS,
                     "SELECT m.idx,m.id % " AGENTRT_SPAN_SIZE ",m.body" AGENTRT_SPAN_LOOKUP, base_column);
  std::vector<Message> out;
  while (s.step()) {
    if (base_column >= 0 && out.empty()) remember_span(thread_id, s.i64(base_column));
    const int64_t first = s.i64(0);
    const auto& parts = row_parts(thread_id, first, s.i64(1), s.bytes(2));
    for (size_t k = 0; k < parts.size(); ++k)
      out.push_back(store_rows::stored_message(thread_id, first + static_cast<int64_t>(k), parts[k], unpack_message));
  }
  return out;
}

std::vector<StoredEvent> SqliteStore::events_after(std::string_view thread_id, int64_t after_seq, size_t limit) {
  Read r(*this);
  std::vector<StoredEvent> out;
  const std::optional<int64_t> span = span_of(r.db(), thread_id);
  if (!span) return out;  // no span: no events
  // The thread's rows from the one that holds after_seq + 1 (its rowid the greatest at or below that seq's), then
  // split into events.
  auto s = r.db().stmt(AGENTRT_EVENTS_FROM);
  s.bind(1, *span * kSpanEvents).bind(2, std::clamp<int64_t>(after_seq, -1, kSpanEvents - 2) + 1);
  while (out.size() < limit && s.step()) {
    if (s.is_blob(2)) {
      // A packed row decodes to no more than SQLite would have stored as text.
      const auto max_bytes = static_cast<size_t>(sqlite3_limit(r.db().get(), SQLITE_LIMIT_LENGTH, -1));
      const std::string text = unpack_events(s.bytes(2), thread_id, s.i64(0), max_bytes);
      store_rows::split_event_row(s.i64(0), s.text(1), text, after_seq, limit, out);
    } else {
      store_rows::split_event_row(s.i64(0), s.text(1), s.bytes(2), after_seq, limit, out);
    }
  }
  return out;
}

std::vector<LedgerEntry> SqliteStore::ledger(std::string_view turn_id) {
  Read r(*this);
  return read_ledger(r.db(), turn_id);
}

std::vector<LedgerEntry> SqliteStore::read_ledger(Connection& c, std::string_view turn_id) {
  auto s = c.stmt("SELECT " AGENTRT_LEDGER_COLS " FROM ledger WHERE turn_id=? ORDER BY run_id, ordinal");
  s.bind(1, turn_id);
  return read_rows(s, read_ledger_entry);
}

// One read transaction instead of four: one snapshot, and SQLite takes and drops its read lock (two or more
// fcntl calls) once.
Store::TurnSnapshot SqliteStore::turn_snapshot(std::string_view turn_id) {
  if (layout_) return Store::turn_snapshot(turn_id);  // the layout reads messages its own way
  Read r(*this);
  Connection& c = r.db();
  c.stmt("BEGIN").run();
  try {
    TurnSnapshot snap;
    snap.turn = read_turn_row(c, turn_id);
    if (snap.turn && is_waiting(snap.turn->status)) {
      snap.ledger = read_ledger(c, snap.turn->id);
      snap.history = read_messages(c, snap.turn->thread_id);
      snap.thread_state = read_thread_state(c, snap.turn->thread_id);
    }
    c.stmt("COMMIT").run();
    return snap;
  } catch (...) {
    c.rollback();
    throw;
  }
}

// The turns a spend sums: ?1 the thread (or the user), ?2 the turn left out.
#define AGENTRT_SPEND_THREAD_TURNS "SELECT id FROM turns WHERE " AGENTRT_TURNS_OF_THREAD " AND id<>?2"
#define AGENTRT_SPEND_USER_TURNS                                                                                    \
  "SELECT id FROM turns WHERE span IN (SELECT s.base FROM threads t JOIN thread_spans s ON s.thread_id=t.id WHERE " \
  "t.user_id=?1) AND id<>?2"
#define AGENTRT_SPEND_USAGE(turns)                                                                                     \
  "SELECT coalesce(json_extract(u.value,'$.provider'),''),coalesce(json_extract(u.value,'$.model'),''),"               \
  "sum(coalesce(json_extract(u.value,'$.inputTokens'),0)),sum(coalesce(json_extract(u.value,'$.outputTokens'),0)),"    \
  "sum(coalesce(json_extract(u.value,'$.totalTokens'),0)),sum(coalesce(json_extract(u.value,'$.reasoningTokens'),0))," \
  "sum(coalesce(json_extract(u.value,'$.cachedInputTokens'),0)),"                                                      \
  "sum(coalesce(json_extract(u.value,'$.cacheWriteInputTokens'),0)) "                                                  \
  "FROM turns t, json_each(t.usage) u WHERE t.id IN (" turns ") GROUP BY 1,2 ORDER BY 1,2"

StoredSpend SqliteStore::spend(std::string_view thread_id, std::string_view user_id, std::string_view except_turn_id) {
  const bool thread = !thread_id.empty();
  // Bound as strings: an empty string_view (null data) would bind NULL, and `id<>NULL` holds for no row.
  const std::string scope(thread ? thread_id : user_id), except(except_turn_id);
  Read r(*this);
  StoredSpend out;
  auto calls =
      r.db().stmt(thread ? "SELECT coalesce(sum(steps),0) FROM turns WHERE id IN (" AGENTRT_SPEND_THREAD_TURNS ")"
                         : "SELECT coalesce(sum(steps),0) FROM turns WHERE id IN (" AGENTRT_SPEND_USER_TURNS ")");
  calls.bind(1, scope).bind(2, except);
  if (calls.step()) out.model_calls = calls.i64(0);
  auto tools = r.db().stmt(thread ? "SELECT count(*) FROM ledger WHERE turn_id IN (" AGENTRT_SPEND_THREAD_TURNS ")"
                                  : "SELECT count(*) FROM ledger WHERE turn_id IN (" AGENTRT_SPEND_USER_TURNS ")");
  tools.bind(1, scope).bind(2, except);
  if (tools.step()) out.tool_calls = tools.i64(0);
  auto usage = r.db().stmt(thread ? AGENTRT_SPEND_USAGE(AGENTRT_SPEND_THREAD_TURNS)
                                  : AGENTRT_SPEND_USAGE(AGENTRT_SPEND_USER_TURNS));
  usage.bind(1, scope).bind(2, except);
  while (usage.step()) out.usage.push_back(store_rows::usage_columns(usage, 0));
  return out;
}

std::optional<ApprovalRecord> SqliteStore::get_approval(std::string_view id) {
  Read r(*this);
  auto s = r.db().stmt("SELECT id,turn_id,thread_id,decisions,answer,created_at FROM approvals WHERE id=?");
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
  Read r(*this);
  auto s = r.db().stmt("SELECT heartbeat FROM instances WHERE id=?");
  s.bind(1, instance_id);
  if (!s.step()) return std::nullopt;
  return s.i64(0);
}

}  // namespace v1
}  // namespace agentrt
