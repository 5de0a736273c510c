// The job service: host updates, delivery of outcomes into history, expiry, jobs in flight.
#include "runtime/job_service.hpp"

#include <cmath>

#include <fmt/format.h>

#include "agentrt/clock.hpp"
#include "agentrt/error.hpp"
#include "agentrt/json_limits.hpp"
#include "agentrt/records.hpp"
#include "agentrt/summary.hpp"
#include "core/ids.hpp"
#include "tracing/run_spans.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

constexpr size_t kMaxJobText = 4096;        // a progress message or error message
constexpr size_t kMaxJobPayload = 1 << 20;  // a job's result + assets, serialised
constexpr int kMaxAttempts = 100;           // compare-and-set rounds against a job that keeps changing

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

bool is_conflict(const Error& e) { return e.code() == ErrorCode::conflict; }

}  // namespace

JobService::JobService(const RuntimeConfig& cfg, MakeEmitter make_emitter, Log log)
    : cfg_(cfg), make_emitter_(std::move(make_emitter)), log_(std::move(log)) {}

// ----------------------------------------------------------------------------------------------- delivery

// The outcome of a finished job as a run of its own: RUN_STARTED, TOOL_CALL_RESULT against the call that
// started it, CUSTOM agentrt.job, RUN_FINISHED; and a tool-result style message in history. The job's record
// in the agentrt.job event says it is delivered; the batch commits only while no run is open on the thread.
void JobService::stage_delivery(RunEmitter& em, JobRecord& job, int64_t expected_version) {
  job.delivered = true;
  const std::string msg_id = new_id("msg");
  const std::string text = outcome_text(job, *cfg_.summarizer);
  json job_json = job_change(job, expected_version);
  // The tool message the projector derives from TOOL_CALL_RESULT: its metadata and error.
  json index = {{"job_id", job.id},
                {"job_status", to_string(job.status)},
                {"tool_call_id", job.tool_call_id},
                {"tool_name", job.tool_name},
                {"turn_id", job.turn_id}};
  if (job.assets.is_array() && !job.assets.empty()) index["assets"] = job.assets;
  if (!job.error_code.empty()) index["error_code"] = job.error_code;
  json facts = json::object();
  if (job.status != JobStatus::succeeded)
    facts["error"] = job.error_message.empty() ? job.error_code : job.error_message;
  facts["metadata"] = std::move(index);
  RunEmitter::Unit unit(em);
  em.require_idle();
  em.emit(events::run_started(job.thread_id, em.run_id()));
  em.emit(events::tool_call_result(msg_id, job.tool_call_id, text, json{{"job", job_json}, {"agentrt", facts}}));
  em.emit(events::custom("agentrt.job", std::move(job_json)));
  em.emit(events::run_finished(job.thread_id, em.run_id(), json{{"type", "success"}}));
}

bool JobService::deliver(JobRecord job) {
  if (job.delivered || !is_terminal(job.status)) return true;
  auto em = make_emitter_(job.thread_id, new_id("run"));
  stage_delivery(*em, job, job.version);
  try {
    em->flush();
  } catch (const Error& e) {
    if (is_conflict(e)) return false;  // a run is open (or another process delivered it)
    throw;
  }
  return true;
}

void JobService::mark_waiting(const std::string& thread_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  waiting_threads_.insert(thread_id);
}

void JobService::deliver_waiting(const std::string& thread_id) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!waiting_threads_.erase(thread_id)) return;
  }
  try {
    for (auto& j : cfg_.store->thread_jobs(thread_id))
      if (is_terminal(j.status) && !j.delivered && !deliver(j)) {
        mark_waiting(thread_id);  // busy again: the next run's end (or the sweeper) retries
        return;
      }
  } catch (const std::exception& e) {
    log_(LogLevel::error, "jobs", fmt::format("thread {}: could not deliver job outcomes: {}", thread_id, e.what()));
    mark_waiting(thread_id);
  }
}

// ------------------------------------------------------------------------------------------ host updates

