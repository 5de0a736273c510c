// WorkPool: the few threads on which agentrt-server calls the runtime (which may block on the store), so that
// the I/O threads never wait for SQLite. Jobs run in the order they were posted, several at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

namespace agentrt::server {

// Thread-safe. A job that throws is reported to `on_error` and the thread goes on.
//
// Posting takes no lock: under load the threads that post (the I/O threads, the runtime's workers) outnumber the
// cores, and a queue lock held by a thread the scheduler had preempted kept every other poster waiting for a time
// slice (about a millisecond, some thousand times a second at 16 clients' turns). A post pushes its job on an
// inbox (an atomic list) and wakes a sleeping thread through an event count on a futex; the pool's threads take
// the whole inbox at once, in post order, into a queue that only they lock.
class WorkPool {
 public:
  WorkPool(int threads, std::function<void(std::string_view)> on_error);
  ~WorkPool();  // runs what is queued (and what that posts), then joins
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  void post(std::function<void()> job);
  size_t queued() const;

 private:
  struct Node {
    std::function<void()> job;
    Node* next = nullptr;
  };
  void work();
  bool take(std::function<void()>& job);  // the oldest job, if any
  std::function<void(std::string_view)> on_error_;
  std::atomic<Node*> inbox_{nullptr};  // newest first
  std::mutex taken_mutex_;             // the pool's threads only
  std::deque<Node*> taken_;            // oldest first (under taken_mutex_)
  std::atomic<size_t> queued_{0};
  // The event count: a thread that found nothing sleeps on `epoch_` unless a post moved it since it looked.
  std::atomic<uint32_t> epoch_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

}  // namespace agentrt::server
