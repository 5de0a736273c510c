// The event hub: fans committed events out to subscriptions; a subscription replays a thread's committed events
// from the store after a sequence number, then follows the live tail.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "agentrt/storage.hpp"

namespace agentrt {
inline namespace v1 {

class SubscriptionImpl;

// One commit's events as published: shared by every subscription's queue and the hub's tail, never changed
// (made non-const, so that the last holder may move its events out).
using EventBatch = std::shared_ptr<const std::vector<StoredEvent>>;

// Events in batches, read one at a time from the front.
class EventQueue {
 public:
  bool empty() const { return count_ == 0; }
  size_t size() const { return count_; }
  const StoredEvent& front() const { return (*batches_.front())[pos_]; }
  const EventBatch& front_batch() const { return batches_.front(); }
  void pop_front();
  void push_back(EventBatch batch);
  void clear();

 private:
  std::deque<EventBatch> batches_;
  size_t pos_ = 0;  // in batches_.front()
  size_t count_ = 0;
};

// Thread-safe: publish() from committing threads, attach/detach from subscribers.
//
// Once anything has subscribed, the hub also keeps the newest events it published of recently committed threads
// (a bounded tail each, within a byte budget for all): a subscription that starts within a tail it holds whole
// starts from it, live, without reading the store (a stream opened on a run that just started). A tail is used
// only while it provably ends at the newest event this process published for its thread (a table of the highest
// sequence number published per hash slot of thread ids, never forgotten: a collision only costs a store read)
// and while no other process has been seen committing since it was made (tail_external moves an epoch).
class EventHub {
 public:
  static constexpr size_t kTailEvents = 256;           // events kept of one thread (whole batches)
  static constexpr size_t kTailBytes = 1 << 20;        // all threads' tails, their JSON and run ids counted
  static constexpr size_t kTailBatchBytes = 64 << 10;  // a larger commit is not kept (its thread's tail is dropped)
  static constexpr size_t kTailThreads = 4096;         // threads with a tail, an emptied one too
  static constexpr size_t kHighSlots = 4096;

  // Attaches `sub`; returns the thread's tail when it holds every committed event after `after_seq` (it may hold
  // older ones too), nullopt when the store must be read.
  std::optional<std::vector<EventBatch>> attach(const std::string& thread_id,
                                                const std::shared_ptr<SubscriptionImpl>& sub, int64_t after_seq);
  void detach(const std::string& thread_id, const SubscriptionImpl* sub);
  // One commit's events, in sequence order: kept (the tail) and queued for the thread's subscribers as they are.
  void publish(const std::string& thread_id, EventBatch events);
  void publish(const std::string& thread_id, std::vector<StoredEvent> events) {
    publish(thread_id, std::make_shared<std::vector<StoredEvent>>(std::move(events)));
  }
  // Tells every subscription to read the store again (events another process committed).
  void poke_all();
  // The store's external version (Store::external_version) as last looked at: pokes every subscription when it
  // moved, or when the store cannot tell (-1; the hub then keeps no tails). The first look only remembers it.
  void tail_external(int64_t external_version);

  size_t tail_bytes() const;  // tests, stats
  size_t tails() const;       // threads with a tail (tests)

 private:
  struct Tail {
    std::deque<EventBatch> batches;  // consecutive sequence numbers, the newest last
    size_t events = 0;
    size_t bytes = 0;
    uint64_t epoch = 0;
    std::list<const std::string*>::iterator lru;
  };
  // Under mutex_. What they let go of goes to `dropped`, freed by the caller once the lock is released: the last
  // holder of a batch frees each of its events, and every commit of every thread waits for the hub's lock.
  void remember_locked(const std::string& thread_id, const EventBatch& batch, std::vector<EventBatch>& dropped);
  void drop_locked(Tail& t, std::vector<EventBatch>& dropped);
  static size_t slot(std::string_view thread_id);

  mutable std::mutex mutex_;
  std::optional<int64_t> seen_external_;  // under mutex_
  std::map<std::string, std::vector<std::weak_ptr<SubscriptionImpl>>, std::less<>> subs_;
  // The tails, all under mutex_: kept once something has subscribed, never for a store that cannot tell others'
  // commits.
  std::atomic<bool> caching_{false};  // written under mutex_; read before it too (whether to copy a batch)
  bool external_unknown_ = false;
  uint64_t epoch_ = 0;
  std::unordered_map<std::string, Tail> tails_;
  std::list<const std::string*> lru_;  // tails_'s keys, the most recently published first
  size_t tail_bytes_ = 0;
  std::vector<int64_t> high_ = std::vector<int64_t>(kHighSlots, 0);  // the highest seq published, per slot
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
  size_t drain(size_t max, const std::function<void(const StoredEvent&)>& take);  // Subscription::drain
  void close();
  bool closed() const;
  void push(const EventBatch& events);  // from EventHub::publish
  void poke();                          // from EventHub::poke_all: look at the store for events not pushed
  // Subscription::on_ready: called (under ready_mutex_) after every push, poke and close.
  void set_ready(std::function<void()> ready);

 private:
  void signal_ready();
  // Under the lock (which a read of the store releases meanwhile): the next event to hand out, now past it, its
  // batch held in `batch`; `own`: nobody else holds that batch (a page read from the store), so it may be moved
  // from. Null when there is none now (or the subscription is closed).
  StoredEvent* advance(std::unique_lock<std::mutex>& lock, EventBatch& batch, bool& own);
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
  EventQueue backlog_;  // read from the store, or the hub's tail at the start
  EventQueue live_;
};

}  // namespace v1
}  // namespace agentrt
