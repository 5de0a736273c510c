// RuntimeState: what an agentrt_runtime handle owns — the core Runtime, its open event streams (detached
// before the Runtime goes), the host's job cancel hook and the lazily built transcriber.
#pragma once

#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "agentrt.h"
#include "agentrt/asr.hpp"
#include "agentrt/runtime.hpp"
#include "event_stream.hpp"
#include "host_data.hpp"

namespace agentrt::capi {

// The host's job cancel hook (agentrt_runtime_set_job_cancel_hook), settable after the Runtime exists: the
// Runtime's RuntimeConfig::job_cancel_hook dispatches here. Thread-safe. A call in progress keeps the hook it
// started with, so a replaced hook's user_data is destroyed once no call of it runs (on the thread that lets
// go last).
class JobCancelHookSlot {
 public:
  // Replaces the hook (NULL cb: none); the previous one is released outside the lock.
  void set(agentrt_job_cb cb, HostData data);
  void clear();
  // Calls the hook, if any, with the job's JSON (on the calling thread).
  void call(const JobRecord& job);

 private:
  struct Hook {
    agentrt_job_cb cb;
    HostData data;
  };
  std::mutex mutex_;
  std::shared_ptr<Hook> hook_;
};

// Thread-safe, except destruction (the last call on the handle).
class RuntimeState {
 public:
  // `model_section`: the config's "model" value, kept for the transcriber.
  RuntimeState(RuntimeConfig config, json model_section);
  ~RuntimeState();
  RuntimeState(const RuntimeState&) = delete;
  RuntimeState& operator=(const RuntimeState&) = delete;

  Runtime& runtime() { return *runtime_; }
  JobCancelHookSlot& job_cancel_hook() { return *job_cancel_hook_; }
  std::shared_ptr<EventStream> open_stream(std::string_view thread_id, int64_t after_seq);
  // Throws Error(unsupported) when the config names no OpenAI-compatible service.
  std::shared_ptr<Transcriber> transcriber();

 private:
  // Shared with the Runtime's config (its hook calls into it); declared first, so it exists before the Runtime.
  std::shared_ptr<JobCancelHookSlot> job_cancel_hook_;
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
