#include "work_pool.hpp"

#include <pthread.h>

#include <exception>
#include <string>

namespace agentrt::server {

WorkPool::WorkPool(int threads, std::function<void(std::string_view)> on_error) : on_error_(std::move(on_error)) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { work(); });
}

WorkPool::~WorkPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void WorkPool::post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

size_t WorkPool::queued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return jobs_.size();
}

void WorkPool::work() {
  pthread_setname_np(pthread_self(), "server-work");
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, and nothing left
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    try {
      job();
    } catch (const std::exception& e) {
      if (on_error_) on_error_(std::string("work thread: ") + e.what());
    } catch (...) {
      if (on_error_) on_error_("work thread: unknown exception");
    }
    job = nullptr;  // captured state goes before the lock is taken again
    lock.lock();
  }
}

}  // namespace agentrt::server
