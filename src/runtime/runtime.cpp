#include "agentrt/runtime.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "agentrt/records.hpp"
#include "runtime/context_builder.hpp"
#include "runtime/runtime_impl.hpp"
#include "store/document_store.hpp"

namespace agentrt {
inline namespace v1 {

void RunCtx::note_outcome(const std::string& id, const ToolAgentOutput& out) {
  outcomes[id] = Outcome{out.status, out.result_summary};
  full_results[id] = model_result_text(out);
}

LedgerEntry* RunCtx::find_ledger(const std::string& id) {
  for (auto& l : ledger)
    if (l.tool_call_id == id) return &l;
  return nullptr;
}

Decision decision_from_json(const json& j, size_t max_depth) {
  check_json_depth(j, max_depth, "decision");
  if (!j.is_object()) throw Error(ErrorCode::invalid_argument, "decision must be an object");
  Decision d;
  if (auto it = j.find("interruptId"); it != j.end() && it->is_string())
    d.interrupt_id = it->get<std::string>();
  else if (auto it2 = j.find("toolCallId"); it2 != j.end() && it2->is_string())
    d.interrupt_id = it2->get<std::string>();
  else
    throw Error(ErrorCode::invalid_argument, "decision: needs a string 'interruptId' (or 'toolCallId')");
  if (auto a = j.find("action"); a != j.end()) {
    if (!a->is_string()) throw Error(ErrorCode::invalid_argument, "decision: 'action' must be a string");
    const auto& s = a->get_ref<const std::string&>();
    if (s == "approve")
      d.action = Decision::Action::approve;
    else if (s == "reject")
      d.action = Decision::Action::reject;
    else if (s == "cancel")
      d.action = Decision::Action::cancel;
    else
      throw Error(ErrorCode::invalid_argument, fmt::format("decision: unknown action '{}'", s));
  } else if (auto ap = j.find("approved"); ap != j.end()) {
    if (!ap->is_boolean()) throw Error(ErrorCode::invalid_argument, "decision: 'approved' must be a boolean");
    d.action = ap->get<bool>() ? Decision::Action::approve : Decision::Action::reject;
  } else {
    throw Error(ErrorCode::invalid_argument, "decision: needs 'action' (approve|reject|cancel) or 'approved'");
  }
  if (auto e = j.find("editedArgs"); e != j.end() && !e->is_null()) {
    if (!e->is_object()) throw Error(ErrorCode::invalid_argument, "decision: 'editedArgs' must be an object");
    d.edited_args = *e;
  }
  if (auto r = j.find("reason"); r != j.end() && !r->is_null()) {
    if (!r->is_string()) throw Error(ErrorCode::invalid_argument, "decision: 'reason' must be a string");
    d.reason = r->get<std::string>();
  }
  return d;
}

void from_json(const json& j, Decision& d) { d = decision_from_json(j, kDefaultMaxJsonDepth); }

InputLimits input_limits(const RuntimeConfig& config) {
  return InputLimits{config.max_json_depth, config.max_input_parts, config.max_input_messages};
}

TurnInput turn_input_from_agui(const json& in, std::string user_id, const InputLimits& limits) {
  check_json_depth(in, limits.max_json_depth, "RunAgentInput");
  if (!in.is_object()) throw Error(ErrorCode::invalid_argument, "RunAgentInput must be a JSON object");
  auto str = [&](const char* k) -> std::string {
    auto it = in.find(k);
    if (it == in.end() || !it->is_string())
      throw Error(ErrorCode::invalid_argument, fmt::format("RunAgentInput: '{}' must be a string", k));
    return it->get<std::string>();
  };
  TurnInput t;
  t.thread_id = str("threadId");
  t.run_id = str("runId");
  t.user_id = std::move(user_id);
  auto msgs = in.find("messages");
  if (msgs == in.end() || !msgs->is_array())
    throw Error(ErrorCode::invalid_argument, "RunAgentInput: 'messages' must be an array");
  if (msgs->size() > limits.max_input_messages)
    throw Error(ErrorCode::too_large,
                fmt::format("RunAgentInput: {} messages; the limit is {}", msgs->size(), limits.max_input_messages));
  const json* last_user = nullptr;
  for (const auto& m : *msgs)
    if (m.is_object())
      if (auto role = m.find("role"); role != m.end() && role->is_string() && *role == "user") last_user = &m;
  if (!last_user) throw Error(ErrorCode::invalid_argument, "RunAgentInput: no user message to answer");
  if (auto c = last_user->find("content"); c != last_user->end() && c->is_array() && c->size() > limits.max_input_parts)
    throw Error(ErrorCode::too_large, fmt::format("the user message has {} content parts; the limit is {}", c->size(),
                                                  limits.max_input_parts));
  t.message = message_from_json(*last_user, limits.max_json_depth);
  t.client_message_id = t.message.id;
  return t;
}

std::vector<Decision> decisions_from_agui_resume(const json& resume, const InputLimits& limits) {
  check_json_depth(resume, limits.max_json_depth, "resume");
  if (!resume.is_array()) throw Error(ErrorCode::invalid_argument, "resume must be an array of entries");
  std::vector<Decision> out;
  for (const auto& r : resume) {
    if (!r.is_object() || !r.contains("interruptId") || !r["interruptId"].is_string())
      throw Error(ErrorCode::invalid_argument, "resume entry: needs a string 'interruptId'");
    Decision d;
    d.interrupt_id = r["interruptId"].get<std::string>();
    const auto st = r.find("status");
    const std::string status = st != r.end() && st->is_string() ? st->get<std::string>() : std::string();
    if (status == "cancelled") {
      d.action = Decision::Action::cancel;
    } else if (status == "resolved") {
      // payload: {approved?, editedArgs?, reason?}, or a bare boolean (approved), or absent (approves).
      const auto p = r.find("payload");
      if (p != r.end() && p->is_boolean()) {
        d.action = p->get<bool>() ? Decision::Action::approve : Decision::Action::reject;
      } else if (p != r.end() && p->is_object()) {
        const auto ap = p->find("approved");
        if (ap != p->end() && !ap->is_boolean())
          throw Error(ErrorCode::invalid_argument, "resume payload: approved must be a boolean");
        d.action = ap == p->end() || ap->get<bool>() ? Decision::Action::approve : Decision::Action::reject;
        if (auto e = p->find("editedArgs"); e != p->end() && !e->is_null()) {
          if (!e->is_object()) throw Error(ErrorCode::invalid_argument, "resume payload: editedArgs must be an object");
          d.edited_args = *e;
        }
        if (auto rs = p->find("reason"); rs != p->end() && rs->is_string()) d.reason = rs->get<std::string>();
      } else {
        d.action = Decision::Action::approve;
      }
    } else {
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("resume entry: status must be \"resolved\" or \"cancelled\", not '{}'", status));
    }
    out.push_back(std::move(d));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------- Impl

Runtime::Impl::Impl(RuntimeConfig c) : cfg(std::move(c)) {
  if (!cfg.store) throw Error(ErrorCode::invalid_argument, "runtime config: store is required");
  if (!cfg.model) throw Error(ErrorCode::invalid_argument, "runtime config: model is required");
  if (cfg.workers < 1 || cfg.workers > 256)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("runtime config: workers must be 1..256, not {}", cfg.workers));
  if (cfg.max_steps < 1) throw Error(ErrorCode::invalid_argument, "runtime config: max_steps must be at least 1");
  if (cfg.approval_timeout.count() <= 0)
    throw Error(ErrorCode::invalid_argument, "runtime config: approval_timeout must be positive");
  if (cfg.flush_interval.count() <= 0 || cfg.sweep_interval.count() <= 0 || cfg.instance_lease.count() <= 0)
    throw Error(ErrorCode::invalid_argument, "runtime config: intervals must be positive");
  if (cfg.max_json_depth < 1 || cfg.max_json_depth > kMaxConfigurableJsonDepth)
    throw Error(ErrorCode::invalid_argument, fmt::format("runtime config: max_json_depth must be 1..{}, not {}",
                                                         kMaxConfigurableJsonDepth, cfg.max_json_depth));
  if (cfg.max_input_parts < 1 || cfg.max_input_messages < 1)
    throw Error(ErrorCode::invalid_argument, "runtime config: max_input_parts and max_input_messages must be positive");
  if (!cfg.summarizer) cfg.summarizer = std::make_shared<Summarizer>();
  if (cfg.instance_id.empty()) cfg.instance_id = new_id("rt");
  for (auto& t : cfg.tools) tools.add(std::move(t));
  cfg.tools.clear();
  seen_external_version = cfg.store->external_version();
  cfg.store->heartbeat(cfg.instance_id, now_ms());
  sweep(false);  // fail turns a dead process left running, expire overdue approvals
  for (int i = 0; i < cfg.workers; ++i) workers.emplace_back([this] { worker_loop(); });
  flusher = std::thread([this] { flusher_loop(); });
  sweeper = std::thread([this] { sweeper_loop(); });
}

Runtime::Impl::~Impl() {
  {
    std::lock_guard<std::mutex> lock(runs_mutex);
    for (auto& [id, h] : runs) h->cancel.cancel();
  }
  {
    std::lock_guard<std::mutex> lock(queue_mutex);
    stopping = true;
  }
  queue_cv.notify_all();
  for (auto& t : workers) t.join();
  {
    std::lock_guard<std::mutex> lock(flush_mutex);
    flusher_stop = true;
  }
  flush_cv.notify_all();
  flusher.join();
  {
    std::lock_guard<std::mutex> lock(sweep_mutex);
    sweeper_stop = true;
  }
  sweep_cv.notify_all();
  sweeper.join();
  try {
    cfg.store->remove_instance(cfg.instance_id);
  } catch (const std::exception& e) {
    log(LogLevel::warn, "runtime", fmt::format("could not deregister instance: {}", e.what()));
  }
}

void Runtime::Impl::log(LogLevel level, std::string_view component, std::string_view message) const {
  if (!cfg.log || level < cfg.log_level || cfg.log_level == LogLevel::off) return;
  try {
    cfg.log(level, component, message);
  } catch (...) {
    // A failing log sink must not break a run.
  }
}

void Runtime::Impl::enqueue(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(queue_mutex);
    queue.push_back(std::move(job));
  }
  queue_cv.notify_one();
}

void Runtime::Impl::worker_loop() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(queue_mutex);
      queue_cv.wait(lock, [&] { return stopping || !queue.empty(); });
      if (queue.empty()) return;  // stopping, and nothing left to drain
      job = std::move(queue.front());
      queue.pop_front();
    }
    try {
      job();
    } catch (const std::exception& e) {
      log(LogLevel::error, "runtime", fmt::format("worker job failed: {}", e.what()));
    } catch (...) {
      log(LogLevel::error, "runtime", "worker job failed with a non-standard exception");
    }
  }
}

