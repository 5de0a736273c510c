#include "agentrt/runtime.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>

#include <fmt/format.h>

#include "agentrt/records.hpp"
#include "runtime/budget_guard.hpp"
#include "runtime/context_builder.hpp"
#include "runtime/runtime_impl.hpp"
#include "runtime/turn_runner.hpp"
#include "store/messages_of_turn.hpp"
#include "util/printable.hpp"

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

// ---------------------------------------------------------------------------------------------- Impl

Runtime::Impl::Impl(RuntimeConfig c)
    : cfg(std::move(c)),
      tracer(cfg.tracing, [this](LogLevel level, std::string_view message) { log(level, "tracing", message); }),
      jobs(
          cfg,
          [this](const std::string& thread_id, const std::string& run_id) {
            return make_emitter(thread_id, run_id, -1, false);
          },
          [this](LogLevel level, std::string_view component, std::string_view message) {
            log(level, component, message);
          }) {
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
  jobs.set_tracer(&tracer);
  if (cfg.instance_id.empty()) cfg.instance_id = new_id("rt");
  for (auto& t : cfg.tools) tools.add(std::move(t));
  cfg.tools.clear();
  if (!cfg.mcp_servers.empty()) {
    mcp = std::make_unique<mcp::McpTools>(cfg.mcp_servers, tools, cfg.mcp_pins_path, cfg.max_json_depth,
                                          [this](LogLevel level, std::string_view component, std::string_view message) {
                                            log(level, component, message);
                                          });
    mcp->start();
  }
  hub.tail_external(cfg.store->external_version());
  cfg.store->heartbeat(cfg.instance_id, now_ms());
  group_commit = std::make_unique<GroupCommit>(cfg.flush_interval);
  auto log_error = [this](std::string_view component) {
    return [this, component](std::string_view what) { log(LogLevel::error, component, what); };
  };
  workers = std::make_unique<WorkerPool>(cfg.workers, log_error("runtime"));
  recovery.sweep(false);  // fail turns a dead process left running, expire overdue approvals
  sweeper = std::make_unique<Sweeper>(
      cfg.sweep_interval,
      std::vector<Sweeper::Step>{
          {"live tail", [this] { hub.tail_external(cfg.store->external_version()); }},
          // Each step on its own: a failing heartbeat (a full disk) must not keep expiry or recovery from running.
          {"heartbeat", [this] { cfg.store->heartbeat(cfg.instance_id, now_ms()); }},
          {"failed runs", [this] { recovery.record_unrecorded(); }},
          {"sweep", [this] { recovery.sweep(); }},
      },
      log_error("sweeper"));
  // Where other processes' commits stand now, before anyone can subscribe (PostgreSQL: the LISTEN connection
  // opens here). The hub compares every later version with this one: a commit made between a subscription and
  // a first look later on (the sweeper's, the live tail's) would not count as a change.
  hub.tail_external(cfg.store->external_version());
  if (cfg.store->waits_external())
    live_tail = std::make_unique<LiveTail>(*cfg.store, [this](int64_t version) { hub.tail_external(version); });
}

Runtime::Impl::~Impl() {
  runs.cancel_all();
  workers->stop();  // runs what is queued (cancelled), then joins
  if (mcp) mcp->stop();
  group_commit->stop();
  sweeper->stop();
  if (live_tail) live_tail->stop();
  tracer.shutdown();  // the runs' spans are all ended: flush them (bounded by export_timeout)
  try {
    cfg.store->remove_instance(cfg.instance_id);
  } catch (const std::exception& e) {
    log(LogLevel::warn, "runtime", fmt::format("could not deregister instance: {}", e.what()));
  }
}

void Runtime::Impl::log(LogLevel level, std::string_view component, std::string_view message) const {
  if (!cfg.log || level < cfg.log_level || cfg.log_level == LogLevel::off) return;
  try {
    // A record is one line of text: what it quotes from models, tools and MCP servers (their stderr too) could
    // otherwise forge lines of its own or send a terminal commands.
    if (has_controls(message))
      cfg.log(level, component, escape_controls(message));
    else
      cfg.log(level, component, message);
  } catch (...) {
    // A failing log sink must not break a run.
  }
}

std::shared_ptr<RunEmitter> Runtime::Impl::make_emitter(const std::string& thread_id, const std::string& run_id,
                                                        int64_t turn_version, bool live,
                                                        const std::shared_ptr<RunHandle>& run,
                                                        RunEmitter::Committed committed) {
  RunEmitter::Failed failed;
  if (run)
    failed = [weak = std::weak_ptr<RunHandle>(run)] {
      if (auto h = weak.lock()) h->cancel.cancel();
    };
  RunEmitter::Committed on_committed = [this](const CommitBatch& b) { on_commit(b); };
  if (committed)
    on_committed = [this, committed = std::move(committed)](const CommitBatch& b) {
      committed(b);  // before the turn's waiters wake: what a start's callback is told comes first
      on_commit(b);
    };
  auto em = std::make_shared<RunEmitter>(*cfg.store, hub, thread_id, run_id, std::move(on_committed),
                                         CommitRetry{cfg.commit_retries, cfg.commit_retry_backoff}, std::move(failed));
  em->set_turn_version(turn_version);
  if (live) group_commit->watch(em);
  return em;
}

