// Hard budgets at run time: before each model call and each batch of tool calls a turn's spend, with what its
// thread's and its user's other turns committed, is checked against RuntimeConfig::budgets.
#pragma once

#include "agentrt/budgets.hpp"
#include "agentrt/error.hpp"
#include "agentrt/storage.hpp"

namespace agentrt {
inline namespace v1 {

// A limit the turn would pass: the run ends with RUN_ERROR {code: "budget_exceeded"} and this message.
class BudgetExceeded : public Error {
 public:
  explicit BudgetExceeded(std::string message) : Error(ErrorCode::invalid_state, std::move(message)) {}
};

// Throws BudgetExceeded for the first limit (turn, then thread, then user) that `next` passes. `next` is the
// turn's spend with what is about to happen counted in (the model call, the tool calls just asked for): a count
// passes its limit when it is above it; tokens and cost, which an action's outcome adds to, when they have
// reached it. A cost limit with usage of a model that has no price passes too (its cost is unknown). Reads the
// store only for the scopes that have limits. Thread-safe (as the store is).
void check_budgets(const Budgets& budgets, const ModelPrices& prices, Store& store, const TurnRecord& turn,
                   const Spend& next);

// What the store holds for a turn, a thread or a user, priced.
Spend stored_spend(Store& store, const ModelPrices& prices, std::string_view thread_id, std::string_view user_id,
                   std::string_view except_turn_id);

}  // namespace v1
}  // namespace agentrt
