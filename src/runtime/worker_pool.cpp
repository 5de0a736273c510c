#include "runtime/worker_pool.hpp"

#include <exception>
#include <string>
#include "util/thread_name.hpp"

namespace agentrt {
inline namespace v1 {

WorkerPool::WorkerPool(int threads, OnError on_error) : on_error_(std::move(on_error)) {
  threads_.reserve(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { loop(); });
}

WorkerPool::~WorkerPool() { stop(); }

bool WorkerPool::post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return false;
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

void WorkerPool::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void WorkerPool::loop() {
  name_this_thread("agentrt-worker");
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to drain
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      job();
    } catch (const std::exception& e) {
      on_error_(std::string("worker job failed: ") + e.what());
    } catch (...) {
      on_error_("worker job failed with a non-standard exception");
    }
  }
}

}  // namespace v1
}  // namespace agentrt
