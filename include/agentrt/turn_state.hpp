// Turn statuses and the one transition table every state change goes through.
#pragma once

#include <string_view>

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
constexpr bool can_transition(TurnStatus from, TurnStatus to) noexcept {
  constexpr bool table[7][7] = {
      //            run    wait   resum  compl  fail   exp    canc
      /* run   */ {false, true, false, true, true, false, true},
      /* wait  */ {false, false, true, false, false, true, true},
      /* resum */ {true, false, false, false, true, false, true},
      /* compl */ {false, false, false, false, false, false, false},
      /* fail  */ {false, false, false, false, false, false, false},
      /* exp   */ {false, false, false, false, false, false, false},
      /* canc  */ {false, false, false, false, false, false, false},
  };
  return table[static_cast<int>(from)][static_cast<int>(to)];
}

// Throws Error(invalid_state) "turn <id>: cannot go from X to Y" when the table refuses the transition.
void check_transition(std::string_view turn_id, TurnStatus from, TurnStatus to);

}  // namespace v1
}  // namespace agentrt
