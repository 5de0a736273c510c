// Hard budgets at run time (see budget_guard.hpp).
#include "runtime/budget_guard.hpp"

#include <fmt/format.h>

namespace agentrt {
inline namespace v1 {

namespace {

// The usage of both, summed per provider and model.
std::vector<TokenUsage> merged(std::vector<TokenUsage> a, const std::vector<TokenUsage>& b) {
  for (const auto& u : b) {
    bool found = false;
    for (auto& x : a)
      if (x.provider == u.provider && x.model == u.model) {
        x += u;
        found = true;
        break;
      }
    if (!found) a.push_back(u);
  }
  return a;
}

void check_scope(std::string_view scope, const BudgetLimits& l, const Spend& s) {
  auto count = [&](const std::optional<int64_t>& limit, int64_t used, std::string_view key, std::string_view what) {
    if (limit && used > *limit)
      throw BudgetExceeded(
          fmt::format("budget exceeded: {}.{} is {}, and this would make {} {}", scope, key, *limit, used, what));
  };
  auto reached = [&](const std::optional<int64_t>& limit, int64_t used, std::string_view key) {
    if (limit && used >= *limit)
      throw BudgetExceeded(fmt::format("budget exceeded: {}.{} is {}, and {} are used", scope, key, *limit, used));
  };
  count(l.model_calls, s.model_calls, "model_calls", "model calls");
  count(l.tool_calls, s.tool_calls, "tool_calls", "tool calls");
  reached(l.input_tokens, s.input_tokens, "input_tokens");
  reached(l.output_tokens, s.output_tokens, "output_tokens");
  if (l.cost) {
    if (!s.unpriced_models.empty())
      throw BudgetExceeded(
          fmt::format("budget exceeded: {}.cost is {}, and the cost of model '{}' is unknown (it has "
                      "no entry in prices)",
                      scope, *l.cost, s.unpriced_models.front()));
    if (s.cost >= *l.cost)
      throw BudgetExceeded(fmt::format("budget exceeded: {}.cost is {}, and {:.6g} is spent", scope, *l.cost, s.cost));
  }
}

Spend with_stored(const Spend& next, const Spend& stored, const ModelPrices& prices) {
  return spend_of(next.model_calls + stored.model_calls, next.tool_calls + stored.tool_calls,
                  merged(next.usage, stored.usage), prices);
}

}  // namespace

Spend stored_spend(Store& store, const ModelPrices& prices, std::string_view thread_id, std::string_view user_id,
                   std::string_view except_turn_id) {
  StoredSpend s = store.spend(thread_id, user_id, except_turn_id);
  return spend_of(s.model_calls, s.tool_calls, s.usage, prices);
}

void check_budgets(const Budgets& budgets, const ModelPrices& prices, Store& store, const TurnRecord& turn,
                   const Spend& next) {
  check_scope("turn", budgets.turn, next);
  if (!budgets.thread.empty())
    check_scope("thread", budgets.thread,
                with_stored(next, stored_spend(store, prices, turn.thread_id, {}, turn.id), prices));
  if (!budgets.user.empty())
    check_scope("user", budgets.user,
                with_stored(next, stored_spend(store, prices, {}, turn.user_id, turn.id), prices));
}

}  // namespace v1
}  // namespace agentrt
