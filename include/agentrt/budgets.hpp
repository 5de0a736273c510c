// Hard budgets: limits on what one turn, one thread or one user may spend (model calls, tool calls, tokens,
// cost), the prices that turn tokens into cost, and what was spent.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agentrt/json.hpp"
#include "agentrt/model.hpp"

namespace agentrt {
inline namespace v1 {

// The limits of one scope; an absent limit is no limit. A plain value.
struct BudgetLimits {
  std::optional<int64_t> model_calls;    // model calls (every stage's)
  std::optional<int64_t> tool_calls;     // tool calls the model makes, whatever their outcome
  std::optional<int64_t> input_tokens;   // TokenUsage::input_tokens summed
  std::optional<int64_t> output_tokens;  // TokenUsage::output_tokens summed
  std::optional<double> cost;            // in the prices' unit (see ModelPrice)
  bool empty() const { return !model_calls && !tool_calls && !input_tokens && !output_tokens && !cost; }
};

// Per scope: one turn; all turns of a thread; all turns of a user (every thread of theirs, deleted ones too).
struct Budgets {
  BudgetLimits turn, thread, user;
  bool empty() const { return turn.empty() && thread.empty() && user.empty(); }
};

// A model's price per million tokens (any currency: cost is in the same unit). cached_input < 0 = input's.
struct ModelPrice {
  double input = 0;
  double output = 0;
  double cached_input = -1;
};
// By model name as providers report it in TokenUsage::model; "*" prices every model not listed.
using ModelPrices = std::map<std::string, ModelPrice, std::less<>>;

// What a run, a turn, a thread or a user spent. cost sums the priced models; a model without a price adds
// nothing and is named in unpriced_models.
struct Spend {
  int64_t model_calls = 0;
  int64_t tool_calls = 0;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double cost = 0;
  std::vector<std::string> unpriced_models;
  std::vector<TokenUsage> usage;  // per provider and model
};
// {modelCalls, toolCalls, inputTokens, outputTokens, cost, unpricedModels (when any), usage: TokenUsage[]}.
void to_json(json& j, const Spend& s);
// The same without `usage` (what RUN_FINISHED carries: the event has the run's usage of its own).
json spend_totals_json(const Spend& s);

// Totals of counts and usage, priced.
Spend spend_of(int64_t model_calls, int64_t tool_calls, const std::vector<TokenUsage>& usage,
               const ModelPrices& prices);

// From {turn|thread|user: {model_calls, tool_calls, input_tokens, output_tokens, cost}}: non-negative numbers
// (integers but cost). From {"<model>": {input, output, cached_input}}: non-negative prices per million tokens.
// Error(invalid_argument) for an unknown key, a wrong type or a negative value.
Budgets budgets_from_json(const json& j);
ModelPrices prices_from_json(const json& j);

}  // namespace v1
}  // namespace agentrt
