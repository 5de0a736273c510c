#include "runtime/run_registry.hpp"

namespace agentrt {
inline namespace v1 {

std::shared_ptr<RunHandle> RunRegistry::add(const std::string& turn_id) {
  auto h = std::make_shared<RunHandle>();
  h->turn_id = turn_id;
  std::lock_guard<std::mutex> lock(mutex_);
  runs_[turn_id] = h;
  return h;
}

void RunRegistry::remove(const std::string& turn_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  runs_.erase(turn_id);
}

bool RunRegistry::cancel(std::string_view turn_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = runs_.find(turn_id);
  if (it == runs_.end()) return false;
  it->second->cancel.cancel();
  return true;
}

bool RunRegistry::has(std::string_view turn_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  return runs_.find(turn_id) != runs_.end();
}

void RunRegistry::cancel_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [id, h] : runs_) h->cancel.cancel();
}

void RunRegistry::turn_changed() {
  {
    std::lock_guard<std::mutex> lock(change_mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  change_cv_.notify_all();
}

void RunRegistry::wait_for_change(uint64_t seen, std::chrono::steady_clock::time_point until) {
  std::unique_lock<std::mutex> lock(change_mutex_);
  change_cv_.wait_until(lock, until, [&] { return generation_.load(std::memory_order_acquire) != seen; });
}

}  // namespace v1
}  // namespace agentrt
