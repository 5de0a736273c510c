// External jobs: long-running tool work that outlives the turn that started it.
//
// A tool may answer "started job J" (ToolCompletion::start_job) instead of a result. The runtime records the
// job, gives the call a tool result saying the job runs, and the turn goes on without waiting. The host
// finishes the job later (Runtime::complete_job / fail_job, from any thread or process sharing the store);
// the runtime then adds the outcome to the thread's history and streams it as a short run of its own
// (RUN_STARTED, TOOL_CALL_RESULT against the original call, CUSTOM "agentrt.job", RUN_FINISHED) as soon as
// no run is open on the thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "agentrt/json.hpp"

namespace agentrt {
inline namespace v1 {

enum class JobStatus { queued, running, succeeded, failed, cancelled };
std::string_view to_string(JobStatus s) noexcept;
// Throws Error(invalid_argument) for anything but the five lower-case names.
JobStatus job_status_from_string(std::string_view s);
inline bool is_terminal(JobStatus s) noexcept {
  return s == JobStatus::succeeded || s == JobStatus::failed || s == JobStatus::cancelled;
}

// Whether a job waits for a person's confirmation (an interrupt with reason "confirmation").
enum class JobConfirmation { none, pending, confirmed, declined };
std::string_view to_string(JobConfirmation c) noexcept;
JobConfirmation job_confirmation_from_string(std::string_view s);

struct JobRecord {
  std::string id;  // "job_..." (assigned by the runtime; the tool learns it from ToolCallContext::job_id)
  std::string thread_id, turn_id, run_id, tool_call_id, tool_name, user_id;
  JobStatus status = JobStatus::queued;
  double progress = 0;          // 0..1, as the host last reported it
  std::string message;          // the host's last word on it ("rendering frame 10/40")
  json result;                  // succeeded: the job's result (null before)
  json assets = json::array();  // succeeded: references to what it generated ([{url|key, mimeType, ...}])
  std::string error_code;       // failed / cancelled: why ("timeout" when it expired)
  std::string error_message;
  json metadata = json::object();  // the tool's own data about the job (external id, cost estimate, ...)
  JobConfirmation confirmation = JobConfirmation::none;
  std::string confirm_message;  // what the person is asked
  int64_t timeout_ms = 0;       // how long it may run once started (0 until started: the runtime's default)
  int64_t expires_at = 0;       // ms; a job still queued/running then fails with code "timeout". 0 = never
  bool delivered = false;       // its outcome is in the thread's history
  int64_t version = 0;          // bumped by every committed change; compare-and-set key
  int64_t created_at = 0, updated_at = 0, finished_at = 0;  // ms
};

// Its JSON form: job_to_json (agentrt/records.hpp).

// What a tool answers to start a job (ToolCompletion::start_job).
struct JobStart {
  JobStatus status = JobStatus::running;  // queued or running
  std::string message;                    // shown with the job ("render queued behind 2 others")
  json metadata = json::object();
  // Ask the person first. The call pauses the turn with an interrupt {reason:"confirmation"}; when it is
  // confirmed the tool is called again with ToolCallContext::job_confirmed set and starts the work then;
  // when it is cancelled the job ends cancelled and the tool is not called again.
  bool confirm = false;
  std::string confirm_message;
  std::optional<std::chrono::milliseconds> timeout;  // default: RuntimeConfig::job_timeout
};

// A job's successful outcome (Runtime::complete_job).
struct JobResult {
  json result;                  // any JSON
  json assets = json::array();  // references to generated assets
  std::string message;
};

// A progress report (Runtime::update_job). A queued job may become running; nothing else changes status.
struct JobProgress {
  std::optional<JobStatus> status;
  std::optional<double> progress;  // 0..1
  std::optional<std::string> message;
};

}  // namespace v1
}  // namespace agentrt
