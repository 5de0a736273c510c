// A turn's start (Runtime::Impl::start_turn): checks, the turn and its user message staged or committed, and the
// run queued — for start_turn (the start committed before it returns), run_turn (the start rides on the run's first
// commit) and start_turn_async (likewise, and the host's callback is told by that commit) — and the answers to a
// start that a repeated client message id or a conflict refused.
#include <algorithm>
#include <atomic>
#include <exception>

#include <fmt/format.h>

#include "agentrt/records.hpp"
#include "runtime/runtime_impl.hpp"
#include "runtime/turn_runner.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

// start_turn_async's callback, called once (see Runtime::start_turn_async): by the start's commit, by the run that
// could not commit it, or, when nothing ran and nothing committed it (the runtime stopped first), as the last
// owner lets it go.
struct AsyncStart {
  Runtime::Started started;
  TurnHandle handle;
  std::atomic<bool> fired{false};
  void fire(const TurnHandle& h, std::exception_ptr error) noexcept {
    if (fired.exchange(true)) return;
    try {
      started(h, std::move(error));
    } catch (...) {
      // The host's callback threw: nothing to tell it with.
    }
    started = nullptr;  // what it holds (a host's request) goes now, not with the run
  }
  ~AsyncStart() {
    if (fired.load()) return;
    fire(handle,
         std::make_exception_ptr(
             Error(ErrorCode::cancelled, fmt::format("turn {} was not started: the runtime stopped", handle.turn_id))));
  }
};

}  // namespace

std::optional<TurnHandle> Runtime::Impl::refused_start(const Error& e, const std::string& thread_id,
                                                       const std::string& user_id, const std::string& client_id) {
  if (e.code() != ErrorCode::conflict) return std::nullopt;
  // A concurrent start with the same client message id won the race: answer with its turn.
  if (!client_id.empty())
    if (auto t = cfg.store->find_turn_by_client_message(thread_id, client_id)) return repeated_start(*t);
  if (!cfg.store->active_turn(thread_id)) {
    const auto t = cfg.store->get_thread(thread_id);
    if (t && (t->user_id != user_id || t->deleted))
      throw Error(ErrorCode::not_found, fmt::format("thread {} not found", thread_id));
  }
  return std::nullopt;
}

