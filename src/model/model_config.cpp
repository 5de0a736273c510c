// Model providers from configuration (see model_config.hpp).
#include "agentrt/model_config.hpp"

#include <fmt/format.h>

#include <cstdlib>

#include "agentrt/anthropic.hpp"
#include "agentrt/error.hpp"
#include "agentrt/json_reader.hpp"
#include "agentrt/scripted_model.hpp"

namespace agentrt {
inline namespace v1 {
namespace {

// A chain longer than this is a configuration mistake, not a plan: each link is a provider with its own pool.
constexpr size_t kMaxFallbacks = 16;

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v && *v;
}

std::string type_of(const json& model, std::string_view where) {
  wire::JsonReader in(model, where);
  std::string type = "auto";
  if (const json* t = in.find("type")) {
    if (!t->is_string()) in.wrong_type("type", "a string");
    type = t->get<std::string>();
  }
  if (type == "auto") type = (env_set("OPENAI_API_KEY") || env_set("OPENAI_BASE_URL")) ? "openai" : "demo";
  return type;
}

// The provider's own keys: the configuration without what this file reads.
json own_keys(const json& model) {
  json out = model;
  out.erase("type");
  out.erase("fallbacks");
  out.erase("rate_limit");
  return out;
}

OpenAIConfig openai_config(const json& model) {
  const json oc = own_keys(model);
  OpenAIConfig base = openai_config_from_env();
  OpenAIConfig cfg = oc.empty() ? base : openai_config_from_json(oc);
  if (!oc.contains("base_url")) cfg.base_url = base.base_url;
  if (!oc.contains("model")) cfg.model = base.model;
  return cfg;
}

RateLimit rate_limit_from_json(const json& j, const std::string& where) {
  wire::JsonReader in(j, where);
  in.only_keys({"requests_per_minute", "tokens_per_minute"});
  constexpr int64_t kMax = int64_t{1} << 40;
  return RateLimit{in.optional_integer("requests_per_minute", 0, kMax).value_or(0),
                   in.optional_integer("tokens_per_minute", 0, kMax).value_or(0)};
}

// One link: the provider of the configuration's type, paced when it says so.
FallbackChoice link_from_json(const json& model, const std::string& where) {
  const std::string type = type_of(model, where);
  FallbackChoice c;
  c.provider_name = type;
  if (type == "demo") {
    wire::JsonReader(model, where).only_keys({"type", "rate_limit", "fallbacks"});
    c.provider = make_demo_model();
    c.model = "demo";
  } else if (type == "openai") {
    OpenAIConfig cfg = openai_config(model);
    c.model = cfg.model;
    c.provider = make_openai_provider(std::move(cfg));
  } else if (type == "anthropic") {
    AnthropicConfig cfg = anthropic_config_from_json(own_keys(model));
    c.model = cfg.model;
    c.provider = make_anthropic_provider(std::move(cfg));
  } else {
    wire::refuse(where, fmt::format("type '{}' is unknown (auto, demo, openai, anthropic)", type));
  }
  if (const auto r = model.find("rate_limit"); r != model.end()) {
    const RateLimit limit = rate_limit_from_json(*r, where + ".rate_limit");
    if (limit.requests_per_minute > 0 || limit.tokens_per_minute > 0)
      c.provider = make_rate_limited_provider(std::move(c.provider), limit);
  }
  return c;
}

}  // namespace

std::shared_ptr<ModelProvider> model_provider_from_json(const json& model) {
  std::vector<FallbackChoice> chain;
  chain.push_back(link_from_json(model, "model"));
  if (const auto f = model.find("fallbacks"); f != model.end()) {
    if (!f->is_array()) wire::refuse("model", "'fallbacks' must be an array of model configurations");
    if (f->size() > kMaxFallbacks)
      wire::refuse("model", fmt::format("'fallbacks' lists {} models; at most {} are tried", f->size(), kMaxFallbacks));
    for (size_t i = 0; i < f->size(); ++i) {
      const std::string where = fmt::format("model.fallbacks[{}]", i);
      if ((*f)[i].is_object() && (*f)[i].contains("fallbacks"))
        wire::refuse(where, "a fallback has no fallbacks of its own (list them all in model.fallbacks)");
      chain.push_back(link_from_json((*f)[i], where));
    }
  }
  if (chain.size() == 1) return chain.front().provider;
  return make_fallback_provider(std::move(chain));
}

OpenAIConfig openai_config_from_model_json(const json& model) {
  return openai_config(model.is_object() ? model : json::object());
}

}  // namespace v1
}  // namespace agentrt
