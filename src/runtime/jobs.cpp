// External jobs: records, the host's completion API, delivery of outcomes into history, expiry.
#include "agentrt/jobs.hpp"

#include <cmath>
#include <thread>

#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "agentrt/records.hpp"
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

namespace {

constexpr size_t kMaxJobText = 4096;        // a progress message or error message
constexpr size_t kMaxJobPayload = 1 << 20;  // a job's result + assets, serialised

void check_text(const std::string& s, std::string_view what) {
  if (s.size() > kMaxJobText)
    throw Error(ErrorCode::too_large,
                fmt::format("the job's {} is {} bytes; the limit is {}", what, s.size(), kMaxJobText));
}

// The text of a job's outcome in history: what the next turn's model and a UI read.
std::string outcome_text(const JobRecord& j, Summarizer& summarizer) {
  switch (j.status) {
    case JobStatus::succeeded: {
      std::string text = fmt::format("Job {} ({}) succeeded", j.id, j.tool_name);
      std::string summary = summarizer.summarize(j.tool_name, json::object(), j.result, nullptr);
      if (!summary.empty()) text += ": " + summary;
      if (j.assets.is_array() && !j.assets.empty()) text += "\nAssets: " + j.assets.dump();
      return text;
    }
    case JobStatus::failed:
      return fmt::format("Job {} ({}) failed: {}: {}", j.id, j.tool_name, j.error_code, j.error_message);
    case JobStatus::cancelled:
      return fmt::format("Job {} ({}) was cancelled: {}", j.id, j.tool_name,
                         j.error_message.empty() ? std::string("no reason given") : j.error_message);
    default: return fmt::format("Job {} ({}) is {}", j.id, j.tool_name, to_string(j.status));
  }
}

}  // namespace

// ----------------------------------------------------------------------------------------------- delivery

// The outcome of a finished job as a run of its own: RUN_STARTED, TOOL_CALL_RESULT against the call that
// started it, CUSTOM agentrt.job, RUN_FINISHED; and a tool-result style message in history. The job row is
// marked delivered in the same batch, which commits only while no run is open on the thread.
void Runtime::Impl::add_delivery(CommitBatch& b, JobRecord& job) {
  job.delivered = true;
  job.updated_at = now_ms();
  const std::string run_id = new_id("run");
  const std::string msg_id = new_id("msg");
  const std::string text = outcome_text(job, *cfg.summarizer);
  json job_json = job_to_json(job);
  job_json["delivered"] = true;
  job_json["version"] = job.version + 1;
  auto add = [&](const Event& e) { b.events.push_back(StoredEvent{0, run_id, to_json_string(e)}); };
  add(events::run_started(job.thread_id, run_id));
  add(events::tool_call_result(msg_id, job.tool_call_id, text, json{{"job", job_json}}));
  add(events::custom("agentrt.job", job_json));
  add(events::run_finished(job.thread_id, run_id, json{{"type", "success"}}));
  Message m;
  m.id = msg_id;
  m.role = Role::tool;
  m.content = text;
  m.tool_call_id = job.tool_call_id;
  if (job.status != JobStatus::succeeded) m.error = job.error_message.empty() ? job.error_code : job.error_message;
  m.metadata = {{"job_id", job.id},
                {"job_status", to_string(job.status)},
                {"tool_call_id", job.tool_call_id},
                {"tool_name", job.tool_name},
                {"turn_id", job.turn_id}};
  if (job.assets.is_array() && !job.assets.empty()) m.metadata["assets"] = job.assets;
  if (!job.error_code.empty()) m.metadata["error_code"] = job.error_code;
  b.messages.push_back(MessageRecord{job.thread_id, 0, "", run_id, std::move(m)});
  b.require_idle = true;
}

