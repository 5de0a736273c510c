#include "pipeline/event_hub.hpp"

#include <algorithm>

namespace agentrt {
inline namespace v1 {

// ------------------------------------------------------------------------------------------------ EventQueue

void EventQueue::pop_front() {
  if (++pos_ == batches_.front()->size()) {
    batches_.pop_front();
    pos_ = 0;
  }
  --count_;
}

void EventQueue::push_back(EventBatch batch) {
  if (!batch || batch->empty()) return;
  count_ += batch->size();
  batches_.push_back(std::move(batch));
}

void EventQueue::clear() {
  batches_.clear();
  pos_ = 0;
  count_ = 0;
}

// -------------------------------------------------------------------------------------------------- EventHub

namespace {

size_t event_bytes(const StoredEvent& e) { return sizeof(StoredEvent) + e.json.size() + e.run_id.size(); }

}  // namespace

size_t EventHub::slot(std::string_view thread_id) { return std::hash<std::string_view>{}(thread_id) % kHighSlots; }

std::optional<std::vector<EventBatch>> EventHub::attach(const std::string& thread_id,
                                                        const std::shared_ptr<SubscriptionImpl>& sub,
                                                        int64_t after_seq) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& v = subs_[thread_id];
  v.erase(std::remove_if(v.begin(), v.end(), [](const auto& w) { return w.expired(); }), v.end());
  v.push_back(sub);
  caching_.store(!external_unknown_, std::memory_order_relaxed);
  auto it = tails_.find(thread_id);
  if (it == tails_.end()) return std::nullopt;
  const Tail& t = it->second;
  // Whole from after_seq on, up to the newest event this process published of the thread; nobody else seen since.
  if (t.epoch != epoch_ || t.batches.empty() || t.batches.back()->back().seq != high_[slot(thread_id)] ||
      t.batches.front()->front().seq > after_seq + 1)
    return std::nullopt;
  return std::vector<EventBatch>(t.batches.begin(), t.batches.end());
}

void EventHub::detach(const std::string& thread_id, const SubscriptionImpl* sub) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = subs_.find(thread_id);
  if (it == subs_.end()) return;
  auto& v = it->second;
  v.erase(std::remove_if(v.begin(), v.end(),
                         [&](const auto& w) {
                           auto s = w.lock();
                           return !s || s.get() == sub;
                         }),
          v.end());
  if (v.empty()) subs_.erase(it);
}

void EventHub::drop_locked(Tail& t, std::vector<EventBatch>& dropped) {
  tail_bytes_ -= t.bytes;
  t.bytes = 0;
  t.events = 0;
  for (auto& b : t.batches) dropped.push_back(std::move(b));
  t.batches.clear();
}

void EventHub::remember_locked(const std::string& thread_id, const EventBatch& batch,
                               std::vector<EventBatch>& dropped) {
  const auto& events = *batch;
  size_t bytes = 0;
  bool consecutive = true;
  for (size_t i = 0; i < events.size(); ++i) {
    bytes += event_bytes(events[i]);
    consecutive = consecutive && (i == 0 || events[i].seq == events[i - 1].seq + 1);
  }
  auto [it, fresh] = tails_.try_emplace(thread_id);
  Tail& t = it->second;
  if (fresh) {
    lru_.push_front(&it->first);
    t.lru = lru_.begin();
  } else {
    lru_.splice(lru_.begin(), lru_, t.lru);
  }
  // A batch that does not follow the tail (another run's commit published first; a tail from before another
  // process was seen) starts it anew; one too large to keep, or not consecutive, leaves none (the store is read).
  if (t.epoch != epoch_ || t.batches.empty() || t.batches.back()->back().seq + 1 != events.front().seq) {
    drop_locked(t, dropped);
    t.epoch = epoch_;
  }
  if (bytes > kTailBatchBytes || !consecutive) {
    drop_locked(t, dropped);
  } else {
    t.batches.push_back(batch);
    t.events += events.size();
    t.bytes += bytes;
    tail_bytes_ += bytes;
    while (t.events > kTailEvents && t.batches.size() > 1) {
      size_t b = 0;
      for (const auto& e : *t.batches.front()) b += event_bytes(e);
      t.events -= t.batches.front()->size();
      t.bytes -= b;
      tail_bytes_ -= b;
      dropped.push_back(std::move(t.batches.front()));
      t.batches.pop_front();
    }
  }
  // The threads published least recently go first (an emptied tail counts as a thread too); the slot table keeps
  // what they published.
  while ((tail_bytes_ > kTailBytes || tails_.size() > kTailThreads) && lru_.size() > 1) {
    auto victim = tails_.find(*lru_.back());
    drop_locked(victim->second, dropped);
    lru_.pop_back();
    tails_.erase(victim);
  }
}

