// RunRateLimiter: how many runs a bearer token may start or resume — `burst` at once, then `per_minute`.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace agentrt::server {

// Token buckets per bearer token: `burst` runs at once, refilled at `per_minute` (0: unlimited). Thread-safe.
class RunRateLimiter {
 public:
  RunRateLimiter(double per_minute, int burst) : per_second_(per_minute / 60.0), burst_(burst) {}

  // 0 when the run may start (one token taken), else the whole seconds to wait.
  int64_t acquire(const std::string& key);

 private:
  struct Bucket {
    double tokens;
    std::chrono::steady_clock::time_point at;
  };
  const double per_second_;
  const int burst_;
  std::mutex mutex_;
  std::unordered_map<std::string, Bucket> buckets_;
};

}  // namespace agentrt::server
