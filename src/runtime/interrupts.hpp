// Interrupts: a run's pauses for a person and the decisions that end them. pause() asks about the calls that
// wait (an approval interrupt per call, with the response schema its answer is checked against; a confirmation
// interrupt per job a tool asked to confirm), ends the run WAITING_APPROVAL with the deadline and commits.
// decided() is a resumed run's first step: the decisions (committed by Approvals, approvals.cpp) give rejected
// and declined calls their results, and a call a crash cut off while `started` an unknown outcome unless its
// tool is idempotent. Not thread-safe: one run's, on the run's thread.
#pragma once

#include <string>
#include <vector>

#include "runtime/runtime_impl.hpp"

namespace agentrt {
inline namespace v1 {

class TurnRunner;

class Interrupts {
 public:
  // `runner`: the run's step, turn row and commits.
  Interrupts(TurnRunner& runner, Runtime::Impl& rt, RunCtx& ctx);

  // Pauses the run for the calls `ids` (their ledger entries wait for a person) and the client tool calls
  // `client_ids` (they wait for the client's answers) and commits its end: WAITING_APPROVAL with the interrupt
  // outcome when a person is asked anything, else WAITING_CLIENT with the success outcome and pendingToolCallIds.
  void pause(const std::vector<std::string>& ids, const std::vector<std::string>& client_ids = {});
  // The decided calls of a resumed turn: records the results of those that do not run (rejected and declined
  // calls, client tools' answers); returns those to run.
  std::vector<std::string> decided();

 private:
  void answered(const LedgerEntry& l);

  TurnRunner& runner_;
  Runtime::Impl& rt_;
  RunCtx& ctx_;
};

}  // namespace v1
}  // namespace agentrt