void EventHub::publish(const std::string& thread_id, EventBatch batch) {
  if (!batch || batch->empty()) return;
  std::vector<std::shared_ptr<SubscriptionImpl>> targets;
  std::vector<EventBatch> dropped;  // freed after the lock
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Before any tail is kept too: a batch published before caching began, after a later one, must still count.
    int64_t& high = high_[slot(thread_id)];
    high = std::max(high, batch->back().seq);
    auto it = subs_.find(thread_id);
    if (it != subs_.end())
      for (const auto& w : it->second)
        if (auto s = w.lock()) targets.push_back(std::move(s));
    if (caching_.load(std::memory_order_relaxed)) remember_locked(thread_id, batch, dropped);
  }
  for (const auto& s : targets) s->push(batch);
}

void EventHub::poke_all() {
  std::vector<std::shared_ptr<SubscriptionImpl>> targets;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [thread, v] : subs_)
      for (const auto& w : v)
        if (auto s = w.lock()) targets.push_back(std::move(s));
  }
  for (const auto& s : targets) s->poke();
}

void EventHub::tail_external(int64_t external_version) {
  std::vector<EventBatch> dropped;  // freed after the lock
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const bool first = !seen_external_;
    const bool same = seen_external_ && external_version >= 0 && external_version == *seen_external_;
    seen_external_ = external_version;
    if (external_version < 0) {  // the store cannot tell: no tail is ever sure to end where the thread does
      external_unknown_ = true;
      caching_.store(false, std::memory_order_relaxed);
      for (auto& [id, t] : tails_) drop_locked(t, dropped);
    }
    if (first || same) return;
    ++epoch_;  // another process committed: any tail may lack its events
  }
  poke_all();
}

size_t EventHub::tail_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return tail_bytes_;
}

size_t EventHub::tails() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return tails_.size();
}

// ------------------------------------------------------------------------------------------- SubscriptionImpl

void SubscriptionImpl::poke() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return;
    catching_up_ = true;
    ++store_wanted_;
  }
  cv_.notify_all();
  signal_ready();
}

void SubscriptionImpl::set_ready(std::function<void()> ready) {
  std::lock_guard<std::mutex> lock(ready_mutex_);
  ready_ = std::move(ready);
  if (ready_) ready_();  // the committed events after the start may already be there
}

void SubscriptionImpl::signal_ready() {
  std::lock_guard<std::mutex> lock(ready_mutex_);
  if (ready_) ready_();
}

SubscriptionImpl::SubscriptionImpl(Store& store, EventHub& hub, std::string thread_id, int64_t after_seq)
    : store_(store), hub_(hub), thread_id_(std::move(thread_id)), delivered_(after_seq) {}

SubscriptionImpl::~SubscriptionImpl() { hub_.detach(thread_id_, this); }

void SubscriptionImpl::start() {
  int64_t after = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    after = delivered_;
  }
  auto tail = hub_.attach(thread_id_, shared_from_this(), after);
  if (!tail) return;
  std::lock_guard<std::mutex> lock(mutex_);
  // Every event committed after `after` is in the tail or comes as a push from now on: live from here, unless a
  // read of the store was asked for meanwhile (a poke, an overflowing queue).
  if (closed_ || store_wanted_ != 0) return;
  for (auto& b : *tail) backlog_.push_back(std::move(b));
  catching_up_ = false;
}

