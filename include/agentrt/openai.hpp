// OpenAI-compatible backends: a chat-completions ModelProvider and an audio-transcription Transcriber.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "agentrt/asr.hpp"
#include "agentrt/json.hpp"
#include "agentrt/model.hpp"

namespace agentrt {
inline namespace v1 {

// The model and parameters one stage uses when the request does not name its own.
struct OpenAIStageModel {
  std::string model;             // "" = OpenAIConfig::model
  json params = json::object();  // merged over OpenAIConfig::params (JSON merge patch: null removes a key)
};

// Where and how to reach an OpenAI-compatible server (api.openai.com, vLLM, llama.cpp, Ollama, ...).
// A plain value (not synchronized: copy it rather than share it across threads while changing it). It never
// holds the key unless a host puts one in `api_key`.
struct OpenAIConfig {
  std::string base_url = "https://api.openai.com/v1";  // the paths /chat/completions etc. are appended
  // The API key is read from this environment variable when a provider or transcriber is constructed.
  // It is sent only as `Authorization: Bearer`, and never logged, persisted or put in an error message.
  std::string api_key_env = "OPENAI_API_KEY";
  // For hosts that hold the key themselves; wins over api_key_env when set. Never read from JSON.
  std::string api_key;
  std::string model = "gpt-4o-mini";
  json params = json::object();                    // body fields for every chat request (temperature, ...)
  std::map<std::string, OpenAIStageModel> stages;  // per stage ("intent", "execution", "organization")
  std::vector<std::pair<std::string, std::string>> extra_headers;  // sent on every request

  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds request_timeout{600'000};  // the whole request, stream included
  std::chrono::milliseconds idle_timeout{120'000};     // longest silence between received bytes

  int max_retries = 2;  // retries after the first attempt (408/409/429/5xx, connection failures)
  std::chrono::milliseconds retry_base_backoff{500};  // doubled per retry, times a jitter in [0.75, 1]
  std::chrono::milliseconds retry_max_backoff{8'000};
  // A server's Retry-After / retry-after-ms longer than this is ignored in favour of the backoff.
  std::chrono::milliseconds max_retry_after{60'000};

  std::string transcription_model = "whisper-1";
  size_t max_audio_bytes = 25u * 1024 * 1024;
};

// OPENAI_BASE_URL, OPENAI_MODEL over the defaults; the key stays in OPENAI_API_KEY (api_key_env), read
// when the provider is constructed.
OpenAIConfig openai_config_from_env();

// From snake_case keys: base_url, api_key_env, model, params, stages ({stage: {model, params}}),
// extra_headers ({name: value}), connect_timeout_ms, request_timeout_ms, idle_timeout_ms, max_retries,
// retry_base_backoff_ms, retry_max_backoff_ms, max_retry_after_ms, transcription_model, max_audio_bytes.
// Missing keys keep their defaults. Throws Error(invalid_argument) for an unknown key, a wrong type, or
// `api_key` (keys belong in the environment, not in configuration files).
OpenAIConfig openai_config_from_json(const json& j);

// A ModelProvider speaking POST {base_url}/chat/completions with streaming. Thread-safe.
std::shared_ptr<ModelProvider> make_openai_provider(OpenAIConfig config);

// A Transcriber speaking POST {base_url}/audio/transcriptions (multipart). Thread-safe.
std::shared_ptr<Transcriber> make_openai_transcriber(OpenAIConfig config);

}  // namespace v1
}  // namespace agentrt
