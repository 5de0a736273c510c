// The PostgreSQL store's schema: its migrations, applied in one transaction when a store opens, and the table
// that records them (agentrt_schema).
#include <fmt/format.h>

#include <iterator>

#include "agentrt/clock.hpp"
#include "store/postgres/connection.hpp"
#include "store/postgres/pool.hpp"
#include "store/postgres/postgres_store.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

// Migrations, in order; migration i brings the schema from version i to i+1. Ids are compared and sorted as bytes
// (COLLATE "C"), as SQLite does, whatever the database's locale.
const char* const kMigrations[] = {
    R"sql(
CREATE TABLE threads(
  id text COLLATE "C" PRIMARY KEY, user_id text COLLATE "C" NOT NULL, title text NOT NULL DEFAULT '',
  deleted boolean NOT NULL DEFAULT false, created_at bigint NOT NULL, updated_at bigint NOT NULL);
CREATE INDEX threads_by_user ON threads(user_id, updated_at);
-- A thread's last event sequence number and message index. Every commit of the thread updates (and so locks)
-- its row first: commits of one thread, from any process, take their turn here.
CREATE TABLE thread_tails(
  thread_id text COLLATE "C" PRIMARY KEY, last_seq bigint NOT NULL, last_idx bigint NOT NULL);
CREATE TABLE turns(
  pos bigint GENERATED ALWAYS AS IDENTITY, id text COLLATE "C" PRIMARY KEY, thread_id text COLLATE "C" NOT NULL,
  user_id text COLLATE "C" NOT NULL, status text COLLATE "C" NOT NULL, version bigint NOT NULL,
  client_message_id text COLLATE "C" NOT NULL, run_id text COLLATE "C" NOT NULL,
  parent_run_id text COLLATE "C" NOT NULL, stage text NOT NULL, approval_request_id text COLLATE "C" NOT NULL,
  interrupts text NOT NULL, expires_at bigint NOT NULL, owner text COLLATE "C" NOT NULL, intent text NOT NULL,
  error text NOT NULL, usage text NOT NULL, steps integer NOT NULL, created_at bigint NOT NULL,
  updated_at bigint NOT NULL);
CREATE UNIQUE INDEX turns_one_active ON turns(thread_id)
  WHERE status='RUNNING' OR status='WAITING_APPROVAL' OR status='RESUMING';
CREATE UNIQUE INDEX turns_by_client_message ON turns(thread_id, client_message_id) WHERE client_message_id <> '';
CREATE INDEX turns_by_thread ON turns(thread_id, created_at);
-- The event log. One row holds the consecutive events of one run in one commit (JSON lines, seq
-- first_seq..last_seq): a group commit writes one row, not one per token delta.
CREATE TABLE events(
  thread_id text COLLATE "C" NOT NULL, first_seq bigint NOT NULL, last_seq bigint NOT NULL,
  run_id text COLLATE "C" NOT NULL, body text NOT NULL, PRIMARY KEY(thread_id, first_seq));
CREATE TABLE messages(
  thread_id text COLLATE "C" NOT NULL, idx bigint NOT NULL, turn_id text COLLATE "C" NOT NULL,
  run_id text COLLATE "C" NOT NULL, body text NOT NULL, PRIMARY KEY(thread_id, idx));
CREATE TABLE ledger(
  turn_id text COLLATE "C" NOT NULL, tool_call_id text COLLATE "C" NOT NULL, thread_id text COLLATE "C" NOT NULL,
  run_id text COLLATE "C" NOT NULL, tool_name text NOT NULL, stage text NOT NULL, ordinal integer NOT NULL,
  arguments text NOT NULL, status text NOT NULL, needs_approval boolean NOT NULL, idempotent boolean NOT NULL,
  interrupt_id text NOT NULL, decision text NOT NULL, output text NOT NULL, updated_at bigint NOT NULL,
  PRIMARY KEY(turn_id, tool_call_id));
CREATE TABLE approvals(
  id text COLLATE "C" PRIMARY KEY, turn_id text COLLATE "C" NOT NULL, thread_id text COLLATE "C" NOT NULL,
  decisions text NOT NULL, answer text NOT NULL, created_at bigint NOT NULL);
-- Runtime instances' leases: each heartbeats its row; one whose heartbeat is older than the lease is dead.
CREATE TABLE instances(id text COLLATE "C" PRIMARY KEY, heartbeat bigint NOT NULL);
CREATE TABLE jobs(
  pos bigint GENERATED ALWAYS AS IDENTITY, id text COLLATE "C" PRIMARY KEY, thread_id text COLLATE "C" NOT NULL,
  turn_id text COLLATE "C" NOT NULL, run_id text COLLATE "C" NOT NULL, tool_call_id text COLLATE "C" NOT NULL,
  tool_name text NOT NULL, user_id text COLLATE "C" NOT NULL, status text NOT NULL, progress double precision NOT NULL,
  message text NOT NULL, result text NOT NULL, assets text NOT NULL, error_code text NOT NULL,
  error_message text NOT NULL, metadata text NOT NULL, confirmation text NOT NULL, confirm_message text NOT NULL,
  timeout_ms bigint NOT NULL, expires_at bigint NOT NULL, delivered boolean NOT NULL, version bigint NOT NULL,
  created_at bigint NOT NULL, updated_at bigint NOT NULL, finished_at bigint NOT NULL);
CREATE INDEX jobs_by_thread ON jobs(thread_id, created_at);
-- The jobs the runtime still has to look at (open ones, and finished ones not yet in history).
CREATE INDEX jobs_undelivered ON jobs(expires_at) WHERE NOT delivered;
)sql",
    // 2: the conversation-document layout's pointer rows (store/postgres/document_pointers), one per thread.
    R"sql(
