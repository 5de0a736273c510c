// The worker pool: a fixed set of threads that run queued jobs (fresh runs and continuations) in order.
// Thread-safe: post() from any thread; stop() once, from the owner.
#pragma once

#include <condition_variable>
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
  void loop();

  OnError on_error_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // under mutex_
  bool stopping_ = false;                    // under mutex_
  std::vector<std::thread> threads_;
};

}  // namespace v1
}  // namespace agentrt