TurnHandle Runtime::Impl::start_turn(const TurnInput& input, TurnRecord* inline_run, Runtime::Started* async) {
  require_id(input.thread_id, "thread id");
  require_id(input.user_id, "user id");
  if (input.message.role != Role::user)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("a turn's input must be a user message, not {}", to_string(input.message.role)));
  // Empty: no text and nothing attached (a part list of empty text parts is as empty as "").
  const auto& parts = input.message.parts;
  if (parts.empty() ? input.message.content.empty() : std::all_of(parts.begin(), parts.end(), [](const ContentPart& p) {
        return !p.is_media() && p.text.empty();
      }))
    throw Error(ErrorCode::invalid_argument, "the user message is empty");
  std::string client_id = !input.client_message_id.empty() ? input.client_message_id : input.message.id;
  if (!client_id.empty()) require_id(client_id, "client message id");
  if (!input.run_id.empty()) require_id(input.run_id, "run id");
  check_context(input.context, input_limits(cfg));
  if (input.state) check_state(*input.state, input_limits(cfg));
  auto client_tools = offer_client_tools(input.client_tools);
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
  // A repeat of a started turn: its thread exists (a start commits the thread's row with the turn's; rows of threads
  // are never removed), so a new thread's start reads no further (a repeat racing its first start is answered when
  // the commit refuses it: refused_start).
  if (!client_id.empty() && thread) {
    if (auto t = cfg.store->find_turn_by_client_message(input.thread_id, client_id)) {
      TurnHandle h = repeated_start(*t);
      if (async) (*async)(h, nullptr);
      return h;
    }
  }
  // An async start is refused at its commit too, but only after its run has begun (its first model call): a
  // thread with an active turn refuses it here, before anything runs (a start racing it is refused by the commit).
  if (async && thread)
    if (auto active = cfg.store->active_turn(input.thread_id))
      throw Error(ErrorCode::conflict,
                  fmt::format("thread {} already has an active turn ({})", input.thread_id, active->id));
  std::vector<std::string> uploads;  // inline data stored for this message: removed if the start is not stored
  msg = attachments.store_input_parts(input.user_id, input.thread_id, std::move(msg), uploads);

  TurnRecord turn;
  turn.id = new_id("turn");
  turn.thread_id = input.thread_id;
  turn.user_id = input.user_id;
  turn.status = TurnStatus::running;
  turn.client_message_id = client_id;
  turn.run_id = input.run_id.empty() ? new_id("run") : input.run_id;
  turn.stage = to_string(Stage::intent);
  turn.owner = cfg.instance_id;

  MessageRecord user{turn.thread_id, 0, turn.id, turn.run_id, msg};
  // The async run's outlives this call; the others' lives here.
  DeferredStart deferred_here;
  auto deferred_at = async ? std::make_shared<DeferredStart>() : nullptr;
  DeferredStart& deferred = async ? *deferred_at : deferred_here;
  if (inline_run || async) {
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
  handle->context = input.context;
  handle->traceparent = input.traceparent;
  handle->state = input.state;
  handle->client_tools = std::move(client_tools);
  // run_turn's and start_turn_async's start may ride on a group commit (live); start_turn's is committed here,
  // before it returns. start_turn_async's callback is told by the first commit (the start's, with what follows it).
  std::shared_ptr<AsyncStart> told;
  RunEmitter::Committed tell;
  if (async) {
    told = std::make_shared<AsyncStart>();
    told->started = std::move(*async);
    told->handle = TurnHandle{turn.thread_id, turn.id, turn.run_id, false, 0, {}};
    tell = [told](const RunEmitter::Flushed& f) {
      if (f.emitter_first_seq == 0) return;  // nothing of the start committed yet
      TurnHandle h = told->handle;
      h.first_seq = f.emitter_first_seq;  // the start's: this call may be a later commit's, overtaking the start's
      told->fire(h, nullptr);
    };
  }
  auto em = make_emitter(turn.thread_id, turn.run_id, -1, inline_run != nullptr, handle, std::move(tell));
  // Until its run is queued, an async start is the caller's to fail (it throws; the callback stays silent), and
  // nothing commits it (its emitter is watched by the flusher only then).
  struct Disarm {
    AsyncStart* start;
    ~Disarm() {
      if (start) start->fired = true;
    }
  } disarm{told.get()};
  ThreadRecord th;
  th.id = turn.thread_id;
  th.user_id = turn.user_id;
  auto stage_start = [th, turn, user](RunEmitter& e) {
    RunEmitter::Unit unit(e);  // the thread, the turn, its input and RUN_STARTED commit together
    e.create_thread(th);
    e.emit_run_started(agentrt::turn::run_started(turn, &user.message), turn.id, user.message);
  };
  stage_start(*em);
  for (const auto& key : uploads) em->add_compensation([objects = cfg.objects, key] { objects->remove(key); });
  auto refused = [&](const Error& e) { return refused_start(e, input.thread_id, input.user_id, client_id); };
  if (async) {
    // The run starts on a worker with its start staged; whoever commits the start tells the callback, and a start
    // the store refuses is told by the run, which then stores nothing.
    runs_started.fetch_add(1, std::memory_order_relaxed);
    deferred.em = em;
    group_commit->watch(em);
    disarm.start = nullptr;
    enqueue([this, handle, turn, deferred_at, told, client_id] {
      run_fresh(handle, turn, deferred_at.get());
      if (!deferred_at->error) return;
      runs_started.fetch_sub(1, std::memory_order_relaxed);
      try {
        std::rethrow_exception(deferred_at->error);
      } catch (const Error& e) {
        try {
          if (auto h = refused_start(e, turn.thread_id, turn.user_id, client_id)) return told->fire(*h, nullptr);
        } catch (...) {
          return told->fire(told->handle, std::current_exception());
        }
        told->fire(told->handle, deferred_at->error);
      } catch (...) {
        told->fire(told->handle, deferred_at->error);
      }
    });
    return told->handle;
  }
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
  RunEmitter::Flushed committed;
  try {
    committed = em->flush();
  } catch (const Error& e) {
    unregister_run(turn.id);
    if (auto h = refused(e)) return *h;
    throw;
  }
  runs_started.fetch_add(1, std::memory_order_relaxed);
  turn.version = committed.batch.turn ? committed.batch.turn->version : 0;
  TurnHandle out{turn.thread_id, turn.id, turn.run_id, false, committed.first_seq(), {}};
  enqueue([this, handle, turn]() mutable { run_fresh(handle, turn); });
  return out;
}

TurnHandle Runtime::Impl::repeated_start(const TurnRecord& t) {
  TurnHandle h{t.thread_id, t.id, t.run_id, true, 0, {}};
  h.delta_messages = turn_messages(t);
  return h;
}

}  // namespace v1
}  // namespace agentrt
