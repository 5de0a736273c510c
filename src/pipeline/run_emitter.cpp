#include "pipeline/run_emitter.hpp"

#include <algorithm>
#include <thread>

#include "agentrt/clock.hpp"
#include "runtime/event_wire.hpp"

namespace agentrt {
inline namespace v1 {

RunEmitter::RunEmitter(Store& store, EventHub& hub, std::string thread_id, std::string run_id, Committed on_commit,
                       CommitRetry retry, Failed on_failed)
    : store_(store),
      hub_(hub),
      thread_id_(std::move(thread_id)),
      run_id_(std::move(run_id)),
      on_commit_(std::move(on_commit)),
      retry_(retry),
      on_failed_(std::move(on_failed)),
      projector_(thread_id_) {
  batch_->thread_id = thread_id_;
}

void RunEmitter::note_pending() {
  if (batch_->empty() && undo_.empty()) pending_since_ = std::chrono::steady_clock::now();
}

void RunEmitter::note_content() {
  note_pending();
  if (due_since_.load(std::memory_order_relaxed) == 0)
    due_since_.store(std::max<int64_t>(1, pending_since_.time_since_epoch().count()), std::memory_order_release);
}

void RunEmitter::stage_event(std::string body) {
  note_content();
  // Room for a whole turn's events at once (a model's answer streams as a few dozen): growing one at a time moved
  // them six times over in a turn, through allocations too large for the allocator's thread cache.
  if (batch_->events.capacity() == 0) batch_->events.reserve(kEventsReserved);
  batch_->events.push_back(StoredEvent{0, run_id_, std::move(body)});
}

void RunEmitter::project(std::optional<MessageRecord> m) {
  // The ledger entries the events changed are copied once, as the batch commits (an entry moves several times in
  // one batch: requested, approved, started, finished), like the turn's row below.
  if (auto a = projector_.take_approval()) batch_->approval = std::move(*a);
  for (auto& w : projector_.take_job_writes()) batch_->jobs.push_back(std::move(w));
  if (auto s = projector_.take_state()) batch_->thread_state = std::move(*s);
  // The row itself is copied once, as the batch commits (a run's status moves several times in one batch).
  if (projector_.turn_changed()) {
    batch_->expected_version = turn_version_;
    projected_turn_ = true;
  }
  if (!m) return;
  batch_->messages.push_back(std::move(*m));
  if (on_message_) on_message_(batch_->messages.back());
}

template <class E>
void RunEmitter::take(E&& e) {
  std::string body = to_json_string(e);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!staging()) return;
  // First: an event the projector refuses (a ledger move) is not staged.
  auto m = projector_.apply(run_id_, std::forward<E>(e));
  stage_event(std::move(body));
  project(std::move(m));
}

void RunEmitter::emit(const Event& e) { take(e); }
void RunEmitter::emit(Event&& e) { take(std::move(e)); }

void RunEmitter::step_started(std::string_view step) {
  std::string body = wire::step_started(step, now_ms());
  std::lock_guard<std::mutex> lock(mutex_);
  if (!staging()) return;
  stage_event(std::move(body));
  projector_.step_started(run_id_, step);
  projector_.turn_step(run_id_, step);
  project(std::nullopt);
}

void RunEmitter::step_finished(std::string_view step) {
  std::string body = wire::step_finished(step, now_ms());
  std::lock_guard<std::mutex> lock(mutex_);
  if (staging()) stage_event(std::move(body));
}

void RunEmitter::text_start(std::string_view message_id) {
  std::string body = wire::text_start(message_id, now_ms());
  std::lock_guard<std::mutex> lock(mutex_);
  if (!staging()) return;
  stage_event(std::move(body));
  projector_.text_start(message_id);
}

void RunEmitter::text_content(std::string_view message_id, std::string_view delta) {
  std::string body = wire::text_content(message_id, delta, now_ms());
  std::lock_guard<std::mutex> lock(mutex_);
  if (!staging()) return;
  stage_event(std::move(body));
  projector_.text_content(message_id, delta);
}

void RunEmitter::tool_call_start(std::string_view tool_call_id, std::string_view name,
                                 std::string_view parent_message_id) {
  std::string body = wire::tool_call_start(tool_call_id, name, parent_message_id, now_ms());
  std::lock_guard<std::mutex> lock(mutex_);
  if (!staging()) return;
  stage_event(std::move(body));
  projector_.tool_call_start(tool_call_id, name, parent_message_id);
}

void RunEmitter::tool_call_args(std::string_view tool_call_id, std::string_view delta) {
  std::string body = wire::tool_call_args(tool_call_id, delta, now_ms());
  std::lock_guard<std::mutex> lock(mutex_);
  if (!staging()) return;
  stage_event(std::move(body));
  projector_.tool_call_args(tool_call_id, delta);
}

void RunEmitter::tool_call_end(std::string_view tool_call_id) {
  std::string body = wire::tool_call_end(tool_call_id, now_ms());
  std::lock_guard<std::mutex> lock(mutex_);
  if (staging()) stage_event(std::move(body));
}

void RunEmitter::emit_tool_call_result(std::string event_json, const std::string& message_id,
                                       const std::string& tool_call_id, std::string content, json facts,
                                       const ToolOutcome& outcome) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!staging()) return;
  auto m =
      projector_.tool_call_result(run_id_, message_id, tool_call_id, std::move(content), std::move(facts), &outcome);
  stage_event(std::move(event_json));
  project(std::move(m));
}

