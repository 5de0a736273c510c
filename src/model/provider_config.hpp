// What the HTTP providers' configurations share: reading their common snake_case keys from JSON, and the model
// and body parameters a request ends up with (configuration, then its stage, then the request).
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "agentrt/error.hpp"
#include "agentrt/json.hpp"
#include "agentrt/model.hpp"

namespace agentrt {
inline namespace v1 {
namespace provider_config {

// Reads values of one provider's configuration; every error is Error(invalid_argument) naming the provider
// and the key ("OpenAI configuration: 'max_retries' must be a non-negative integer"). Immutable.
class ConfigReader {
 public:
  explicit ConfigReader(std::string provider) : provider_(std::move(provider)) {}

  [[noreturn]] void bad(std::string_view key, std::string_view what) const {
    throw Error(ErrorCode::invalid_argument, fmt::format("{} configuration: '{}' {}", provider_, key, what));
  }
  std::string string(const json& v, std::string_view key) const {
    if (!v.is_string()) bad(key, "must be a string");
    return v.get<std::string>();
  }
  int64_t count(const json& v, std::string_view key) const {
    if (!v.is_number_integer() || v.get<int64_t>() < 0) bad(key, "must be a non-negative integer");
    return v.get<int64_t>();
  }
  const json& object(const json& v, std::string_view key) const {
    if (!v.is_object()) bad(key, "must be an object");
    return v;
  }

 private:
  std::string provider_;
};

// Reads `key` into `c` when it is one of the keys every HTTP provider configuration has: base_url,
// api_key_env, api_key (refused: keys belong in the environment), model, params, stages ({stage: {model,
// params}}), extra_headers ({name: value}), connect_timeout_ms, request_timeout_ms, idle_timeout_ms,
// max_retries, retry_base_backoff_ms, retry_max_backoff_ms, max_retry_after_ms. Returns false for any other key.
template <class Config>
bool read_common_key(Config& c, const std::string& key, const json& v, const ConfigReader& r) {
  using std::chrono::milliseconds;
  if (key == "base_url") {
    c.base_url = r.string(v, key);
  } else if (key == "api_key_env") {
    c.api_key_env = r.string(v, key);
  } else if (key == "api_key") {
    r.bad(key, "is not read from configuration: put the key in the environment variable named by api_key_env");
  } else if (key == "model") {
    c.model = r.string(v, key);
  } else if (key == "params") {
    c.params = r.object(v, key);
  } else if (key == "stages") {
    for (const auto& [stage, sv] : r.object(v, key).items()) {
      const std::string where = "stages." + stage;
      typename decltype(c.stages)::mapped_type sm;
      for (const auto& [skey, svv] : r.object(sv, where).items()) {
        if (skey == "model") {
          sm.model = r.string(svv, where + ".model");
        } else if (skey == "params") {
          sm.params = r.object(svv, where + ".params");
        } else {
          r.bad(where + "." + skey, "is not a known key (model, params)");
        }
      }
      c.stages[stage] = std::move(sm);
    }
  } else if (key == "extra_headers") {
    for (const auto& [name, hv] : r.object(v, key).items()) {
      c.extra_headers.emplace_back(name, r.string(hv, "extra_headers." + name));
    }
  } else if (key == "connect_timeout_ms") {
    c.connect_timeout = milliseconds(r.count(v, key));
  } else if (key == "request_timeout_ms") {
    c.request_timeout = milliseconds(r.count(v, key));
  } else if (key == "idle_timeout_ms") {
    c.idle_timeout = milliseconds(r.count(v, key));
  } else if (key == "max_retries") {
    c.max_retries = static_cast<int>(r.count(v, key));
  } else if (key == "retry_base_backoff_ms") {
    c.retry_base_backoff = milliseconds(r.count(v, key));
  } else if (key == "retry_max_backoff_ms") {
    c.retry_max_backoff = milliseconds(r.count(v, key));
  } else if (key == "max_retry_after_ms") {
    c.max_retry_after = milliseconds(r.count(v, key));
  } else {
    return false;
  }
  return true;
}

// The model a request goes to and the body fields it carries: the configuration's, then its stage's
// (stages[request.stage]), then the request's own (request.model, request.params), each params object merged
// over the one before as a JSON merge patch (null removes a key).
struct ResolvedModel {
  std::string model;
  json params = json::object();
};

template <class Config>
ResolvedModel resolve_model(const ModelRequest& request, const Config& config) {
  ResolvedModel r;
  r.model = config.model;
  if (config.params.is_object()) r.params.merge_patch(config.params);
  if (auto it = config.stages.find(request.stage); it != config.stages.end()) {
    if (!it->second.model.empty()) r.model = it->second.model;
    if (it->second.params.is_object()) r.params.merge_patch(it->second.params);
  }
  if (!request.model.empty()) r.model = request.model;
  if (request.params.is_object()) r.params.merge_patch(request.params);
  return r;
}

}  // namespace provider_config
}  // namespace v1
}  // namespace agentrt
