// Test support: a PostgreSQL database of its own for a test, on the throwaway cluster the tests are given
// (AGENTRT_TEST_PG_URL, set by ctest's postgres fixture: scripts/pg-test-cluster), dropped when the test ends.
// A test that needs PostgreSQL and has no URL fails, saying how to get one; it is never skipped.
#pragma once

#include <string>

#include "store/postgres/postgres_store.hpp"

namespace agentrt::testing {

// The cluster's URL (a database to connect to for administration). FAILs the test when it is not set.
std::string pg_cluster_url();
// The cluster's URL with another database name, and `extra` query parameters ("options=...") appended.
std::string pg_url_of(const std::string& dbname, const std::string& extra = {});
// Runs SQL on the cluster's administration database (or on `url`); FAILs the test when it fails.
void pg_admin(const std::string& sql, const std::string& url = {});
// The first column of the first row of a query (REQUIREs a row).
std::string pg_query_value(const std::string& url, const std::string& sql);

// A fresh, empty database, dropped (its connections ended) when this object ends. Not thread-safe.
struct PgDatabase {
  std::string name;
  std::string url;
  PgDatabase();
  ~PgDatabase();
  PgDatabase(const PgDatabase&) = delete;
  PgDatabase& operator=(const PgDatabase&) = delete;
  PostgresStoreOptions options(int pool_size = 4) const { return PostgresStoreOptions{url, pool_size}; }
};

// Stops the cluster's server (scripts/pg-test-cluster pause) until this object ends, which starts it again.
struct PgServerPaused {
  PgServerPaused();
  ~PgServerPaused();
  void resume();  // early; idempotent

 private:
  bool paused_ = false;
};

}  // namespace agentrt::testing
