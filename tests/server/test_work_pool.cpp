// The server's work pool: posting takes no lock (a lock-free queue and an event count on a futex). Every job
// posted runs exactly once, in the order of one poster's posts, whoever posts and however many threads sleep; a
// job that throws is reported and the pool goes on; the destructor runs what is queued before it joins.
#include <doctest/doctest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "work_pool.hpp"

using agentrt::server::WorkPool;

TEST_CASE("work pool: every job of many posters runs exactly once, each poster's in its order") {
  constexpr int kPosters = 6, kJobs = 20000;
  std::vector<std::atomic<int>> runs(static_cast<size_t>(kPosters * kJobs));
  std::vector<std::atomic<int>> last(kPosters);
  for (auto& l : last) l = -1;
  std::atomic<int> out_of_order{0};
  std::atomic<int> errors{0};
  {
    // One thread: a poster's jobs then run in the order posted (with several, two may overlap).
    WorkPool pool(1, [&](std::string_view) { ++errors; });
    std::vector<std::thread> posters;
    for (int p = 0; p < kPosters; ++p)
      posters.emplace_back([&, p] {
        for (int i = 0; i < kJobs; ++i)
          pool.post([&, p, i] {
            ++runs[static_cast<size_t>(p * kJobs + i)];
            if (last[static_cast<size_t>(p)].exchange(i) != i - 1) ++out_of_order;
          });
      });
    for (auto& t : posters) t.join();
  }  // the destructor runs what is still queued
  for (const auto& r : runs) REQUIRE(r.load() == 1);
  CHECK(out_of_order.load() == 0);
  CHECK(errors.load() == 0);
}

TEST_CASE("work pool: threads that sleep are woken by each post, one job at a time") {
  WorkPool pool(4, nullptr);
  std::mutex m;
  std::condition_variable cv;
  int done = 0;
  for (int round = 0; round < 2000; ++round) {
    // Each post finds every thread asleep (or going to sleep): a lost wake-up would hang here.
    pool.post([&] {
      std::lock_guard<std::mutex> lock(m);
      ++done;
      cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(m);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return done == round + 1; }));
  }
  CHECK(pool.queued() == 0);
}

TEST_CASE("work pool: a job that throws is reported and the threads go on") {
  std::mutex m;
  std::vector<std::string> reported;
  std::atomic<int> ran{0};
  {
    WorkPool pool(2, [&](std::string_view what) {
      std::lock_guard<std::mutex> lock(m);
      reported.emplace_back(what);
    });
    pool.post([] { throw std::runtime_error("boom"); });
    pool.post([] { throw 42; });
    for (int i = 0; i < 100; ++i) pool.post([&] { ++ran; });
  }
  CHECK(ran.load() == 100);
  REQUIRE(reported.size() == 2);
  std::sort(reported.begin(), reported.end());
  CHECK(reported[0] == "work thread: boom");
  CHECK(reported[1] == "work thread: unknown exception");
}

TEST_CASE("work pool: jobs posted by jobs run too, before the destructor returns") {
  std::atomic<int> ran{0};
  std::function<void(int)> chain;  // outlives the pool, whose destructor runs the jobs that call it
  {
    WorkPool pool(3, nullptr);
    chain = [&](int left) {
      ++ran;
      if (left > 0) pool.post([&, left] { chain(left - 1); });
    };
    for (int i = 0; i < 8; ++i) pool.post([&] { chain(50); });
  }
  CHECK(ran.load() == 8 * 51);
}
