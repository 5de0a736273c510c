// TokenUsage: summing and its AG-UI JSON form.
#include "agentrt/error.hpp"
#include "agentrt/model.hpp"

namespace agentrt {
inline namespace v1 {
namespace {

int64_t read_count(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return 0;
  if (!it->is_number_integer()) {
    throw Error(ErrorCode::invalid_argument, std::string("TokenUsage: '") + key + "' must be an integer");
  }
  return it->get<int64_t>();
}

std::string read_string(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  if (!it->is_string())
    throw Error(ErrorCode::invalid_argument, std::string("TokenUsage: '") + key + "' must be a string");
  return it->get<std::string>();
}

}  // namespace

TokenUsage& TokenUsage::operator+=(const TokenUsage& o) {
  // Sums over the model calls of a run: the names stay those of the first call that had them.
  if (provider.empty()) provider = o.provider;
  if (model.empty()) model = o.model;
  input_tokens += o.input_tokens;
  output_tokens += o.output_tokens;
  total_tokens += o.total_tokens;
  reasoning_tokens += o.reasoning_tokens;
  cached_input_tokens += o.cached_input_tokens;
  cache_write_input_tokens += o.cache_write_input_tokens;
  return *this;
}

void to_json(json& j, const TokenUsage& u) {
  j = json::object();
  if (!u.provider.empty()) j["provider"] = u.provider;
  if (!u.model.empty()) j["model"] = u.model;
  auto put = [&](const char* key, int64_t v) {
    if (v != 0) j[key] = v;
  };
  put("inputTokens", u.input_tokens);
  put("outputTokens", u.output_tokens);
  put("totalTokens", u.total_tokens);
  put("reasoningTokens", u.reasoning_tokens);
  put("cachedInputTokens", u.cached_input_tokens);
  put("cacheWriteInputTokens", u.cache_write_input_tokens);
}

void from_json(const json& j, TokenUsage& u) {
  if (!j.is_object()) throw Error(ErrorCode::invalid_argument, "TokenUsage must be a JSON object");
  u = TokenUsage{};
  u.provider = read_string(j, "provider");
  u.model = read_string(j, "model");
  u.input_tokens = read_count(j, "inputTokens");
  u.output_tokens = read_count(j, "outputTokens");
  u.total_tokens = read_count(j, "totalTokens");
  u.reasoning_tokens = read_count(j, "reasoningTokens");
  u.cached_input_tokens = read_count(j, "cachedInputTokens");
  u.cache_write_input_tokens = read_count(j, "cacheWriteInputTokens");
}

}  // namespace v1
}  // namespace agentrt
