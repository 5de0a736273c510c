// The tool executor (tool_executor.hpp): approved calls run exactly once, their answers checked, the jobs they
// start recorded, each outcome written.
#include "runtime/tool_executor.hpp"

#include <algorithm>
#include <chrono>
#include <set>

#include <fmt/format.h>

#include "agentrt/json_limits.hpp"
#include "agentrt/records.hpp"
#include "agentrt/summary.hpp"
#include "pipeline/projector.hpp"
#include "runtime/context_builder.hpp"
#include "runtime/event_wire.hpp"
#include "runtime/turn_runner.hpp"
#include "util/crypto.hpp"
#include "util/json_fast.hpp"
#include "util/json_object.hpp"

namespace agentrt {
inline namespace v1 {

using namespace turn;

// The jobs the calls running now start, registered with the job service until the commit that writes their
// records (destroyed after it): an outcome the host reported after the run took the early ones is applied then.
class ToolExecutor::JobsInFlight {
 public:
  explicit JobsInFlight(JobService& jobs) : jobs_(jobs) {}
  ~JobsInFlight() { jobs_.end_in_flight(ids_); }
  void add(const std::string& id, const TurnRecord& turn, const LedgerEntry& call) {
    ids_.push_back(id);
    jobs_.begin_in_flight(id, turn, call);
  }
  JobProgress progress(const std::string& id) { return jobs_.in_flight_progress(id); }
  std::optional<JobRecord> early(const std::string& id) { return jobs_.take_in_flight_outcome(id); }

 private:
  JobService& jobs_;
  std::vector<std::string> ids_;
};

ToolExecutor::ToolExecutor(TurnRunner& runner, Runtime::Impl& rt, RunCtx& ctx) : runner_(runner), rt_(rt), ctx_(ctx) {}

std::vector<std::string> ToolExecutor::execute(const std::vector<std::string>& ids) {
  if (ids.empty()) return {};
  std::vector<Running> running;
  bool durable = false;
  for (const auto& id : ids) {
    LedgerEntry* l = ctx_.find_ledger(id);
    if (!l) continue;
    Running r;
    r.id = id;
    r.entry = rt_.tools.find(l->tool_name);
    // (A call a person approved, or one that runs again after a confirmation: its arguments as the ledger has them.)
    auto checked = checked_args_.extract(id);
    r.args = checked ? std::move(checked.mapped()) : parse_args(l->arguments);
    if (!r.entry) {
      ToolAgentOutput out;
      out.tool_call_id = id;
      out.tool_name = l->tool_name;
      out.args = r.args;
      out.status = ToolStatus::failed;
      out.error = ToolError{"unknown_tool", fmt::format("tool '{}' is no longer registered", l->tool_name)};
      record_result(id, std::move(out));
      continue;
    }
    advance(*l, LedgerStatus::started);
    if (!r.entry->spec.idempotent) durable = true;
    running.push_back(std::move(r));
  }
  if (running.empty()) return {};
  json started = json::array();
  for (const auto& r : running) started.push_back(r.id);
  ctx_.em->emit(events::custom("agentrt.started", json_object("toolCallIds", std::move(started))));
  // A start still pending (resume_turn's decision, run_turn's insert) is committed with the `started`
  // records. A decision always is, even for idempotent tools: the version compare-and-set in that commit
  // is what keeps two concurrent resumes from both running a tool.
  if (durable || (runner_.decision_pending_ && ctx_.start_pending())) runner_.commit();
  // Cancelled after the `started` commit but before any tool ran: the calls are recorded as not run.
  runner_.check_cancel();
  // Each call may start a job: its id is known before the tool runs, so the host can report on it at once.
  JobsInFlight in_flight(rt_.jobs);
  for (auto& r : running) {
    LedgerEntry* l = ctx_.find_ledger(r.id);
    if (l->decision.is_object() && l->decision.contains("jobId") && l->decision["jobId"].is_string()) {
      r.job_id = l->decision["jobId"].get<std::string>();
      r.job_confirmed = true;
    } else {
      r.job_id = new_id("job");
    }
    in_flight.add(r.job_id, ctx_.turn, *l);
  }
  for (auto& r : running) {
    LedgerEntry* l = ctx_.find_ledger(r.id);
    r.span = trace::start_tool(rt_.tracer, ctx_.span, *l, r.entry->spec, r.args);
    ToolCallContext call{ctx_.turn.thread_id,
                         ctx_.turn.id,
                         ctx_.turn.run_id,
                         ctx_.turn.user_id,
                         l->stage,
                         r.id,
                         l->tool_name,
                         r.args,
                         rt_.attachments.attachments_named(r.args, ctx_.history),
                         r.job_id,
                         r.job_confirmed,
                         ctx_.state,
                         l->decision.is_object() && l->decision.contains("input") ? l->decision["input"] : json(),
                         r.span.traceparent()};
    r.started_ms = now_ms();
    r.deadline = std::chrono::steady_clock::now() + r.entry->spec.timeout;
    rt_.tool_executions.fetch_add(1, std::memory_order_relaxed);
    try {
      r.entry->spec.handler(call, r.completion);
    } catch (const Error& e) {
      r.completion.fail("tool_error", e.message());
    } catch (const std::exception& e) {
      r.completion.fail("tool_error", e.what());
    } catch (...) {
      r.completion.fail("tool_error", "the tool threw a non-standard exception");
    }
  }
  bool cancelled = false;
  bool jobs_touched = false;
  std::vector<std::string> confirm;
  for (auto& r : running) {
    LedgerEntry* l = ctx_.find_ledger(r.id);
    if (!wait_for(r, *l)) cancelled = true;  // (a call abandoned there is told its arguments: still r.args)
    ToolAgentOutput out;
    out.tool_call_id = r.id;
    out.tool_name = l->tool_name;
    out.args = std::move(r.args);  // the call is over: what it was asked goes with its outcome
    auto oc = r.completion.take_outcome();
    if (oc.ok && oc.input) {
      if (auto problem = invalid_input_request(*oc.input, rt_.cfg.max_json_depth)) {
        oc.ok = false;
        oc.input.reset();
        oc.error = ToolError{"invalid_input_request", *problem};
      } else {
        // The call asks a person: it waits with its turn (the interrupt says what for) and runs again after.
        advance(*l, LedgerStatus::requested);
        l->needs_approval = true;
        ctx_.inputs[r.id] = std::move(*oc.input);
        confirm.push_back(r.id);
        continue;
      }
    }
    std::string summary;
    if (oc.ok && oc.job) {
      if (auto problem = invalid_job_start(*oc.job, rt_.cfg.max_json_depth)) {
        oc.ok = false;
        oc.error = ToolError{"invalid_job", *problem};
      }
    } else if (oc.ok) {
      if (auto problem = invalid_result(oc.result, rt_.cfg.max_json_depth)) {
        oc.ok = false;
        oc.result = ToolResult{};
        oc.error = ToolError{"invalid_result", *problem};
      }
    }
    // A change of the thread's state: applied here first, so that the STATE_DELTA the run streams always applies.
    json delta, next_state;
    if (oc.ok && !oc.job && !oc.result.state_delta.is_null()) {
      if (auto problem = apply_state_delta(oc.result.state_delta, next_state)) {
        oc.ok = false;
        oc.result = ToolResult{};
        oc.error = ToolError{"invalid_state_delta", *problem};
      } else {
        delta = std::move(oc.result.state_delta);
      }
    }
    if (oc.ok && oc.job) {
      jobs_touched = true;
      std::optional<JobRecord> early = in_flight.early(r.job_id);
      if (oc.job->confirm && !r.job_confirmed && !early) {
        ask_confirmation(*l, r.job_id, *oc.job);
        confirm.push_back(r.id);
        continue;  // no result yet: the person decides first
      }
      JobRecord j = start_job(*l, r.job_id, r.job_confirmed, *oc.job, early, in_flight.progress(r.job_id));
      trace::begin_job(rt_.tracer, r.span, j);
      out.status = ToolStatus::succeeded;
      out.result = json{{"jobId", j.id}, {"status", to_string(j.status)}};
      if (!oc.job->message.empty()) out.result["message"] = oc.job->message;
      summary = fmt::format("Started job {} ({}): {}{}", j.id, l->tool_name, to_string(j.status),
                            oc.job->message.empty() ? "" : ". " + oc.job->message);
    } else if (oc.ok) {
      out.status = ToolStatus::succeeded;
      // Its depth is checked above. Taken, not copied, unless a confirmed job ends with it (end_confirmed_job
      // reads it too).
      if (r.job_confirmed) {
        out.result = oc.result.result;
        out.ui = oc.result.ui;
      } else {
        out.result = std::move(oc.result.result);
        out.ui = std::move(oc.result.ui);
      }
      if (!oc.result.media.empty()) {
        // Stored before the result commits; removed again if that commit is lost.
        std::vector<std::string> written, pointers;
        for (const auto& f : oc.result.media) pointers.push_back(f.result_pointer);
        json stored = rt_.attachments.store_tool_media(ctx_.turn.user_id, ctx_.turn.thread_id,
                                                       std::move(oc.result.media), written);
        for (size_t i = 0; i < pointers.size() && i < stored.size(); ++i)
          replace_with_ref(out.result, pointers[i], stored[i]);
        media_[r.id] = std::move(stored);
        for (const auto& key : written)
          ctx_.em->add_compensation([objects = rt_.cfg.objects, key] { objects->remove(key); });
      }
    } else {
      out.status = oc.error.code == "cancelled" ? ToolStatus::interrupted : ToolStatus::failed;
      out.error = oc.error;
    }
    // A confirmed job whose tool answered with a result (or failed) instead of starting it ends with that.
    if (r.job_confirmed && !(oc.ok && oc.job)) jobs_touched |= end_confirmed_job(r.job_id, oc);
    out.timings.started_at_ms = r.started_ms;
    out.timings.finished_at_ms = now_ms();
    out.timings.duration_ms = out.timings.finished_at_ms - r.started_ms;
    const bool started_job = oc.ok && oc.job;
    trace::end_tool(rt_.tracer, r.span, out);
    RunEmitter::Unit unit(*ctx_.em);  // the state's change commits with the result
    if (!delta.is_null()) {
      ctx_.em->emit(events::state_delta(std::move(delta)));
      ctx_.state = std::move(next_state);
    }
    record_result(r.id, std::move(out), summary);
    // A started job's record goes with the result: if that commit is lost, so is the job's record, and the
    // call's outcome is not known to the store (it is not written again from memory).
    if (started_job) ctx_.recorded.erase(r.id);
  }
  // The results are not a commit of their own: they go with the run's next one (the next pause or end,
  // or the group-commit flusher's within flush_interval while the model works). Dying before that
  // leaves the calls `started`, which recovery records as interrupted: never run twice. A started job is
  // the exception: it is durable before the run goes on (the host may report on it any time now).
  if (jobs_touched) runner_.commit();
  if (cancelled) throw Error(ErrorCode::cancelled, "the turn was cancelled");
  return confirm;
}

bool ToolExecutor::wait_for(Running& r, const LedgerEntry& l) {
  for (;;) {
    switch (r.completion.wait_news(r.deadline, ctx_.handle->cancel)) {
      case ToolCompletion::Wake::done: return true;
      case ToolCompletion::Wake::progress:
        if (auto report = r.completion.take_progress()) {
          (*report)["toolCallId"] = r.id;
          ctx_.em->emit(events::custom(std::string(kToolProgressEvent), std::move(*report)));
        }
        continue;
      case ToolCompletion::Wake::cancelled:
        if (r.completion.fail("cancelled", "the turn was cancelled while the tool ran")) abandon(r, l, "cancelled");
        return false;
      case ToolCompletion::Wake::deadline:
        if (r.completion.fail(
                "timeout", fmt::format("{} did not finish within {} ms", l.tool_name, r.entry->spec.timeout.count())))
          abandon(r, l, "timeout");
        return true;
    }
  }
}

void ToolExecutor::abandon(const Running& r, const LedgerEntry& l, std::string_view reason) {
  if (!r.entry->spec.on_abandon) return;
  ToolCallContext call;
  call.thread_id = ctx_.turn.thread_id;
  call.turn_id = ctx_.turn.id;
  call.run_id = ctx_.turn.run_id;
  call.user_id = ctx_.turn.user_id;
  call.stage = l.stage;
  call.tool_call_id = r.id;
  call.tool_name = l.tool_name;
  call.args = r.args;
  call.job_id = r.job_id;
  try {
    r.entry->spec.on_abandon(call, reason);
  } catch (const std::exception& e) {
    rt_.log(LogLevel::warn, "tools", fmt::format("{}'s on_abandon threw: {}", l.tool_name, e.what()));
  }
}

void ToolExecutor::replace_with_ref(json& result, const std::string& pointer, const json& stored) {
  if (pointer.empty() || !stored.contains("ref")) return;
  try {
    const json::json_pointer where(pointer);
    if (where.empty() || !result.contains(where)) return;
    json& parent = result[where.parent_pointer()];
    if (!parent.is_object()) return;
    parent.erase(where.back());
    parent["ref"] = stored["ref"];
  } catch (const json::exception&) {
    // not a pointer into this result: the bytes stay
  }
}

std::optional<std::string> ToolExecutor::invalid_input_request(const InputRequest& r, size_t max_depth) {
  if (r.message.size() > 4096) return fmt::format("the message is {} bytes; the limit is 4096", r.message.size());
  if (!r.schema.is_object()) return std::string("the schema must be a JSON Schema object");
  if (json_depth(r.schema, max_depth) > max_depth || json_depth(r.state, max_depth) > max_depth)
    return fmt::format("the schema or state is nested deeper than {} levels", max_depth);
  if (r.schema.dump().size() + r.state.dump().size() > 256 * 1024)
    return std::string("the schema and state together are larger than 256 KiB");
  try {
    JsonSchema compiled(r.schema);
  } catch (const Error& e) {
    return fmt::format("the schema does not compile: {}", e.message());
  }
  return std::nullopt;
}

std::optional<std::string> ToolExecutor::invalid_result(const ToolResult& r, size_t max_depth) {
  if (json_depth(r.result, max_depth) > max_depth)
    return fmt::format("the tool's result is nested deeper than {} levels", max_depth);
  // The card's JSON: {type, version, data, actions}.
  if (r.ui &&
      (1 + json_depth(r.ui->data, max_depth) > max_depth || 1 + json_depth(r.ui->actions, max_depth) > max_depth))
    return fmt::format("the tool's ui card is nested deeper than {} levels", max_depth);
  return std::nullopt;
}

std::optional<std::string> ToolExecutor::invalid_job_start(const JobStart& js, size_t max_depth) {
  if (js.status != JobStatus::queued && js.status != JobStatus::running)
    return fmt::format("a job starts queued or running, not {}", to_string(js.status));
  if (js.message.size() > 4096 || js.confirm_message.size() > 4096)
    return std::string("a job's message is longer than 4096 bytes");
  if (!js.metadata.is_object()) return std::string("a job's metadata must be a JSON object");
  if (json_depth(js.metadata, max_depth) > max_depth)
    return fmt::format("a job's metadata is nested deeper than {} levels", max_depth);
  if (js.metadata.dump().size() > 65536) return std::string("a job's metadata is larger than 64 KiB");
  if (js.timeout && js.timeout->count() <= 0) return std::string("a job's timeout must be positive");
  return std::nullopt;
}

JobRecord ToolExecutor::new_job(const LedgerEntry& l, const std::string& job_id) const {
  JobRecord j;
  j.id = job_id;
  j.thread_id = ctx_.turn.thread_id;
  j.turn_id = ctx_.turn.id;
  j.run_id = ctx_.turn.run_id;
  j.tool_call_id = l.tool_call_id;
  j.tool_name = l.tool_name;
  j.user_id = ctx_.turn.user_id;
  return j;
}

void ToolExecutor::stage_job(JobRecord& j, int64_t expected_version) {
  ctx_.em->emit(events::custom("agentrt.job", job_change(j, expected_version)));
  ctx_.jobs[j.tool_call_id] = j;
}

void ToolExecutor::ask_confirmation(LedgerEntry& l, const std::string& job_id, const JobStart& js) {
  JobRecord j = new_job(l, job_id);
  j.status = JobStatus::queued;
  j.confirmation = JobConfirmation::pending;
  j.confirm_message = js.confirm_message;
  j.message = js.message;
  j.metadata = js.metadata;
  if (js.timeout) j.timeout_ms = js.timeout->count();  // kept for the start after the confirmation
  stage_job(j, -1);
  // The pause's interrupt sends the call back to wait (the projector reads it there).
  advance(l, LedgerStatus::requested);
  l.needs_approval = true;
}

JobRecord ToolExecutor::start_job(const LedgerEntry& l, const std::string& job_id, bool confirmed, const JobStart& js,
                                  const std::optional<JobRecord>& early, const JobProgress& progress) {
  JobRecord j = new_job(l, job_id);
  int64_t expected = -1;
  if (confirmed) {
    if (auto cur = rt_.cfg.store->get_job(job_id)) {
      j = *cur;
      expected = cur->version;
    }
  }
  if (is_terminal(j.status)) {  // the host ended the confirmed job already
    ctx_.jobs[l.tool_call_id] = j;
    return j;
  }
  const int64_t timeout = js.timeout         ? js.timeout->count()
                          : j.timeout_ms > 0 ? j.timeout_ms
                                             : rt_.cfg.job_timeout.count();
  if (!j.metadata.is_object()) j.metadata = json::object();
  for (auto& [k, v] : js.metadata.items()) j.metadata[k] = v;
  j.status = js.status;
  j.message = js.message;
  // What the host reported while the tool answered wins over the tool's answer.
  if (progress.status) j.status = *progress.status;
  if (progress.progress) j.progress = *progress.progress;
  if (progress.message) j.message = *progress.message;
  j.timeout_ms = timeout;
  j.expires_at = now_ms() + timeout;
  if (early) {
    // The host finished it while the tool was still answering: the job is recorded finished; its outcome
    // reaches history when this run ends.
    j.status = early->status;
    j.result = early->result;
    j.assets = early->assets;
    j.progress = early->progress;
    if (!early->message.empty()) j.message = early->message;
    j.error_code = early->error_code;
    j.error_message = early->error_message;
    j.finished_at = early->finished_at;
    rt_.jobs.mark_waiting(j.thread_id);
  }
  stage_job(j, expected);
  return j;
}

bool ToolExecutor::end_confirmed_job(const std::string& job_id, const ToolCompletion::Outcome& oc) {
  auto cur = rt_.cfg.store->get_job(job_id);
  if (!cur || is_terminal(cur->status)) return false;
  JobRecord j = *cur;
  if (oc.ok) {
    j.status = JobStatus::succeeded;
    j.result = oc.result.result;
    j.progress = 1;
  } else {
    j.status = JobStatus::failed;
    j.error_code = oc.error.code;
    j.error_message = oc.error.message;
  }
  j.finished_at = now_ms();
  j.delivered = true;
  stage_job(j, cur->version);
  return true;
}

std::optional<std::string> ToolExecutor::apply_state_delta(const json& delta, json& next) const {
  if (!delta.is_array()) return std::string("state_delta must be a JSON Patch: an array of operations");
  try {
    check_json_depth(delta, rt_.cfg.max_json_depth, "state_delta");
    next = ctx_.state.patch(delta);
    check_state(next, input_limits(rt_.cfg));
  } catch (const Error& e) {
    return e.message();
  } catch (const json::exception& e) {
    return fmt::format("state_delta does not apply to the thread's state: {}", e.what());
  }
  return std::nullopt;
}

void ToolExecutor::record_result(const std::string& id, ToolAgentOutput out, const std::string& summary) {
  record(id, std::move(out), summary, nullptr);
}

void ToolExecutor::record_answer(const std::string& id, ToolAgentOutput out, const std::string& message_id) {
  record(id, std::move(out), {}, &message_id);
}

void ToolExecutor::record(const std::string& id, ToolAgentOutput out, const std::string& summary,
                          const std::string* answer_id) {
  // TOOL_CALL_RESULT commits with the tool message and the ledger's outcome: after a crash, a result that is
  // in the log is in history and the ledger too, so recovery never gives the call a second one.
  RunEmitter::Unit unit(*ctx_.em);
  LedgerEntry* l = ctx_.find_ledger(id);
  const ToolSummaryError err = out.error ? ToolSummaryError{out.error->code, out.error->message} : ToolSummaryError{};
  out.result_summary =
      !summary.empty() ? summary
                       : rt_.cfg.summarizer->summarize(out.tool_name, out.args, out.result, out.error ? &err : nullptr);
  out.summary_version = kSummaryVersion;
  // The outcome is the run's from here on, whatever happens below (recorded: what a run whose batch was lost writes
  // again). It moves into its place as this returns or throws (a move cannot throw), instead of being copied now.
  struct Keep {
    ToolAgentOutput& to;
    ToolAgentOutput& from;
    ~Keep() { to = std::move(from); }
  } keep{ctx_.recorded[id], out};
  std::string out_str = to_json_string(out);
  // Filled key by key: an initializer list builds every pair twice (as arrays, then as members).
  json index = json::object();
  auto& fields = index.get_ref<json::object_t&>();
  fields.emplace("tool_call_id", id);
  fields.emplace("tool_name", out.tool_name);
  fields.emplace("run_id", ctx_.turn.run_id);
  fields.emplace("stage", l ? l->stage : ctx_.turn.stage);
  fields.emplace("storage_bucket", "");
  fields.emplace("storage_path", "");
  fields.emplace("payload_sha256", "");
  fields.emplace("summary_version", out.summary_version);
  if (auto m = media_.find(id); m != media_.end()) {
    fields.emplace("media", std::move(m->second));
    media_.erase(m);
  }
  if (rt_.cfg.objects) {
    // The full payload goes to the object store first; the index (in this batch's commit) second.
    std::string bytes = out_str;
    bytes.pop_back();
    bytes += ",\"thread_id\":";
    append_json_string(bytes, ctx_.turn.thread_id);
    bytes += ",\"turn_id\":";
    append_json_string(bytes, ctx_.turn.id);
    bytes += ",\"run_id\":";
    append_json_string(bytes, ctx_.turn.run_id);
    bytes += '}';
    std::string key = fmt::format("agent-outputs/{}/{}/{}.json", ctx_.turn.thread_id, ctx_.turn.run_id, id);
    try {
      rt_.cfg.objects->put(key, bytes, "application/json");
      index["storage_bucket"] = rt_.cfg.objects->bucket();
      index["storage_path"] = key;
      index["payload_sha256"] = crypto::sha256_hex(bytes);
      index["payload_has_ui"] = out.ui.has_value();  // history reads back only a payload that has a card
      auto objects = rt_.cfg.objects;
      ctx_.em->add_compensation([objects, key] { objects->remove(key); });
    } catch (const std::exception& e) {
      index["payload_missing"] = true;
      rt_.log(LogLevel::warn, "objects", fmt::format("tool payload {} not stored: {}", key, e.what()));
    }
  }
  // TOOL_CALL_RESULT: the summary as content, ToolAgentOutput and the ui card in metadata; the tool message's
  // metadata (the index) and error in metadata.agentrt, from which the projector derives the message.
  const std::string msg_id = answer_id ? *answer_id : new_id("msg");
  json facts = json::object();
  if (out.error) facts["error"] = out.error->message;
  facts["metadata"] = std::move(index);
  std::string ev;
  if (answer_id) {
    json value = json::object();
    auto& v = value.get_ref<json::object_t&>();
    v.emplace("toolCallId", id);
    v.emplace("messageId", msg_id);
    v.emplace("content", out.result_summary);
    ev = to_json_string(events::custom(std::string(kToolAnswerEvent), std::move(value)));
  } else {
    ev = to_json_string(events::tool_call_result(msg_id, id, out.result_summary));
  }
  ev.pop_back();
  // Room for the metadata at once (grown append by append, the event was copied three or four times).
  ev.reserve(ev.size() + out_str.size() + 512);
  ev += ",\"metadata\":{\"tool_agent_output\":";
  ev += out_str;
  if (out.ui) {
    ev += ",\"ui\":";
    append_json(ev, json(*out.ui));
  }
  ev += ",\"agentrt\":";
  append_json(ev, facts);
  ev += "}}";
  ctx_.note_outcome(id, out);
  if (l) {
    advance(*l, ledger_status_of(out.status));
    l->output = out_str;
  }
  ToolOutcome outcome{out.status, std::move(out_str), out.tool_name, l ? l->arguments : out.args.dump(),
                      l ? l->stage : ctx_.turn.stage};
  // The projector derives the tool message and the ledger's outcome from it.
  ctx_.em->emit_tool_call_result(std::move(ev), msg_id, id, out.result_summary, std::move(facts), outcome);
}

void ToolExecutor::close_unanswered(const std::string& code, const std::string& message, ToolStatus not_run_status) {
  std::set<std::string> answered;
  for (const auto& m : ctx_.history)
    if (m.turn_id == ctx_.turn.id && m.message.role == Role::tool) answered.insert(m.message.tool_call_id);
  for (const auto& m : ctx_.history) {
    if (m.turn_id != ctx_.turn.id || m.message.role != Role::assistant) continue;
    for (const auto& c : m.message.tool_calls) {
      if (answered.count(c.id) || ctx_.find_ledger(c.id)) continue;
      LedgerEntry l;
      l.tool_call_id = c.id;
      l.turn_id = ctx_.turn.id;
      l.thread_id = ctx_.turn.thread_id;
      l.run_id = m.run_id;
      l.tool_name = c.name;
      l.stage = ctx_.turn.stage;
      l.arguments = c.arguments;
      ctx_.ledger.push_back(std::move(l));  // stored with its outcome below
    }
  }
  std::vector<std::string> open;
  for (const auto& l : ctx_.ledger)
    if (!l.has_output() && !answered.count(l.tool_call_id)) open.push_back(l.tool_call_id);
  for (const auto& id : open) {
    LedgerEntry* l = ctx_.find_ledger(id);
    if (auto known = ctx_.recorded.find(id); known != ctx_.recorded.end()) {
      ToolAgentOutput out = known->second;
      record_result(id, std::move(out));
      continue;
    }
    ToolAgentOutput out;
    out.tool_call_id = id;
    out.tool_name = l->tool_name;
    out.args = parse_args(l->arguments);
    if (l->status == LedgerStatus::started) {
      out.status = ToolStatus::interrupted;
      out.error = ToolError{"outcome_unknown", kOutcomeUnknown};
      record_result(id, std::move(out), fmt::format("{}: outcome unknown: {}", l->tool_name, kOutcomeUnknown));
    } else {
      out.status = not_run_status;
      out.error = ToolError{code, message};
      record_result(id, std::move(out));
    }
  }
}

}  // namespace v1
}  // namespace agentrt
