// The Anthropic Messages API backend: a ModelProvider speaking POST /v1/messages with streaming.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "agentrt/json.hpp"
#include "agentrt/model.hpp"

namespace agentrt {
inline namespace v1 {

// The model and parameters one stage uses when the request does not name its own.
struct AnthropicStageModel {
  std::string model;             // "" = AnthropicConfig::model
  json params = json::object();  // merged over AnthropicConfig::params (JSON merge patch: null removes a key)
};

// Where and how to reach the Anthropic Messages API (api.anthropic.com or a server speaking it).
// A plain value (not synchronized: copy it rather than share it across threads while changing it). It never
// holds the key unless a host puts one in `api_key`.
struct AnthropicConfig {
  std::string base_url = "https://api.anthropic.com";  // the path /v1/messages is appended
  // The API key is read from this environment variable when a provider is constructed. It is sent only as
  // the `x-api-key` header, and never logged, persisted or put in an error message.
  std::string api_key_env = "ANTHROPIC_API_KEY";
  // For hosts that hold the key themselves; wins over api_key_env when set. Never read from JSON.
  std::string api_key;
  std::string model = "claude-sonnet-4-5";
  int64_t max_tokens = 4096;  // the body's max_tokens (the API requires one); params may set their own
  // Body fields for every request: temperature, top_p, stop_sequences, metadata, server tools in `tools`
  // (the request's tools are added after them), thinking ({"type":"enabled","budget_tokens":N}), ...
  json params = json::object();
  std::map<std::string, AnthropicStageModel> stages;               // per stage ("intent", "execution", "organization")
  std::string anthropic_version = "2023-06-01";                    // the `anthropic-version` header
  std::vector<std::pair<std::string, std::string>> extra_headers;  // sent on every request (anthropic-beta, ...)

  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds request_timeout{600'000};  // the whole request, stream included
  std::chrono::milliseconds idle_timeout{120'000};     // longest silence between received bytes

  int max_retries = 2;  // retries after the first attempt (408/409/429/529/5xx, connection failures)
  std::chrono::milliseconds retry_base_backoff{500};  // doubled per retry, times a jitter in [0.75, 1]
  std::chrono::milliseconds retry_max_backoff{8'000};
  // A server's retry-after / retry-after-ms longer than this is ignored in favour of the backoff.
  std::chrono::milliseconds max_retry_after{60'000};
};

// From snake_case keys: base_url, api_key_env, model, max_tokens, params, stages ({stage: {model, params}}),
// anthropic_version, extra_headers ({name: value}), connect_timeout_ms, request_timeout_ms, idle_timeout_ms,
// max_retries, retry_base_backoff_ms, retry_max_backoff_ms, max_retry_after_ms. Missing keys keep their
// defaults. Throws Error(invalid_argument) for an unknown key, a wrong type, a max_tokens below 1, or `api_key`
// (keys belong in the environment, not in configuration files).
AnthropicConfig anthropic_config_from_json(const json& j);

// A ModelProvider speaking POST {base_url}/v1/messages with streaming. Thread-safe.
//
// An answer's thinking blocks (thinking text with its signature, redacted_thinking data) come back, in order,
// as ModelResult::encrypted_value, JSON text {"provider":"anthropic","model":...,"blocks":[...]}; an assistant
// message whose encrypted_value is such a value is sent with those blocks first, unchanged, as the API
// requires for tool use with extended thinking (a value from another provider, or unreadable, is ignored).
std::shared_ptr<ModelProvider> make_anthropic_provider(AnthropicConfig config);

}  // namespace v1
}  // namespace agentrt
