// Job records (names of their states) and the Runtime's job calls; the work is in job_service.cpp.
#include "agentrt/jobs.hpp"

#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "agentrt/records.hpp"
#include "runtime/runtime_impl.hpp"

namespace agentrt {
inline namespace v1 {

std::string_view to_string(JobStatus s) noexcept {
  switch (s) {
    case JobStatus::queued: return "queued";
    case JobStatus::running: return "running";
    case JobStatus::succeeded: return "succeeded";
    case JobStatus::failed: return "failed";
    case JobStatus::cancelled: return "cancelled";
  }
  return "queued";
}

JobStatus job_status_from_string(std::string_view s) {
  for (auto v : {JobStatus::queued, JobStatus::running, JobStatus::succeeded, JobStatus::failed, JobStatus::cancelled})
    if (to_string(v) == s) return v;
  throw Error(ErrorCode::invalid_argument,
              fmt::format("unknown job status '{}' (queued, running, succeeded, failed, cancelled)", s.substr(0, 40)));
}

std::string_view to_string(JobConfirmation c) noexcept {
  switch (c) {
    case JobConfirmation::none: return "";
    case JobConfirmation::pending: return "pending";
    case JobConfirmation::confirmed: return "confirmed";
    case JobConfirmation::declined: return "declined";
  }
  return "";
}

JobConfirmation job_confirmation_from_string(std::string_view s) {
  for (auto v :
       {JobConfirmation::none, JobConfirmation::pending, JobConfirmation::confirmed, JobConfirmation::declined})
    if (to_string(v) == s) return v;
  throw Error(ErrorCode::invalid_argument, fmt::format("unknown job confirmation state '{}'", s.substr(0, 40)));
}

void decline_job(JobRecord& j, const std::string& reason) {
  j.confirmation = JobConfirmation::declined;
  j.status = JobStatus::cancelled;
  j.error_code = "declined";
  j.error_message = reason.empty() ? std::string("the person declined the job") : reason;
  j.finished_at = now_ms();
  j.delivered = true;  // the call's tool result says it
}

// ---------------------------------------------------------------------------------------------- Runtime

std::optional<JobRecord> Runtime::job(std::string_view job_id) { return impl_->jobs.find(job_id); }
std::vector<JobRecord> Runtime::jobs(std::string_view thread_id) {
  if (thread_id.empty() || thread_id.size() > 128)
    throw Error(ErrorCode::invalid_argument, "thread id must be 1-128 characters");
  return impl_->cfg.store->thread_jobs(thread_id);
}
JobRecord Runtime::update_job(std::string_view job_id, const JobProgress& progress) {
  return impl_->jobs.update(job_id, progress);
}
JobRecord Runtime::complete_job(std::string_view job_id, const JobResult& result) {
  return impl_->jobs.complete(job_id, result);
}
JobRecord Runtime::fail_job(std::string_view job_id, std::string code, std::string message) {
  return impl_->jobs.fail(job_id, std::move(code), std::move(message));
}
JobRecord Runtime::cancel_job(std::string_view job_id, std::string reason) {
  return impl_->jobs.cancel(job_id, std::move(reason));
}

}  // namespace v1
}  // namespace agentrt
