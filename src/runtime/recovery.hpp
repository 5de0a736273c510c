// Recovery: turns whose run cannot go on, ended (or continued) from what is durable. An expired or cancelled
// pause ends with a run of its own (end_waiting_turn); a turn whose runtime stopped is continued here when its
// decision was durable (a resume) and failed otherwise (recover_running_turn); a run whose commit failed for
// good is failed from the store (fail_from_store), and when even that cannot be stored, the turn is remembered
// and the sweeper records it later (record_unrecorded). The sweeper's pass (sweep) expires overdue pauses, takes
// over the turns of runtimes whose lease ran out, and sweeps the jobs. Thread-safe: mutex_ guards the remembered
// turns, sweep_mutex_ lets one sweep run at a time; each turn is guarded by the store's compare-and-set on its
// row.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "agentrt/outputs.hpp"
#include "agentrt/runtime.hpp"
#include "agentrt/storage.hpp"

namespace agentrt {
inline namespace v1 {

class Recovery {
 public:
  explicit Recovery(Runtime::Impl& rt);

  void end_waiting_turn(TurnRecord turn, TurnStatus to, const std::string& reason);  // expire / cancel a pause
  void recover_running_turn(TurnRecord turn);
  // Ends a RUNNING or RESUMING turn whose run cannot go on (its runtime stopped, or a commit of its run failed
  // for good) from what is durable: every tool call in its history gets a result (`known`: the outcomes the
  // run had, written again), then RUN_ERROR {code} and the ERROR message, in one commit. Returns the failed
  // turn as committed, or nullopt when the turn is not running any more. Throws what the commit throws.
  std::optional<TurnRecord> fail_from_store(const std::string& turn_id, const std::string& code,
                                            const std::string& message,
                                            const std::map<std::string, ToolAgentOutput>* known = nullptr);
  // A turn whose run failed and whose end could not be stored: record_unrecorded (the sweeper's) records it.
  void remember_unrecorded(const std::string& turn_id);
  void record_unrecorded();
  // Expires overdue pauses, recovers RUNNING (and, with take_over_resuming, RESUMING) turns whose owner is not
  // alive, and sweeps the jobs; one pass at a time.
  void sweep(bool take_over_resuming = true);
  // Whether the runtime instance `owner` holds its lease (this one always does; no owner is not alive).
  bool instance_alive(const std::string& owner, int64_t now) const;

 private:
  Runtime::Impl& rt_;
  std::mutex sweep_mutex_;
  std::mutex mutex_;
  std::set<std::string> unrecorded_;
};

}  // namespace v1
}  // namespace agentrt
