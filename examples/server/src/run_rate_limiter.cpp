#include "run_rate_limiter.hpp"

#include <algorithm>

namespace agentrt::server {

int64_t RunRateLimiter::acquire(const std::string& key) {
  if (per_second_ <= 0) return 0;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  auto [it, fresh] = buckets_.try_emplace(key, Bucket{static_cast<double>(burst_), now});
  Bucket& b = it->second;
  if (!fresh) {
    b.tokens = std::min<double>(burst_, b.tokens + std::chrono::duration<double>(now - b.at).count() * per_second_);
    b.at = now;
  }
  if (b.tokens >= 1.0) {
    b.tokens -= 1.0;
    return 0;
  }
  return static_cast<int64_t>((1.0 - b.tokens) / per_second_) + 1;
}

}  // namespace agentrt::server
