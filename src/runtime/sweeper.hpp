// The sweeper: one background thread that runs the runtime's periodic steps (live tail of other processes'
// commits, heartbeat, recording failed runs, expiry and recovery) every sweep_interval. Each step runs on
// its own: one that throws is logged and the others still run. Thread-safe: stop() once, from the owner.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace agentrt {
inline namespace v1 {

class Sweeper {
 public:
  struct Step {
    std::string name;
    std::function<void()> run;
  };
  using OnError = std::function<void(std::string_view what)>;

  Sweeper(std::chrono::milliseconds interval, std::vector<Step> steps, OnError on_error);
  ~Sweeper();  // stop()
  Sweeper(const Sweeper&) = delete;
  Sweeper& operator=(const Sweeper&) = delete;

  void stop();

 private:
  void loop();

  const std::chrono::milliseconds interval_;
  const std::vector<Step> steps_;
  OnError on_error_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;  // under mutex_
  std::thread thread_;
};

}  // namespace v1
}  // namespace agentrt
