#include "recent_turns.hpp"

#include <fmt/format.h>

namespace agentrt::server {

void RecentTurns::note(const std::string& turn_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  turns_.push_back(turn_id);
  if (turns_.size() > kCapacity) turns_.pop_front();
}

void RecentTurns::settle(Runtime& rt, std::chrono::steady_clock::time_point deadline,
                         const std::function<void(std::string_view)>& log) {
  std::deque<std::string> turns;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    turns.swap(turns_);
  }
  for (const auto& id : turns) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return;
    try {
      rt.wait(id, left);
    } catch (const std::exception& e) {
      log(fmt::format("shutdown: turn {}: {}", id, e.what()));
    }
  }
}

}  // namespace agentrt::server
