#include "runtime/sweeper.hpp"

#include <exception>
#include "util/thread_name.hpp"

namespace agentrt {
inline namespace v1 {

Sweeper::Sweeper(std::chrono::milliseconds interval, std::vector<Step> steps, OnError on_error)
    : interval_(interval), steps_(std::move(steps)), on_error_(std::move(on_error)), thread_([this] { loop(); }) {}

Sweeper::~Sweeper() { stop(); }

void Sweeper::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Sweeper::loop() {
  name_this_thread("agentrt-sweep");
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    // A predicate, not a bare wait: a stop signalled while a sweep ran is not lost.
    if (cv_.wait_for(lock, interval_, [&] { return stop_; })) return;
    lock.unlock();
    for (const auto& step : steps_) {
      try {
        step.run();
      } catch (const std::exception& e) {
        on_error_(step.name + ": " + e.what());
      } catch (...) {
        on_error_(step.name + ": a non-standard exception");
      }
    }
    lock.lock();
  }
}

}  // namespace v1
}  // namespace agentrt
