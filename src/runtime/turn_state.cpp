#include "agentrt/turn_state.hpp"

#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "agentrt/log.hpp"
#include "agentrt/storage.hpp"

namespace agentrt {
inline namespace v1 {

std::string_view to_string(TurnStatus s) noexcept {
  switch (s) {
    case TurnStatus::running: return "RUNNING";
    case TurnStatus::waiting_approval: return "WAITING_APPROVAL";
    case TurnStatus::resuming: return "RESUMING";
    case TurnStatus::completed: return "COMPLETED";
    case TurnStatus::failed: return "FAILED";
    case TurnStatus::expired: return "EXPIRED";
    case TurnStatus::cancelled: return "CANCELLED";
  }
  return "FAILED";
}

TurnStatus turn_status_from_string(std::string_view s) {
  for (auto st : {TurnStatus::running, TurnStatus::waiting_approval, TurnStatus::resuming, TurnStatus::completed,
                  TurnStatus::failed, TurnStatus::expired, TurnStatus::cancelled})
    if (to_string(st) == s) return st;
  throw Error(ErrorCode::invalid_argument, fmt::format("unknown turn status '{}'", s));
}

void check_transition(std::string_view turn_id, TurnStatus from, TurnStatus to) {
  if (!can_transition(from, to))
    throw Error(ErrorCode::invalid_state,
                fmt::format("turn {}: cannot go from {} to {}", turn_id, to_string(from), to_string(to)));
}

std::string_view to_string(LogLevel l) noexcept {
  switch (l) {
    case LogLevel::debug: return "debug";
    case LogLevel::info: return "info";
    case LogLevel::warn: return "warn";
    case LogLevel::error: return "error";
    case LogLevel::off: return "off";
  }
  return "info";
}

}  // namespace v1
}  // namespace agentrt
