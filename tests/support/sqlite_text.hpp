// Plain SQL on a SQLite file beside a store, for tests that look at (or change) the rows a store wrote.
#pragma once

#include <doctest/doctest.h>
#include <sqlite3.h>

#include <string>

namespace agentrt::testing {

// Runs `sql`; fails the test with SQLite's message when it fails.
inline void sqlite_exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  const std::string msg = err ? err : "";
  sqlite3_free(err);
  INFO(sql, ": ", msg);
  REQUIRE(rc == SQLITE_OK);
}

// What a query gives, as text: each row's columns followed by '|', each row by a newline (a NULL as empty).
inline std::string sqlite_text(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
  std::string out;
  while (sqlite3_step(st) == SQLITE_ROW) {
    for (int c = 0; c < sqlite3_column_count(st); ++c) {
      const auto* t = sqlite3_column_text(st, c);
      out += t ? reinterpret_cast<const char*>(t) : "";
      out += '|';
    }
    out += '\n';
  }
  sqlite3_finalize(st);
  return out;
}

}  // namespace agentrt::testing