void RunEmitter::emit_run_started(const Event& e, const std::string& turn_id, const Message& input) {
  std::string body = to_json_string(e);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!staging()) return;
  projector_.turn_started(run_id_, turn_id, e);
  stage_event(std::move(body));
  project(projector_.run_started(run_id_, turn_id, &input));
}

void RunEmitter::begin_run(const std::string& turn_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  projector_.begin_run(run_id_, turn_id);
}

void RunEmitter::on_message(std::function<void(const MessageRecord&)> sink) {
  std::lock_guard<std::mutex> lock(mutex_);
  on_message_ = std::move(sink);
}

void RunEmitter::seed_turn(const TurnRecord& t) {
  std::lock_guard<std::mutex> lock(mutex_);
  projector_.seed_turn(t);
}

void RunEmitter::seed_ledger(const std::vector<LedgerEntry>& entries) {
  std::lock_guard<std::mutex> lock(mutex_);
  projector_.seed_ledger(entries);
}

void RunEmitter::set_turn_version(int64_t version) {
  std::lock_guard<std::mutex> lock(mutex_);
  turn_version_ = version;
}

std::pair<int64_t, int64_t> RunEmitter::turn_times() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {turn_created_at_, turn_updated_at_};
}

int64_t RunEmitter::turn_version() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return turn_version_;
}

void RunEmitter::set_turn(const TurnRecord& t) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!staging()) return;
  note_content();
  batch_->expected_version = turn_version_;
  batch_->turn = t;
  projected_turn_ = false;  // this row, unless the events change the turn again
  projector_.drop_turn_change();
}

void RunEmitter::create_thread(ThreadRecord t) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!staging()) return;
  note_content();
  batch_->create_thread = std::move(t);
}

void RunEmitter::add_compensation(std::function<void()> undo) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!staging()) {
    // Nothing of this emitter is committed any more: the object goes at once.
    lock.unlock();
    try {
      undo();
    } catch (...) {
    }
    return;
  }
  note_pending();
  undo_.push_back(std::move(undo));
}

void RunEmitter::require_idle() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!staging()) return;
  batch_->require_idle = true;
}

void RunEmitter::set_run_id(std::string run_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  run_id_ = std::move(run_id);
}

void RunEmitter::discard() {
  std::lock_guard<std::mutex> lock(mutex_);
  drop_batch();
}

void RunEmitter::drop_batch() {
  for (auto& u : undo_) {
    try {
      u();
    } catch (...) {
    }
  }
  undo_.clear();
  *batch_ = CommitBatch{};
  batch_->thread_id = thread_id_;
  due_since_.store(0, std::memory_order_release);
  projected_turn_ = false;
  projector_.drop_turn_change();
  projector_.drop_ledger_changes();
}

namespace {

// Worth another attempt: the database was busy or an I/O call failed (a full disk may have room again). A
// conflict, bad data or a size limit fails the same way every time.
bool transient(const Error& e) { return e.code() == ErrorCode::io || e.code() == ErrorCode::timeout; }

}  // namespace