void SubscriptionImpl::push(const EventBatch& events) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return;
    if (live_.size() + events->size() > kMaxQueued) {
      // The consumer is far behind: drop the queue and read the store again from where it is.
      live_.clear();
      catching_up_ = true;
      ++store_wanted_;
    } else {
      live_.push_back(events);
    }
  }
  cv_.notify_all();
  signal_ready();
}

StoredEvent* SubscriptionImpl::advance(std::unique_lock<std::mutex>& lock, EventBatch& batch, bool& own) {
  // Made non-const (EventBatch) and held here: the event stays valid after the queue lets its batch go.
  auto take = [&](EventQueue& q) {
    batch = q.front_batch();
    own = batch.use_count() == 2;  // the queue's and ours
    auto* e = const_cast<StoredEvent*>(&q.front());
    q.pop_front();
    delivered_ = e->seq;
    return e;
  };
  for (;;) {
    if (closed_) return nullptr;
    while (!backlog_.empty()) {
      if (backlog_.front().seq <= delivered_) {
        backlog_.pop_front();
        continue;
      }
      StoredEvent* e = take(backlog_);
      if (e->run_id.empty()) continue;  // a record of the log's own (no run's event): not for clients
      return e;
    }
    if (catching_up_) {
      constexpr size_t kPage = 512;
      int64_t after = delivered_;
      const uint64_t wanted = store_wanted_;
      lock.unlock();
      auto page = store_.events_after(thread_id_, after, kPage);
      lock.lock();
      // Caught up, unless a poke came while reading: what it announces may have committed after the read began.
      if (page.size() < kPage && store_wanted_ == wanted) catching_up_ = false;
      if (!page.empty()) {
        backlog_.push_back(std::make_shared<std::vector<StoredEvent>>(std::move(page)));
        continue;
      }
    }
    while (!live_.empty()) {
      const int64_t seq = live_.front().seq;
      if (seq <= delivered_) {
        live_.pop_front();
        continue;
      }
      if (seq != delivered_ + 1) {
        // A gap (events committed before we attached, or by another process): read them from the store.
        catching_up_ = true;
        break;
      }
      StoredEvent* e = take(live_);
      if (e->run_id.empty()) continue;
      return e;
    }
    if (catching_up_) continue;
    return nullptr;
  }
}

std::optional<StoredEvent> SubscriptionImpl::next(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    EventBatch batch;
    bool own = false;
    if (StoredEvent* e = advance(lock, batch, own)) {
      if (own) return std::move(*e);  // nobody else can see it
      return *e;
    }
    if (closed_) return std::nullopt;
    // A poll (a zero timeout, as a drain after on_ready) answers at once: a wait with its deadline already past
    // still sleeps in the kernel until its timer fires (a context switch per drain).
    if (timeout.count() <= 0) return std::nullopt;
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && live_.empty() && !catching_up_ && !closed_)
      return std::nullopt;
  }
}

size_t SubscriptionImpl::drain(size_t max, const std::function<void(const StoredEvent&)>& take) {
  std::vector<EventBatch> held;  // what `out` points into, alive after the lock is let go
  std::vector<const StoredEvent*> out;
  held.reserve(4);
  out.reserve(std::min<size_t>(max, 64));
  {
    std::unique_lock<std::mutex> lock(mutex_);
    while (out.size() < max) {
      EventBatch batch;
      bool own = false;
      StoredEvent* e = nullptr;
      try {
        e = advance(lock, batch, own);
      } catch (...) {
        if (out.empty()) throw;
        break;  // what was read before the failure is handed over; the next call reads again
      }
      if (!e) break;
      if (held.empty() || held.back() != batch) held.push_back(std::move(batch));
      out.push_back(e);
    }
  }
  for (const StoredEvent* e : out) take(*e);
  return out.size();
}

void SubscriptionImpl::close() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    live_.clear();
    backlog_.clear();
  }
  cv_.notify_all();
  signal_ready();
}

bool SubscriptionImpl::closed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return closed_;
}

}  // namespace v1
}  // namespace agentrt
