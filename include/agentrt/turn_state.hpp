// Turn statuses and the one transition table every state change goes through.
#pragma once

#include <string_view>

#include "agentrt/transition_table.hpp"

namespace agentrt {
inline namespace v1 {

enum class TurnStatus { running, waiting_approval, resuming, completed, failed, expired, cancelled };

std::string_view to_string(TurnStatus s) noexcept;  // "RUNNING", "WAITING_APPROVAL", ...
TurnStatus turn_status_from_string(std::string_view s);

// A turn is active (blocks a new turn on its thread) until it reaches a terminal status.
constexpr bool is_terminal(TurnStatus s) noexcept {
  return s == TurnStatus::completed || s == TurnStatus::failed || s == TurnStatus::expired ||
         s == TurnStatus::cancelled;
}

// The transition table (ARCHITECTURE.md, "Turn state machine").
//   RUNNING -> WAITING_APPROVAL | COMPLETED | FAILED | CANCELLED
//   WAITING_APPROVAL -> RESUMING | EXPIRED | CANCELLED
//   RESUMING -> RUNNING | FAILED | CANCELLED
inline constexpr TransitionTable<TurnStatus, 7> kTurnTransitions = {
    {TurnStatus::running,
     {TurnStatus::waiting_approval, TurnStatus::completed, TurnStatus::failed, TurnStatus::cancelled}},
    {TurnStatus::waiting_approval, {TurnStatus::resuming, TurnStatus::expired, TurnStatus::cancelled}},
    {TurnStatus::resuming, {TurnStatus::running, TurnStatus::failed, TurnStatus::cancelled}},
};
constexpr bool can_transition(TurnStatus from, TurnStatus to) noexcept { return kTurnTransitions.allows(from, to); }

// Throws Error(invalid_state) "turn <id>: cannot go from X to Y" when the table refuses the transition.
inline void check_transition(std::string_view turn_id, TurnStatus from, TurnStatus to) {
  kTurnTransitions.check("turn", turn_id, from, to);
}

}  // namespace v1
}  // namespace agentrt
