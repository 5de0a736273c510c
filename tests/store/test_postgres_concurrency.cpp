// PostgresStore under concurrent writers: several processes (fork) and several stores (pools) on one database.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <barrier>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "store/postgres/postgres_store.hpp"
#include "store/store_conformance.hpp"
#include "support/postgres_database.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {

// What one writer appends: `events` events naming it and their number, and maybe a message.
CommitBatch writer_batch(const std::string& writer, int n, int events, bool message) {
  CommitBatch b;
  b.thread_id = "hot";
  b.create_thread = ThreadRecord{"hot", "u1", "", false, 0, 0, 0};
  for (int k = 0; k < events; ++k)
    b.events.push_back(StoredEvent{0, "run_" + writer,
                                   to_json_string(events::custom("w", json{{"writer", writer}, {"n", n}, {"k", k}}))});
  if (message) {
    Message m;
    m.id = fmt::format("{}-{}", writer, n);
    m.content = "x";
    b.messages.push_back(MessageRecord{"hot", 0, "turn_" + writer, "run_" + writer, m});
  }
  return b;
}

}  // namespace

TEST_CASE("postgres: concurrent commits to one thread from several processes leave no gap and no duplicate seq") {
  PgDatabase db;
  { PostgresStore migrate(db.options(1)); }  // the children find the schema made
  constexpr int kProcesses = 3, kThreads = 2, kBatches = 30;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int rc = 0;
      try {
        PostgresStore s(db.options(kThreads));
        std::vector<std::thread> threads;
        std::atomic<int> failures{0};
        for (int t = 0; t < kThreads; ++t)
          threads.emplace_back([&, t] {
            const std::string writer = fmt::format("p{}t{}", p, t);
            for (int n = 0; n < kBatches; ++n) {
              auto b = writer_batch(writer, n, 1 + (n % 3), n % 2 == 0);
              try {
                s.commit(b);
              } catch (const std::exception& e) {
                fprintf(stderr, "writer %s: %s\n", writer.c_str(), e.what());
                ++failures;
              }
            }
          });
        for (auto& th : threads) th.join();
        rc = failures == 0 ? 0 : 3;
      } catch (const std::exception& e) {
        fprintf(stderr, "child %d: %s\n", p, e.what());
        rc = 5;
      }
      _exit(rc);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  PostgresStore s(db.options(1));
  int expected_events = 0, expected_messages = 0;
  for (int n = 0; n < kBatches; ++n) {
    expected_events += 1 + (n % 3);
    expected_messages += n % 2 == 0 ? 1 : 0;
  }
  expected_events *= kProcesses * kThreads;
  expected_messages *= kProcesses * kThreads;
  auto evs = s.events_after("hot", 0, 100000);
  REQUIRE(static_cast<int>(evs.size()) == expected_events);
  std::set<std::string> seen;
  std::map<std::string, std::pair<int, int>> last;  // writer -> (n, k) of its last event
  for (size_t i = 0; i < evs.size(); ++i) {
    CHECK(evs[i].seq == static_cast<int64_t>(i + 1));  // consecutive from 1: no gap, no duplicate
    const json v = json::parse(evs[i].json)["value"];
    const std::string writer = v["writer"];
    const std::pair<int, int> at{v["n"], v["k"]};
    CHECK(seen.insert(fmt::format("{}/{}/{}", writer, at.first, at.second)).second);
    if (last.count(writer)) CHECK(last[writer] < at);  // each writer's events in the order it committed them
    last[writer] = at;
  }
  CHECK(s.get_thread("hot")->last_seq == expected_events);
  auto msgs = s.messages("hot");
  REQUIRE(static_cast<int>(msgs.size()) == expected_messages);
  for (size_t i = 0; i < msgs.size(); ++i) CHECK(msgs[i].index == static_cast<int64_t>(i));
}

TEST_CASE("postgres: two stores resuming one turn at once: one wins, the other gets a conflict") {
  PgDatabase db;
  PostgresStore a(db.options(2));
  PostgresStore b(db.options(2));
  constexpr int kRounds = 15;
  int a_wins = 0, b_wins = 0;
  for (int r = 0; r < kRounds; ++r) {
    auto t = conformance_turn(fmt::format("t{}", r), fmt::format("th{}", r), TurnStatus::waiting_approval);
    auto start = new_turn_batch(t);
    a.commit(start);
    std::barrier go(2);
    std::atomic<int> wins{0}, conflicts{0};
    auto resume = [&](PostgresStore& s, const std::string& owner, int& won) {
      CommitBatch up;
      up.thread_id = t.thread_id;
      TurnRecord mine = t;
      mine.status = TurnStatus::resuming;
      mine.owner = owner;
      up.turn = mine;
      up.expected_version = 0;
      up.events.push_back(StoredEvent{0, "run_" + owner, to_json_string(events::run_started(t.thread_id, owner))});
      go.arrive_and_wait();
      try {
        s.commit(up);
        ++wins;
        ++won;
      } catch (const Error& e) {
        if (e.code() == ErrorCode::conflict) ++conflicts;
      }
    };
    std::thread ta([&] { resume(a, "rt_a", a_wins); });
    std::thread tb([&] { resume(b, "rt_b", b_wins); });
    ta.join();
    tb.join();
    CHECK(wins == 1);
    CHECK(conflicts == 1);
    auto got = a.get_turn(t.id);
    CHECK(got->version == 1);
    CHECK(got->status == TurnStatus::resuming);
    CHECK(a.events_after(t.thread_id, 0, 10).size() == 2);  // the loser's event was not written
  }
  CHECK(a_wins + b_wins == kRounds);
}

TEST_CASE("postgres: two stores starting a turn on one thread at once: one active turn, the other a conflict") {
  PgDatabase db;
  PostgresStore a(db.options(2));
  PostgresStore b(db.options(2));
  for (int r = 0; r < 10; ++r) {
    const std::string thread = fmt::format("th{}", r);
    std::barrier go(2);
    std::atomic<int> wins{0}, conflicts{0};
    auto start = [&](PostgresStore& s, const std::string& id) {
      auto batch = new_turn_batch(conformance_turn(id, thread, TurnStatus::running));
      go.arrive_and_wait();
      try {
        s.commit(batch);
        ++wins;
      } catch (const Error& e) {
        CHECK_MESSAGE(e.message().find("active turn") != std::string::npos, e.message());
        if (e.code() == ErrorCode::conflict) ++conflicts;
      }
    };
    std::thread ta([&] { start(a, thread + "_a"); });
    std::thread tb([&] { start(b, thread + "_b"); });
    ta.join();
    tb.join();
    CHECK(wins == 1);
    CHECK(conflicts == 1);
    CHECK(b.messages(thread).size() == 1);
    CHECK(b.events_after(thread, 0, 10).size() == 1);
  }
}
