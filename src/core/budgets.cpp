// Budgets, prices and spend: their JSON and the pricing of usage.
#include "agentrt/budgets.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "agentrt/json_reader.hpp"
#include "util/json_object.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

constexpr int64_t kMaxCount = std::numeric_limits<int64_t>::max() / 4;

std::optional<double> optional_amount(const wire::JsonReader& in, std::string_view key) {
  const json* v = in.find(key);
  if (!v) return std::nullopt;
  if (!v->is_number() || v->get<double>() < 0 || !std::isfinite(v->get<double>()))
    in.wrong_value(key, "a non-negative number", *v);
  return v->get<double>();
}

BudgetLimits limits_from_json(const json& j, std::string_view where) {
  wire::JsonReader in(j, where);
  in.only_keys({"model_calls", "tool_calls", "input_tokens", "output_tokens", "cost"});
  BudgetLimits l;
  l.model_calls = in.optional_integer("model_calls", 0, kMaxCount);
  l.tool_calls = in.optional_integer("tool_calls", 0, kMaxCount);
  l.input_tokens = in.optional_integer("input_tokens", 0, kMaxCount);
  l.output_tokens = in.optional_integer("output_tokens", 0, kMaxCount);
  l.cost = optional_amount(in, "cost");
  return l;
}

}  // namespace

json spend_totals_json(const Spend& s) {
  json j = json_object("modelCalls", s.model_calls, "toolCalls", s.tool_calls, "inputTokens", s.input_tokens,
                       "outputTokens", s.output_tokens, "cost", s.cost);
  if (!s.unpriced_models.empty()) j["unpricedModels"] = s.unpriced_models;
  return j;
}

void to_json(json& j, const Spend& s) {
  j = spend_totals_json(s);
  j["usage"] = s.usage;
}

Spend spend_of(int64_t model_calls, int64_t tool_calls, const std::vector<TokenUsage>& usage,
               const ModelPrices& prices) {
  Spend s;
  s.model_calls = model_calls;
  s.tool_calls = tool_calls;
  s.usage = usage;
  const auto any = prices.find("*");
  for (const auto& u : usage) {
    s.input_tokens += u.input_tokens;
    s.output_tokens += u.output_tokens;
    auto p = prices.find(u.model);
    if (p == prices.end()) p = any;
    if (p == prices.end()) {
      if (std::find(s.unpriced_models.begin(), s.unpriced_models.end(), u.model) == s.unpriced_models.end())
        s.unpriced_models.push_back(u.model);
      continue;
    }
    const ModelPrice& price = p->second;
    const int64_t cached = std::min(u.cached_input_tokens, u.input_tokens);
    const double cached_price = price.cached_input < 0 ? price.input : price.cached_input;
    s.cost += (static_cast<double>(u.input_tokens - cached) * price.input + static_cast<double>(cached) * cached_price +
               static_cast<double>(u.output_tokens) * price.output) /
              1e6;
  }
  return s;
}

Budgets budgets_from_json(const json& j) {
  wire::JsonReader in(j, "budgets");
  in.only_keys({"turn", "thread", "user"});
  Budgets b;
  if (const json* v = in.find("turn")) b.turn = limits_from_json(*v, "budgets.turn");
  if (const json* v = in.find("thread")) b.thread = limits_from_json(*v, "budgets.thread");
  if (const json* v = in.find("user")) b.user = limits_from_json(*v, "budgets.user");
  return b;
}

ModelPrices prices_from_json(const json& j) {
  if (!j.is_object()) wire::refuse("prices", "must be a JSON object of models");
  ModelPrices out;
  for (const auto& [model, value] : j.items()) {
    const std::string where = fmt::format("prices.{}", model);
    wire::JsonReader in(value, where);
    in.only_keys({"input", "output", "cached_input"});
    ModelPrice p;
    p.input = optional_amount(in, "input").value_or(0);
    p.output = optional_amount(in, "output").value_or(0);
    p.cached_input = optional_amount(in, "cached_input").value_or(-1);
    out.emplace(model, p);
  }
  return out;
}

}  // namespace v1
}  // namespace agentrt