std::shared_ptr<RunEmitter> Runtime::Impl::make_emitter(const std::string& thread_id, const std::string& run_id,
                                                        int64_t turn_version, bool live,
                                                        const std::shared_ptr<RunHandle>& run) {
  RunEmitter::Failed failed;
  if (run)
    failed = [weak = std::weak_ptr<RunHandle>(run)] {
      if (auto h = weak.lock()) h->cancel.cancel();
    };
  auto em = std::make_shared<RunEmitter>(
      *cfg.store, hub, thread_id, run_id, [this](const CommitBatch& b) { on_commit(b); },
      CommitRetry{cfg.commit_retries, cfg.commit_retry_backoff}, std::move(failed));
  em->set_turn_version(turn_version);
  if (live) {
    std::lock_guard<std::mutex> lock(flush_mutex);
    live_emitters.erase(
        std::remove_if(live_emitters.begin(), live_emitters.end(), [](const auto& w) { return w.expired(); }),
        live_emitters.end());
    live_emitters.push_back(em);
    // Only a flusher idle for a while sleeps without a deadline; otherwise it looks at the list on its next
    // tick, long before anything this emitter stages is due (flush_interval).
    if (flusher_sleeping) flush_cv.notify_one();
  }
  return em;
}

void Runtime::Impl::on_commit(const CommitBatch& b) {
  if (!b.turn) return;
  {
    std::lock_guard<std::mutex> lock(turn_mutex);
    turn_generation.fetch_add(1, std::memory_order_release);
  }
  turn_cv.notify_all();
}

