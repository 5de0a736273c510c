// RecentTurns: the turns this process started or resumed lately — at shutdown each may reach its next commit
// (a pause or its end) within the grace, before the runtime goes.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "agentrt/runtime.hpp"

namespace agentrt::server {

// The last kCapacity turn ids. Thread-safe.
class RecentTurns {
 public:
  static constexpr size_t kCapacity = 4096;

  void note(const std::string& turn_id);
  // Waits for each noted turn to settle (Runtime::wait) until `deadline`; forgets them. A failed wait is
  // reported to `log` and the next turn goes on.
  void settle(Runtime& rt, std::chrono::steady_clock::time_point deadline,
              const std::function<void(std::string_view)>& log);

 private:
  std::mutex mutex_;
  std::deque<std::string> turns_;
};

}  // namespace agentrt::server
