// The job service: jobs a tool call started and the host ends later. The host's updates (update, complete,
// fail, cancel), a finished job's outcome delivered into its thread as a run of its own, jobs past their
// deadline, and the jobs whose tool call is still answering (their record is not committed yet).
// Thread-safe: any method from any thread. mutex_ guards the in-flight jobs and the threads whose outcomes
// wait; it is never held across a commit or the host's cancel hook.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentrt/jobs.hpp"
#include "agentrt/log.hpp"
#include "agentrt/runtime.hpp"
#include "pipeline/run_emitter.hpp"
#include "tracing/tracer.hpp"

namespace agentrt {
inline namespace v1 {

// A job whose confirmation the person declined: cancelled, never started (jobs.cpp).
void decline_job(JobRecord& j, const std::string& reason);
// A change of a job, as its CUSTOM agentrt.job event carries it (the projector derives the row's write from
// the event): `j` gets the version after the change (0 for a new job, whose `replaced_version` is -1) and the
// change's time. Returns the event's value (job_to_json). jobs.cpp.
json job_change(JobRecord& j, int64_t replaced_version);

class JobService {
 public:
  using Log = std::function<void(LogLevel, std::string_view component, std::string_view message)>;
  // An emitter for a batch that is not part of a turn's run: a delivery (a run of its own), or, with an empty
  // run id, a job's change that no run carries (a record of the log's own, never shown to clients).
  using MakeEmitter =
      std::function<std::shared_ptr<RunEmitter>(const std::string& thread_id, const std::string& run_id)>;
  JobService(const RuntimeConfig& cfg, MakeEmitter make_emitter, Log log);
  // Where the spans of jobs end (set once, before any job runs; it outlives the service's use).
  void set_tracer(trace::Tracer* tracer) { tracer_ = tracer; }

  std::optional<JobRecord> find(std::string_view job_id);
  JobRecord update(std::string_view job_id, const JobProgress& p);
  JobRecord complete(std::string_view job_id, const JobResult& r);
  JobRecord fail(std::string_view job_id, std::string code, std::string message);
  JobRecord cancel(std::string_view job_id, std::string reason);
  // Ends a job (the host's outcome, its deadline, an outcome reported while its tool answered). `call_hook`:
  // the host's cancel hook hears of it.
  JobRecord finish(std::string_view job_id, JobStatus to, const std::function<void(JobRecord&)>& fill, bool call_hook);
  void sweep(int64_t now);  // jobs past their deadline fail; finished ones not yet delivered are delivered

  // Delivers the outcomes on `thread_id` that waited for a run to end there, if any.
  void deliver_waiting(const std::string& thread_id);
  // A finished job's outcome on `thread_id` waits for the open run to end.
  void mark_waiting(const std::string& thread_id);

  // A job a tool call is starting: the host may report on it before the call's result (and the job's
  // record) is committed. The turn and call must outlive the registration.
  void begin_in_flight(const std::string& job_id, const TurnRecord& turn, const LedgerEntry& call);
  JobProgress in_flight_progress(const std::string& job_id);  // reported before the record existed
  // The outcome reported before the record existed, taken: the run writes it with the record.
  std::optional<JobRecord> take_in_flight_outcome(const std::string& job_id);
  // Ends the registrations after the commit that wrote the records; an outcome reported since is applied.
  void end_in_flight(const std::vector<std::string>& job_ids);

 private:
  // Registered for every call a tool runs, so kept small: what a host reports is on the heap, apart (a node
  // of over 1 KiB makes glibc's malloc consolidate its free small chunks first, once per call).
  struct InFlight {
    const TurnRecord* turn = nullptr;
    const LedgerEntry* call = nullptr;
    JobRecord base(const std::string& id) const;  // what is known before the tool answers
    std::unique_ptr<JobRecord> outcome;           // reported, not yet applied
    // An outcome was reported, and which (a second one is refused; a second cancel is not).
    std::unique_ptr<JobRecord> ended_as;
    std::unique_ptr<JobProgress> progress;  // progress reported before the record existed
  };
  // The outcome of a finished job as a run of its own, staged on `em` with the job row marked delivered.
  void stage_delivery(RunEmitter& em, JobRecord& job, int64_t expected_version);
  bool deliver(JobRecord job);  // false: a run is open on the thread
  void run_cancel_hook(const JobRecord& job);
  std::pair<JobRecord, bool> early_outcome(std::string_view job_id, JobStatus to,
                                           const std::function<void(JobRecord&)>& fill);

  const RuntimeConfig& cfg_;
  MakeEmitter make_emitter_;
  Log log_;
  trace::Tracer* tracer_ = nullptr;
  std::mutex mutex_;
  std::map<std::string, InFlight, std::less<>> in_flight_;
  std::set<std::string, std::less<>> waiting_threads_;
};

}  // namespace v1
}  // namespace agentrt