void Runtime::Impl::flusher_loop() {
  std::unique_lock<std::mutex> lock(flush_mutex);
  for (;;) {
    live_emitters.erase(
        std::remove_if(live_emitters.begin(), live_emitters.end(), [](const auto& w) { return w.expired(); }),
        live_emitters.end());
    if (flusher_stop) return;
    if (live_emitters.empty()) {
      // Nothing runs: after a second of that, sleep until a run registers its emitter (no wake-ups while
      // idle). Between runs that follow each other closely it keeps ticking instead, so that starting a
      // run costs no wake-up of this thread (a context switch on the run's path).
      if (std::chrono::steady_clock::now() - flusher_busy_at >= std::chrono::seconds(1)) {
        flusher_sleeping = true;
        flush_cv.wait(lock, [&] { return flusher_stop || !live_emitters.empty(); });
        flusher_sleeping = false;
        continue;
      }
    } else {
      flusher_busy_at = std::chrono::steady_clock::now();
    }
    if (flush_cv.wait_for(lock, cfg.flush_interval / 2 + std::chrono::milliseconds(1), [&] { return flusher_stop; }))
      return;
    std::vector<std::shared_ptr<RunEmitter>> due;
    const auto now = std::chrono::steady_clock::now();
    for (const auto& w : live_emitters)
      if (auto em = w.lock(); em && em->has_pending() && now - em->pending_since() >= cfg.flush_interval)
        due.push_back(std::move(em));
    lock.unlock();
    // A failure stays with the emitter (its run ends with it); the flusher goes on with the others.
    for (auto& em : due) em->flush_in_background();
    due.clear();
    lock.lock();
  }
}

void Runtime::Impl::sweeper_loop() {
  std::unique_lock<std::mutex> lock(sweep_mutex);
  for (;;) {
    // A predicate, not a bare wait: a stop signalled while a sweep ran is not lost.
    if (sweep_cv.wait_for(lock, cfg.sweep_interval, [&] { return sweeper_stop; })) return;
    lock.unlock();
    // Each step on its own: a failing heartbeat (a full disk) must not keep expiry or recovery from running.
    auto step = [&](const char* what, const std::function<void()>& f) {
      try {
        f();
      } catch (const std::exception& e) {
        log(LogLevel::error, "sweeper", fmt::format("{}: {}", what, e.what()));
      } catch (...) {
        log(LogLevel::error, "sweeper", fmt::format("{}: a non-standard exception", what));
      }
    };
    step("live tail", [&] { tail_external_commits(); });
    step("heartbeat", [&] { cfg.store->heartbeat(cfg.instance_id, now_ms()); });
    step("failed runs", [&] { record_unrecorded(); });
    step("sweep", [&] { sweep(); });
    lock.lock();
  }
}

void Runtime::Impl::tail_external_commits() {
  const int64_t v = cfg.store->external_version();
  if (v >= 0 && v == seen_external_version) return;
  seen_external_version = v;
  hub.poke_all();
}

std::shared_ptr<RunHandle> Runtime::Impl::register_run(const std::string& turn_id) {
  auto h = std::make_shared<RunHandle>();
  h->turn_id = turn_id;
  std::lock_guard<std::mutex> lock(runs_mutex);
  runs[turn_id] = h;
  return h;
}

void Runtime::Impl::unregister_run(const std::string& turn_id) {
  std::lock_guard<std::mutex> lock(runs_mutex);
  runs.erase(turn_id);
}

bool Runtime::Impl::instance_alive(const std::string& owner, int64_t now) {
  if (owner.empty()) return false;
  if (owner == cfg.instance_id) return true;
  auto hb = cfg.store->instance_heartbeat(owner);
  return hb && now - *hb < cfg.instance_lease.count();
}

