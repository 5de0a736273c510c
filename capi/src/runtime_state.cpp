#include "runtime_state.hpp"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include <fmt/format.h>

#include "agentrt/model_config.hpp"
#include "agentrt/records.hpp"

namespace agentrt::capi {

namespace {

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v && *v;
}

}  // namespace

void JobCancelHookSlot::set(agentrt_job_cb cb, HostData data) {
  std::shared_ptr<Hook> next;
  if (cb) next = std::make_shared<Hook>(Hook{cb, std::move(data)});
  std::shared_ptr<Hook> previous;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    previous = std::exchange(hook_, std::move(next));
  }
  // `previous` (and, for a NULL cb, `data`) is released here, outside the lock: its destroy may run now.
}

void JobCancelHookSlot::clear() { set(nullptr, HostData(nullptr, nullptr)); }

void JobCancelHookSlot::call(const JobRecord& job) {
  std::shared_ptr<Hook> hook;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    hook = hook_;
  }
  if (!hook) return;
  const std::string text = job_to_json(job).dump(-1, ' ', false, json::error_handler_t::replace);
  hook->cb(text.c_str(), hook->data.get());
}

namespace {

RuntimeConfig with_job_cancel_hook(RuntimeConfig config, const std::shared_ptr<JobCancelHookSlot>& slot) {
  config.job_cancel_hook = [slot](const JobRecord& job) { slot->call(job); };
  return config;
}

}  // namespace

RuntimeState::RuntimeState(RuntimeConfig config, json model_section)
    : job_cancel_hook_(std::make_shared<JobCancelHookSlot>()),
      runtime_(std::make_unique<Runtime>(with_job_cancel_hook(std::move(config), job_cancel_hook_))),
      model_section_(std::move(model_section)) {}

RuntimeState::~RuntimeState() {
  std::vector<std::shared_ptr<EventStream>> open;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& w : streams_)
      if (auto s = w.lock()) open.push_back(std::move(s));
    streams_.clear();
  }
  // Subscriptions refer to the runtime's store: they go first.
  for (auto& s : open) s->detach();
  runtime_.reset();
  // The Runtime's threads are joined: no hook call can start any more. The host's user_data goes now.
  job_cancel_hook_->clear();
}

std::shared_ptr<EventStream> RuntimeState::open_stream(std::string_view thread_id, int64_t after_seq) {
  auto stream = std::make_shared<EventStream>(runtime_->subscribe(thread_id, after_seq));
  std::lock_guard<std::mutex> lock(mutex_);
  streams_.erase(std::remove_if(streams_.begin(), streams_.end(), [](const auto& w) { return w.expired(); }),
                 streams_.end());
  streams_.push_back(stream);
  return stream;
}

std::shared_ptr<Transcriber> RuntimeState::transcriber() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (transcriber_) return transcriber_;
  const json& m = model_section_;
  std::string type = "auto";
  if (m.is_object() && m.contains("type") && m["type"].is_string()) type = m["type"].get<std::string>();
  if (type == "auto") type = (env_set("OPENAI_API_KEY") || env_set("OPENAI_BASE_URL")) ? "openai" : "demo";
  if (type != "openai")
    throw Error(ErrorCode::unsupported,
                fmt::format("transcription needs an OpenAI-compatible service (config model.type \"openai\", or "
                            "OPENAI_BASE_URL / OPENAI_API_KEY with type \"auto\"); the model type is \"{}\"",
                            type));
  // The same reading of the model section as runtime_config_from_json: the environment fills what it omits.
  OpenAIConfig cfg = openai_config_from_model_json(m);
  transcriber_ = make_openai_transcriber(cfg);
  return transcriber_;
}

}  // namespace agentrt::capi