bool Runtime::Impl::deliver_job(JobRecord job) {
  if (job.delivered || !is_terminal(job.status)) return true;
  CommitBatch b;
  b.thread_id = job.thread_id;
  const int64_t expected = job.version;
  add_delivery(b, job);
  b.jobs.push_back(JobWrite{job, expected});
  try {
    cfg.store->commit(b);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::conflict) return false;  // a run is open (or another process delivered it)
    throw;
  }
  hub.publish(b.thread_id, b.events);
  return true;
}

void Runtime::Impl::deliver_jobs(const std::string& thread_id) {
  {
    std::lock_guard<std::mutex> lock(jobs_mutex);
    if (!undelivered_threads.erase(thread_id)) return;
  }
  try {
    for (auto& j : cfg.store->thread_jobs(thread_id))
      if (is_terminal(j.status) && !j.delivered && !deliver_job(j)) {
        std::lock_guard<std::mutex> lock(jobs_mutex);
        undelivered_threads.insert(thread_id);  // busy again: the next run's end (or the sweeper) retries
        return;
      }
  } catch (const std::exception& e) {
    log(LogLevel::error, "jobs", fmt::format("thread {}: could not deliver job outcomes: {}", thread_id, e.what()));
    std::lock_guard<std::mutex> lock(jobs_mutex);
    undelivered_threads.insert(thread_id);
  }
}

// ------------------------------------------------------------------------------------------ host updates

JobRecord Runtime::Impl::InFlightJob::base(const std::string& id) const {
  JobRecord j;
  j.id = id;
  if (turn) {
    j.thread_id = turn->thread_id;
    j.turn_id = turn->id;
    j.run_id = turn->run_id;
    j.user_id = turn->user_id;
  }
  if (call) {
    j.tool_call_id = call->tool_call_id;
    j.tool_name = call->tool_name;
  }
  return j;
}

std::optional<JobRecord> Runtime::Impl::find_job(std::string_view job_id) {
  if (job_id.empty() || job_id.size() > 128)
    throw Error(ErrorCode::invalid_argument, "job id must be 1-128 characters");
  return cfg.store->get_job(job_id);
}

JobRecord Runtime::Impl::finish_job(std::string_view job_id, JobStatus to, const std::function<void(JobRecord&)>& fill,
                                    bool call_hook) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::optional<JobRecord> cur = find_job(job_id);
    if (!cur) {
      // Started by a tool call whose result is not committed yet: the outcome waits for the job's record
      // (the run applies it when it writes the record, or right after).
      std::optional<JobRecord> early;
      {
        std::lock_guard<std::mutex> lock(jobs_mutex);
        auto it = jobs_in_flight.find(std::string(job_id));
        if (it == jobs_in_flight.end()) throw Error(ErrorCode::not_found, fmt::format("job {} not found", job_id));
        if (it->second.ended) {
          if (it->second.ended_as.status == to && to == JobStatus::cancelled) return it->second.ended_as;
          throw Error(ErrorCode::invalid_state,
                      fmt::format("job {} has already {}", job_id, to_string(it->second.ended_as.status)));
        }
        early = it->second.base(it->first);
        early->status = to;
        fill(*early);
        early->finished_at = now_ms();
        it->second.outcome = early;
        it->second.ended = true;
        it->second.ended_as = *early;
      }
      if (call_hook) run_cancel_hook(*early);
      return *early;
    }
    if (is_terminal(cur->status)) {
      if (cur->status == to && to == JobStatus::cancelled) return *cur;  // cancelling twice is harmless
      throw Error(ErrorCode::invalid_state, fmt::format("job {} has already {}", job_id, to_string(cur->status)));
    }
    if (cur->confirmation == JobConfirmation::pending)
      throw Error(ErrorCode::invalid_state,
                  fmt::format("job {} waits for the person's confirmation (turn {}): answer the turn's interrupt",
                              job_id, cur->turn_id));
    JobRecord next = *cur;
    fill(next);
    next.status = to;
    next.finished_at = now_ms();
    next.delivered = false;
    // One commit with its delivery when no run is open on the thread; else the outcome alone, delivered
    // when the open run ends.
    CommitBatch b;
    b.thread_id = next.thread_id;
    JobRecord delivered = next;
    add_delivery(b, delivered);
    b.jobs.push_back(JobWrite{delivered, cur->version});
    bool done = false;
    try {
      cfg.store->commit(b);
      hub.publish(b.thread_id, b.events);
      next = b.jobs.front().job;
      done = true;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::conflict) throw;
    }
    if (!done) {
      CommitBatch only;
      only.thread_id = next.thread_id;
      only.jobs.push_back(JobWrite{next, cur->version});
      try {
        cfg.store->commit(only);
      } catch (const Error& e) {
        if (e.code() != ErrorCode::conflict) throw;
        continue;  // the job changed meanwhile: look again
      }
      next = only.jobs.front().job;
      {
        std::lock_guard<std::mutex> lock(jobs_mutex);
        undelivered_threads.insert(next.thread_id);
      }
      // The run may have ended between the two commits: try again now (no-op while it is still open).
      deliver_jobs(next.thread_id);
    }
    if (call_hook) run_cancel_hook(next);
    return next;
  }
  throw Error(ErrorCode::conflict, fmt::format("job {} kept changing", job_id));
}

