#include "agentrt/ledger_state.hpp"

#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "agentrt/storage.hpp"

namespace agentrt {
inline namespace v1 {

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