CREATE TABLE thread_documents(
  thread_id text COLLATE "C" PRIMARY KEY, doc_key text COLLATE "C" NOT NULL, version bigint NOT NULL,
  bytes bigint NOT NULL, messages bigint NOT NULL, updated_at bigint NOT NULL);
)sql",
    // 3: a thread's shared state (AG-UI state), a row once a commit gives it one.
    R"sql(
CREATE TABLE thread_states(thread_id text COLLATE "C" PRIMARY KEY, state text NOT NULL);
)sql",
    // 4: client tool calls (AG-UI client-provided tools) in the ledger, and a turn waiting for their answers
    // (WAITING_CLIENT) is active: one per thread, like one waiting for approval.
    R"sql(
ALTER TABLE ledger ADD COLUMN client boolean NOT NULL DEFAULT false;
DROP INDEX turns_one_active;
CREATE UNIQUE INDEX turns_one_active ON turns(thread_id)
  WHERE status='RUNNING' OR status='WAITING_APPROVAL' OR status='RESUMING' OR status='WAITING_CLIENT';
)sql",
    // 5: a waiting turn's trace context (TurnRecord::trace).
    R"sql(
ALTER TABLE turns ADD COLUMN trace text NOT NULL DEFAULT '';
)sql",
};

// Held (for the transaction) by the store that migrates: two processes opening a new database do not both try.
constexpr const char* kMigrationLock = "SELECT pg_advisory_xact_lock(4107321901)";

}  // namespace

using namespace pg;

int PostgresStore::schema_version() {
  return pool_->with([&](Connection& c) {
    Result r = c.exec("SELECT coalesce(max(version),0) FROM agentrt_schema", "read the schema version");
    return static_cast<int>(r.row(0).i64(0));
  });
}

void PostgresStore::migrate() {
  static_assert(static_cast<int>(std::size(kMigrations)) == kSchemaVersion);
  pool_->with([&](Connection& c) {
    c.run("BEGIN", "open the schema");
    try {
      c.exec(kMigrationLock, "lock the schema");
      // Nothing is written when the schema is current: a read-only database at the current version opens.
      int64_t version = 0;
      if (c.exec("SELECT to_regclass('agentrt_schema') IS NULL", "read the schema version").row(0).flag(0))
        c.run("CREATE TABLE agentrt_schema(version integer PRIMARY KEY, applied_at bigint NOT NULL)",
              "create the schema table");
      else
        version =
            c.exec("SELECT coalesce(max(version),0) FROM agentrt_schema", "read the schema version").row(0).i64(0);
      const auto known = static_cast<int64_t>(std::size(kMigrations));
      if (version > known)
        throw Error(ErrorCode::unsupported,
                    fmt::format("postgres: {} has schema version {}, newer than this agentrt knows ({})", target_,
                                version, known));
      for (int64_t v = version; v < known; ++v) {
        c.run(kMigrations[v], "migrate the schema");
        c.exec("INSERT INTO agentrt_schema(version,applied_at) VALUES($1,$2)", Params().add(v + 1).add(now_ms()),
               "record the schema version");
      }
      c.run("COMMIT", "commit the schema");
    } catch (...) {
      c.rollback();
      throw;
    }
  });
}

}  // namespace v1
}  // namespace agentrt