TurnHandle Runtime::Impl::start_turn(const TurnInput& input, TurnRecord* inline_run) {
  require_id(input.thread_id, "thread id");
  require_id(input.user_id, "user id");
  if (input.message.role != Role::user)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("a turn's input must be a user message, not {}", to_string(input.message.role)));
  if (input.message.parts.empty() && input.message.content.empty())
    throw Error(ErrorCode::invalid_argument, "the user message is empty");
  std::string client_id = !input.client_message_id.empty() ? input.client_message_id : input.message.id;
  if (!client_id.empty()) require_id(client_id, "client message id");
  if (!input.run_id.empty()) require_id(input.run_id, "run id");
  // Checked before the message is copied: a copy of a value nested too deep would overflow the stack.
  if (message_depth(input.message, cfg.max_json_depth) > cfg.max_json_depth)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("the input message is nested deeper than {} levels", cfg.max_json_depth));
  if (input.message.parts.size() > cfg.max_input_parts)
    throw Error(ErrorCode::too_large, fmt::format("the input message has {} content parts; the limit is {}",
                                                  input.message.parts.size(), cfg.max_input_parts));
  Message msg = input.message;
  msg.tool_calls.clear();
  msg.tool_call_id.clear();
  msg.id = client_id.empty() ? new_id("msg") : client_id;
  // The message as it is stored (its serialised form, metadata included). Inline data is not stored in it
  // but as an upload, checked against the attachment limits.
  size_t size = to_json_string(msg).size();
  for (const auto& p : msg.parts)
    if (p.source && p.source->type == "data") size -= p.source->value.size();
  if (size > cfg.max_input_bytes)
    throw Error(ErrorCode::too_large,
                fmt::format("the input message is {} bytes; the limit is {}", size, cfg.max_input_bytes));

  auto owner_check = [&](const std::optional<ThreadRecord>& t) {
    if (t && (t->user_id != input.user_id || t->deleted))
      throw Error(ErrorCode::not_found, fmt::format("thread {} not found", input.thread_id));
  };
  const auto thread = cfg.store->get_thread(input.thread_id);
  owner_check(thread);
  if (!client_id.empty()) {
    if (auto t = cfg.store->find_turn_by_client_message(input.thread_id, client_id)) return repeated_start(*t);
  }
  std::vector<std::string> uploads;  // inline data stored for this message: removed if the start is not stored
  msg = store_input_parts(input.user_id, input.thread_id, std::move(msg), uploads);

  TurnRecord turn;
  turn.id = new_id("turn");
  turn.thread_id = input.thread_id;
  turn.user_id = input.user_id;
  turn.status = TurnStatus::running;
  turn.client_message_id = client_id;
  turn.run_id = input.run_id.empty() ? new_id("run") : input.run_id;
  turn.stage = kIntent;
  turn.owner = cfg.instance_id;

  MessageRecord user{turn.thread_id, 0, turn.id, turn.run_id, msg};
  DeferredStart deferred;
  if (inline_run) {
    // The run's history, read before its start is staged where the group-commit flusher can commit it. A
    // thread that does not exist has none (its row is written with its first message).
    std::vector<MessageRecord> history;
    try {
      if (thread) history = cfg.store->messages(input.thread_id);
    } catch (...) {
      for (const auto& key : uploads) cfg.objects->remove(key);
      throw;
    }
    user.index = static_cast<int64_t>(history.size());
    history.push_back(user);
    deferred.history = std::move(history);
  }
  auto handle = register_run(turn.id);
  // run_turn's start may ride on a group commit (live); start_turn's is committed here, before it returns.
  auto em = make_emitter(turn.thread_id, turn.run_id, -1, inline_run != nullptr, handle);
  ThreadRecord th;
  th.id = turn.thread_id;
  th.user_id = turn.user_id;
  auto stage_start = [th, turn, user](RunEmitter& e) {
    RunEmitter::Unit unit(e);  // the thread, the turn, its input and RUN_STARTED commit together
    e.create_thread(th);
    e.set_turn(turn);
    e.add_message(user);
    e.emit(events::run_started(turn.thread_id, turn.run_id));
  };
  stage_start(*em);
  for (const auto& key : uploads) em->add_compensation([objects = cfg.objects, key] { objects->remove(key); });
  auto refused = [&](const Error& e) -> std::optional<TurnHandle> {
    if (e.code() == ErrorCode::conflict) {
      // A concurrent start with the same client message id won the race: answer with its turn.
      if (!client_id.empty())
        if (auto t = cfg.store->find_turn_by_client_message(input.thread_id, client_id)) return repeated_start(*t);
      if (!cfg.store->active_turn(input.thread_id)) owner_check(cfg.store->get_thread(input.thread_id));
    }
    return std::nullopt;
  };
  if (inline_run) {
    // run_turn: the caller holds no handle until the run pauses or ends, so the start need not be a commit
    // of its own. It rides on the run's first commit: the next pause or end, a `started` tool record, or
    // the group-commit flusher's within flush_interval. Refused there, the run stores nothing.
    runs_started.fetch_add(1, std::memory_order_relaxed);
    deferred.em = em;
    *inline_run = run_fresh(handle, turn, &deferred);
    if (!deferred.error) return TurnHandle{turn.thread_id, turn.id, turn.run_id, false, 0, {}};
    runs_started.fetch_sub(1, std::memory_order_relaxed);
    try {
      std::rethrow_exception(deferred.error);
    } catch (const Error& e) {
      if (auto h = refused(e)) return *h;
      throw;
    }
  }
  CommitBatch committed;
  try {
    committed = em->flush();
  } catch (const Error& e) {
    unregister_run(turn.id);
    if (auto h = refused(e)) return *h;
    throw;
  }
  runs_started.fetch_add(1, std::memory_order_relaxed);
  turn.version = committed.turn ? committed.turn->version : 0;
  TurnHandle out{
      turn.thread_id, turn.id, turn.run_id, false, committed.events.empty() ? 0 : committed.events.front().seq, {}};
  enqueue([this, handle, turn]() mutable { run_fresh(handle, turn); });
  return out;
}

