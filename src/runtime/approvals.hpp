// Approvals: a person's decisions on a paused turn (approve, approve with edited arguments, reject, cancel; a job
// confirmation), checked against the pause and committed once, in one batch with the resumed run's RUN_STARTED
// (which carries the decision: the projector derives the turn's move, the ledger's decisions and the approval
// record from it) and the jobs the decision changes; then the continuation runs (interrupts.hpp), on the
// caller's thread (resume_turn) or a worker (resume). Thread-safe: no state of its own; concurrent resumes of one
// turn race on the turn's compare-and-set, and a resume that loses answers with the first one's answer.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "agentrt/runtime.hpp"
#include "agentrt/storage.hpp"
#include "runtime/run_registry.hpp"

namespace agentrt {
inline namespace v1 {

class Approvals {
 public:
  explicit Approvals(Runtime::Impl& rt);
  // `inline_run`: the continuation runs on this thread and its final record lands there (resume_turn).
  // The context and client tools are checked against the limits first; they are for the continuation.
  json resume(const ResumeInput& in, TurnRecord* inline_run = nullptr);

 private:
  struct Decided {
    std::vector<LedgerEntry> updates;  // the decided entries
    std::vector<JobWrite> jobs;        // the confirmations' jobs, confirmed or declined (and their versions)
  };
  json resume_once(const ResumeInput& in, std::vector<ClientToolOffer> client_tools, TurnRecord* inline_run);
  std::optional<Store::TurnSnapshot> open_pause(std::string_view turn_id, std::string_view approval_request_id,
                                                std::string_view run_id, std::optional<json>& prior_answer);
  Decided decide(const TurnRecord& paused, std::vector<LedgerEntry>& ledger, const std::vector<Decision>& decisions,
                 const std::vector<ToolAnswer>& answers);

  Runtime::Impl& rt_;
};

}  // namespace v1
}  // namespace agentrt
