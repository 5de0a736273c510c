// Events to job rows: each CUSTOM agentrt.job event is one committed change of a job (see projector.hpp).
#include "agentrt/records.hpp"
#include "pipeline/projector.hpp"

namespace agentrt {
inline namespace v1 {

void Projector::job_changed(const json& value) {
  JobRecord j = job_from_json(value);  // a record this runtime did not write is refused here, before it is staged
  const int64_t expected = j.version == 0 ? -1 : j.version - 1;
  job_writes_.push_back(JobWrite{std::move(j), expected});
}

std::vector<JobWrite> Projector::take_job_writes() {
  std::vector<JobWrite> out;
  out.swap(job_writes_);
  return out;
}

}  // namespace v1
}  // namespace agentrt
