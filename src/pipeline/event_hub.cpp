#include "pipeline/event_hub.hpp"

#include <algorithm>

namespace agentrt {
inline namespace v1 {

void EventHub::attach(const std::string& thread_id, const std::shared_ptr<SubscriptionImpl>& sub) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& v = subs_[thread_id];
  v.erase(std::remove_if(v.begin(), v.end(), [](const auto& w) { return w.expired(); }), v.end());
  v.push_back(sub);
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

void EventHub::publish(const std::string& thread_id, const std::vector<StoredEvent>& events) {
  std::vector<std::shared_ptr<SubscriptionImpl>> targets;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = subs_.find(thread_id);
    if (it == subs_.end()) return;
    for (const auto& w : it->second)
      if (auto s = w.lock()) targets.push_back(std::move(s));
  }
  for (const auto& s : targets) s->push(events);
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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const bool first = !seen_external_;
    const bool same = seen_external_ && external_version >= 0 && external_version == *seen_external_;
    seen_external_ = external_version;
    if (first || same) return;
  }
  poke_all();
}

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

void SubscriptionImpl::start() { hub_.attach(thread_id_, shared_from_this()); }

void SubscriptionImpl::push(const std::vector<StoredEvent>& events) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return;
    for (const auto& e : events) {
      if (live_.size() >= kMaxQueued) {
        // The consumer is far behind: drop the queue and read the store again from where it is.
        live_.clear();
        catching_up_ = true;
        ++store_wanted_;
        break;
      }
      live_.push_back(e);
    }
  }
  cv_.notify_all();
  signal_ready();
}

std::optional<StoredEvent> SubscriptionImpl::next(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (closed_) return std::nullopt;
    while (!backlog_.empty()) {
      StoredEvent e = std::move(backlog_.front());
      backlog_.pop_front();
      if (e.seq <= delivered_) continue;
      delivered_ = e.seq;
      if (e.run_id.empty()) continue;  // a record of the log's own (no run's event): not for clients
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
      for (auto& e : page) backlog_.push_back(std::move(e));
      if (!backlog_.empty()) continue;
    }
    while (!live_.empty()) {
      StoredEvent e = std::move(live_.front());
      live_.pop_front();
      if (e.seq <= delivered_) continue;
      if (e.seq != delivered_ + 1) {
        // A gap (events committed before we attached, or by another process): read them from the store.
        catching_up_ = true;
        live_.push_front(std::move(e));
        break;
      }
      delivered_ = e.seq;
      if (e.run_id.empty()) continue;
      return e;
    }
    if (catching_up_) continue;
    // A poll (a zero timeout, as a drain after on_ready) answers at once: a wait with its deadline already past
    // still sleeps in the kernel until its timer fires (a context switch per drain).
    if (timeout.count() <= 0) return std::nullopt;
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && live_.empty() && !catching_up_ && !closed_)
      return std::nullopt;
  }
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