TurnHandle Runtime::Impl::repeated_start(const TurnRecord& t) {
  TurnHandle h{t.thread_id, t.id, t.run_id, true, 0, {}};
  h.delta_messages = turn_messages(t);
  return h;
}

std::vector<Message> Runtime::Impl::turn_messages(const TurnRecord& t) {
  std::vector<Message> out;
  for (auto& rec : messages_of_turn(*cfg.store, t.thread_id, t.id)) out.push_back(history_view(std::move(rec.message)));
  return out;
}

json Runtime::Impl::resume(std::string_view turn_id, std::string_view approval_request_id,
                           const std::vector<Decision>& decisions, std::string_view run_id, TurnRecord* inline_run) {
  try {
    return resume_once(turn_id, approval_request_id, decisions, run_id, inline_run);
  } catch (const Error&) {
    // A concurrent resume with the same id may have won while this one read a half-old state (the turn
    // before, the ledger after): its answer is the answer.
    if (auto prior = cfg.store->get_approval(approval_request_id); prior && prior->turn_id == turn_id)
      return prior->answer;
    throw;
  }
}

json Runtime::Impl::resume_once(std::string_view turn_id, std::string_view approval_request_id,
                                const std::vector<Decision>& decisions, std::string_view run_id,
                                TurnRecord* inline_run) {
  if (approval_request_id.empty()) throw Error(ErrorCode::invalid_argument, "approval request id is empty");
  if (!run_id.empty()) require_id(run_id, "run id");
  // The turn first, the approval second: a resume that lost the race then always finds the winner's answer.
  auto turn = cfg.store->get_turn(turn_id);
  if (!turn) throw Error(ErrorCode::not_found, fmt::format("turn {} not found", turn_id));
  // A turn still waiting on this very request has no answer to it yet (the answer is committed with the
  // turn's move out of WAITING_APPROVAL); a resume that wins meanwhile makes ours a conflict, answered below.
  const bool open = turn->status == TurnStatus::waiting_approval && turn->approval_request_id == approval_request_id;
  if (auto prior = open ? std::nullopt : cfg.store->get_approval(approval_request_id)) {
    if (prior->turn_id != turn->id)
      throw Error(ErrorCode::conflict, fmt::format("approval request {} belongs to another turn", approval_request_id));
    return prior->answer;
  }
  if (turn->status == TurnStatus::expired)
    throw Error(ErrorCode::expired, fmt::format("turn {}: the approval request expired ({})", turn->id, turn->error));
  if (turn->status != TurnStatus::waiting_approval)
    throw Error(ErrorCode::invalid_state,
                fmt::format("turn {} is {}, not waiting for approval", turn->id, to_string(turn->status)));
  if (turn->approval_request_id != approval_request_id)
    throw Error(ErrorCode::not_found, fmt::format("approval request {} is not open on turn {} (the open one is {})",
                                                  approval_request_id, turn->id, turn->approval_request_id));
  const int64_t now = now_ms();
  if (turn->expires_at > 0 && now >= turn->expires_at) {
    end_waiting_turn(*turn, TurnStatus::expired, "approval expired");
    throw Error(ErrorCode::expired,
                fmt::format("turn {}: the approval request expired at {}", turn->id, iso8601_ms(turn->expires_at)));
  }

  auto ledger = cfg.store->ledger(turn->id);
  // Every open interrupt must be answered exactly once.
  std::map<std::string, const Decision*> by_interrupt;
  for (const auto& d : decisions) {
    const LedgerEntry* match = nullptr;
    for (const auto& l : ledger)
      if (!l.interrupt_id.empty() && !l.has_output() && l.status == LedgerStatus::requested &&
          (l.interrupt_id == d.interrupt_id || l.tool_call_id == d.interrupt_id))
        match = &l;
    if (!match)
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("decision for unknown interrupt '{}' on turn {}", d.interrupt_id, turn->id));
    if (by_interrupt.count(match->interrupt_id))
      throw Error(ErrorCode::invalid_argument, fmt::format("two decisions for interrupt '{}'", match->interrupt_id));
    by_interrupt[match->interrupt_id] = &d;
  }
  // Interrupts that ask to confirm a job (reason "confirmation"), by interrupt id: the job ids.
  std::map<std::string, std::string> confirmations;
  for (const auto& i : turn->interrupts)
    if (i.is_object() && i.value("reason", "") == "confirmation" && i.contains("metadata") && i["metadata"].is_object())
      confirmations[i.value("id", "")] = i["metadata"].value("jobId", "");
  std::vector<JobWrite> job_updates;
  std::vector<LedgerEntry> updates;
  for (auto& l : ledger) {
    if (l.interrupt_id.empty() || l.has_output() || l.status != LedgerStatus::requested) continue;
    auto it = by_interrupt.find(l.interrupt_id);
    if (it == by_interrupt.end())
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("interrupt '{}' ({}) has no decision: a resume must answer every open interrupt",
                              l.interrupt_id, l.tool_name));
    const Decision& d = *it->second;
    json dj = {{"action", d.action == Decision::Action::approve  ? "approve"
                          : d.action == Decision::Action::reject ? "reject"
                                                                 : "cancel"}};
    if (!d.reason.empty()) dj["reason"] = d.reason;
    if (auto c = confirmations.find(l.interrupt_id); c != confirmations.end()) {
      auto job = cfg.store->get_job(c->second);
      if (!job)
        throw Error(ErrorCode::not_found, fmt::format("job {} of interrupt '{}' not found", c->second, l.interrupt_id));
      if (d.action == Decision::Action::approve && d.edited_args)
        throw Error(
            ErrorCode::invalid_argument,
            fmt::format("interrupt '{}' confirms job {}: it takes no edited arguments", l.interrupt_id, job->id));
      JobRecord next = *job;
      if (d.action == Decision::Action::approve) {
        next.confirmation = JobConfirmation::confirmed;
        advance(l, LedgerStatus::approved);
      } else {
        decline_job(next, d.reason);
        advance(l, LedgerStatus::rejected);
      }
      dj["jobId"] = job->id;
      l.decision = dj;
      updates.push_back(l);
      job_updates.push_back(JobWrite{next, job->version});
      continue;
    }
    if (d.action == Decision::Action::approve) {
      if (d.edited_args) {
        if (json_depth(*d.edited_args, cfg.max_json_depth) > cfg.max_json_depth)
          throw Error(
              ErrorCode::invalid_argument,
              fmt::format("edited arguments for {} are nested deeper than {} levels", l.tool_name, cfg.max_json_depth));
        auto entry = tools.find(l.tool_name);
        if (!entry)
          throw Error(ErrorCode::invalid_argument, fmt::format("tool '{}' is no longer registered", l.tool_name));
        if (auto v = entry->schema.validate(*d.edited_args))
          throw Error(ErrorCode::invalid_argument,
                      fmt::format("edited arguments for {} are invalid: {}{}{}", l.tool_name, v->path,
                                  v->path.empty() ? "" : ": ", v->message));
        l.arguments = d.edited_args->dump();
        dj["editedArgs"] = *d.edited_args;
      }
      advance(l, LedgerStatus::approved);
    } else {
      advance(l, LedgerStatus::rejected);
    }
    l.decision = dj;
    updates.push_back(l);
  }

  const std::string new_run = run_id.empty() ? new_id("run") : std::string(run_id);
  json answer = resume_answer_to_json(turn->id, turn->thread_id, new_run, approval_request_id);
  json decisions_json = json::array();
  for (const auto& d : decisions) {
    json dj = {{"interruptId", d.interrupt_id},
               {"action", d.action == Decision::Action::approve  ? "approve"
                          : d.action == Decision::Action::reject ? "reject"
                                                                 : "cancel"}};
    if (d.edited_args) dj["editedArgs"] = *d.edited_args;
    if (!d.reason.empty()) dj["reason"] = d.reason;
    decisions_json.push_back(std::move(dj));
  }

  turn->interrupts = json::array();  // read above; the next state has none: nothing to copy
  TurnRecord next = *turn;
  check_transition(next.id, next.status, TurnStatus::resuming);
  next.status = TurnStatus::resuming;
  next.parent_run_id = turn->run_id;
  next.run_id = new_run;
  next.owner = cfg.instance_id;
  next.interrupts = json::array();

  auto handle = register_run(turn->id);
  auto em = make_emitter(turn->thread_id, new_run, turn->version, inline_run != nullptr, handle);
  {
    RunEmitter::Unit unit(*em);  // the decision commits whole: the turn, the ledger, the jobs and the answer
    em->set_turn(next);
    for (const auto& l : updates) em->put_ledger(l);
    for (const auto& j : job_updates) em->put_job(j);
    em->set_approval(
        ApprovalRecord{std::string(approval_request_id), turn->id, turn->thread_id, decisions_json, answer, 0});
  }
  auto lost = [&](const Error& e) -> json {
    if (e.code() == ErrorCode::conflict) {
      // Another resume (or the sweeper) changed the turn first; the first answer wins.
      if (auto prior = cfg.store->get_approval(approval_request_id)) return prior->answer;
      auto now_turn = cfg.store->get_turn(turn_id);
      if (now_turn && now_turn->status == TurnStatus::expired)
        throw Error(ErrorCode::expired, fmt::format("turn {}: the approval request expired", turn->id));
      throw Error(ErrorCode::invalid_state, fmt::format("turn {} changed while resuming: it is now {}", turn->id,
                                                        now_turn ? to_string(now_turn->status) : "gone"));
    }
    throw e;
  };
  std::string tid = turn->id;
  for (const auto& u : updates)
    for (auto& l : ledger)
      if (l.tool_call_id == u.tool_call_id) l = u;
  if (inline_run) {
    // resume_turn: the continuation runs here, so the decision need not be a commit of its own before it
    // starts. It rides on the run's first commit, which comes before any approved tool runs (with the
    // `started` records), or at the run's pause or end. Refused there (another resume won, the turn was
    // cancelled or expired), the run stores nothing and this call answers as a lost race does.
    runs_started.fetch_add(1, std::memory_order_relaxed);
    DeferredStart deferred{em, std::nullopt, nullptr};
    *inline_run = run_continuation(handle, tid, std::make_optional(std::make_pair(std::move(next), std::move(ledger))),
                                   &deferred);
    if (!deferred.error) return answer;
    runs_started.fetch_sub(1, std::memory_order_relaxed);
    try {
      std::rethrow_exception(deferred.error);
    } catch (const Error& e) {
      return lost(e);
    }
  }
  CommitBatch committed;
  try {
    committed = em->flush();
  } catch (const Error& e) {
    unregister_run(turn->id);
    return lost(e);
  }
  runs_started.fetch_add(1, std::memory_order_relaxed);
  next.version = committed.turn ? committed.turn->version : next.version + 1;
  auto known = std::make_optional(std::make_pair(std::move(next), std::move(ledger)));
  enqueue([this, handle, tid, known = std::move(known)]() mutable { run_continuation(handle, tid, std::move(known)); });
  return answer;
}

