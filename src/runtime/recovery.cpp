// Recovery (recovery.hpp): runs that cannot go on — expired and cancelled pauses, turns a stopped runtime left,
// failed commits.
#include "runtime/recovery.hpp"

#include "runtime/turn_runner.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "agentrt/records.hpp"
#include "agentrt/summary.hpp"
#include "runtime/context_builder.hpp"
#include "runtime/event_wire.hpp"
#include "util/crypto.hpp"
#include "util/json_fast.hpp"

namespace agentrt {
inline namespace v1 {

using namespace turn;

Recovery::Recovery(Runtime::Impl& rt) : rt_(rt) {}

void Recovery::end_waiting_turn(TurnRecord turn, TurnStatus to, const std::string& reason) {
  check_transition(turn.id, turn.status, to);
  RunCtx ctx;
  ctx.turn = turn;
  ctx.handle = std::make_shared<RunHandle>();
  ctx.turn.parent_run_id = turn.run_id;
  ctx.turn.run_id = new_id("run");
  ctx.em = rt_.make_emitter(turn.thread_id, ctx.turn.run_id, turn.version, false);
  load_run_state(*rt_.cfg.store, ctx);
  ctx.watch_history();
  TurnRunner runner(rt_, ctx);
  ctx.em->emit(run_started(ctx.turn));
  const bool expired = to == TurnStatus::expired;
  // A turn that waited for client tool answers alone: its deadline was the client's.
  const bool client_wait = turn.status == TurnStatus::waiting_client;
  const std::string code = client_wait ? "answer_expired" : "approval_expired";
  const std::string msg =
      !expired      ? "not run: the turn was cancelled"
      : client_wait ? fmt::format("not answered: the client's answers were due at {}", iso8601_ms(turn.expires_at))
                    : fmt::format("not run: the approval request expired at {}", iso8601_ms(turn.expires_at));
  runner.tools().close_unanswered(expired ? code : "cancelled", msg,
                                  expired ? ToolStatus::expired : ToolStatus::rejected);
  // Jobs that waited for a confirmation end with the pause: never started.
  for (const auto& i : turn.interrupts) {
    if (!i.is_object() || i.value("reason", "") != "confirmation" || !i.contains("metadata")) continue;
    auto j = rt_.cfg.store->get_job(i["metadata"].value("jobId", ""));
    if (!j || is_terminal(j->status)) continue;
    JobRecord next = *j;
    next.status = expired ? JobStatus::failed : JobStatus::cancelled;
    next.error_code = expired ? "timeout" : "cancelled";
    next.error_message = expired ? fmt::format("the confirmation request expired at {}", iso8601_ms(turn.expires_at))
                                 : "the turn was cancelled before the job was confirmed";
    next.finished_at = now_ms();
    next.delivered = true;  // the call's tool result above says it
    ctx.em->emit(events::custom("agentrt.job", job_change(next, j->version)));
  }
  ctx.turn.status = to;
  ctx.turn.error = expired ? msg.substr(msg.find(": ") + 2) : reason;
  ctx.turn.interrupts = json::array();
  ctx.turn.owner.clear();
  runner.stage_turn();
  Event end = expired
                  ? events::run_error(client_wait ? fmt::format("the client tool calls of turn {} were not "
                                                                "answered by {}",
                                                                turn.id, iso8601_ms(turn.expires_at))
                                                  : fmt::format("approval request {} expired at {}",
                                                                turn.approval_request_id, iso8601_ms(turn.expires_at)),
                                      code)
                  : events::run_finished(turn.thread_id, ctx.turn.run_id, json{{"type", "cancelled"}});
  runner.end_facts(end);
  ctx.em->emit(end);
  ctx.em->flush();
  trace::end_approval_wait(rt_.tracer, turn, expired ? "expired" : "cancelled");
  rt_.jobs.deliver_waiting(turn.thread_id);
}

void Recovery::recover_running_turn(TurnRecord turn) {
  if (turn.status == TurnStatus::resuming) {
    // The decision is durable: take the turn over and run the continuation here.
    TurnRecord mine = turn;
    mine.owner = rt_.cfg.instance_id;
    auto handle = rt_.register_run(turn.id);
    auto em = rt_.make_emitter(turn.thread_id, turn.run_id, turn.version, false);
    em->set_turn(mine);
    try {
      em->flush();
    } catch (...) {
      rt_.unregister_run(turn.id);
      throw;
    }
    rt_.log(LogLevel::info, "recovery",
            fmt::format("turn {}: continuing a resume its runtime did not finish", turn.id));
    std::string tid = turn.id;
    rt_.enqueue([&rt = rt_, handle, tid] { rt.run_continuation(handle, tid); });
    return;
  }
  rt_.log(LogLevel::warn, "recovery",
          fmt::format("turn {}: its runtime ({}) stopped while it ran; failing it", turn.id,
                      turn.owner.empty() ? "unknown" : turn.owner));
  // A tool that was started and not finished is recorded with an unknown outcome and not run again.
  fail_from_store(turn.id, "runtime_restarted", "the runtime running this turn stopped before the turn finished");
}

std::optional<TurnRecord> Recovery::fail_from_store(const std::string& turn_id, const std::string& code,
                                                    const std::string& message,
                                                    const std::map<std::string, ToolAgentOutput>* known) {
  auto turn = rt_.cfg.store->get_turn(turn_id);
  if (!turn || (turn->status != TurnStatus::running && turn->status != TurnStatus::resuming)) return std::nullopt;
  RunCtx ctx;
  ctx.turn = std::move(*turn);
  ctx.handle = std::make_shared<RunHandle>();
  ctx.em = rt_.make_emitter(ctx.turn.thread_id, ctx.turn.run_id, ctx.turn.version, false);
  load_run_state(*rt_.cfg.store, ctx);
  ctx.watch_history();
  if (known) ctx.recorded = *known;
  TurnRunner runner(rt_, ctx);
  runner.fail(code, message);
  return std::move(ctx.turn);
}

void Recovery::remember_unrecorded(const std::string& turn_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  unrecorded_.insert(turn_id);
}

void Recovery::record_unrecorded() {
  std::set<std::string> pending;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending.swap(unrecorded_);
  }
  for (const auto& id : pending) {
    try {
      fail_from_store(id, "storage", kStorageFailed);
      rt_.log(LogLevel::info, "recovery", fmt::format("turn {}: its failure is recorded now", id));
    } catch (const std::exception& e) {
      remember_unrecorded(id);
      throw;
    }
  }
}

void Recovery::sweep(bool take_over_resuming) {
  std::lock_guard<std::mutex> guard(sweep_mutex_);
  const int64_t now = now_ms();
  for (auto& t : rt_.cfg.store->turns_expired(now)) {
    if (t.expires_at <= 0 || t.expires_at > now) continue;
    try {
      end_waiting_turn(t, TurnStatus::expired, "approval expired");
    } catch (const Error& e) {
      if (e.code() != ErrorCode::conflict) rt_.log(LogLevel::error, "sweeper", e.what());
    }
  }
  for (auto status : {TurnStatus::running, TurnStatus::resuming}) {
    if (status == TurnStatus::resuming && !take_over_resuming) continue;
    for (auto& t : rt_.cfg.store->turns_in_status(status)) {
      if (t.owner == rt_.cfg.instance_id) continue;
      if (instance_alive(t.owner, now)) continue;
      try {
        recover_running_turn(t);
      } catch (const Error& e) {
        if (e.code() != ErrorCode::conflict) rt_.log(LogLevel::error, "sweeper", e.what());
      }
    }
  }
  // Jobs past their deadline, and finished ones whose outcome is not in history yet (the thread was busy,
  // or the process that finished them stopped first).
  rt_.jobs.sweep(now);
}

bool Recovery::instance_alive(const std::string& owner, int64_t now) const {
  if (owner.empty()) return false;
  if (owner == rt_.cfg.instance_id) return true;
  auto hb = rt_.cfg.store->instance_heartbeat(owner);
  return hb && now - *hb < rt_.cfg.instance_lease.count();
}

}  // namespace v1
}  // namespace agentrt