void Runtime::Impl::run_cancel_hook(const JobRecord& job) {
  if (!cfg.job_cancel_hook) return;
  try {
    cfg.job_cancel_hook(job);
  } catch (const std::exception& e) {
    log(LogLevel::warn, "jobs", fmt::format("job {}: the cancel hook threw: {}", job.id, e.what()));
  } catch (...) {
    log(LogLevel::warn, "jobs", fmt::format("job {}: the cancel hook threw", job.id));
  }
}

JobRecord Runtime::Impl::complete_job(std::string_view job_id, const JobResult& r) {
  check_text(r.message, "message");
  if (!r.assets.is_array()) throw Error(ErrorCode::invalid_argument, "a job's assets must be a JSON array");
  check_json_depth(r.result, cfg.max_json_depth, "a job's result");
  check_json_depth(r.assets, cfg.max_json_depth, "a job's asset list");
  const size_t size = r.result.dump().size() + r.assets.dump().size();
  if (size > kMaxJobPayload)
    throw Error(ErrorCode::too_large,
                fmt::format("the job's result and assets are {} bytes; the limit is {}", size, kMaxJobPayload));
  return finish_job(
      job_id, JobStatus::succeeded,
      [&](JobRecord& j) {
        j.result = r.result;
        j.assets = r.assets;
        j.progress = 1;
        if (!r.message.empty()) j.message = r.message;
      },
      false);
}

JobRecord Runtime::Impl::fail_job(std::string_view job_id, std::string code, std::string message) {
  if (code.empty()) code = "job_failed";
  check_text(code, "error code");
  check_text(message, "error message");
  return finish_job(
      job_id, JobStatus::failed,
      [&](JobRecord& j) {
        j.error_code = code;
        j.error_message = message;
      },
      false);
}

JobRecord Runtime::Impl::cancel_job(std::string_view job_id, std::string reason) {
  check_text(reason, "reason");
  return finish_job(
      job_id, JobStatus::cancelled,
      [&](JobRecord& j) {
        j.error_code = "cancelled";
        j.error_message = reason.empty() ? std::string("cancelled by the host") : reason;
      },
      true);
}

