// The run emitter's units: what a run stages inside one commits whole, never split by the group-commit flusher.
#include <doctest/doctest.h>

#include "pipeline/run_emitter.hpp"
#include "store/sqlite_store.hpp"
#include "support/runtime_fixture.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {
ThreadRecord thread_record() {
  ThreadRecord t;
  t.id = "th_1";
  t.user_id = "u_1";
  return t;
}
}  // namespace

TEST_CASE("run emitter: the flusher commits nothing while a unit is open, then all of it together") {
  TempDir dir;
  SqliteStore store(SqliteStoreOptions{dir.file("agentrt.db")});
  EventHub hub;
  int commits = 0;
  RunEmitter em(store, hub, "th_1", "run_1", [&](const CommitBatch&) { ++commits; });
  {
    RunEmitter::Unit outer(em);
    em.create_thread(thread_record());
    em.emit(events::custom("agentrt.test", json{{"n", 1}}));
    {
      RunEmitter::Unit inner(em);  // nested: the outer one still holds after it closes
      em.emit(events::custom("agentrt.test", json{{"n", 2}}));
    }
    em.flush_in_background();
    CHECK(commits == 0);
    CHECK(em.has_pending());
    CHECK(store.events_after("th_1", 0, 10).empty());
  }
  em.flush_in_background();
  CHECK(commits == 1);
  CHECK_FALSE(em.has_pending());
  auto events = store.events_after("th_1", 0, 10);
  REQUIRE(events.size() == 2);
  CHECK(events[0].seq == 1);
  CHECK(events[1].seq == 2);
}

TEST_CASE("run emitter: the run's own flush inside a unit commits") {
  TempDir dir;
  SqliteStore store(SqliteStoreOptions{dir.file("agentrt.db")});
  EventHub hub;
  RunEmitter em(store, hub, "th_1", "run_1");
  RunEmitter::Unit unit(em);
  em.create_thread(thread_record());
  em.emit(events::custom("agentrt.test", json{{"n", 1}}));
  auto batch = em.flush();
  REQUIRE(batch.events.size() == 1);
  CHECK(batch.events[0].seq == 1);
  CHECK(store.events_after("th_1", 0, 10).size() == 1);
}
