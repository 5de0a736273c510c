// SqliteStore's schema as SQLite sees it: migrations of existing files, and the query plans the store's
// speed depends on.
#include <doctest/doctest.h>

#include <sqlite3.h>

#include "store/sqlite_store.hpp"
#include "support/runtime_fixture.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {

std::string one_text(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
  std::string out;
  while (sqlite3_step(st) == SQLITE_ROW) {
    for (int c = 0; c < sqlite3_column_count(st); ++c) {
      auto* t = sqlite3_column_text(st, c);
      out += t ? reinterpret_cast<const char*>(t) : "";
      out += '|';
    }
    out += '\n';
  }
  sqlite3_finalize(st);
  return out;
}

TurnRecord active_turn(const std::string& id, const std::string& thread) {
  TurnRecord t;
  t.id = id;
  t.thread_id = thread;
  t.user_id = "u";
  t.status = TurnStatus::waiting_approval;
  t.run_id = "run_" + id;
  t.expires_at = 1;
  return t;
}

void insert(SqliteStore& s, const TurnRecord& t) {
  CommitBatch b;
  b.thread_id = t.thread_id;
  b.create_thread = ThreadRecord{t.thread_id, "u", "", false, 0, 0, 0};
  b.turn = t;
  b.expected_version = -1;
  s.commit(b);
}

}  // namespace

TEST_CASE("a version-2 file migrates to the OR-form active-turn index and keeps its turns and its rule") {
  TempDir dir;
  const std::string path = dir.file("v2.db");
  {
    SqliteStore s(SqliteStoreOptions{path});
    insert(s, active_turn("turn_a", "t1"));
  }
  // Back to what schema 2 had: the IN-list predicate.
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db,
                       "DROP INDEX turns_one_active; CREATE UNIQUE INDEX turns_one_active ON turns(thread_id) WHERE "
                       "status IN ('RUNNING','WAITING_APPROVAL','RESUMING'); PRAGMA user_version=2;",
                       nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);

  SqliteStore s(SqliteStoreOptions{path});
  CHECK(s.schema_version() == 3);
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  const std::string sql = one_text(db, "SELECT sql FROM sqlite_schema WHERE name='turns_one_active'");
  CHECK(sql.find("status='RUNNING' OR status='WAITING_APPROVAL' OR status='RESUMING'") != std::string::npos);
  CHECK(sql.find(" IN ") == std::string::npos);
  sqlite3_close(db);
  // The turn is still there and still the thread's one active turn.
  auto a = s.active_turn("t1");
  REQUIRE(a);
  CHECK(a->id == "turn_a");
  CHECK_THROWS_AS(insert(s, active_turn("turn_b", "t1")), Error);
  CHECK(s.turns_in_status(TurnStatus::waiting_approval).size() == 1);
  CHECK(s.turns_expired(2).size() == 1);
}

TEST_CASE("the active-turn queries read the partial index, not the table") {
  // The planner uses a partial index only when the query states its predicate word for word; a query that
  // drifted from the index would scan every turn ever written.
  TempDir dir;
  SqliteStore s(SqliteStoreOptions{dir.file("plan.db")});
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(dir.file("plan.db").c_str(), &db) == SQLITE_OK);
  const std::string active = "(status='RUNNING' OR status='WAITING_APPROVAL' OR status='RESUMING')";
  for (const std::string& where :
       {"thread_id='t' AND " + active,
        "status='WAITING_APPROVAL' AND " + active + " AND expires_at > 0 AND expires_at <= 5",
        "status='RUNNING' AND " + active}) {
    CAPTURE(where);
    const std::string plan = one_text(db, "EXPLAIN QUERY PLAN SELECT id FROM turns WHERE " + where);
    CHECK(plan.find("turns_one_active") != std::string::npos);
  }
  sqlite3_close(db);
}
