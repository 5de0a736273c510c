// The run emitter's units: what a run stages inside one commits whole, never split by the group-commit flusher.
#include <doctest/doctest.h>

#include <condition_variable>
#include <future>
#include <thread>

#include "pipeline/run_emitter.hpp"
#include "runtime/group_commit.hpp"
#include "store/sqlite_store.hpp"
#include "support/forwarding_store.hpp"
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
  RunEmitter em(store, hub, "th_1", "run_1", [&](const RunEmitter::Flushed&) { ++commits; });
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
  auto flushed = em.flush();
  CHECK(flushed.batch.events.empty());  // moved to the hub's shared copy
  REQUIRE(flushed.events);
  REQUIRE(flushed.events->size() == 1);
  CHECK((*flushed.events)[0].seq == 1);
  CHECK(flushed.first_seq() == 1);
  CHECK(store.events_after("th_1", 0, 10).size() == 1);
}

namespace {
// A store whose commits of one thread wait at a gate until the test opens it.
class GatedStore : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  void commit(CommitBatch& b) override {
    if (b.thread_id == "th_gated") {
      std::unique_lock<std::mutex> lock(mutex_);
      entered_ = true;
      cv_.notify_all();
      cv_.wait(lock, [&] { return open_; });
    }
    ForwardingStore::commit(b);
  }
  void wait_entered() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return entered_; });
  }
  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool entered_ = false, open_ = false;
};
}  // namespace

TEST_CASE("group commit: a run's start is not held up by another run's commit that takes long") {
  // An emitter's lock is held through its commit (a checkpoint's fsyncs take milliseconds). The flusher asks each
  // live emitter whether it holds anything; it must not do so under the lock that every run's start (watch) takes.
  TempDir dir;
  GatedStore store(std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("agentrt.db")}));
  EventHub hub;
  GroupCommit gc(std::chrono::milliseconds(1));
  auto slow = std::make_shared<RunEmitter>(store, hub, "th_gated", "run_1");
  gc.watch(slow);
  slow->emit(events::custom("agentrt.test", json{{"n", 1}}));
  std::thread committing([&] { slow->flush(); });
  store.wait_entered();
  // Long enough for the flusher's ticks to reach the emitter whose commit waits (it ticks every millisecond).
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto next = std::make_shared<RunEmitter>(store, hub, "th_next", "run_2");
  auto started = std::async(std::launch::async, [&] { gc.watch(next); });
  const bool prompt = started.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  store.open();
  committing.join();
  started.wait();
  CHECK(prompt);
  CHECK(store.events_after("th_gated", 0, 10).size() == 1);
}