void Runtime::Impl::on_commit(const CommitBatch& b) {
  if (b.turn) runs.turn_changed();
}

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
  if (!client_id.empty()) {
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
  auto deferred_at = std::make_shared<DeferredStart>();
  DeferredStart& deferred = *deferred_at;
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
    tell = [told](const CommitBatch& b) {
      TurnHandle h = told->handle;
      h.first_seq = b.events.empty() ? 0 : b.events.front().seq;
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
  for (auto& rec : messages_of_turn(*cfg.store, t.thread_id, t.id)) {
    history_view.view(rec.message);
    out.push_back(std::move(rec.message));
  }
  return out;
}

void Runtime::Impl::cancel(std::string_view turn_id) {
  for (int attempt = 0; attempt < 50; ++attempt) {
    auto turn = cfg.store->get_turn(turn_id);
    if (!turn) throw Error(ErrorCode::not_found, fmt::format("turn {} not found", turn_id));
    if (is_terminal(turn->status)) return;
    if (!is_waiting(turn->status)) {
      if (runs.cancel(turn_id)) return;
    } else {
      // The run that paused may still be unregistering: a waiting turn is cancelled by compare-and-set.
      try {
        recovery.end_waiting_turn(*turn, TurnStatus::cancelled, "cancelled by the host");
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
    if (recovery.instance_alive(turn->owner, now_ms()))
      throw Error(ErrorCode::invalid_state,
                  fmt::format("turn {} is running in another runtime instance ({})", turn->id, turn->owner));
    recovery.recover_running_turn(*turn);
    return;
  }
  throw Error(ErrorCode::conflict, fmt::format("turn {} kept changing while being cancelled", turn_id));
}

// ---------------------------------------------------------------------------------------------- Runtime

Runtime::Runtime(RuntimeConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}
Runtime::~Runtime() = default;

ToolRegistry& Runtime::tools() { return impl_->tools; }
std::vector<McpServerInfo> Runtime::mcp_servers() const {
  return impl_->mcp ? impl_->mcp->servers() : std::vector<McpServerInfo>{};
}
std::vector<McpToolInfo> Runtime::mcp_tools() const {
  return impl_->mcp ? impl_->mcp->tools() : std::vector<McpToolInfo>{};
}
McpToolInfo Runtime::approve_mcp_tool(std::string_view name) {
  if (!impl_->mcp) throw Error(ErrorCode::not_found, fmt::format("no MCP tool is named {}", name));
  return impl_->mcp->approve(name);
}
TurnHandle Runtime::start_turn(const TurnInput& input) { return impl_->start_turn(input); }
TurnHandle Runtime::start_turn_async(const TurnInput& input, Started started) {
  if (!started) throw Error(ErrorCode::invalid_argument, "start_turn_async: a callback is required");
  return impl_->start_turn(input, nullptr, &started);
}
namespace {
ResumeInput resume_input(std::string_view turn_id, std::string_view approval_request_id,
                         const std::vector<Decision>& decisions, std::string_view run_id,
                         const std::vector<ContextEntry>& context) {
  ResumeInput in;
  in.turn_id = turn_id;
  in.approval_request_id = approval_request_id;
  in.decisions = decisions;
  in.run_id = run_id;
  in.context = context;
  return in;
}
}  // namespace

json Runtime::resume(std::string_view turn_id, std::string_view approval_request_id,
                     const std::vector<Decision>& decisions, std::string_view run_id,
                     const std::vector<ContextEntry>& context) {
  return impl_->approvals.resume(resume_input(turn_id, approval_request_id, decisions, run_id, context));
}
json Runtime::resume(const ResumeInput& input) { return impl_->approvals.resume(input); }
void Runtime::cancel(std::string_view turn_id) { impl_->cancel(turn_id); }

TurnRecord Runtime::run_turn(const TurnInput& input) {
  TurnRecord out;
  auto h = impl_->start_turn(input, &out);
  if (h.existing) return wait(h.turn_id, std::chrono::hours(24));
  return out;
}

TurnRecord Runtime::resume_turn(std::string_view turn_id, std::string_view approval_request_id,
                                const std::vector<Decision>& decisions, std::string_view run_id,
                                const std::vector<ContextEntry>& context) {
  return resume_turn(resume_input(turn_id, approval_request_id, decisions, run_id, context));
}

TurnRecord Runtime::resume_turn(const ResumeInput& input) {
  TurnRecord out;
  impl_->approvals.resume(input, &out);
  // A repeated approval id answered from the record: nothing ran here, report the turn as it is.
  if (out.id.empty()) return wait(input.turn_id, std::chrono::hours(24));
  return out;
}

std::vector<ClientToolOffer> Runtime::Impl::offer_client_tools(const std::vector<ToolDefinition>& offered) {
  check_client_tools(offered, input_limits(cfg));
  std::vector<ClientToolOffer> out;
  out.reserve(offered.size());
  for (const auto& t : offered) {
    if (tools.find(t.name))
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("client tool '{}' has the name of a tool of this runtime", t.name));
    ClientToolOffer offer;
    offer.definition = t;
    // An absent schema and an empty one mean the same thing: any arguments object.
    if (offer.definition.parameters.is_null() || offer.definition.parameters.empty())
      offer.definition.parameters = json{{"type", "object"}, {"properties", json::object()}};
    try {
      offer.schema = std::make_shared<const JsonSchema>(offer.definition.parameters);
    } catch (const Error& e) {
      throw Error(ErrorCode::invalid_argument, fmt::format("client tool '{}': parameters: {}", t.name, e.message()));
    }
    out.push_back(std::move(offer));
  }
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

std::vector<Message> Runtime::history(std::string_view thread_id) { return impl_->history_view.history(thread_id); }
std::optional<json> Runtime::thread_state(std::string_view thread_id) {
  require_id(thread_id, "thread id");
  auto s = impl_->cfg.store->thread_state(thread_id);
  if (!s) return std::nullopt;
  return parse_json(*s);
}
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
  std::vector<StoredEvent> out;
  while (out.size() < limit) {
    auto page = store.events_after(thread_id, after_seq, limit - out.size());
    if (page.empty()) break;
    after_seq = page.back().seq;
    for (auto& e : page)
      if (!e.run_id.empty()) out.push_back(std::move(e));  // a record of no run is the log's own
  }
  return out;
}

std::optional<TurnRecord> Runtime::last_turn(std::string_view thread_id) {
  return impl_->cfg.store->last_turn(thread_id);
}

std::optional<ApprovalRecord> Runtime::approval(std::string_view approval_request_id) {
  return impl_->cfg.store->get_approval(approval_request_id);
}

std::vector<LedgerEntry> Runtime::tool_calls(std::string_view turn_id) { return impl_->cfg.store->ledger(turn_id); }

Spend Runtime::turn_spend(std::string_view turn_id) {
  Store& store = *impl_->cfg.store;
  auto t = store.get_turn(turn_id);
  if (!t) throw Error(ErrorCode::not_found, fmt::format("turn '{}' not found", turn_id));
  return spend_of(t->steps, static_cast<int64_t>(store.ledger(turn_id).size()), turn::usage_from_json(t->usage),
                  impl_->cfg.prices);
}

Spend Runtime::thread_spend(std::string_view thread_id) {
  require_id(thread_id, "thread id");
  return stored_spend(*impl_->cfg.store, impl_->cfg.prices, thread_id, {}, {});
}

Spend Runtime::user_spend(std::string_view user_id) {
  if (user_id.empty()) throw Error(ErrorCode::invalid_argument, "user id must not be empty");
  return stored_spend(*impl_->cfg.store, impl_->cfg.prices, {}, user_id, {});
}

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
    const uint64_t gen = impl_->runs.generation();
    auto t = impl_->cfg.store->get_turn(turn_id);
    auto now = std::chrono::steady_clock::now();
    if (!t) {
      // Not stored, but running here: an async start whose commit is still to come (it wakes this wait).
      if (!impl_->runs.has(turn_id) || now >= deadline)
        throw Error(ErrorCode::not_found, fmt::format("turn {} not found", turn_id));
      impl_->runs.wait_for_change(gen, std::min(deadline, now + std::chrono::milliseconds(50)));
      continue;
    }
    if (t->status != TurnStatus::running && t->status != TurnStatus::resuming) return *t;
    // Changes made by another process are not signalled here: look at the store again now and then.
    if (now >= deadline) return *t;
    auto until = std::min(deadline, now + std::chrono::milliseconds(50));
    impl_->runs.wait_for_change(gen, until);
  }
}

void Runtime::sweep() { impl_->recovery.sweep(); }

RuntimeStats Runtime::stats() const {
  const trace::ExportStats spans = impl_->tracer.stats();
  return RuntimeStats{impl_->model_calls.load(), impl_->tool_executions.load(), impl_->runs_started.load(),
                      static_cast<int64_t>(spans.exported),
                      static_cast<int64_t>(spans.dropped_full + spans.dropped_failed)};
}
bool Runtime::flush_traces(std::chrono::milliseconds timeout) { return impl_->tracer.flush(timeout); }
const RuntimeConfig& Runtime::config() const { return impl_->cfg; }

}  // namespace v1
}  // namespace agentrt
