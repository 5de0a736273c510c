// The SQLite store's records as rows: the shared readers of store/record_rows.hpp over a SQLite statement.
#pragma once

#include <string>
#include <vector>

#include "agentrt/events.hpp"
#include "agentrt/storage.hpp"
#include "store/record_rows.hpp"
#include "store/sqlite/statement.hpp"

namespace agentrt {
inline namespace v1 {
namespace sqlite {

// The active turns (RUNNING, WAITING_APPROVAL, WAITING_CLIENT, RESUMING), as the partial index turns_one_active states
// it: a query names the index's predicate word for word, or the planner cannot use the index. The row's `active` column
// says it, written only when it changes (see commit_rows), so a move between two active statuses leaves the index
// alone.
#define AGENTRT_ACTIVE "active=1"

// A thread's messages are the rowids first .. first + AGENTRT_SPAN_LAST of `messages`, first thread_spans.base x
// AGENTRT_SPAN_SIZE (schema 10; SqliteStore::kSpanMessages, checked against both), each row's rowid its first + the
// index of its last message (schema 13: a row holds one run's messages of a commit); its event rows the rowids first ..
// first + AGENTRT_EVENT_SPAN_LAST of `events`, first thread_spans.base x AGENTRT_EVENT_SPAN_SIZE (schema 11;
// SqliteStore::kSpanEvents), each row's rowid its first + first_seq.
#define AGENTRT_SPAN_SIZE "16777216"
#define AGENTRT_SPAN_LAST "16777215"
#define AGENTRT_EVENT_SPAN_SIZE "4294967296"
#define AGENTRT_EVENT_SPAN_LAST "4294967295"

// A thread's event rows from the one that holds the seq after ?2 - 1 (its rowid the greatest at or below that seq's)
// to the span's end; ?1 the span's first rowid.
#define AGENTRT_EVENTS_FROM                                                                                     \
  "SELECT first_seq,run_id,body FROM events WHERE id BETWEEN "                                                  \
  "(SELECT coalesce(max(id),?1) FROM events WHERE id BETWEEN ?1 AND ?1 + ?2) AND ?1 + " AGENTRT_EVENT_SPAN_LAST \
  " ORDER BY id"
// The last event seq of the thread `threads.id` (a correlated subquery of a threads query), NULL when it has none.
#define AGENTRT_THREAD_LAST_SEQ                                                                            \
  "(SELECT e.last_seq FROM thread_spans s JOIN events e ON e.id BETWEEN s.base * " AGENTRT_EVENT_SPAN_SIZE \
  " AND s.base * " AGENTRT_EVENT_SPAN_SIZE " + " AGENTRT_EVENT_SPAN_LAST                                   \
  " WHERE s.thread_id=threads.id ORDER BY e.id DESC LIMIT 1)"

// AGENTRT_TURN_COLS of `turns` rows with their turn_waits row, when they have one (schema 8: a waiting turn's
// interrupts and trace context are kept beside its row; none reads as the field's default). A query adds its WHERE.
#define AGENTRT_SQLITE_SELECT_TURNS                                                                              \
  "SELECT id,thread_id,user_id,status,version,client_message_id,run_id,parent_run_id,stage,approval_request_id," \
  "w.interrupts,expires_at,owner,intent,error,usage,steps,created_at,updated_at,w.trace "                        \
  "FROM turns LEFT JOIN turn_waits w ON w.turn_id=turns.id"

// The turns of thread ?1, found in the indexes on (span, ...) (schema 14; the id is checked too).
#define AGENTRT_TURNS_OF_THREAD "span=(SELECT base FROM thread_spans WHERE thread_id=?1) AND thread_id=?1"

// True when a turn has something to keep in turn_waits.
bool has_wait(const TurnRecord& t);

using store_rows::dump;
using store_rows::parse_or;

// The row the statement stands on, in the column order of AGENTRT_*_COLS (a thread's last_seq is not a
// column of its row).
ThreadRecord read_thread(const Statement& s);
TurnRecord read_turn(const Statement& s);
LedgerEntry read_ledger_entry(const Statement& s);
JobRecord read_job(const Statement& s);

// Every row the statement yields, each read by `read`.
template <class Read>
auto read_rows(Statement& s, Read read) {
  std::vector<decltype(read(s))> out;
  while (s.step()) out.push_back(read(s));
  return out;
}

}  // namespace sqlite
}  // namespace v1
}  // namespace agentrt
