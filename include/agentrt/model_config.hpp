// Model providers from configuration: a provider by type, a fallback chain, a client-side rate limit.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agentrt/json.hpp"
#include "agentrt/model.hpp"
#include "agentrt/openai.hpp"

namespace agentrt {
inline namespace v1 {

// One link of a fallback chain: the provider, and the names its switches are reported under.
struct FallbackChoice {
  std::shared_ptr<ModelProvider> provider;
  std::string provider_name;  // "openai", "anthropic", ...
  std::string model;          // the model it answers with ("" = its default)
};

// A ModelProvider that asks the chain in order: when one fails for good (after its own retries) before it has
// streamed anything, the next is asked, the switch reported to the sink (ModelStreamSink::on_fallback: the
// runtime emits CUSTOM agentrt.model_fallback). The request's `model` (a stage's model name) goes to the first
// only; the others answer with their own. A failure after some of the answer has streamed, a cancellation, or
// the last one's failure is thrown as it is. Thread-safe (as its providers are).
std::shared_ptr<ModelProvider> make_fallback_provider(std::vector<FallbackChoice> chain);

// Client-side pacing of one provider: at most this many requests and tokens (the request's estimated input, then
// corrected by the answer's reported input and output) in any minute; 0 = no limit.
struct RateLimit {
  int64_t requests_per_minute = 0;
  int64_t tokens_per_minute = 0;
};

// A ModelProvider that queues calls (first come, first served) until the limit allows them, instead of letting
// the provider refuse them: a queued call waits as long as it has to, and ends with Error(cancelled) at once when
// its turn is cancelled. Thread-safe; one limit shared by every turn and stage that uses the returned provider.
std::shared_ptr<ModelProvider> make_rate_limited_provider(std::shared_ptr<ModelProvider> provider, RateLimit limit);

// The provider a `model` configuration describes: {type: "auto" | "demo" | "openai" | "anthropic", ...the
// type's keys (openai_config_from_json, anthropic_config_from_json)..., rate_limit: {requests_per_minute,
// tokens_per_minute}, fallbacks: [at most 16 model configurations without fallbacks of their own]}. "auto" is "openai"
// when OPENAI_API_KEY or OPENAI_BASE_URL is set, else "demo". Error(invalid_argument) for an unknown type or key.
std::shared_ptr<ModelProvider> model_provider_from_json(const json& model);

// The OpenAI settings of a `model` configuration of type openai (the environment's base_url and model where the
// configuration has none), for the transcriber that shares them; fallbacks and rate_limit are left out.
OpenAIConfig openai_config_from_model_json(const json& model);

}  // namespace v1
}  // namespace agentrt
