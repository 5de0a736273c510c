// The PostgreSQL store's reads (threads, turns, messages, events, ledger, approvals, instances) and the writes
// outside a batch (a thread's title and soft delete, heartbeats).
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "agentrt/clock.hpp"
#include "store/postgres/connection.hpp"
#include "store/postgres/pool.hpp"
#include "store/postgres/postgres_store.hpp"
#include "store/record_rows.hpp"

namespace agentrt {
inline namespace v1 {

using namespace pg;

namespace {

ThreadRecord read_thread(const Row& r) { return store_rows::thread_from_row(r); }
TurnRecord read_turn(const Row& r) { return store_rows::turn_from_row(r); }
LedgerEntry read_ledger_entry(const Row& r) { return store_rows::ledger_entry_from_row(r); }

template <class T>
std::optional<T> first(std::vector<T>&& v) {
  if (v.empty()) return std::nullopt;
  return std::move(v.front());
}

}  // namespace

std::optional<ThreadRecord> PostgresStore::get_thread(std::string_view thread_id) {
  return pool_->with([&](Connection& c) -> std::optional<ThreadRecord> {
    Result r = c.exec("SELECT " AGENTRT_THREAD_COLS
                      ",coalesce((SELECT last_seq FROM thread_tails WHERE thread_id=threads.id),0) "
                      "FROM threads WHERE id=$1",
                      Params().add(thread_id), "read a thread");
    if (r.rows() == 0) return std::nullopt;
    ThreadRecord t = read_thread(r.row(0));
    t.last_seq = r.row(0).i64(6);
    return t;
  });
}

std::vector<ThreadRecord> PostgresStore::list_threads(std::string_view user_id, bool include_deleted) {
  return pool_->with([&](Connection& c) {
    return read_rows(
        c.exec("SELECT " AGENTRT_THREAD_COLS " FROM threads WHERE user_id=$1 AND (NOT deleted OR $2::boolean) "
               "ORDER BY updated_at DESC, id",
               Params().add(user_id).add(include_deleted), "list threads"),
        read_thread);
  });
}

std::optional<std::string> PostgresStore::thread_state(std::string_view thread_id) {
  return pool_->with([&](Connection& c) -> std::optional<std::string> {
    Result r =
        c.exec("SELECT state FROM thread_states WHERE thread_id=$1", Params().add(thread_id), "read a thread's state");
    if (r.rows() == 0) return std::nullopt;
    return r.row(0).text(0);
  });
}

void PostgresStore::set_thread_title(std::string_view thread_id, std::string_view title) {
  pool_->with([&](Connection& c) {
    Result r = c.exec("UPDATE threads SET title=$1, updated_at=$2 WHERE id=$3",
                      Params().add(title).add(now_ms()).add(thread_id), "set a thread's title");
    if (r.affected() == 0) throw Error(ErrorCode::not_found, fmt::format("thread {} not found", thread_id));
  });
  write_txns_.fetch_add(1, std::memory_order_relaxed);
}

void PostgresStore::soft_delete_thread(std::string_view thread_id) {
  pool_->with([&](Connection& c) {
    try {
      {
        Pipeline p(c);
        p.add("BEGIN", Params(), "begin a delete");
        // The thread's lock, as every commit of it takes first: no turn can start between the check and the
        // delete (a start's commit on a deleted thread is refused).
        ThreadTail tail;
        lock_thread(p, thread_id, 0, 0, tail);
        p.add("SELECT id FROM turns WHERE thread_id=$1 AND " AGENTRT_ACTIVE, Params().add(thread_id),
              "look for an active turn", [&](const Result& act) {
                if (act.rows() > 0)
                  throw Error(ErrorCode::conflict, fmt::format("thread {} has an active turn ({}): cancel it first",
                                                               thread_id, act.row(0).text(0)));
              });
        p.add("UPDATE threads SET deleted=true, updated_at=$1 WHERE id=$2", Params().add(now_ms()).add(thread_id),
              "delete a thread", [&](const Result& up) {
                if (up.affected() == 0)
                  throw Error(ErrorCode::not_found, fmt::format("thread {} not found", thread_id));
              });
        p.run();
      }
      c.run("COMMIT", "commit a delete");
    } catch (...) {
      c.rollback();
      throw;
    }
  });
  write_txns_.fetch_add(1, std::memory_order_relaxed);
}

std::vector<TurnRecord> PostgresStore::query_turns(const char* sql, std::string_view a, std::string_view b) {
  return pool_->with([&](Connection& c) {
    Params p;
    p.add(a);
    if (!b.empty()) p.add(b);
    return read_rows(c.exec(sql, p, "read turns"), read_turn);
  });
}

std::optional<TurnRecord> PostgresStore::get_turn(std::string_view turn_id) {
  return first(query_turns("SELECT " AGENTRT_TURN_COLS " FROM turns WHERE id=$1", turn_id));
}

std::optional<TurnRecord> PostgresStore::find_turn_by_client_message(std::string_view thread_id,
                                                                     std::string_view client_message_id) {
  if (client_message_id.empty()) return std::nullopt;
  return first(query_turns("SELECT " AGENTRT_TURN_COLS " FROM turns WHERE thread_id=$1 AND client_message_id=$2",
                           thread_id, client_message_id));
}

std::optional<TurnRecord> PostgresStore::active_turn(std::string_view thread_id) {
  return first(
      query_turns("SELECT " AGENTRT_TURN_COLS " FROM turns WHERE thread_id=$1 AND " AGENTRT_ACTIVE, thread_id));
}

std::optional<TurnRecord> PostgresStore::last_turn(std::string_view thread_id) {
  return first(query_turns("SELECT " AGENTRT_TURN_COLS
                           " FROM turns WHERE thread_id=$1 ORDER BY created_at DESC, pos DESC LIMIT 1",
                           thread_id));
}

std::vector<TurnRecord> PostgresStore::turns_expired(int64_t now) {
  return pool_->with([&](Connection& c) {
    // The partial index of active turns holds the waiting ones; only the overdue rows are read.
    return read_rows(
        c.exec("SELECT " AGENTRT_TURN_COLS
               " FROM turns WHERE (status='WAITING_APPROVAL' OR status='WAITING_CLIENT') AND " AGENTRT_ACTIVE
               " AND expires_at > 0 AND expires_at <= $1 ORDER BY created_at, pos",
               Params().add(now), "read expired turns"),
        read_turn);
  });
}

std::vector<TurnRecord> PostgresStore::turns_in_status(TurnStatus status) {
  if (!is_terminal(status))  // the active turns: the small partial index, not every turn
    return query_turns("SELECT " AGENTRT_TURN_COLS " FROM turns WHERE status=$1 AND " AGENTRT_ACTIVE
                       " ORDER BY created_at, pos",
                       to_string(status));
  return query_turns("SELECT " AGENTRT_TURN_COLS " FROM turns WHERE status=$1 ORDER BY created_at, pos",
                     to_string(status));
}

std::vector<MessageRecord> PostgresStore::messages(std::string_view thread_id) {
  if (layout_) return layout_->messages(*this, thread_id);
  return pool_->with([&](Connection& c) {
    Result r = c.exec("SELECT idx,turn_id,run_id,body FROM messages WHERE thread_id=$1 ORDER BY idx",
                      Params().add(thread_id), "read messages");
    std::vector<MessageRecord> out;
    out.reserve(static_cast<size_t>(r.rows()));
    for (int i = 0; i < r.rows(); ++i) {
      const Row row = r.row(i);
      MessageRecord m;
      m.thread_id = std::string(thread_id);
      m.index = row.i64(0);
      m.turn_id = row.text(1);
      m.run_id = row.text(2);
      m.message = store_rows::stored_message(thread_id, m.index,
                                             std::string_view(reinterpret_cast<const char*>(row.raw(3)), row.size(3)));
      out.push_back(std::move(m));
    }
    return out;
  });
}

std::vector<StoredEvent> PostgresStore::events_after(std::string_view thread_id, int64_t after_seq, size_t limit) {
  // Each row holds at least one event: `limit` rows from the one that holds after_seq + 1 are enough.
  const auto rows = static_cast<int64_t>(std::min<size_t>(limit, std::numeric_limits<int32_t>::max()));
  return pool_->with([&](Connection& c) {
    Result r = c.exec(
        "SELECT first_seq,run_id,body FROM events WHERE thread_id=$1 AND first_seq >= "
        "(SELECT coalesce(max(first_seq),0) FROM events WHERE thread_id=$1 AND first_seq <= $2::bigint + 1) "
        "ORDER BY first_seq LIMIT $3",
        Params().add(thread_id).add(after_seq).add(rows), "read events");
    std::vector<StoredEvent> out;
    for (int i = 0; i < r.rows() && out.size() < limit; ++i) {
      const Row row = r.row(i);
      store_rows::split_event_row(row.i64(0), row.text(1),
                                  std::string_view(reinterpret_cast<const char*>(row.raw(2)), row.size(2)), after_seq,
                                  limit, out);
    }
    return out;
  });
}

std::vector<LedgerEntry> PostgresStore::ledger(std::string_view turn_id) {
  return pool_->with([&](Connection& c) {
    return read_rows(c.exec("SELECT " AGENTRT_LEDGER_COLS " FROM ledger WHERE turn_id=$1 ORDER BY run_id, ordinal",
                            Params().add(turn_id), "read the ledger"),
                     read_ledger_entry);
  });
}

// The turns a spend sums: $1 the thread (or the user), $2 the turn left out.
#define AGENTRT_SPEND_THREAD_TURNS "SELECT id FROM turns WHERE thread_id=$1 AND id<>$2"
#define AGENTRT_SPEND_USER_TURNS \
  "SELECT id FROM turns WHERE thread_id IN (SELECT id FROM threads WHERE user_id=$1) AND id<>$2"
#define AGENTRT_SPEND(turns)                                                                                     \
  "SELECT 0,'','',(SELECT coalesce(sum(steps),0) FROM turns WHERE id IN (" turns                                 \
  ")),"                                                                                                          \
  "(SELECT count(*) FROM ledger WHERE turn_id IN (" turns                                                        \
  ")),0,0,0,0,0 "                                                                                                \
  "UNION ALL SELECT 1,coalesce(u->>'provider',''),coalesce(u->>'model',''),"                                     \
  "sum(coalesce((u->>'inputTokens')::bigint,0)),sum(coalesce((u->>'outputTokens')::bigint,0)),"                  \
  "sum(coalesce((u->>'totalTokens')::bigint,0)),sum(coalesce((u->>'reasoningTokens')::bigint,0)),"               \
  "sum(coalesce((u->>'cachedInputTokens')::bigint,0)),sum(coalesce((u->>'cacheWriteInputTokens')::bigint,0)),0 " \
  "FROM turns t, jsonb_array_elements(t.usage::jsonb) u WHERE t.id IN (" turns ") GROUP BY 2,3 ORDER BY 1,2,3"

StoredSpend PostgresStore::spend(std::string_view thread_id, std::string_view user_id,
                                 std::string_view except_turn_id) {
  const bool thread = !thread_id.empty();
  return pool_->with([&](Connection& c) {
    Result r = c.exec(thread ? AGENTRT_SPEND(AGENTRT_SPEND_THREAD_TURNS) : AGENTRT_SPEND(AGENTRT_SPEND_USER_TURNS),
                      Params().add(thread ? thread_id : user_id).add(except_turn_id), "read what turns spent");
    StoredSpend out;
    for (int i = 0; i < r.rows(); ++i) {
      const Row row = r.row(i);
      if (row.i64(0) == 0) {
        out.model_calls = row.i64(3);
        out.tool_calls = row.i64(4);
        continue;
      }
      out.usage.push_back(store_rows::usage_columns(row, 1));
    }
    return out;
  });
}

std::optional<ApprovalRecord> PostgresStore::get_approval(std::string_view id) {
  return pool_->with([&](Connection& c) -> std::optional<ApprovalRecord> {
    Result r = c.exec("SELECT id,turn_id,thread_id,decisions,answer,created_at FROM approvals WHERE id=$1",
                      Params().add(id), "read an approval");
    if (r.rows() == 0) return std::nullopt;
    const Row row = r.row(0);
    return ApprovalRecord{row.text(0),
                          row.text(1),
                          row.text(2),
                          store_rows::parse_or(row.raw(3), json::array()),
                          store_rows::parse_or(row.raw(4), json::object()),
                          row.i64(5)};
  });
}

void PostgresStore::heartbeat(std::string_view instance_id, int64_t now) {
  pool_->with([&](Connection& c) {
    c.exec(
        "INSERT INTO instances(id,heartbeat) VALUES($1,$2) ON CONFLICT(id) DO UPDATE SET heartbeat=EXCLUDED.heartbeat",
        Params().add(instance_id).add(now), "record a heartbeat");
  });
  write_txns_.fetch_add(1, std::memory_order_relaxed);
}

void PostgresStore::remove_instance(std::string_view instance_id) {
  pool_->with([&](Connection& c) {
    c.exec("DELETE FROM instances WHERE id=$1", Params().add(instance_id), "remove an instance");
  });
  write_txns_.fetch_add(1, std::memory_order_relaxed);
}

std::optional<int64_t> PostgresStore::instance_heartbeat(std::string_view instance_id) {
  return pool_->with([&](Connection& c) -> std::optional<int64_t> {
    Result r = c.exec("SELECT heartbeat FROM instances WHERE id=$1", Params().add(instance_id), "read a heartbeat");
    if (r.rows() == 0) return std::nullopt;
    return r.row(0).i64(0);
  });
}

}  // namespace v1
}  // namespace agentrt
