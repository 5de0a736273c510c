#include "runtime/live_tail.hpp"
#include "util/thread_name.hpp"

namespace agentrt {
inline namespace v1 {

LiveTail::LiveTail(Store& store, std::function<void(int64_t)> changed, std::chrono::milliseconds poll)
    : store_(store), changed_(std::move(changed)), poll_(poll) {
  thread_ = std::thread([this] {
    name_this_thread("agentrt-tail");
    while (!stop_.load(std::memory_order_acquire)) {
      try {
        store_.wait_external(poll_);
        if (stop_.load(std::memory_order_acquire)) break;
        changed_(store_.external_version());
      } catch (...) {
        // The sweeper's live tail step reports failures; this one tries again after a pause.
        store_.wait_external(poll_);
      }
    }
  });
}

LiveTail::~LiveTail() { stop(); }

void LiveTail::stop() {
  stop_.store(true, std::memory_order_release);
  store_.wake_external();
  if (thread_.joinable()) thread_.join();
}

}  // namespace v1
}  // namespace agentrt
