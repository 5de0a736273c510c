// The worker pool: a fixed set of threads that run queued jobs (fresh runs and continuations) in order.
// Thread-safe: post() from any thread; stop() once, from the owner.
//
// Posting takes no lock: the threads that post (a host's request threads, the runtime's own) may outnumber the
// cores, and a queue lock held by a thread the scheduler had preempted kept every other poster waiting for a time
// slice. A post pushes its job on an inbox (an atomic list) and wakes a sleeping worker through an event count
// (a futex; std::atomic's wait and notify elsewhere); the workers take the whole inbox at once, in post order, into a
// queue only they lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

namespace agentrt {
inline namespace v1 {

class WorkerPool {
 public:
  // Told of a job that threw (the pool goes on with the next).
  using OnError = std::function<void(std::string_view what)>;

  WorkerPool(int threads, OnError on_error);
  ~WorkerPool();  // stop()
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // False (and the job is not run) once stop() has begun.
  [[nodiscard]] bool post(std::function<void()> job);
  // Runs what is queued, then joins the threads.
  void stop();

 private:
  struct Node {
    std::function<void()> job;
    Node* next = nullptr;
  };
  void loop();
  void wake(bool all);
  bool take(std::function<void()>& job);  // the oldest job, if any

  OnError on_error_;
  std::atomic<Node*> inbox_{nullptr};  // newest first
  std::mutex taken_mutex_;             // the workers only
  std::deque<Node*> taken_;            // oldest first (under taken_mutex_)
  std::atomic<bool> stopping_{false};
  std::atomic<int> posting_{0};  // posts under way: a worker leaves only when none is (and nothing is queued)
  // The event count: a worker that found nothing sleeps on `epoch_` unless a post moved it since it looked.
  std::atomic<uint32_t> epoch_{0};
  std::atomic<int> sleepers_{0};
  std::vector<std::thread> threads_;  // the owner's
};

}  // namespace v1
}  // namespace agentrt
