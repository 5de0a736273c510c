// The SQLite store's schema: its migrations, applied in one transaction when a store opens.
#include <iterator>

#include "store/sqlite/connection.hpp"
#include "store/sqlite/statement.hpp"
#include "store/sqlite_store.hpp"

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
    // 4: whether a turn is active is a column of its own. An index whose predicate names `status` is written
    // at every status change (SQLite rewrites an index entry whenever the update sets a column the index
    // names), so a pause, a resume and an end each wrote it; with `active`, only a start and an end do.
    R"sql(
ALTER TABLE turns ADD COLUMN active INTEGER NOT NULL DEFAULT 0;
UPDATE turns SET active=1 WHERE status='RUNNING' OR status='WAITING_APPROVAL' OR status='RESUMING';
DROP INDEX turns_one_active;
CREATE UNIQUE INDEX turns_one_active ON turns(thread_id) WHERE active=1;
)sql",
    // 5: a thread's shared state (AG-UI state), a row once a commit gives it one.
    R"sql(
CREATE TABLE thread_states(thread_id TEXT PRIMARY KEY, state TEXT NOT NULL) WITHOUT ROWID;
)sql",
    // 6: client tool calls (AG-UI client-provided tools) in the ledger; a turn waiting for their answers
    // (WAITING_CLIENT) is active like one waiting for approval (the `active` column says so: nothing to migrate).
    R"sql(
ALTER TABLE ledger ADD COLUMN client INTEGER NOT NULL DEFAULT 0;
)sql",
    // 7: a waiting turn's trace context (TurnRecord::trace).
    R"sql(
ALTER TABLE turns ADD COLUMN trace TEXT NOT NULL DEFAULT '';
)sql",
    // 8: what only a waiting turn has (its interrupts, its wait's trace context) in a row of its own, deleted when
    // the wait ends. In the turn's row it made a paused turn's row ~1 KB that shrank to ~200 bytes as the turn
    // ended, and SQLite never refills the room a row leaves in a page that new rows are not appended to: in W1
    // (every turn pauses once) 72% of the turns table's pages were empty space. Deleted rows free whole pages,
    // which any table then reuses.
    R"sql(
CREATE TABLE turn_waits(turn_id TEXT PRIMARY KEY, interrupts TEXT NOT NULL, trace TEXT NOT NULL) WITHOUT ROWID;
INSERT INTO turn_waits SELECT id, interrupts, trace FROM turns WHERE interrupts<>'[]' OR trace<>'';
ALTER TABLE turns DROP COLUMN interrupts;
ALTER TABLE turns DROP COLUMN trace;
)sql",
    // 9: an events row's body may be a BLOB, its events packed (store/sqlite/event_body.hpp). Nothing to migrate:
    // text rows stay as they are; the version keeps a build that would read a BLOB as text from opening the file.
    R"sql(
SELECT 1;
)sql",
    // 10: a thread's messages side by side. Each thread that has messages gets a span of rowids (thread_spans.base
    // x 2^24, one rowid per message index), so its messages are one range of the table: a history read is one
    // lookup in thread_spans and one scan of adjacent rows, where the index on (thread_id, idx) cost a search of
    // the index and then one of the table per message, each message on a page of its own once threads
    // interleave. A new thread's span is the next rowid of thread_spans (whose index on thread_id holds it). The
    // table stays a rowid table (a row up to ~4 KB stays on its page; a WITHOUT ROWID table
    // moves what passes ~1 KB to overflow pages), and the index goes: the rowid is unique per (thread, index).
    R"sql(
CREATE TABLE thread_spans(base INTEGER PRIMARY KEY, thread_id TEXT NOT NULL UNIQUE);
INSERT INTO thread_spans(base, thread_id)
  SELECT row_number() OVER (ORDER BY min(id)), thread_id FROM messages GROUP BY thread_id;
CREATE TABLE messages_spanned(
  id INTEGER PRIMARY KEY, thread_id TEXT NOT NULL, idx INTEGER NOT NULL, turn_id TEXT NOT NULL,
  run_id TEXT NOT NULL, body TEXT NOT NULL);
INSERT INTO messages_spanned(id, thread_id, idx, turn_id, run_id, body)
  SELECT s.base * 16777216 + m.idx, m.thread_id, m.idx, m.turn_id, m.run_id, m.body
  FROM messages m JOIN thread_spans s ON s.thread_id = m.thread_id ORDER BY s.base, m.idx;
