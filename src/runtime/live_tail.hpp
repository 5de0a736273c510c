// LiveTail: a runtime's live subscribers see other processes' commits as they arrive, on a store that can wait
// for them (Store::waits_external: PostgreSQL's LISTEN/NOTIFY). One thread waits on the store and hands each
// change to the event hub, which reads the new rows; without one, the sweeper's "live tail" step looks at every
// sweep. Thread-safe: stop() once, from the owner.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "agentrt/storage.hpp"

namespace agentrt {
inline namespace v1 {

class LiveTail {
 public:
  // Calls `changed(store.external_version())` after every wait that ends (a notification, or `poll` passing:
  // a reconnection is only seen by reading the version). stop() wakes the wait; where several runtimes share
  // one store another may take that wake-up, and stop() then takes up to `poll`.
  LiveTail(Store& store, std::function<void(int64_t)> changed,
           std::chrono::milliseconds poll = std::chrono::milliseconds(250));
  ~LiveTail();  // stop()
  LiveTail(const LiveTail&) = delete;
  LiveTail& operator=(const LiveTail&) = delete;

  void stop();

 private:
  Store& store_;
  const std::function<void(int64_t)> changed_;
  const std::chrono::milliseconds poll_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace v1
}  // namespace agentrt
