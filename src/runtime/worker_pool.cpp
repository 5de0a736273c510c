#include "runtime/worker_pool.hpp"

#include <exception>
#include <memory>
#include <string>
#include "util/futex.hpp"
#include "util/thread_name.hpp"

namespace agentrt {
inline namespace v1 {

WorkerPool::WorkerPool(int threads, OnError on_error) : on_error_(std::move(on_error)) {
  threads_.reserve(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { loop(); });
}

WorkerPool::~WorkerPool() { stop(); }

bool WorkerPool::post(std::function<void()> job) {
  // Counted before stopping_ is read: stop() then either is seen here (refused) or sees this post under way, and
  // no worker leaves before it has landed.
  posting_.fetch_add(1);
  if (stopping_.load()) {
    posting_.fetch_sub(1);
    wake(true);  // a stopping worker may be waiting for this post to land
    return false;
  }
  auto* node = new Node{std::move(job), inbox_.load(std::memory_order_relaxed)};
  while (!inbox_.compare_exchange_weak(node->next, node, std::memory_order_release, std::memory_order_relaxed)) {
  }
  posting_.fetch_sub(1);
  wake(false);
  return true;
}

// Once stopping, every sleeper: each has to look whether it may leave.
void WorkerPool::wake(bool all) {
  epoch_.fetch_add(1);
  if (all || stopping_.load())
    futex_wake(epoch_, true);
  else if (sleepers_.load() > 0)
    futex_wake(epoch_);
}

void WorkerPool::stop() {
  stopping_.store(true);
  wake(true);
  for (auto& t : threads_) t.join();
  threads_.clear();
}

bool WorkerPool::take(std::function<void()>& job) {
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
  job = std::move(node->job);
  return true;
}

void WorkerPool::loop() {
  name_this_thread("agentrt-worker");
  for (;;) {
    std::function<void()> job;
    if (!take(job)) {
      // Announce the sleep, then look once more: a post after that look has moved the epoch, and the wait returns
      // at once (or the post saw the sleeper and wakes it).
      sleepers_.fetch_add(1);
      const uint32_t seen = epoch_.load();
      bool got = take(job);
      if (!got && stopping_.load() && posting_.load() == 0) {
        got = take(job);  // a post that landed between the look and the count
        if (!got) {
          sleepers_.fetch_sub(1);
          return;  // stopping, and nothing left to drain
        }
      }
      if (!got) futex_wait(epoch_, seen);
      sleepers_.fetch_sub(1);
      if (!got) continue;
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