void Runtime::Impl::cancel(std::string_view turn_id) {
  for (int attempt = 0; attempt < 50; ++attempt) {
    auto turn = cfg.store->get_turn(turn_id);
    if (!turn) throw Error(ErrorCode::not_found, fmt::format("turn {} not found", turn_id));
    if (is_terminal(turn->status)) return;
    if (turn->status != TurnStatus::waiting_approval) {
      std::lock_guard<std::mutex> lock(runs_mutex);
      auto it = runs.find(turn_id);
      if (it != runs.end()) {
        it->second->cancel.cancel();
        return;
      }
    } else {
      // The run that paused may still be unregistering: a waiting turn is cancelled by compare-and-set.
      try {
        end_waiting_turn(*turn, TurnStatus::cancelled, "cancelled by the host");
        return;
      } catch (const Error& e) {
        if (e.code() != ErrorCode::conflict) throw;
        continue;  // resumed or expired meanwhile: look again
      }
    }
    // Ours, but its run just ended: read the new state.
    if (turn->owner == cfg.instance_id) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    // RUNNING or RESUMING, but not in this runtime.
    if (instance_alive(turn->owner, now_ms()))
      throw Error(ErrorCode::invalid_state,
                  fmt::format("turn {} is running in another runtime instance ({})", turn->id, turn->owner));
    recover_running_turn(*turn);
    return;
  }
  throw Error(ErrorCode::conflict, fmt::format("turn {} kept changing while being cancelled", turn_id));
}

