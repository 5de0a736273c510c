// Test support: Condition, what a test waits on instead of sleeping — a counter that tool handlers, hooks and
// helper threads bump, and that the test waits for (the count, or a predicate over state guarded by the
// Condition's mutex), with a deadline long enough never to be reached on a loaded machine: it only turns a
// hang into a failure.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace agentrt::testing {

// How long a test waits for something that is bound to happen.
inline constexpr std::chrono::seconds kLongWait{60};

// Thread-safe.
class Condition {
 public:
  // Counts one occurrence and wakes the waiters.
  void notify() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++count_;
    }
    cv_.notify_all();
  }
  // Runs `change` under the mutex (the state a wait_until predicate reads), then wakes the waiters.
  template <class F>
  void update(F&& change) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      change();
    }
    cv_.notify_all();
  }
  // True once notify() has been called `n` times (false after `timeout`).
  bool wait(int n = 1, std::chrono::milliseconds timeout = kLongWait) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return count_ >= n; });
  }
  // True once `pred` (called under the mutex) holds (false after `timeout`).
  template <class P>
  bool wait_until(P&& pred, std::chrono::milliseconds timeout = kLongWait) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, timeout, pred);
  }
  int count() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return count_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  int count_ = 0;
};

// For state that nothing reports (another thread's counter, a file, a server's list): true once `done` holds,
// asked each millisecond (false after `timeout`).
inline bool eventually(const std::function<bool()>& done, std::chrono::milliseconds timeout = kLongWait) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace agentrt::testing
