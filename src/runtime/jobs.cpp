// Job records (names of their states) and the Runtime's job calls; the work is in job_service.cpp.
#include "agentrt/jobs.hpp"

#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "agentrt/records.hpp"
#include "runtime/job_service.hpp"
#include "runtime/runtime_impl.hpp"

namespace agentrt {
inline namespace v1 {

void decline_job(JobRecord& j, const std::string& reason) {
  j.confirmation = JobConfirmation::declined;
  j.status = JobStatus::cancelled;
  j.error_code = "declined";
  j.error_message = reason.empty() ? std::string("the person declined the job") : reason;
  j.finished_at = now_ms();
  j.delivered = true;  // the call's tool result says it
}

json job_change(JobRecord& j, int64_t replaced_version) {
  j.version = replaced_version < 0 ? 0 : replaced_version + 1;
  j.updated_at = now_ms();
  if (replaced_version < 0 || j.created_at == 0) j.created_at = j.updated_at;
  return job_to_json(j);
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