JobRecord JobService::InFlight::base(const std::string& id) const {
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

std::optional<JobRecord> JobService::find(std::string_view job_id) {
  if (job_id.empty() || job_id.size() > 128)
    throw Error(ErrorCode::invalid_argument, "job id must be 1-128 characters");
  return cfg_.store->get_job(job_id);
}

// A job whose tool call has not answered yet: its outcome waits for the job's record (the run applies it when
// it writes the record, or right after). Returns the outcome as reported, and whether it is new (a second
// cancel answers with the first).
std::pair<JobRecord, bool> JobService::early_outcome(std::string_view job_id, JobStatus to,
                                                     const std::function<void(JobRecord&)>& fill) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = in_flight_.find(job_id);
  if (it == in_flight_.end()) throw Error(ErrorCode::not_found, fmt::format("job {} not found", job_id));
  if (const JobRecord* ended = it->second.ended_as.get()) {
    if (ended->status == to && to == JobStatus::cancelled) return {*ended, false};
    throw Error(ErrorCode::invalid_state, fmt::format("job {} has already {}", job_id, to_string(ended->status)));
  }
  JobRecord early = it->second.base(it->first);
  early.status = to;
  fill(early);
  early.finished_at = now_ms();
  it->second.outcome = std::make_unique<JobRecord>(early);
  it->second.ended_as = std::make_unique<JobRecord>(early);
  return {early, true};
}

JobRecord JobService::finish(std::string_view job_id, JobStatus to, const std::function<void(JobRecord&)>& fill,
                             bool call_hook) {
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    std::optional<JobRecord> cur = find(job_id);
    if (!cur) {
      auto [early, fresh] = early_outcome(job_id, to, fill);
      if (fresh && call_hook) run_cancel_hook(early);
      return early;
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
    bool done = false;
    try {
      auto em = make_emitter_(next.thread_id, new_id("run"));
      JobRecord delivered = next;
      stage_delivery(*em, delivered, cur->version);
      next = em->flush().batch.jobs.front().job;
      done = true;
    } catch (const Error& e) {
      if (!is_conflict(e)) throw;
    }
    if (!done) {
      auto em = make_emitter_(next.thread_id, std::string());  // no run: the log's own record
      em->emit(events::custom("agentrt.job", job_change(next, cur->version)));
      try {
        next = em->flush().batch.jobs.front().job;
      } catch (const Error& e) {
        if (!is_conflict(e)) throw;
        continue;  // the job changed meanwhile: look again
      }
      mark_waiting(next.thread_id);
      // The run may have ended between the two commits: try again now (no-op while it is still open).
      deliver_waiting(next.thread_id);
    }
    if (tracer_) trace::end_job(*tracer_, next);
    if (call_hook) run_cancel_hook(next);
    return next;
  }
  throw Error(ErrorCode::conflict, fmt::format("job {} kept changing", job_id));
}

void JobService::run_cancel_hook(const JobRecord& job) {
  if (!cfg_.job_cancel_hook) return;
  try {
    cfg_.job_cancel_hook(job);
  } catch (const std::exception& e) {
    log_(LogLevel::warn, "jobs", fmt::format("job {}: the cancel hook threw: {}", job.id, e.what()));
  } catch (...) {
    log_(LogLevel::warn, "jobs", fmt::format("job {}: the cancel hook threw", job.id));
  }
}

JobRecord JobService::complete(std::string_view job_id, const JobResult& r) {
  check_text(r.message, "message");
  if (!r.assets.is_array()) throw Error(ErrorCode::invalid_argument, "a job's assets must be a JSON array");
  check_json_depth(r.result, cfg_.max_json_depth, "a job's result");
  check_json_depth(r.assets, cfg_.max_json_depth, "a job's asset list");
  const size_t size = r.result.dump().size() + r.assets.dump().size();
  if (size > kMaxJobPayload)
    throw Error(ErrorCode::too_large,
                fmt::format("the job's result and assets are {} bytes; the limit is {}", size, kMaxJobPayload));
  return finish(
      job_id, JobStatus::succeeded,
      [&](JobRecord& j) {
        j.result = r.result;
        j.assets = r.assets;
        j.progress = 1;
        if (!r.message.empty()) j.message = r.message;
      },
      false);
}

JobRecord JobService::fail(std::string_view job_id, std::string code, std::string message) {
  if (code.empty()) code = "job_failed";
  check_text(code, "error code");
  check_text(message, "error message");
  return finish(
      job_id, JobStatus::failed,
      [&](JobRecord& j) {
        j.error_code = code;
        j.error_message = message;
      },
      false);
}

JobRecord JobService::cancel(std::string_view job_id, std::string reason) {
  check_text(reason, "reason");
  return finish(
      job_id, JobStatus::cancelled,
      [&](JobRecord& j) {
        j.error_code = "cancelled";
        j.error_message = reason.empty() ? std::string("cancelled by the host") : reason;
      },
      true);
}

