// PostgresStore on a real server (the throwaway cluster of ctest's postgres fixture): the Store conformance suite
// in both message layouts, migrations, configuration errors, and a database that is down, read-only or gone.
#include <doctest/doctest.h>
#include <libpq-fe.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <thread>

#include <fmt/format.h>

#include "agentrt/config.hpp"
#include "store/document_layout.hpp"
#include "store/fs_object_store.hpp"
#include "store/postgres/document_pointers.hpp"
#include "store/postgres/postgres_store.hpp"
#include "store/store_conformance.hpp"
#include "support/postgres_database.hpp"
#include "support/runtime_fixture.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {

CommitBatch event_batch(const std::string& thread, int events, int messages = 0) {
  CommitBatch b;
  b.thread_id = thread;
  b.create_thread = ThreadRecord{thread, "u1", "", false, 0, 0, 0};
  for (int i = 0; i < events; ++i)
    b.events.push_back(StoredEvent{0, "run_1", to_json_string(events::step_started("s" + std::to_string(i)))});
  for (int i = 0; i < messages; ++i) {
    Message m;
    m.id = fmt::format("m{}", i);
    m.content = "hi";
    b.messages.push_back(MessageRecord{thread, 0, "turn_1", "run_1", m});
  }
  return b;
}

std::string error_of(const std::function<void()>& f, ErrorCode expected) {
  try {
    f();
  } catch (const Error& e) {
    CHECK_MESSAGE(e.code() == expected, e.what());
    return e.message();
  }
  FAIL("no error");
  return {};
}

