#include "support/postgres_database.hpp"

#include <doctest/doctest.h>
#include <libpq-fe.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <random>

#include <fmt/format.h>

namespace agentrt::testing {

namespace {

const char* kNoServer =
    "AGENTRT_TEST_PG_URL is not set: the PostgreSQL tests need a server. ctest starts a throwaway one (the "
    "postgres fixture: ./scripts/test, or ctest -R postgres); by hand: eval \"$(scripts/pg-test-cluster start "
    "/tmp/agentrt-pg)\" and run the tests, then scripts/pg-test-cluster stop /tmp/agentrt-pg";

using Conn = std::unique_ptr<PGconn, decltype(&PQfinish)>;

Conn connect(const std::string& url) {
  Conn c(PQconnectdb(url.c_str()), &PQfinish);
  REQUIRE_MESSAGE(PQstatus(c.get()) == CONNECTION_OK,
                  "cannot connect to the test cluster " << url << ": " << PQerrorMessage(c.get()));
  return c;
}

}  // namespace

std::string pg_cluster_url() {
  const char* url = std::getenv("AGENTRT_TEST_PG_URL");
  if (!url || !*url) FAIL(std::string(kNoServer));
  return url;
}

std::string pg_url_of(const std::string& dbname, const std::string& extra) {
  const std::string base = pg_cluster_url();
  char* err = nullptr;
  std::unique_ptr<PQconninfoOption, decltype(&PQconninfoFree)> opts(PQconninfoParse(base.c_str(), &err),
                                                                    &PQconninfoFree);
  if (err) PQfreemem(err);
  REQUIRE_MESSAGE(opts, "AGENTRT_TEST_PG_URL is not a PostgreSQL URL: " << base);
  std::string url = "postgresql://", query;
  std::string user, password;
  for (auto* o = opts.get(); o->keyword; ++o) {
    if (!o->val || std::string_view(o->keyword) == "dbname") continue;
    const std::string k = o->keyword;
    if (k == "user")
      user = o->val;
    else if (k == "password")
      password = o->val;
    else if (k == "host" || k == "port" || k == "hostaddr" || k == "sslmode")
      query += fmt::format("{}{}={}", query.empty() ? "?" : "&", k, o->val);
  }
  if (!user.empty()) url += user + (password.empty() ? "" : ":" + password) + "@";
  url += "/" + dbname + query;
  if (!extra.empty()) url += (query.empty() ? "?" : "&") + extra;
  return url;
}

void pg_admin(const std::string& sql, const std::string& url) {
  Conn c = connect(url.empty() ? pg_cluster_url() : url);
  PGresult* r = PQexec(c.get(), sql.c_str());
  const auto st = PQresultStatus(r);
  const std::string msg = PQresultErrorMessage(r);
  PQclear(r);
  REQUIRE_MESSAGE((st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK), "SQL failed: " << sql << ": " << msg);
}

std::string pg_query_value(const std::string& url, const std::string& sql) {
  Conn c = connect(url);
  PGresult* r = PQexec(c.get(), sql.c_str());
  const bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0;
  const std::string v = ok ? PQgetvalue(r, 0, 0) : std::string();
  const std::string msg = PQresultErrorMessage(r);
  PQclear(r);
  REQUIRE_MESSAGE(ok, "query gave no row: " << sql << ": " << msg);
  return v;
}

PgDatabase::PgDatabase() {
  static std::atomic<int> n{0};
  std::random_device rd;
  name = fmt::format("agentrt_test_{}_{}_{}", ::getpid(), n++, rd() % 100000);
  pg_admin(fmt::format("CREATE DATABASE {}", name));
  url = pg_url_of(name);
}

PgDatabase::~PgDatabase() {
  try {
    pg_admin(fmt::format("DROP DATABASE IF EXISTS {} WITH (FORCE)", name));
  } catch (...) {
    // A failed drop fails the test already (REQUIRE); a leftover database goes with the cluster.
  }
}

namespace {

void cluster_ctl(const char* verb) {
  const char* dir = std::getenv("AGENTRT_TEST_PG_DIR");
  if (!dir || !*dir)
    FAIL(
        "AGENTRT_TEST_PG_DIR is not set: this test stops and starts the test cluster's server; "
        "run it through ctest (the postgres fixture sets it)");
  const std::string cmd = fmt::format("'{}/scripts/pg-test-cluster' {} '{}'", AGENTRT_SOURCE_DIR, verb, dir);
  REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, "failed: " << cmd);
}

}  // namespace

PgServerPaused::PgServerPaused() {
  cluster_ctl("pause");
  paused_ = true;
}

PgServerPaused::~PgServerPaused() {
  try {
    resume();
  } catch (...) {
  }
}

void PgServerPaused::resume() {
  if (!paused_) return;
  paused_ = false;
  cluster_ctl("resume");
}

}  // namespace agentrt::testing
