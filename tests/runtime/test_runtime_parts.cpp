// The runtime's small parts on their own: worker pool, run registry, sweeper, tool offers.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/run_registry.hpp"
#include "runtime/sweeper.hpp"
#include "runtime/tool_offers.hpp"
#include "runtime/worker_pool.hpp"

using namespace agentrt;
using namespace std::chrono_literals;

namespace {

// Counts to a goal; wait() returns false if the goal is not reached within 20 s.
class Latch {
 public:
  explicit Latch(int goal) : goal_(goal) {}
  void count() {
    std::lock_guard<std::mutex> lock(m_);
    ++n_;
    cv_.notify_all();
  }
  bool wait() {
    std::unique_lock<std::mutex> lock(m_);
    return cv_.wait_for(lock, 20s, [&] { return n_ >= goal_; });
  }
  int value() {
    std::lock_guard<std::mutex> lock(m_);
    return n_;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int n_ = 0;
  const int goal_;
};

}  // namespace

TEST_CASE("worker pool: every job runs once, a throwing job is reported and the pool goes on") {
  std::mutex m;
  std::vector<std::string> errors;
  Latch done(100);
  std::atomic<int> ran{0};
  {
    WorkerPool pool(3, [&](std::string_view what) {
      std::lock_guard<std::mutex> lock(m);
      errors.emplace_back(what);
    });
    for (int i = 0; i < 100; ++i)
      REQUIRE(pool.post([&, i] {
        ++ran;
        done.count();
        if (i == 10) throw std::runtime_error("job 10 broke");
        if (i == 20) throw 42;
      }));
    REQUIRE(done.wait());
  }
  CHECK(ran == 100);
  std::sort(errors.begin(), errors.end());  // two workers may report in either order
  CHECK(errors ==
        std::vector<std::string>{"worker job failed with a non-standard exception", "worker job failed: job 10 broke"});
}

TEST_CASE("worker pool: stop() runs what is queued, then nothing more") {
  std::atomic<int> ran{0};
  std::mutex gate;
  std::unique_lock<std::mutex> closed(gate);
  WorkerPool pool(1, [](std::string_view) {});
  Latch started(1);
  REQUIRE(pool.post([&] {
    started.count();
    std::lock_guard<std::mutex> wait_for_gate(gate);
    ++ran;
  }));
  REQUIRE(started.wait());
  for (int i = 0; i < 5; ++i) REQUIRE(pool.post([&] { ++ran; }));  // queued behind the blocked job
  std::thread stopper([&] { pool.stop(); });
  closed.unlock();
  stopper.join();
  CHECK(ran == 6);
  CHECK_FALSE(pool.post([&] { ++ran; }));  // after stop: refused, not run
  CHECK(ran == 6);
}

TEST_CASE("worker pool: posts racing stop() either run exactly once or are refused, and stop() returns") {
  for (int round = 0; round < 200; ++round) {
    constexpr int kPosters = 3, kPosts = 200;
    std::vector<std::atomic<int>> runs(kPosters * kPosts);
    std::vector<std::atomic<bool>> accepted(kPosters * kPosts);
    auto pool = std::make_unique<WorkerPool>(2, [](std::string_view) {});
    std::atomic<bool> go{false};
    std::vector<std::thread> posters;
    for (int p = 0; p < kPosters; ++p)
      posters.emplace_back([&, p] {
        while (!go.load()) std::this_thread::yield();
        for (int i = 0; i < kPosts; ++i) {
          const size_t k = static_cast<size_t>(p * kPosts + i);
          accepted[k] = pool->post([&runs, k] { ++runs[k]; });
        }
      });
    go = true;
    if (round % 2) std::this_thread::yield();
    pool->stop();  // returns once what was accepted has run
    for (size_t k = 0; k < runs.size(); ++k)
      if (accepted[k]) REQUIRE(runs[k].load() == 1);
    for (auto& t : posters) t.join();
    for (size_t k = 0; k < runs.size(); ++k) REQUIRE(runs[k].load() == (accepted[k] ? 1 : 0));
  }
}

TEST_CASE("worker pool: each poster's jobs run in the order posted; sleeping workers wake for each post") {
  constexpr int kPosters = 4, kJobs = 5000;
  std::vector<int> last(kPosters, -1);
  std::atomic<int> out_of_order{0};
  {
    WorkerPool pool(1, [](std::string_view) {});  // one worker: a poster's jobs never overlap
    std::vector<std::thread> posters;
    for (int p = 0; p < kPosters; ++p)
      posters.emplace_back([&, p] {
        for (int i = 0; i < kJobs; ++i)
          REQUIRE(pool.post([&, p, i] {
            if (last[static_cast<size_t>(p)] != i - 1) ++out_of_order;
            last[static_cast<size_t>(p)] = i;
          }));
      });
    for (auto& t : posters) t.join();
  }
  CHECK(out_of_order.load() == 0);
  CHECK(last == std::vector<int>(kPosters, kJobs - 1));
  WorkerPool pool(3, [](std::string_view) {});
  for (int i = 0; i < 1000; ++i) {  // each post finds the workers asleep: a lost wake-up hangs the latch
    Latch one(1);
    REQUIRE(pool.post([&] { one.count(); }));
    REQUIRE(one.wait());
  }
}

TEST_CASE("run registry: cancel reaches the registered run only; a change wakes a waiter") {
  RunRegistry runs;
  auto a = runs.add("turn_a");
  auto b = runs.add("turn_b");
  CHECK(runs.cancel("turn_a"));
  CHECK(a->cancel.cancelled());
  CHECK_FALSE(b->cancel.cancelled());
  CHECK_FALSE(runs.cancel("turn_x"));
  runs.remove("turn_a");
  CHECK_FALSE(runs.cancel("turn_a"));
  auto b2 = runs.add("turn_b");  // a continuation replaces the paused run's handle
  runs.cancel_all();
  CHECK(b2->cancel.cancelled());
  CHECK_FALSE(b->cancel.cancelled());

  const uint64_t seen = runs.generation();
  std::thread changer([&] { runs.turn_changed(); });
  runs.wait_for_change(seen, std::chrono::steady_clock::now() + 20s);
  CHECK(runs.generation() == seen + 1);
  changer.join();
  // Already changed: returns at once.
  const auto t0 = std::chrono::steady_clock::now();
  runs.wait_for_change(seen, std::chrono::steady_clock::now() + 20s);
  CHECK(std::chrono::steady_clock::now() - t0 < 10s);
}

TEST_CASE("sweeper: every step runs each sweep, one that throws is logged and the rest still run") {
  std::mutex m;
  std::vector<std::string> errors;
  Latch swept(3);
  std::atomic<int> first{0}, second{0};
  {
    Sweeper sweeper(1ms,
                    {{"first",
                      [&] {
                        ++first;
                        throw std::runtime_error("disk full");
                      }},
                     {"second",
                      [&] {
                        ++second;
                        swept.count();
                      }}},
                    [&](std::string_view what) {
                      std::lock_guard<std::mutex> lock(m);
                      errors.emplace_back(what);
                    });
    REQUIRE(swept.wait());
  }  // stops and joins
  const int sweeps = second.load();
  CHECK(sweeps >= 3);
  CHECK(first == sweeps);
  std::lock_guard<std::mutex> lock(m);
  REQUIRE(errors.size() == static_cast<size_t>(sweeps));
  CHECK(errors[0] == "first: disk full");
}

TEST_CASE("sweeper: stop() returns without waiting out the interval") {
  std::atomic<int> runs{0};
  const auto t0 = std::chrono::steady_clock::now();
  {
    Sweeper sweeper(std::chrono::hours(1), {{"never", [&] { ++runs; }}}, [](std::string_view) {});
  }
  CHECK(runs == 0);
  CHECK(std::chrono::steady_clock::now() - t0 < 10s);
}

TEST_CASE("tool offers: a set given back is taken again at its generation only, and at most kMaxKept are kept") {
  ToolRegistry registry;
  auto add = [&](const std::string& name, std::vector<std::string> stages = {"execution"}) {
    ToolSpec spec;
    spec.name = name;
    spec.description = "tool " + name;
    spec.stages = std::move(stages);
    spec.handler = sync_tool([](const ToolCallContext&) { return ToolResult{}; });
    registry.add(std::move(spec));
  };
  auto names = [](const std::vector<ToolDefinition>& defs) {
    std::vector<std::string> out;
    for (const auto& d : defs) out.push_back(d.name);
    return out;
  };
  add("b");
  add("a", {"execution", "intent"});
  const std::optional<std::vector<std::string>> every, only_b = std::vector<std::string>{"b"};
  ToolOffers offers(registry);
  uint64_t g = registry.generation();
  auto first = offers.take(Stage::execution, every, g);
  CHECK(names(first) == std::vector<std::string>{"a", "b"});
  CHECK(first[0].description == "tool a");
  CHECK(names(offers.take(Stage::intent, every, g)) == std::vector<std::string>{"a"});
  CHECK(names(offers.take(Stage::execution, only_b, g)) == std::vector<std::string>{"b"});
  CHECK(offers.kept(Stage::execution) == 0);
  // Given back, the same set (its buffer) comes out again for the same stage, list and generation.
  const ToolDefinition* buffer = first.data();
  offers.give_back(Stage::execution, every, g, std::move(first));
  CHECK(offers.kept(Stage::execution) == 1);
  CHECK(offers.kept(Stage::intent) == 0);
  auto again = offers.take(Stage::execution, every, g);
  CHECK(again.data() == buffer);
  CHECK(names(again) == std::vector<std::string>{"a", "b"});
  CHECK(offers.kept(Stage::execution) == 0);
  // Another list: a copy under it; its set given back replaces those kept under the other.
  offers.give_back(Stage::execution, every, g, std::move(again));
  CHECK(names(offers.take(Stage::execution, only_b, g)) == std::vector<std::string>{"b"});
  CHECK(offers.kept(Stage::execution) == 1);
  offers.give_back(Stage::execution, only_b, g, offers.take(Stage::execution, only_b, g));
  CHECK(offers.kept(Stage::execution) == 1);
  CHECK(names(offers.take(Stage::execution, every, g)) == std::vector<std::string>{"a", "b"});
  // The registry changes: a set of the old generation is not taken, and one given back under it after a newer one
  // is dropped.
  auto old_set = offers.take(Stage::execution, every, g);
  add("c");
  const uint64_t g2 = registry.generation();
  REQUIRE(g2 > g);
  auto fresh = offers.take(Stage::execution, every, g2);
  CHECK(names(fresh) == std::vector<std::string>{"a", "b", "c"});
  offers.give_back(Stage::execution, every, g2, std::move(fresh));
  offers.give_back(Stage::execution, every, g, std::move(old_set));
  CHECK(offers.kept(Stage::execution) == 1);
  CHECK(names(offers.take(Stage::execution, every, g2)) == std::vector<std::string>{"a", "b", "c"});
  // Bounded: many given back, kMaxKept kept.
  std::vector<std::vector<ToolDefinition>> sets;
  for (size_t i = 0; i < ToolOffers::kMaxKept + 5; ++i) sets.push_back(offers.take(Stage::execution, every, g2));
  for (auto& s : sets) offers.give_back(Stage::execution, every, g2, std::move(s));
  CHECK(offers.kept(Stage::execution) == ToolOffers::kMaxKept);
}