void Runtime::Impl::sweep(bool take_over_resuming) {
  std::lock_guard<std::mutex> guard(sweep_run_mutex);
  const int64_t now = now_ms();
  for (auto& t : cfg.store->turns_expired(now)) {
    if (t.expires_at <= 0 || t.expires_at > now) continue;
    try {
      end_waiting_turn(t, TurnStatus::expired, "approval expired");
    } catch (const Error& e) {
      if (e.code() != ErrorCode::conflict) log(LogLevel::error, "sweeper", e.what());
    }
  }
  for (auto status : {TurnStatus::running, TurnStatus::resuming}) {
    if (status == TurnStatus::resuming && !take_over_resuming) continue;
    for (auto& t : cfg.store->turns_in_status(status)) {
      if (t.owner == cfg.instance_id) continue;
      if (instance_alive(t.owner, now)) continue;
      try {
        recover_running_turn(t);
      } catch (const Error& e) {
        if (e.code() != ErrorCode::conflict) log(LogLevel::error, "sweeper", e.what());
      }
    }
  }
  // Jobs past their deadline, and finished ones whose outcome is not in history yet (the thread was busy,
  // or the process that finished them stopped first).
  sweep_jobs(now);
}

// ---------------------------------------------------------------------------------------------- Runtime

Runtime::Runtime(RuntimeConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}
Runtime::~Runtime() = default;

ToolRegistry& Runtime::tools() { return impl_->tools; }
TurnHandle Runtime::start_turn(const TurnInput& input) { return impl_->start_turn(input); }
json Runtime::resume(std::string_view turn_id, std::string_view approval_request_id,
                     const std::vector<Decision>& decisions, std::string_view run_id) {
  return impl_->resume(turn_id, approval_request_id, decisions, run_id, nullptr);
}
void Runtime::cancel(std::string_view turn_id) { impl_->cancel(turn_id); }

TurnRecord Runtime::run_turn(const TurnInput& input) {
  TurnRecord out;
  auto h = impl_->start_turn(input, &out);
  if (h.existing) return wait(h.turn_id, std::chrono::hours(24));
  return out;
}

TurnRecord Runtime::resume_turn(std::string_view turn_id, std::string_view approval_request_id,
                                const std::vector<Decision>& decisions, std::string_view run_id) {
  TurnRecord out;
  impl_->resume(turn_id, approval_request_id, decisions, run_id, &out);
  // A repeated approval id answered from the record: nothing ran here, report the turn as it is.
  if (out.id.empty()) return wait(turn_id, std::chrono::hours(24));
  return out;
}