DROP TABLE messages;
ALTER TABLE messages_spanned RENAME TO messages;
)sql",
    // 11: a thread's event rows in its span too (rowid base x 2^32 + first_seq), so the index on (thread_id,
    // first_seq) goes; and thread_spans keyed by thread id alone (WITHOUT ROWID), so its index goes. A commit that
    // starts a thread wrote both indexes and the two b-trees of thread_spans; every commit wrote events_by_thread, a
    // page at a random place once threads interleave. A new thread's base is one past the highest span any row uses
    // (a span is given only as its first row is written, in that transaction: SqliteStore::thread_span). Threads
    // with events and no messages get theirs here, after the others, in the order their events came.
    R"sql(
CREATE TABLE spans(thread_id TEXT PRIMARY KEY, base INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO spans(thread_id, base) SELECT thread_id, base FROM thread_spans;
INSERT INTO spans(thread_id, base)
  SELECT thread_id, (SELECT coalesce(max(base), 0) FROM thread_spans) + row_number() OVER (ORDER BY min(id))
  FROM events WHERE thread_id NOT IN (SELECT thread_id FROM thread_spans) GROUP BY thread_id;
DROP TABLE thread_spans;
ALTER TABLE spans RENAME TO thread_spans;
CREATE TABLE events_spanned(
  id INTEGER PRIMARY KEY, thread_id TEXT NOT NULL, first_seq INTEGER NOT NULL, last_seq INTEGER NOT NULL,
  run_id TEXT NOT NULL, body TEXT NOT NULL);
INSERT INTO events_spanned(id, thread_id, first_seq, last_seq, run_id, body)
  SELECT s.base * 4294967296 + e.first_seq, e.thread_id, e.first_seq, e.last_seq, e.run_id, e.body
  FROM events e JOIN thread_spans s ON s.thread_id = e.thread_id ORDER BY s.base, e.first_seq;
DROP TABLE events;
ALTER TABLE events_spanned RENAME TO events;
)sql",
    // 12: a messages row's body may be a BLOB, the message packed (store/sqlite/message_body.hpp). Nothing to
    // migrate: text rows stay as they are; the version keeps a build that would read a BLOB as JSON from opening the
    // file.
    R"sql(
SELECT 1;
)sql",
    // 13: a messages row may hold several messages (one run's in one commit), its rowid the span plus its last
    // message's index (store/sqlite/message_body.hpp). Nothing to migrate: a row of one message is as before; the
    // version keeps a build that would read a group as one message from opening the file.
    R"sql(
SELECT 1;
)sql",
    // 14: the turns' indexes by thread name it by its span (thread_spans.base), not its id. Thread ids are the
    // clients' (random UUIDs, most of them), so each new turn wrote a page at a random place in both indexes; a new
    // thread's span is one past all others, so its turns land on the indexes' last pages, which the turns
    // committed together share (at 16 clients a group commit wrote ~7 fewer pages of its ~22). Threads that have
    // turns and no span get theirs here, past every span in use (as new_span counts them: turns' spans too).
    R"sql(
ALTER TABLE turns ADD COLUMN span INTEGER NOT NULL DEFAULT 0;
INSERT INTO thread_spans(thread_id, base)
  SELECT thread_id, (SELECT max(coalesce((SELECT max(base) FROM thread_spans), 0),
                                coalesce((SELECT max(id) FROM messages), 0) / 16777216,
                                coalesce((SELECT max(id) FROM events), 0) / 4294967296))
                    + row_number() OVER (ORDER BY min(rowid))
  FROM turns WHERE thread_id NOT IN (SELECT thread_id FROM thread_spans) GROUP BY thread_id;
UPDATE turns SET span=(SELECT base FROM thread_spans s WHERE s.thread_id=turns.thread_id);
DROP INDEX turns_by_client_message;
DROP INDEX turns_by_thread;
CREATE UNIQUE INDEX turns_by_client_message ON turns(span, client_message_id) WHERE client_message_id <> '';
CREATE INDEX turns_by_thread ON turns(span, created_at);
)sql",
};

}  // namespace

using namespace sqlite;

int SqliteStore::schema_version() {
  std::lock_guard<std::mutex> lock(mutex_);
  auto s = stmt("PRAGMA user_version");
  return s.step() ? static_cast<int>(s.i64(0)) : 0;
}

void SqliteStore::migrate() {
  static_assert(static_cast<int>(std::size(kMigrations)) == kSchemaVersion);
  db_->migrate(kMigrations, options_.path);
}

}  // namespace v1
}  // namespace agentrt