// Ends the connections of the database at `url` that `waiting` (a condition on pg_stat_activity) picks, as an
// administrator would, until `kills` were ended or `stop` is set. It polls the server's view of who waits.
struct BackendKiller {
  std::atomic<bool> stop{false};
  std::atomic<int> killed{0};
  std::thread thread;
  BackendKiller(const std::string& url, const std::string& waiting, int kills) {
    thread = std::thread([this, url, waiting, kills] {
      std::unique_ptr<PGconn, decltype(&PQfinish)> admin(PQconnectdb(url.c_str()), &PQfinish);
      const std::string sql =
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname=current_database() AND "
          "pid<>pg_backend_pid() AND " +
          waiting;
      while (!stop && killed < kills) {
        PGresult* r = PQexec(admin.get(), sql.c_str());
        if (PQresultStatus(r) == PGRES_TUPLES_OK) killed += PQntuples(r);
        PQclear(r);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
  }
  // The number ended.
  int join() {
    stop = true;
    if (thread.joinable()) thread.join();
    return killed;
  }
  ~BackendKiller() { join(); }
};

}  // namespace

TEST_CASE("postgres: PostgresStore passes the store conformance suite (rows layout)") {
  std::vector<std::unique_ptr<PgDatabase>> dbs;
  run_store_conformance([&] {
    dbs.push_back(std::make_unique<PgDatabase>());
    return std::make_shared<PostgresStore>(dbs.back()->options());
  });
}

TEST_CASE("postgres: PostgresStore passes the store conformance suite (document layout)") {
  TempDir dir;
  std::vector<std::unique_ptr<PgDatabase>> dbs;
  int n = 0;
  run_store_conformance([&] {
    dbs.push_back(std::make_unique<PgDatabase>());
    FsObjectStoreOptions o;
    o.root = dir.file("objects" + std::to_string(n));
    o.bucket = "agentrt";
    o.signing_secret = "test-secret";
    o.public_base_url = "http://127.0.0.1:8080/api/v1/objects";
    DocumentLayoutOptions d;
    d.pointers = pg::document_pointers(dbs.back()->options());  // the pointer rows in the same database
    ++n;
    auto layout = std::make_unique<DocumentLayout>(std::make_shared<FsObjectStore>(o), d);
    return std::make_shared<PostgresStore>(dbs.back()->options(), std::move(layout));
  });
}

TEST_CASE("postgres: the document layout's writers in three processes on one database lose nothing") {
  TempDir dir;
  PgDatabase db;
  auto open_store = [&] {
    FsObjectStoreOptions o;
    o.root = dir.file("objects");  // one bucket for the three processes
    o.bucket = "agentrt";
    o.signing_secret = "test-secret";
    o.public_base_url = "http://127.0.0.1:8080/api/v1/objects";
    DocumentLayoutOptions d;
    d.pointers = pg::document_pointers(db.options(2));
    return std::make_shared<PostgresStore>(db.options(2),
                                           std::make_unique<DocumentLayout>(std::make_shared<FsObjectStore>(o), d));
  };
  {
    CommitBatch create;
    create.thread_id = "shared";
    create.create_thread = ThreadRecord{"shared", "u1", "", false, 0, 0, 0};
    open_store()->commit(create);
  }
  constexpr int kWriters = 3, kBatches = 15;
  std::vector<pid_t> pids;
  for (int w = 0; w < kWriters; ++w) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int code = 0;
      try {
        auto store = open_store();
        for (int i = 0; i < kBatches; ++i) {
          CommitBatch b;
          b.thread_id = "shared";
          b.events.push_back(
              StoredEvent{0, fmt::format("run_{}", w), to_json_string(events::custom("w", json{{"w", w}, {"i", i}}))});
          Message m;
          m.id = fmt::format("{}-{}", w, i);
          m.content = "x";
          b.messages.push_back(MessageRecord{"shared", 0, fmt::format("turn_{}", w), fmt::format("run_{}", w), m});
          store->commit(b);
        }
      } catch (const std::exception& e) {
        fprintf(stderr, "writer %d: %s\n", w, e.what());
        code = 3;
      }
      _exit(code);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  auto store = open_store();
  auto msgs = store->messages("shared");
  REQUIRE(msgs.size() == static_cast<size_t>(kWriters * kBatches));
  std::set<std::string> ids;
  for (size_t i = 0; i < msgs.size(); ++i) {
    CHECK(msgs[i].index == static_cast<int64_t>(i));  // no gap, no duplicate
    ids.insert(msgs[i].message.id);
  }
  CHECK(ids.size() == msgs.size());
  for (int w = 0; w < kWriters; ++w) {  // each writer's own batches in its order
    int last = -1;
    for (const auto& m : msgs)
      if (m.message.id.rfind(fmt::format("{}-", w), 0) == 0) {
        const int i = std::stoi(m.message.id.substr(m.message.id.find('-') + 1));
        CHECK(i == last + 1);
        last = i;
      }
    CHECK(last == kBatches - 1);
  }
  CHECK(store->events_after("shared", 0, 1000).size() == static_cast<size_t>(kWriters * kBatches));
}

TEST_CASE("postgres: migrations run once, are recorded in agentrt_schema, and a newer schema is refused") {
  PgDatabase db;
  {
    PostgresStore s(db.options());
    CHECK(s.schema_version() == PostgresStore::kSchemaVersion);
  }
  const std::string applied = pg_query_value(db.url, "SELECT applied_at FROM agentrt_schema WHERE version=1");
  {
    PostgresStore again(db.options());  // opening again migrates nothing
    CHECK(again.schema_version() == PostgresStore::kSchemaVersion);
    auto b = event_batch("th", 1);
    again.commit(b);
  }
  CHECK(pg_query_value(db.url, "SELECT count(*) FROM agentrt_schema") == std::to_string(PostgresStore::kSchemaVersion));
  CHECK(pg_query_value(db.url, "SELECT applied_at FROM agentrt_schema WHERE version=1") == applied);
  // Two stores opening a new database at once: one migrates, the other waits for it and finds it done.
  PgDatabase fresh;
  std::vector<std::thread> openers;
  std::atomic<int> opened{0};
  for (int i = 0; i < 3; ++i)
    openers.emplace_back([&] {
      PostgresStore s(fresh.options(1));
      if (s.schema_version() == PostgresStore::kSchemaVersion) ++opened;
    });
  for (auto& t : openers) t.join();
  CHECK(opened == 3);
  CHECK(pg_query_value(fresh.url, "SELECT count(*) FROM agentrt_schema") ==
        std::to_string(PostgresStore::kSchemaVersion));

  pg_admin("INSERT INTO agentrt_schema(version, applied_at) VALUES(99, 0)", db.url);
  const std::string msg = error_of([&] { PostgresStore newer(db.options()); }, ErrorCode::unsupported);
  CHECK(msg.find("schema version 99") != std::string::npos);
}

TEST_CASE("postgres: a bad URL or pool size is invalid_argument, and no message shows the password") {
  auto bad = [](const std::string& url, int pool = 4) {
    return error_of([&] { PostgresStore s(PostgresStoreOptions{url, pool}); }, ErrorCode::invalid_argument);
  };
  CHECK(bad("mysql://u:hunter2@localhost/db").find("postgresql://") != std::string::npos);
  CHECK(bad("").find("url is required") != std::string::npos);
  const std::string garbled = bad("postgresql://u:hunter2@[::1/db");
  CHECK(garbled.find("not a valid PostgreSQL connection URL") != std::string::npos);
  CHECK(garbled.find("hunter2") == std::string::npos);
  CHECK(bad(pg_url_of("postgres"), 0).find("pool_size") != std::string::npos);
  CHECK(bad(pg_url_of("postgres"), 65).find("pool_size") != std::string::npos);
  // Through the config, as every host reads it.
  TempDir dir;
  auto config_error = [&](json store) {
    return error_of(
        [&] {
          runtime_config_from_json({{"data_dir", dir.path.string()}, {"store", store}});
        },
        ErrorCode::invalid_argument);
  };
  CHECK(config_error({{"type", "postgres"}}).find("url") != std::string::npos);
  CHECK(config_error({{"type", "postgres"}, {"url", "http://x"}}).find("postgresql://") != std::string::npos);
  CHECK(config_error({{"type", "postgres"}, {"url", pg_url_of("postgres")}, {"pool_size", 0}}).find("pool_size") !=
        std::string::npos);
  CHECK(config_error({{"type", "postgres"}, {"url", pg_url_of("postgres")}, {"path", "x.db"}}).find("path") !=
        std::string::npos);
  CHECK(config_error({{"type", "oracle"}}).find("postgres") != std::string::npos);
}

TEST_CASE("postgres: the config opens a PostgresStore that a runtime runs turns on") {
  PgDatabase db;
  TempDir dir;
  RuntimeConfig c = runtime_config_from_json(
      {{"data_dir", dir.path.string()}, {"store", {{"type", "postgres"}, {"url", db.url}, {"pool_size", 2}}}});
  auto* pg = dynamic_cast<PostgresStore*>(c.store.get());
  REQUIRE(pg);
  CHECK(pg->target().find("hunter2") == std::string::npos);
  auto b = event_batch("th_config", 2, 1);
  c.store->commit(b);
  CHECK(pg_query_value(db.url, "SELECT last_seq FROM thread_tails WHERE thread_id='th_config'") == "2");
}

TEST_CASE("postgres: a server that is not running is an io error naming the database but not the password") {
  TempDir nowhere;  // a socket folder with no server in it
  const std::string url = "postgresql://agentrt:hunter2@/agentrt?host=" + nowhere.path.string();
  const std::string msg = error_of([&] { PostgresStore s(PostgresStoreOptions{url, 2}); }, ErrorCode::io);
  CHECK(msg.find("cannot connect to postgresql://agentrt@" + nowhere.path.string()) != std::string::npos);
  CHECK(msg.find("hunter2") == std::string::npos);
  CHECK(msg.find('\n') == std::string::npos);
}

TEST_CASE("postgres: a read-only database opens, reads, and refuses commits with an io error saying so") {
  PgDatabase db;
  PostgresStore writer(db.options());
  auto b = event_batch("th_ro", 2);
  writer.commit(b);
  PostgresStore ro(PostgresStoreOptions{pg_url_of(db.name, "options=-c%20default_transaction_read_only%3Don"), 2});
  CHECK(ro.get_thread("th_ro")->last_seq == 2);
  auto more = event_batch("th_ro", 1);
  const std::string msg = error_of([&] { ro.commit(more); }, ErrorCode::io);
  CHECK(msg.find("read-only") != std::string::npos);
  CHECK(msg.find("default_transaction_read_only") != std::string::npos);
  CHECK(ro.events_after("th_ro", 0, 10).size() == 2);  // nothing of it was written
  // A read-only database that was never migrated cannot be opened: it says why.
  PgDatabase empty;
  const std::string open_msg = error_of(
      [&] {
        PostgresStore s(PostgresStoreOptions{pg_url_of(empty.name, "options=-c%20default_transaction_read_only%3Don")});
      },
      ErrorCode::io);
  CHECK(open_msg.find("read-only") != std::string::npos);
}

TEST_CASE("postgres: a server stopped mid-test gives io errors, and the store works again once it is back") {
  PgDatabase db;
  PostgresStore s(db.options(2));
  auto b1 = event_batch("th_down", 3, 1);
  s.commit(b1);
  {
    PgServerPaused down;
    auto b2 = event_batch("th_down", 2, 1);
    const std::string msg = error_of([&] { s.commit(b2); }, ErrorCode::io);
    CHECK(msg.find("postgres:") == 0);
    CHECK(msg.find('\n') == std::string::npos);
    error_of([&] { s.get_thread("th_down"); }, ErrorCode::io);
    CHECK(s.external_version() == -1);  // it cannot listen: the runtime treats every look as a change
    down.resume();
    auto b3 = event_batch("th_down", 2, 1);
    s.commit(b3);                  // reconnected on this call
    CHECK(b3.events[0].seq == 4);  // the failed commit left nothing: no gap
    CHECK(b3.messages[0].index == 1);
  }
  CHECK(s.events_after("th_down", 0, 100).size() == 5);
  CHECK(s.messages("th_down").size() == 2);
  CHECK(s.external_version() >= 0);
}

TEST_CASE("postgres: a connection killed mid-transaction is rolled back; the commit is retried once, then io") {
  PgDatabase db;
  PostgresStore s(db.options(1));
  auto first = event_batch("th_kill", 1);
  s.commit(first);
  // An administrator holds the thread's tail row: the store's commit waits inside its transaction, where it is
  // killed.
  using Conn = std::unique_ptr<PGconn, decltype(&PQfinish)>;
  Conn holder(PQconnectdb(db.url.c_str()), &PQfinish);
  REQUIRE(PQstatus(holder.get()) == CONNECTION_OK);
  PQclear(PQexec(holder.get(), "BEGIN"));
  PQclear(PQexec(holder.get(), "SELECT * FROM thread_tails WHERE thread_id='th_kill' FOR UPDATE"));
  const int kills = 2;  // the first loss is retried on a new connection; the second is the caller's
  BackendKiller killer(db.url, "wait_event_type='Lock'", kills);
  auto b = event_batch("th_kill", 2);
  const std::string msg = error_of([&] { s.commit(b); }, ErrorCode::io);
  CHECK(killer.join() == kills);
  CHECK(msg.find("was lost") != std::string::npos);
  PQclear(PQexec(holder.get(), "ROLLBACK"));
  auto again = event_batch("th_kill", 2);
  s.commit(again);
  CHECK(again.events[0].seq == 2);  // nothing of the killed transactions landed
  CHECK(s.events_after("th_kill", 0, 100).size() == 3);
}

TEST_CASE("postgres: a commit of hundreds of rows is sent in parts; an error in a late part leaves nothing") {
  PgDatabase db;
  PostgresStore s(db.options(1));  // one connection: every commit below reuses the one the failure was on
  auto big = event_batch("th_parts", 40, 300);
  big.approval = ApprovalRecord{"ap_1", "turn_1", "th_parts", json::array(), json::object(), 0};
  s.commit(big);
  const auto messages = s.messages("th_parts");
  REQUIRE(messages.size() == 300);
  for (size_t i = 0; i < messages.size(); ++i) CHECK(messages[i].index == static_cast<int64_t>(i));
  CHECK(s.events_after("th_parts", 0, 1000).size() == 40);
  CHECK(s.get_approval("ap_1"));

  // The same approval id again, queued after 300 messages (the third part): the server refuses it there, after
  // the messages of the first two parts were written in the transaction.
  auto bad = event_batch("th_parts", 5, 300);
  bad.approval = ApprovalRecord{"ap_1", "turn_1", "th_parts", json::array(), json::object(), 0};
  const std::string msg = error_of([&] { s.commit(bad); }, ErrorCode::conflict);
  CHECK(msg == "approval request ap_1 was already answered");
  CHECK(s.messages("th_parts").size() == 300);
  CHECK(s.events_after("th_parts", 0, 1000).size() == 40);

  // A value the server refuses (a NUL byte in a text column) in the middle of a part; the connection goes on.
  auto nul = event_batch("th_parts", 1, 2);
  nul.messages[0].turn_id = std::string("t\0x", 3);
  error_of([&] { s.commit(nul); }, ErrorCode::invalid_argument);

  auto next = event_batch("th_parts", 2, 1);
  s.commit(next);
  CHECK(next.events[0].seq == 41);  // nothing of the refused commits landed: no gap
  CHECK(next.messages[0].index == 300);
  CHECK(s.messages("th_parts").size() == 301);
}

TEST_CASE("postgres: stores that take turns on one thread number its rows without gaps or repeats") {
  // Each store numbers a commit's rows from the tail its own last commit of the thread left (one round trip
  // less); another store's commit in between makes that guess wrong, and the commit is made again from the tail
  // the lock returns.
  PgDatabase db;
  PostgresStore a(db.options(1));
  PostgresStore b(db.options(1));
  for (int round = 0; round < 6; ++round) {
    auto batch = event_batch("th_turns", 2, 1);
    (round % 2 == 0 ? a : b).commit(batch);
    CHECK(batch.events[0].seq == 2 * round + 1);
    CHECK(batch.messages[0].index == round);
  }
  // Only messages on one side, only events on the other: nothing collides, the tail read by the lock tells.
  auto only_messages = event_batch("th_turns", 0, 2);
  only_messages.create_thread.reset();
  b.commit(only_messages);
  auto only_events = event_batch("th_turns", 1, 0);
  a.commit(only_events);
  auto next = event_batch("th_turns", 1, 1);
  a.commit(next);
  CHECK(only_messages.messages[1].index == 7);
  CHECK(only_events.events[0].seq == 13);
  CHECK(next.events[0].seq == 14);
  CHECK(next.messages[0].index == 8);

  // Both at once, from two threads: every commit lands once, numbered in the order they took the lock.
  std::vector<std::thread> writers;
  for (PostgresStore* s : {&a, &b})
    writers.emplace_back([s] {
      for (int i = 0; i < 40; ++i) {
        auto batch = event_batch("th_turns", 3, 1);
        s->commit(batch);
      }
    });
  for (auto& w : writers) w.join();
  const auto events = a.events_after("th_turns", 0, 10000);
  REQUIRE(events.size() == 14 + 80 * 3);
  for (size_t i = 0; i < events.size(); ++i) CHECK(events[i].seq == static_cast<int64_t>(i) + 1);
  const auto messages = b.messages("th_turns");
  REQUIRE(messages.size() == 9 + 80);
  for (size_t i = 0; i < messages.size(); ++i) CHECK(messages[i].index == static_cast<int64_t>(i));
}

TEST_CASE("postgres: a commit with events notifies its thread and last seq; other stores count it") {
  PgDatabase db;
  PostgresStore a(db.options(2));
  PostgresStore b(db.options(2));
  using Conn = std::unique_ptr<PGconn, decltype(&PQfinish)>;
  Conn listener(PQconnectdb(db.url.c_str()), &PQfinish);
  REQUIRE(PQstatus(listener.get()) == CONNECTION_OK);
  PQclear(PQexec(listener.get(), "LISTEN agentrt_events"));
  const int64_t a0 = a.external_version();
  REQUIRE(a0 >= 0);
  auto own = event_batch("th_n", 3);
  a.commit(own);
  auto other = event_batch("th_n", 2);
  b.commit(other);
  auto quiet = event_batch("th_n", 0, 1);  // no events: no notification
  b.commit(quiet);
  // The listening connection receives both commits, in commit order, when they commit.
  std::vector<std::string> payloads;
  const auto deadline = std::chrono::steady_clock::now() + kLongWait;
  while (payloads.size() < 2 && std::chrono::steady_clock::now() < deadline) {
    pollfd p{PQsocket(listener.get()), POLLIN, 0};
    ::poll(&p, 1, 1000);
    PQconsumeInput(listener.get());
    while (PGnotify* n = PQnotifies(listener.get())) {
      CHECK(std::string(n->relname) == "agentrt_events");
      payloads.push_back(n->extra);
      PQfreemem(n);
    }
  }
  CHECK(payloads == std::vector<std::string>{"3 th_n", "5 th_n"});
  // Store a counts b's commit, not its own (its notification came first, so once b's is in, both are).
  // external_version() is polled (the runtime's sweeper does so): poll it until the notification is in.
  int64_t v = a0;
  const auto until = std::chrono::steady_clock::now() + kLongWait;
  while ((v = a.external_version()) == a0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  CHECK(v == a0 + 1);
}

TEST_CASE("postgres: a connection lost during COMMIT: the store asks the server what became of it, and never retries") {
  PgDatabase db;
  PostgresStore s(db.options(1));
  auto first = event_batch("th_slow", 1);
  s.commit(first);
  // A deferred trigger makes COMMIT itself wait (it runs at commit time, before the commit is durable); the
  // connection is killed there, so the store's COMMIT gets no answer.
  pg_admin(R"sql(
CREATE FUNCTION agentrt_test_slow() RETURNS trigger AS $$ BEGIN PERFORM pg_sleep(60); RETURN NULL; END $$
LANGUAGE plpgsql;
CREATE CONSTRAINT TRIGGER agentrt_test_slow_commit AFTER INSERT ON events DEFERRABLE INITIALLY DEFERRED
FOR EACH ROW WHEN (NEW.thread_id = 'th_slow') EXECUTE FUNCTION agentrt_test_slow();
)sql",
           db.url);
  BackendKiller killer(db.url, "wait_event='PgSleep'", 2);  // would end a second attempt too, were there one
  auto b = event_batch("th_slow", 2);
  const std::string msg = error_of([&] { s.commit(b); }, ErrorCode::io);
  CHECK(killer.join() == 1);  // one attempt: a COMMIT without an answer is never sent again
  CHECK_MESSAGE(msg.find("the commit was rolled back") != std::string::npos, msg);
  pg_admin("DROP TRIGGER agentrt_test_slow_commit ON events", db.url);
  CHECK(s.events_after("th_slow", 0, 100).size() == 1);
  auto again = event_batch("th_slow", 2);
  s.commit(again);
  CHECK(again.events[0].seq == 2);
}