std::unique_ptr<Subscription> Runtime::subscribe(std::string_view thread_id, int64_t after_seq) {
  require_id(thread_id, "thread id");
  if (after_seq < 0) throw Error(ErrorCode::invalid_argument, "after_seq must not be negative");
  struct Sub final : Subscription {
    std::shared_ptr<SubscriptionImpl> impl;
    std::optional<StoredEvent> next(std::chrono::milliseconds timeout) override { return impl->next(timeout); }
    void close() override { impl->close(); }
    bool closed() const override { return impl->closed(); }
    void on_ready(std::function<void()> ready) override { impl->set_ready(std::move(ready)); }
    ~Sub() override {
      impl->set_ready({});  // the hub may still hold the impl: nothing calls into our owner once we are gone
      impl->close();
    }
  };
  auto s = std::make_unique<Sub>();
  s->impl = std::make_shared<SubscriptionImpl>(*impl_->cfg.store, impl_->hub, std::string(thread_id), after_seq);
  s->impl->start();
  return s;
}

std::vector<Message> Runtime::history(std::string_view thread_id) { return impl_->history(thread_id); }
std::vector<Message> Runtime::turn_messages(std::string_view turn_id) {
  require_id(turn_id, "turn id");
  auto t = impl_->cfg.store->get_turn(turn_id);
  if (!t) throw Error(ErrorCode::not_found, fmt::format("turn {} not found", turn_id));
  return impl_->turn_messages(*t);
}
std::optional<TurnRecord> Runtime::turn(std::string_view turn_id) { return impl_->cfg.store->get_turn(turn_id); }
std::optional<TurnRecord> Runtime::active_turn(std::string_view thread_id) {
  return impl_->cfg.store->active_turn(thread_id);
}
std::optional<ThreadRecord> Runtime::thread(std::string_view thread_id) {
  return impl_->cfg.store->get_thread(thread_id);
}
std::vector<ThreadRecord> Runtime::threads(std::string_view user_id) {
  Store& store = *impl_->cfg.store;
  std::vector<ThreadRecord> out = store.list_threads(user_id);
  // A listing may leave last_seq out (the SQLite store's does); the thread's own record has it.
  for (auto& t : out)
    if (auto full = store.get_thread(t.id)) t.last_seq = full->last_seq;
  return out;
}

std::vector<StoredEvent> Runtime::events_page(std::string_view thread_id, std::string_view user_id, int64_t after_seq,
                                              size_t limit) {
  require_id(thread_id, "thread id");
  if (after_seq < 0)
    throw Error(ErrorCode::invalid_argument, fmt::format("after_seq must not be negative, not {}", after_seq));
  if (limit < 1 || limit > kMaxEventsPage)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("an events page holds 1 to {} events, not {}", kMaxEventsPage, limit));
  Store& store = *impl_->cfg.store;
  auto t = store.get_thread(thread_id);
  if (!t || t->deleted || t->user_id != user_id)
    throw Error(ErrorCode::not_found, fmt::format("thread {} not found", thread_id));
  return store.events_after(thread_id, after_seq, limit);
}

std::optional<TurnRecord> Runtime::last_turn(std::string_view thread_id) {
  return impl_->cfg.store->last_turn(thread_id);
}

std::optional<ApprovalRecord> Runtime::approval(std::string_view approval_request_id) {
  return impl_->cfg.store->get_approval(approval_request_id);
}

std::vector<LedgerEntry> Runtime::tool_calls(std::string_view turn_id) { return impl_->cfg.store->ledger(turn_id); }

void Runtime::delete_thread(std::string_view thread_id, std::string_view user_id) {
  require_id(thread_id, "thread id");
  Store& store = *impl_->cfg.store;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    auto t = store.get_thread(thread_id);
    if (!t || t->deleted || t->user_id != user_id)
      throw Error(ErrorCode::not_found, fmt::format("thread {} not found", thread_id));
    if (auto active = store.active_turn(thread_id)) {
      cancel(active->id);
      wait(active->id, std::chrono::seconds(5));
    }
    try {
      store.soft_delete_thread(thread_id);
      return;
    } catch (const Error& e) {
      // A turn started (or was still ending) in between: cancel it too, then try again.
      if (e.code() != ErrorCode::conflict || std::chrono::steady_clock::now() >= deadline) throw;
    }
  }
}

TurnRecord Runtime::wait(std::string_view turn_id, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const uint64_t gen = impl_->turn_generation.load(std::memory_order_acquire);
    auto t = impl_->cfg.store->get_turn(turn_id);
    if (!t) throw Error(ErrorCode::not_found, fmt::format("turn {} not found", turn_id));
    if (t->status != TurnStatus::running && t->status != TurnStatus::resuming) return *t;
    // Changes made by another process are not signalled here: look at the store again now and then.
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return *t;
    auto until = std::min(deadline, now + std::chrono::milliseconds(50));
    std::unique_lock<std::mutex> lock(impl_->turn_mutex);
    impl_->turn_cv.wait_until(lock, until, [&] { return impl_->turn_generation.load() != gen; });
  }
}

void Runtime::sweep() { impl_->sweep(); }

RuntimeStats Runtime::stats() const {
  return RuntimeStats{impl_->model_calls.load(), impl_->tool_executions.load(), impl_->runs_started.load()};
}
const RuntimeConfig& Runtime::config() const { return impl_->cfg; }

}  // namespace v1
}  // namespace agentrt
