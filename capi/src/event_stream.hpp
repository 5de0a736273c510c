// EventStream: the state behind an agentrt_events handle — a core Subscription that can be closed from any
// thread and detached before its runtime is destroyed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>

#include "agentrt/runtime.hpp"

namespace agentrt::capi {

// Thread-safe: next() from one thread at a time, close() and detach() from any thread.
class EventStream {
 public:
  explicit EventStream(std::unique_ptr<Subscription> sub) : sub_(std::move(sub)) {}
  ~EventStream() { detach(); }
  EventStream(const EventStream&) = delete;
  EventStream& operator=(const EventStream&) = delete;

  enum class Pull { event, timeout, closed };
  Pull next(std::chrono::milliseconds timeout, StoredEvent& out);
  // Wakes a pull in progress; later pulls answer `closed`.
  void close();
  // Closes, waits for a pull in progress to return, and destroys the subscription (which refers to its
  // runtime's store). Idempotent.
  void detach();

 private:
  std::shared_mutex mutex_;  // shared: a pull or a close in progress; exclusive: detach
  std::unique_ptr<Subscription> sub_;
  std::atomic<bool> closed_{false};
};

}  // namespace agentrt::capi