CommitBatch RunEmitter::commit_locked() {
  if (failure_) throw *failure_;
  if (projected_turn_) {
    if (auto t = projector_.take_turn()) batch_->turn = std::move(*t);
    projected_turn_ = false;
  }
  batch_->ledger = projector_.take_ledger_changes();  // each entry the batch's events changed, as it is now
  CommitBatch out;
  out.thread_id = thread_id_;
  if (batch_->empty()) {
    undo_.clear();
    return out;
  }
  std::chrono::milliseconds backoff = retry_.backoff;
  for (int attempt = 0;; ++attempt) {
    try {
      // The store writes seq numbers, indexes and versions into the batch only as it goes: a failed attempt
      // leaves values that the next attempt assigns again.
      store_.commit(*batch_);
      break;
    } catch (const Error& e) {
      if (transient(e) && attempt < retry_.retries) {
        std::this_thread::sleep_for(backoff);
        backoff *= 2;
        continue;
      }
      failure_ = e;  // its code stays: a conflict, a size limit (too_large) or storage (io)
    } catch (const std::exception& e) {
      failure_ = Error(ErrorCode::io, e.what());
    } catch (...) {
      failure_ = Error(ErrorCode::io, "a commit failed with a non-standard exception");
    }
    // What the batch held is gone: its objects with it. Nothing staged from now on is committed.
    drop_batch();
    throw *failure_;
  }
  undo_.clear();
  if (batch_->turn) {
    turn_version_ = batch_->turn->version;
    turn_created_at_ = batch_->turn->created_at;
    turn_updated_at_ = batch_->turn->updated_at;
  }
  out = std::move(*batch_);
  *batch_ = CommitBatch{};
  batch_->thread_id = thread_id_;
  due_since_.store(0, std::memory_order_release);
  return out;
}

RunEmitter::Flushed RunEmitter::flush() { return flush(false); }

RunEmitter::Flushed RunEmitter::flush(bool background) {
  Flushed out;
  bool told = false;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (background && open_units_ > 0) return out;
    // A run's own flush commits only once the calls after the flusher's commits have returned: what it commits
    // (the run's end, which the turn's waiters see) comes after whatever they tell, as when they ran locked.
    if (!background) callbacks_done_.wait(lock, [&] { return callbacks_ == 0; });
    const bool was_failed = failure_.has_value();
    try {
      out.batch = commit_locked();
    } catch (...) {
      if (!was_failed && failure_ && on_failed_) on_failed_();
      throw;
    }
    // Published under the lock: a later batch of this run (the flusher's) is never published before this one.
    // Published before the commit callbacks: a stream opened on what they tell (a start's answer) finds the
    // events in the hub's tail, not only in the store. Moved, not copied: the hub's tail and every subscriber
    // share them.
    if (!out.batch.events.empty()) {
      out.events =
          std::make_shared<std::vector<StoredEvent>>(std::move(out.batch.events));  // not const: see EventBatch
      out.batch.events.clear();
      hub_.publish(thread_id_, out.events);
      if (first_seq_ == 0) first_seq_ = out.events->front().seq;
    }
    out.emitter_first_seq = first_seq_;
    if (on_commit_) {
      told = true;
      ++callbacks_;
    }
  }
  // The callback runs unlocked: it may call the runtime (a host's start callback opens its stream there, on this
  // thread, instead of handing that to another).
  if (told) {
    try {
      on_commit_(out);
    } catch (...) {
      // Not the commit's failure: the callbacks given here do not throw.
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (--callbacks_ == 0) callbacks_done_.notify_all();
  }
  return out;
}

void RunEmitter::flush_in_background() noexcept {
  try {
    flush(true);
  } catch (...) {
    // The failure stays in failure_ for the run; the Failed callback has told it.
  }
}

RunEmitter::Unit::Unit(RunEmitter& em) : em_(em) {
  std::lock_guard<std::mutex> lock(em_.mutex_);
  ++em_.open_units_;
}

RunEmitter::Unit::~Unit() {
  std::lock_guard<std::mutex> lock(em_.mutex_);
  --em_.open_units_;
}

std::optional<Error> RunEmitter::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

bool RunEmitter::has_pending() const { return due_since_.load(std::memory_order_acquire) != 0; }

std::chrono::steady_clock::time_point RunEmitter::pending_since() const {
  return std::chrono::steady_clock::time_point(
      std::chrono::steady_clock::duration(due_since_.load(std::memory_order_acquire)));
}

}  // namespace v1
}  // namespace agentrt
