// RuntimeState: what an agentrt_runtime handle owns — the core Runtime, its open event streams (detached
// before the Runtime goes) and the lazily built transcriber.
#pragma once

#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "agentrt/asr.hpp"
#include "agentrt/runtime.hpp"
#include "event_stream.hpp"

namespace agentrt::capi {

// Thread-safe, except destruction (the last call on the handle).
class RuntimeState {
 public:
  // `model_section`: the config's "model" value, kept for the transcriber.
  RuntimeState(RuntimeConfig config, json model_section);
  ~RuntimeState();
  RuntimeState(const RuntimeState&) = delete;
  RuntimeState& operator=(const RuntimeState&) = delete;

  Runtime& runtime() { return *runtime_; }
  std::shared_ptr<EventStream> open_stream(std::string_view thread_id, int64_t after_seq);
  // Throws Error(unsupported) when the config names no OpenAI-compatible service.
  std::shared_ptr<Transcriber> transcriber();

 private:
  std::unique_ptr<Runtime> runtime_;
  json model_section_;
  std::mutex mutex_;
  std::vector<std::weak_ptr<EventStream>> streams_;
  std::shared_ptr<Transcriber> transcriber_;
};

}  // namespace agentrt::capi

struct agentrt_runtime {
  std::unique_ptr<agentrt::capi::RuntimeState> state;
};

struct agentrt_events {
  std::shared_ptr<agentrt::capi::EventStream> stream;
};
