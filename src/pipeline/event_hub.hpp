// The event hub: fans committed events out to subscriptions; a subscription replays a thread's committed events
// from the store after a sequence number, then follows the live tail.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agentrt/storage.hpp"

namespace agentrt {
inline namespace v1 {

class SubscriptionImpl;

// Thread-safe: publish() from committing threads, attach/detach from subscribers.
class EventHub {
 public:
  void attach(const std::string& thread_id, const std::shared_ptr<SubscriptionImpl>& sub);
  void detach(const std::string& thread_id, const SubscriptionImpl* sub);
  void publish(const std::string& thread_id, const std::vector<StoredEvent>& events);
  // Tells every subscription to read the store again (events another process committed).
  void poke_all();
  // The store's external version (Store::external_version) as last looked at: pokes every subscription when it
  // moved, or when the store cannot tell (-1). The first look only remembers it.
  void tail_external(int64_t external_version);

 private:
  std::mutex mutex_;
  std::optional<int64_t> seen_external_;  // under mutex_
  std::map<std::string, std::vector<std::weak_ptr<SubscriptionImpl>>, std::less<>> subs_;
};

// Replays committed events from the store after a sequence number, then follows the live tail. A consumer
// that falls more than kMaxQueued events behind goes back to reading the store: nothing is dropped.
class SubscriptionImpl : public std::enable_shared_from_this<SubscriptionImpl> {
 public:
  static constexpr size_t kMaxQueued = 10000;
  SubscriptionImpl(Store& store, EventHub& hub, std::string thread_id, int64_t after_seq);
  ~SubscriptionImpl();
  void start();  // attaches to the hub; call once after construction
  std::optional<StoredEvent> next(std::chrono::milliseconds timeout);
  void close();
  bool closed() const;
  void push(const std::vector<StoredEvent>& events);  // from EventHub::publish
  void poke();  // from EventHub::poke_all: look at the store for events not pushed
  // Subscription::on_ready: called (under ready_mutex_) after every push, poke and close.
  void set_ready(std::function<void()> ready);

 private:
  void drop_batch();  // undoes the batch's objects and empties it (under mutex_)
  void signal_ready();
  Store& store_;
  EventHub& hub_;
  std::string thread_id_;
  std::mutex ready_mutex_;  // held while `ready_` runs, so that set_ready() waits for a call in progress
  std::function<void()> ready_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  int64_t delivered_ = 0;    // highest sequence number handed out
  bool catching_up_ = true;  // reading the store, not the live queue
  // Moves each time something asks for a read of the store (a poke, a dropped live queue): a read that began
  // before it may have missed what it announces, so the reader reads again rather than stop catching up.
  uint64_t store_wanted_ = 0;
  bool closed_ = false;
  std::deque<StoredEvent> backlog_;
  std::deque<StoredEvent> live_;
};

}  // namespace v1
}  // namespace agentrt
