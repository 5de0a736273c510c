// Turn statuses and the one transition table every state change goes through.
#pragma once

#include <string_view>

#include "agentrt/transition_table.hpp"

namespace agentrt {
inline namespace v1 {

enum class TurnStatus { running, waiting_approval, resuming, completed, failed, expired, cancelled, waiting_client };

std::string_view to_string(TurnStatus s) noexcept;  // "RUNNING", "WAITING_APPROVAL", ...
TurnStatus turn_status_from_string(std::string_view s);

// Paused: waiting for a person's decisions (WAITING_APPROVAL; client tool calls may be pending too) or for the
// answers of client tool calls alone (WAITING_CLIENT). Both end with resume(), expire at their deadline and
// can be cancelled.
constexpr bool is_waiting(TurnStatus s) noexcept {
  return s == TurnStatus::waiting_approval || s == TurnStatus::waiting_client;
}

// A turn is active (blocks a new turn on its thread) until it reaches a terminal status.
constexpr bool is_terminal(TurnStatus s) noexcept {
  return s == TurnStatus::completed || s == TurnStatus::failed || s == TurnStatus::expired ||
         s == TurnStatus::cancelled;
}

// The transition table (ARCHITECTURE.md, "Turn state machine").
//   RUNNING -> WAITING_APPROVAL | WAITING_CLIENT | COMPLETED | FAILED | CANCELLED
//   WAITING_APPROVAL -> RESUMING | EXPIRED | CANCELLED
//   WAITING_CLIENT -> RESUMING | EXPIRED | CANCELLED   (client tool calls: their answers resume the turn)
//   RESUMING -> RUNNING | FAILED | CANCELLED
inline constexpr TransitionTable<TurnStatus, 8> kTurnTransitions = {
    {TurnStatus::running,
     {TurnStatus::waiting_approval, TurnStatus::waiting_client, TurnStatus::completed, TurnStatus::failed,
      TurnStatus::cancelled}},
    {TurnStatus::waiting_approval, {TurnStatus::resuming, TurnStatus::expired, TurnStatus::cancelled}},
    {TurnStatus::waiting_client, {TurnStatus::resuming, TurnStatus::expired, TurnStatus::cancelled}},
    {TurnStatus::resuming, {TurnStatus::running, TurnStatus::failed, TurnStatus::cancelled}},
};
constexpr bool can_transition(TurnStatus from, TurnStatus to) noexcept { return kTurnTransitions.allows(from, to); }

// Throws Error(invalid_state) "turn <id>: cannot go from X to Y" when the table refuses the transition.
inline void check_transition(std::string_view turn_id, TurnStatus from, TurnStatus to) {
  kTurnTransitions.check("turn", turn_id, from, to);
}

}  // namespace v1
}  // namespace agentrt