JobRecord JobService::update(std::string_view job_id, const JobProgress& p) {
  if (p.progress && !(std::isfinite(*p.progress) && *p.progress >= 0 && *p.progress <= 1))
    throw Error(ErrorCode::invalid_argument, "a job's progress must be a number from 0 to 1");
  if (p.message) check_text(*p.message, "message");
  if (p.status && *p.status != JobStatus::queued && *p.status != JobStatus::running)
    throw Error(ErrorCode::invalid_argument,
                "update_job only moves a job to queued or running; use complete_job, fail_job or cancel_job to end it");
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    auto cur = find(job_id);
    if (!cur) {
      // Its tool is still answering: the progress is written with the job's record.
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = in_flight_.find(job_id);
      if (it == in_flight_.end()) throw Error(ErrorCode::not_found, fmt::format("job {} not found", job_id));
      if (it->second.ended_as) throw Error(ErrorCode::invalid_state, fmt::format("job {} has already ended", job_id));
      if (!it->second.progress) it->second.progress = std::make_unique<JobProgress>();
      JobProgress& acc = *it->second.progress;
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
    auto em = make_emitter_(next.thread_id, std::string());  // no run: the log's own record
    em->emit(events::custom("agentrt.job", job_change(next, cur->version)));
    try {
      return em->flush().batch.jobs.front().job;
    } catch (const Error& e) {
      if (!is_conflict(e)) throw;
    }
  }
  throw Error(ErrorCode::conflict, fmt::format("job {} kept changing", job_id));
}

// ----------------------------------------------------------------------------------------- jobs in flight

void JobService::begin_in_flight(const std::string& job_id, const TurnRecord& turn, const LedgerEntry& call) {
  std::lock_guard<std::mutex> lock(mutex_);
  InFlight f;
  f.turn = &turn;
  f.call = &call;
  in_flight_.emplace(job_id, std::move(f));
}

JobProgress JobService::in_flight_progress(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = in_flight_.find(job_id);
  return it == in_flight_.end() || !it->second.progress ? JobProgress{} : *it->second.progress;
}

std::optional<JobRecord> JobService::take_in_flight_outcome(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = in_flight_.find(job_id);
  if (it == in_flight_.end()) return std::nullopt;
  if (!it->second.outcome) return std::nullopt;
  std::optional<JobRecord> out = std::move(*it->second.outcome);
  it->second.outcome.reset();
  return out;
}

void JobService::end_in_flight(const std::vector<std::string>& job_ids) {
  std::vector<JobRecord> late;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& id : job_ids) {
      auto it = in_flight_.find(id);
      if (it == in_flight_.end()) continue;
      if (it->second.outcome) late.push_back(*it->second.outcome);
      in_flight_.erase(it);
    }
  }
  for (const auto& o : late) {
    try {
      finish(
          o.id, o.status,
          [&](JobRecord& j) {
            j.result = o.result;
            j.assets = o.assets;
            j.progress = o.progress;
            if (!o.message.empty()) j.message = o.message;
            j.error_code = o.error_code;
            j.error_message = o.error_message;
          },
          false);
    } catch (const std::exception& e) {
      log_(LogLevel::warn, "jobs",
           fmt::format("job {}: the outcome reported while its tool answered was not applied: {}", o.id, e.what()));
    }
  }
}

// ---------------------------------------------------------------------------------------------- sweeping

void JobService::sweep(int64_t now) {
  for (auto& j : cfg_.store->jobs_due(now)) {
    try {
      if (is_terminal(j.status)) {
        deliver(j);
        continue;
      }
      finish(
          j.id, JobStatus::failed,
          [&](JobRecord& r) {
            r.error_code = "timeout";
            r.error_message = fmt::format("the job did not finish within {} ms (expired at {})", j.timeout_ms,
                                          iso8601_ms(j.expires_at));
          },
          true);
      log_(LogLevel::info, "jobs", fmt::format("job {} expired", j.id));
    } catch (const Error& e) {
      if (e.code() != ErrorCode::conflict && e.code() != ErrorCode::invalid_state)
        log_(LogLevel::error, "jobs", fmt::format("job {}: {}", j.id, e.what()));
    }
  }
}

}  // namespace v1
}  // namespace agentrt
