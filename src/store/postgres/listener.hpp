// pg::Listener: how a PostgreSQL store learns of other processes' commits (LISTEN on the store's channel).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "store/postgres/connection.hpp"

namespace agentrt {
inline namespace v1 {
namespace pg {

// The channel every commit with events notifies in its transaction, with the payload "<last_seq> <thread_id>":
// the thread's highest sequence number after that commit.
inline constexpr const char* kEventsChannel = "agentrt_events";

// Thread-safe (one mutex). A connection of its own, listening on kEventsChannel; version() reads what has
// arrived without waiting, wait() waits for more without the mutex.
class Listener {
 public:
  Listener(std::string url, std::string target, int connect_timeout_s);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // The number of notifications seen so far from connections `own` does not claim, plus one for every
  // (re)connection (what was committed while it was not listening is unknown); -1 when it cannot listen now
  // (it tries again on the next call).
  int64_t version(const std::function<bool(int)>& own);
  // Blocks until the listening connection has something to read (true), `timeout` passes or interrupt() is
  // called (false). Without a connection (it cannot listen now) it waits the timeout out, or the interrupt.
  bool wait(std::chrono::milliseconds timeout);
  // Ends a wait() in progress at once (or the next one).
  void interrupt();

 private:
  const std::string url_;
  const std::string target_;
  const int connect_timeout_s_;
  std::mutex mutex_;
  std::unique_ptr<Connection> conn_;
  int64_t version_ = 0;
  int wake_fd_ = -1;  // an eventfd: interrupt() makes it readable until a wait() reads it
};

}  // namespace pg
}  // namespace v1
}  // namespace agentrt
