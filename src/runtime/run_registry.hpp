// The run registry: the runs this runtime executes now (or has queued), by turn id — what cancel() reaches —
// and the turn-change signal that wait() sleeps on. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include <optional>
#include <vector>

#include "agentrt/cancel.hpp"
#include "agentrt/json_schema.hpp"
#include "agentrt/runtime.hpp"

namespace agentrt {
inline namespace v1 {

// A client tool offered to a run: its definition as the model sees it, and its parameters' schema, compiled.
struct ClientToolOffer {
  ToolDefinition definition;
  std::shared_ptr<const JsonSchema> schema;
};

// A turn that runs (or is queued to run) in this runtime.
struct RunHandle {
  std::string turn_id;
  CancelToken cancel;
  std::vector<ContextEntry> context;  // what the host told the model for this run (set before it is queued)
  std::optional<json> state;          // the client's state for the thread (TurnInput::state), taken by the run
  std::vector<ClientToolOffer>
      client_tools;  // the tools the client runs itself, for this run (set before it is queued)
  // The host's traceparent for the run's span, and the approval wait it continues (set before it is queued).
  std::string traceparent, follows;
};

class RunRegistry {
 public:
  // A new handle for `turn_id`, replacing the one registered before (a continuation after its pause).
  std::shared_ptr<RunHandle> add(const std::string& turn_id);
  void remove(const std::string& turn_id);
  // Cancels the run of `turn_id`; false when none is registered.
  bool cancel(std::string_view turn_id);
  // Whether a run of `turn_id` is registered here (one whose start may not be stored yet: start_turn_async).
  bool has(std::string_view turn_id);
  void cancel_all();

  // A turn's state was committed: wakes wait_for_change().
  void turn_changed();
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  // Sleeps until a turn changes after generation `seen`, or until `until`.
  void wait_for_change(uint64_t seen, std::chrono::steady_clock::time_point until);

 private:
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<RunHandle>, std::less<>> runs_;  // under mutex_

  std::mutex change_mutex_;
  std::condition_variable change_cv_;
  std::atomic<uint64_t> generation_{0};
};

}  // namespace v1
}  // namespace agentrt
