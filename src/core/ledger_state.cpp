#include "agentrt/ledger_state.hpp"

#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "agentrt/storage.hpp"

namespace agentrt {
inline namespace v1 {

std::string_view to_string(LedgerStatus s) noexcept {
  switch (s) {
    case LedgerStatus::requested: return "requested";
    case LedgerStatus::approved: return "approved";
    case LedgerStatus::rejected: return "rejected";
    case LedgerStatus::started: return "started";
    case LedgerStatus::finished: return "finished";
    case LedgerStatus::failed: return "failed";
    case LedgerStatus::interrupted: return "interrupted";
    case LedgerStatus::expired: return "expired";
  }
  return "failed";
}

LedgerStatus ledger_status_from_string(std::string_view s) {
  for (auto st : {LedgerStatus::requested, LedgerStatus::approved, LedgerStatus::rejected, LedgerStatus::started,
                  LedgerStatus::finished, LedgerStatus::failed, LedgerStatus::interrupted, LedgerStatus::expired})
    if (to_string(st) == s) return st;
  throw Error(ErrorCode::invalid_argument, fmt::format("unknown ledger status '{}'", s));
}

void check_transition(std::string_view tool_call_id, LedgerStatus from, LedgerStatus to) {
  if (!can_transition(from, to))
    throw Error(ErrorCode::invalid_state,
                fmt::format("tool call {}: cannot go from {} to {}", tool_call_id, to_string(from), to_string(to)));
}

void advance(LedgerEntry& entry, LedgerStatus to) {
  check_transition(entry.tool_call_id, entry.status, to);
  if (entry.status == LedgerStatus::started && to == LedgerStatus::started && !entry.idempotent)
    throw Error(ErrorCode::invalid_state,
                fmt::format("tool call {}: started before, and its tool is not idempotent: it is not run again",
                            entry.tool_call_id));
  entry.status = to;
}

}  // namespace v1
}  // namespace agentrt
