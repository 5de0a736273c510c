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
  RunEmitter::Committed on_committed = [this](const RunEmitter::Flushed& f) { on_commit(f.batch); };
  if (committed)
    on_committed = [this, committed = std::move(committed)](const RunEmitter::Flushed& f) {
      committed(f);  // before the turn's waiters wake: what a start's callback is told comes first
      on_commit(f.batch);
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

size_t Subscription::drain(size_t max, const std::function<void(const StoredEvent&)>& take) {
  size_t n = 0;
  for (; n < max; ++n) {
    std::optional<StoredEvent> e;
    try {
      e = next(std::chrono::milliseconds(0));
    } catch (...) {
      if (n == 0) throw;
      break;
    }
    if (!e) break;
    take(*e);
  }
  return n;
}

std::unique_ptr<Subscription> Runtime::subscribe(std::string_view thread_id, int64_t after_seq) {
  require_id(thread_id, "thread id");
  if (after_seq < 0) throw Error(ErrorCode::invalid_argument, "after_seq must not be negative");
  struct Sub final : Subscription {
    std::shared_ptr<SubscriptionImpl> impl;
    std::optional<StoredEvent> next(std::chrono::milliseconds timeout) override { return impl->next(timeout); }
    size_t drain(size_t max, const std::function<void(const StoredEvent&)>& take) override {
      return impl->drain(max, take);
    }
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
      if (!impl_->runs.has(turn_id)) throw Error(ErrorCode::not_found, fmt::format("turn {} not found", turn_id));
      if (now >= deadline)  // it exists, it is just not stored yet: not the "no such turn" of a refused start
        throw Error(ErrorCode::timeout, fmt::format("turn {}: its start is not stored yet", turn_id));
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
