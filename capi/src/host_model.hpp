// HostModelProvider: a ModelProvider implemented by the host through agentrt_model_cb; the host pushes the
// stream and the result from any thread, and complete() replays them into the sink on the worker's thread.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "agentrt.h"
#include "agentrt/error.hpp"
#include "agentrt/model.hpp"
#include "host_data.hpp"

namespace agentrt::capi {

// The shared state of one model call. The host pushes items from any thread; they reach the sink only on the
// worker thread that runs complete() (the consumer), as ModelStreamSink requires: a push made on that thread
// while it is inside the host's callback (a synchronous host) is applied at once, any other push is queued
// until the worker drains it. Thread-safe.
class ModelCallState {
 public:
  struct Item {
    enum class Kind { text, reasoning, tool_start, tool_args, finish, fail } kind;
    int index = 0;
    std::string a, b;                   // delta | id + name | message
    json result;                        // finish: the validated result object
    ErrorCode code = ErrorCode::model;  // fail
  };
  // Created on the consumer thread. `max_json_depth`: the runtime's limit on the host's result_json.
  ModelCallState(ModelStreamSink& sink, CancelToken cancel, size_t max_json_depth);
  size_t max_json_depth() const { return max_json_depth_; }

  // Queues an item (any thread). Returns AGENTRT_OK, or a status with the last error set: AGENTRT_E_CANCELLED
  // once the turn is cancelled or the worker stopped waiting, AGENTRT_E_INVALID_STATE once the call ended.
  int32_t push(Item item);
  // The host released its handle: fails the call if it never ended.
  void release();
  // Consumer thread: brackets the host's callback (pushes made inside it on this thread apply at once).
  void enter_callback() { in_callback_.store(true); }
  void leave_callback() { in_callback_.store(false); }
  // Consumer thread, after the callback returned: waits for the end (polling the cancel token).
  ModelResult consume();
  // The worker stopped waiting (cancel, exception): later pushes answer AGENTRT_E_CANCELLED.
  void abandon();

 private:
  enum class End { open, ended, cancelled };
  void drain();  // consumer thread only: applies queued items to the sink

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Item> items_;
  End end_ = End::open;
  ModelStreamSink& sink_;
  const CancelToken cancel_;
  const size_t max_json_depth_;
  const std::thread::id consumer_;
  std::atomic<bool> in_callback_{false};
  // Touched only on the consumer thread.
  std::string text_, reasoning_;
  std::map<int, std::array<std::string, 3>> calls_;  // index -> id, name, arguments
  std::optional<ModelResult> result_;
  std::exception_ptr error_;
};

// Validates a finish() result object ({text, reasoning, toolCalls, usage, finishReason}); throws
// Error(invalid_argument) naming the bad field.
void validate_model_result(const json& result);

// Thread-safe: complete() runs on several workers at once; each call has its own ModelCallState.
class HostModelProvider final : public ModelProvider {
 public:
  HostModelProvider(agentrt_model_cb cb, HostData data, size_t max_json_depth)
      : cb_(cb), data_(std::move(data)), max_json_depth_(max_json_depth) {}
  ModelResult complete(const ModelRequest& request, ModelStreamSink& sink, const CancelToken& cancel) override;
  std::string name() const override { return "host"; }

 private:
  agentrt_model_cb cb_;
  HostData data_;
  size_t max_json_depth_;
};

// The request as the host sees it (camelCase JSON).
json model_request_to_json(const ModelRequest& request);

}  // namespace agentrt::capi

// The handle the host holds: shares the call's state with the worker.
struct agentrt_model_call {
  std::shared_ptr<agentrt::capi::ModelCallState> state;
};
