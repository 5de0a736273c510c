// Tool-ledger statuses and the one transition table every ledger change goes through (beside the turn table in
// turn_state.hpp). The ledger is what makes a tool run at most once per call: a call is durable `started`
// before a tool that is not idempotent runs, and no status leads back to `approved` from there.
#pragma once

#include <string_view>

#include "agentrt/transition_table.hpp"

namespace agentrt {
inline namespace v1 {

enum class LedgerStatus { requested, approved, rejected, started, finished, failed, interrupted, expired };

std::string_view to_string(LedgerStatus s) noexcept;  // "requested", "approved", ...
LedgerStatus ledger_status_from_string(std::string_view s);

// A call has its outcome (nothing changes it afterwards but recording the same outcome again, as recovery does).
constexpr bool is_terminal(LedgerStatus s) noexcept {
  return s == LedgerStatus::rejected || s == LedgerStatus::finished || s == LedgerStatus::failed ||
         s == LedgerStatus::interrupted || s == LedgerStatus::expired;
}

// The transition table (ARCHITECTURE.md, "Words: tool ledger").
//   requested -> approved (no approval needed, or a person approved) | rejected | expired (the deadline passed)
//                | failed (unknown tool, invalid arguments) | interrupted (the turn was cancelled or failed)
//                | finished (a client tool call: the client ran it and answered; failed when it answered an error)
//   approved  -> started | failed (the tool is gone when it is due) | interrupted (cancelled before it started)
//   started   -> finished | failed | interrupted (cancelled, or found started after a crash: outcome unknown)
//                | started (found started after a crash, run again: only a call to an idempotent tool — advance()
//                  refuses it for any other)
//                | requested (the tool asked for a job confirmation: the call waits for the person again; the
//                  job, not the tool, is what runs after the confirmation)
//   an outcome -> the same outcome (recorded again), nothing else
inline constexpr TransitionTable<LedgerStatus, 8> kLedgerTransitions = {
    {LedgerStatus::requested,
     {LedgerStatus::approved, LedgerStatus::rejected, LedgerStatus::expired, LedgerStatus::failed,
      LedgerStatus::interrupted, LedgerStatus::finished}},
    {LedgerStatus::approved, {LedgerStatus::started, LedgerStatus::failed, LedgerStatus::interrupted}},
    {LedgerStatus::started,
     {LedgerStatus::finished, LedgerStatus::failed, LedgerStatus::interrupted, LedgerStatus::started,
      LedgerStatus::requested}},
    {LedgerStatus::rejected, {LedgerStatus::rejected}},
    {LedgerStatus::finished, {LedgerStatus::finished}},
    {LedgerStatus::failed, {LedgerStatus::failed}},
    {LedgerStatus::interrupted, {LedgerStatus::interrupted}},
    {LedgerStatus::expired, {LedgerStatus::expired}},
};
constexpr bool can_transition(LedgerStatus from, LedgerStatus to) noexcept {
  return kLedgerTransitions.allows(from, to);
}

// Throws Error(invalid_state) "tool call <id>: cannot go from X to Y" when the table refuses the transition.
inline void check_transition(std::string_view tool_call_id, LedgerStatus from, LedgerStatus to) {
  kLedgerTransitions.check("tool call", tool_call_id, from, to);
}

}  // namespace v1
}  // namespace agentrt
