// WorkPool: the few threads on which agentrt-server calls the runtime (which may block on the store), so that
// the I/O threads never wait for SQLite. Jobs run in the order they were posted, several at once.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

namespace agentrt::server {

// Thread-safe. A job that throws is reported to `on_error` and the thread goes on.
class WorkPool {
 public:
  WorkPool(int threads, std::function<void(std::string_view)> on_error);
  ~WorkPool();  // runs what is queued, then joins
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  void post(std::function<void()> job);
  size_t queued() const;

 private:
  void work();
  std::function<void(std::string_view)> on_error_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace agentrt::server
