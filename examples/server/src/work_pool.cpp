#include "work_pool.hpp"

#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <exception>
#include <memory>
#include <string>

namespace agentrt::server {

namespace {

void futex(std::atomic<uint32_t>& word, int op, uint32_t value) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), op, value, nullptr, nullptr, 0);
}

}  // namespace

WorkPool::WorkPool(int threads, std::function<void(std::string_view)> on_error) : on_error_(std::move(on_error)) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { work(); });
}

WorkPool::~WorkPool() {
  stop_.store(true);
  epoch_.fetch_add(1);
  futex(epoch_, FUTEX_WAKE_PRIVATE, static_cast<uint32_t>(threads_.size()));
  for (auto& t : threads_) t.join();
}

void WorkPool::post(std::function<void()> job) {
  auto* node = new Node{std::move(job), inbox_.load(std::memory_order_relaxed)};
  while (!inbox_.compare_exchange_weak(node->next, node, std::memory_order_release, std::memory_order_relaxed)) {
  }
  queued_.fetch_add(1, std::memory_order_relaxed);
  epoch_.fetch_add(1);
  if (sleepers_.load() > 0) futex(epoch_, FUTEX_WAKE_PRIVATE, 1);
}

size_t WorkPool::queued() const { return queued_.load(std::memory_order_relaxed); }

bool WorkPool::take(std::function<void()>& job) {
  std::unique_ptr<Node> node;
  {
    std::lock_guard<std::mutex> lock(taken_mutex_);
    if (taken_.empty()) {
      // The whole inbox: newest first there, oldest first here.
      for (Node* n = inbox_.exchange(nullptr, std::memory_order_acquire); n; n = n->next) taken_.push_front(n);
      if (taken_.empty()) return false;
    }
    node.reset(taken_.front());
    taken_.pop_front();
  }
  queued_.fetch_sub(1, std::memory_order_relaxed);
  job = std::move(node->job);
  return true;
}

void WorkPool::work() {
  pthread_setname_np(pthread_self(), "server-work");
  for (;;) {
    std::function<void()> job;
    if (!take(job)) {
      // Announce the sleep, then look once more: a post after that look has moved the epoch, and the wait returns
      // at once (or the post saw the sleeper and wakes it).
      sleepers_.fetch_add(1);
      const uint32_t seen = epoch_.load();
      const bool got = take(job);
      if (!got && stop_.load()) {
        sleepers_.fetch_sub(1);
        return;  // stopping, and nothing left
      }
      if (!got) futex(epoch_, FUTEX_WAIT_PRIVATE, seen);
      sleepers_.fetch_sub(1);
      if (!got) continue;
    }
    try {
      job();
    } catch (const std::exception& e) {
      if (on_error_) on_error_(std::string("work thread: ") + e.what());
    } catch (...) {
      if (on_error_) on_error_("work thread: unknown exception");
    }
  }
}

}  // namespace agentrt::server