JobRecord Runtime::Impl::update_job(std::string_view job_id, const JobProgress& p) {
  if (p.progress && !(std::isfinite(*p.progress) && *p.progress >= 0 && *p.progress <= 1))
    throw Error(ErrorCode::invalid_argument, "a job's progress must be a number from 0 to 1");
  if (p.message) check_text(*p.message, "message");
  if (p.status && *p.status != JobStatus::queued && *p.status != JobStatus::running)
    throw Error(ErrorCode::invalid_argument,
                "update_job only moves a job to queued or running; use complete_job, fail_job or cancel_job to end it");
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto cur = find_job(job_id);
    if (!cur) {
      // Its tool is still answering: the progress is written with the job's record.
      std::lock_guard<std::mutex> lock(jobs_mutex);
      auto it = jobs_in_flight.find(std::string(job_id));
      if (it == jobs_in_flight.end()) throw Error(ErrorCode::not_found, fmt::format("job {} not found", job_id));
      if (it->second.ended) throw Error(ErrorCode::invalid_state, fmt::format("job {} has already ended", job_id));
      JobProgress& acc = it->second.progress;
      if (p.status) acc.status = p.status;
      if (p.progress) acc.progress = p.progress;
      if (p.message) acc.message = p.message;
      JobRecord early = it->second.base(it->first);
      early.status = acc.status.value_or(JobStatus::running);
      early.progress = acc.progress.value_or(0);
      early.message = acc.message.value_or("");
      return early;
    }
    if (is_terminal(cur->status))
      throw Error(ErrorCode::invalid_state, fmt::format("job {} has already {}", job_id, to_string(cur->status)));
    if (cur->confirmation == JobConfirmation::pending)
      throw Error(ErrorCode::invalid_state, fmt::format("job {} waits for the person's confirmation", job_id));
    if (p.status && *p.status == JobStatus::queued && cur->status == JobStatus::running)
      throw Error(ErrorCode::invalid_state, fmt::format("job {} is running; it cannot go back to queued", job_id));
    JobRecord next = *cur;
    if (p.status) next.status = *p.status;
    if (p.progress) next.progress = *p.progress;
    if (p.message) next.message = *p.message;
    CommitBatch b;
    b.thread_id = next.thread_id;
    b.jobs.push_back(JobWrite{next, cur->version});
    try {
      cfg.store->commit(b);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::conflict) throw;
      continue;
    }
    return b.jobs.front().job;
  }
  throw Error(ErrorCode::conflict, fmt::format("job {} kept changing", job_id));
}

// ---------------------------------------------------------------------------------------------- sweeping

void Runtime::Impl::sweep_jobs(int64_t now) {
  for (auto& j : cfg.store->jobs_due(now)) {
    try {
      if (is_terminal(j.status)) {
        deliver_job(j);
        continue;
      }
      finish_job(
          j.id, JobStatus::failed,
          [&](JobRecord& r) {
            r.error_code = "timeout";
            r.error_message = fmt::format("the job did not finish within {} ms (expired at {})", j.timeout_ms,
                                          iso8601_ms(j.expires_at));
          },
          true);
      log(LogLevel::info, "jobs", fmt::format("job {} expired", j.id));
    } catch (const Error& e) {
      if (e.code() != ErrorCode::conflict && e.code() != ErrorCode::invalid_state)
        log(LogLevel::error, "jobs", fmt::format("job {}: {}", j.id, e.what()));
    }
  }
}

// ---------------------------------------------------------------------------------------------- Runtime

std::optional<JobRecord> Runtime::job(std::string_view job_id) { return impl_->find_job(job_id); }
std::vector<JobRecord> Runtime::jobs(std::string_view thread_id) {
  if (thread_id.empty() || thread_id.size() > 128)
    throw Error(ErrorCode::invalid_argument, "thread id must be 1-128 characters");
  return impl_->cfg.store->thread_jobs(thread_id);
}
JobRecord Runtime::update_job(std::string_view job_id, const JobProgress& progress) {
  return impl_->update_job(job_id, progress);
}
JobRecord Runtime::complete_job(std::string_view job_id, const JobResult& result) {
  return impl_->complete_job(job_id, result);
}
JobRecord Runtime::fail_job(std::string_view job_id, std::string code, std::string message) {
  return impl_->fail_job(job_id, std::move(code), std::move(message));
}
JobRecord Runtime::cancel_job(std::string_view job_id, std::string reason) {
  return impl_->cancel_job(job_id, std::move(reason));
}

}  // namespace v1
}  // namespace agentrt
