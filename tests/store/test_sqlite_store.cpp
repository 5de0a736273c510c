#include <doctest/doctest.h>

#include <sqlite3.h>

#include "store/sqlite_store.hpp"
#include "store/store_conformance.hpp"
#include "support/runtime_fixture.hpp"

using namespace agentrt;
using namespace agentrt::testing;

TEST_CASE("SqliteStore passes the store conformance suite") {
  TempDir dir;
  int n = 0;
  run_store_conformance([&] {
    return std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("conf" + std::to_string(n++) + ".db")});
  });
}

TEST_CASE("SqliteStore migrates a new file to the current schema version and refuses a newer one") {
  TempDir dir;
  {
    SqliteStore s(SqliteStoreOptions{dir.file("v.db")});
    CHECK(s.schema_version() == SqliteStore::kSchemaVersion);
  }
  {
    SqliteStore again(SqliteStoreOptions{dir.file("v.db")});  // reopening migrates nothing
    CHECK(again.schema_version() == SqliteStore::kSchemaVersion);
  }
  sqlite3* db = nullptr;
  sqlite3_open(dir.file("v.db").c_str(), &db);
  sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  try {
    SqliteStore newer(SqliteStoreOptions{dir.file("v.db")});
    FAIL("a newer schema was opened");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::unsupported);
  }
  CHECK_THROWS_AS(SqliteStore(SqliteStoreOptions{dir.file("x.db"), "SOMETIMES"}), Error);
  CHECK_THROWS_AS(SqliteStore(SqliteStoreOptions{"/nonexistent-dir/x/y.db"}), Error);
}

TEST_CASE("the database runs in WAL mode with the configured synchronous level") {
  TempDir dir;
  SqliteStore s(SqliteStoreOptions{dir.file("w.db"), "FULL"});
  sqlite3* db = nullptr;
  sqlite3_open(dir.file("w.db").c_str(), &db);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, nullptr);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  CHECK(std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, 0))) == "wal");
  sqlite3_finalize(st);
  sqlite3_close(db);
}
