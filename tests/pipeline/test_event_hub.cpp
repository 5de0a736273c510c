// The event hub and its subscriptions: catching up with the store (a poke that comes while it reads is not lost),
// the tails that spare a new subscription its read, and drain(), which hands over the events the hub shares.
#include <doctest/doctest.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "pipeline/event_hub.hpp"
#include "store/sqlite_store.hpp"
#include "support/forwarding_store.hpp"
#include "support/runtime_fixture.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {

// The store, with a gate in events_after: once armed, the next read takes its rows, then waits for release()
// before answering (a read whose snapshot is older than what is committed meanwhile).
class GatedStore final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;

  void arm() {
    std::lock_guard<std::mutex> lock(m_);
    armed_ = true;
    entered_ = released_ = false;
  }
  void wait_entered() {
    std::unique_lock<std::mutex> lock(m_);
    REQUIRE(cv_.wait_for(lock, std::chrono::seconds(10), [&] { return entered_; }));
  }
  void release() {
    std::lock_guard<std::mutex> lock(m_);
    released_ = true;
    cv_.notify_all();
  }

  std::vector<StoredEvent> events_after(std::string_view thread_id, int64_t after_seq, size_t limit) override {
    auto rows = inner->events_after(thread_id, after_seq, limit);
    std::unique_lock<std::mutex> lock(m_);
    if (armed_) {
      armed_ = false;
      entered_ = true;
      cv_.notify_all();
      cv_.wait(lock, [&] { return released_; });
    }
    return rows;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool armed_ = false, entered_ = false, released_ = false;
};

// One event of another process's run on the thread (committed without this process's hub hearing of it).
void commit_event(Store& store, const std::string& thread, int n) {
  CommitBatch b;
  b.thread_id = thread;
  b.events.push_back(StoredEvent{0, "run_1", R"({"type":"CUSTOM","name":"n","value":)" + std::to_string(n) + "}"});
  store.commit(b);
}

// Counts the reads of events from the store.
class CountingStore final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  std::vector<StoredEvent> events_after(std::string_view thread_id, int64_t after_seq, size_t limit) override {
    ++reads;
    return inner->events_after(thread_id, after_seq, limit);
  }
  int reads = 0;
};

// Events values[i] committed as one batch (this process's: the caller publishes them, or not).
std::vector<StoredEvent> commit_events(Store& store, const std::string& thread, const std::vector<int>& values,
                                       size_t pad = 0) {
  CommitBatch b;
  b.thread_id = thread;
  for (int v : values)
    b.events.push_back(StoredEvent{
        0, "run_1",
        R"({"type":"CUSTOM","name":")" + std::string(pad, 'x') + R"(","value":)" + std::to_string(v) + "}"});
  store.commit(b);
  return b.events;
}

// What a new subscription after `after` hands out until it has nothing more: the events' values, in order.
std::vector<int> drain(Store& store, EventHub& hub, const std::string& thread, int64_t after) {
  auto sub = std::make_shared<SubscriptionImpl>(store, hub, thread, after);
  sub->start();
  std::vector<int> out;
  int64_t last = after;
  while (auto e = sub->next(std::chrono::milliseconds(0))) {
    CHECK(e->seq == last + 1);  // in order, none twice, none left out
    last = e->seq;
    auto at = e->json.find("\"value\":");
    out.push_back(std::stoi(e->json.substr(at + 8)));
  }
  sub->close();
  return out;
}

// A hub that keeps tails: the store's version looked at once, and something subscribed.
void start_tails(EventHub& hub, Store& store) {
  hub.tail_external(7);
  auto first = std::make_shared<SubscriptionImpl>(store, hub, "someone-else", 0);
  first->start();
}

}  // namespace

TEST_CASE("event hub: a poke that comes while a subscription reads the store is not lost") {
  // Another process commits event 2 after this subscription's read began and before it ended; the poke that
  // announces it arrives during the read. The subscription must read again, not take the read's end for
  // "caught up" (it waited for a poke that had already come: 20 s, then nothing).
  TempDir dir;
  auto inner = std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("hub.db")});
  GatedStore store(inner);
  EventHub hub;
  commit_event(*inner, "t", 1);
  auto sub = std::make_shared<SubscriptionImpl>(store, hub, "t", 0);
  sub->start();

  std::optional<StoredEvent> first;
  store.arm();
  std::thread reader([&] { first = sub->next(std::chrono::seconds(10)); });
  store.wait_entered();  // its read has event 1 only
  commit_event(*inner, "t", 2);
  sub->poke();
  store.release();
  reader.join();
  REQUIRE(first);
  CHECK(first->seq == 1);
  auto second = sub->next(std::chrono::seconds(5));
  REQUIRE(second);
  CHECK(second->seq == 2);
  CHECK(second->json.find("\"value\":2") != std::string::npos);
  sub->close();
}

TEST_CASE("event hub: a subscription that starts within the hub's tail of a thread reads nothing from the store") {
  TempDir dir;
  auto inner = std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("hub.db")});
  CountingStore store(inner);
  EventHub hub;
  start_tails(hub, store);
  hub.publish("t", commit_events(*inner, "t", {1, 2, 3}));
  hub.publish("t", commit_events(*inner, "t", {4, 5}));
  const int before = store.reads;
  CHECK(drain(store, hub, "t", 0) == std::vector<int>{1, 2, 3, 4, 5});
  CHECK(drain(store, hub, "t", 3) == std::vector<int>{4, 5});
  CHECK(drain(store, hub, "t", 5).empty());
  CHECK(store.reads == before);

  // Live from there: the next commit comes as a push, still without a read.
  auto sub = std::make_shared<SubscriptionImpl>(store, hub, "t", 4);
  sub->start();
  auto e = sub->next(std::chrono::milliseconds(0));
  REQUIRE(e);
  CHECK(e->seq == 5);
  CHECK_FALSE(sub->next(std::chrono::milliseconds(0)));
  hub.publish("t", commit_events(*inner, "t", {6}));
  e = sub->next(std::chrono::milliseconds(0));
  REQUIRE(e);
  CHECK(e->seq == 6);
  CHECK(store.reads == before);
  sub->close();

  // Before the tail's first event: the store is read, and gives every event once.
  commit_events(*inner, "u", {1});  // committed before this hub heard of the thread
  hub.publish("u", commit_events(*inner, "u", {2}));
  const int reads = store.reads;
  CHECK(drain(store, hub, "u", 0) == std::vector<int>{1, 2});
  CHECK(store.reads > reads);
}

TEST_CASE("event hub: a tail another process may have outdated, or that misses a batch published first, is not used") {
  TempDir dir;
  auto inner = std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("hub.db")});
  CountingStore store(inner);
  EventHub hub;
  start_tails(hub, store);

  SUBCASE("another process committed (the store's version moved)") {
    hub.publish("t", commit_events(*inner, "t", {1, 2}));
    commit_events(*inner, "t", {3});  // not published here
    hub.tail_external(8);
    const int reads = store.reads;
    CHECK(drain(store, hub, "t", 0) == std::vector<int>{1, 2, 3});
    CHECK(drain(store, hub, "t", 2) == std::vector<int>{3});
    CHECK(store.reads > reads);
  }
  SUBCASE("two commits of one thread published in the other order") {
    auto first = commit_events(*inner, "t", {1, 2});
    auto second = commit_events(*inner, "t", {3});
    hub.publish("t", second);
    hub.publish("t", first);  // the tail now ends at 2, but 3 was published: not the thread's end
    const int reads = store.reads;
    CHECK(drain(store, hub, "t", 0) == std::vector<int>{1, 2, 3});
    CHECK(drain(store, hub, "t", 2) == std::vector<int>{3});
    CHECK(store.reads > reads);
  }
  SUBCASE("the later of two reordered commits was published before the hub kept tails") {
    EventHub fresh;
    fresh.tail_external(7);
    auto first = commit_events(*inner, "v", {1, 2});
    auto second = commit_events(*inner, "v", {3});
    fresh.publish("v", second);  // nothing subscribed yet: no tail kept, but its end is remembered
    auto someone = std::make_shared<SubscriptionImpl>(store, fresh, "someone-else", 0);
    someone->start();
    fresh.publish("v", first);
    CHECK(drain(store, fresh, "v", 0) == std::vector<int>{1, 2, 3});
  }
  SUBCASE("a store that cannot tell other processes' commits: no tail at all") {
    hub.tail_external(-1);
    hub.publish("t", commit_events(*inner, "t", {1}));
    CHECK(hub.tail_bytes() == 0);
    const int reads = store.reads;
    CHECK(drain(store, hub, "t", 0) == std::vector<int>{1});
    CHECK(store.reads > reads);
  }
}

TEST_CASE("event hub: the tails stay within their budget; a large commit is not kept") {
  TempDir dir;
  auto inner = std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("hub.db")});
  CountingStore store(inner);
  EventHub hub;
  start_tails(hub, store);
  for (int i = 0; i < 400; ++i) {
    const std::string thread = "t" + std::to_string(i);
    hub.publish(thread, commit_events(*inner, thread, {1, 2, 3, 4}, 1000));
    CHECK(hub.tail_bytes() <= EventHub::kTailBytes);
  }
  CHECK(hub.tail_bytes() > EventHub::kTailBytes / 2);
  // The oldest threads' tails went: read from the store, whole; the newest still served from memory.
  int reads = store.reads;
  CHECK(drain(store, hub, "t0", 0) == std::vector<int>{1, 2, 3, 4});
  CHECK(store.reads > reads);
  reads = store.reads;
  CHECK(drain(store, hub, "t399", 0) == std::vector<int>{1, 2, 3, 4});
  CHECK(store.reads == reads);

  // One thread keeps at most kTailEvents events, whole batches.
  for (int i = 0; i < 100; ++i) hub.publish("long", commit_events(*inner, "long", {3 * i + 1, 3 * i + 2, 3 * i + 3}));
  reads = store.reads;
  CHECK(drain(store, hub, "long", 300 - 240).size() == 240);
  CHECK(store.reads == reads);
  CHECK(drain(store, hub, "long", 0).size() == 300);
  CHECK(store.reads > reads);

  // However many threads: at most kTailThreads of them have a tail, emptied ones (a large commit's) included.
  for (size_t i = 0; i < EventHub::kTailThreads + 100; ++i) {
    const std::string thread = "many" + std::to_string(i);
    hub.publish(thread, {StoredEvent{1, "run_1", std::string(EventHub::kTailBatchBytes + 1, 'x')}});
  }
  CHECK(hub.tails() == EventHub::kTailThreads);

  // A commit larger than kTailBatchBytes is not copied: its thread reads the store.
  hub.publish("big", commit_events(*inner, "big", {1, 2}, EventHub::kTailBatchBytes / 2));
  reads = store.reads;
  CHECK(drain(store, hub, "big", 0) == std::vector<int>{1, 2});
  CHECK(store.reads > reads);
}

TEST_CASE("event hub: drain hands over what next() would, in order, without a copy of the events the hub shares") {
  TempDir dir;
  SqliteStore store(SqliteStoreOptions{dir.file("hub.db")});
  EventHub hub;
  start_tails(hub, store);
  // Three events of a run and one of the log's own (no run: never handed to clients), committed and published.
  CommitBatch b;
  b.thread_id = "t";
  for (int v : {1, 2, 3, 4})
    b.events.push_back(StoredEvent{0, v == 2 ? "" : "run_1", R"({"type":"CUSTOM","value":)" + std::to_string(v) + "}"});
  store.commit(b);
  hub.publish("t", b.events);

  auto open = [&] {
    auto s = std::make_shared<SubscriptionImpl>(store, hub, "t", 0);
    s->start();
    return s;
  };
  auto a = open(), c = open();
  std::vector<const StoredEvent*> seen_a, seen_c;
  std::vector<int64_t> seqs;
  CHECK(a->drain(10, [&](const StoredEvent& e) {
    seen_a.push_back(&e);
    seqs.push_back(e.seq);
  }) == 3);
  CHECK(seqs == std::vector<int64_t>{1, 3, 4});
  CHECK(c->drain(2, [&](const StoredEvent& e) { seen_c.push_back(&e); }) == 2);  // at most `max`
  CHECK(c->drain(10, [&](const StoredEvent& e) { seen_c.push_back(&e); }) == 1);
  CHECK(seen_c == seen_a);  // the same events, not copies: both subscriptions read the hub's one batch
  CHECK(a->drain(10, [](const StoredEvent&) { FAIL("nothing new"); }) == 0);

  // Live: a later commit's events come the same way, and next() still hands over copies of them.
  auto more = commit_events(store, "t", {5, 6});
  hub.publish("t", more);
  seqs.clear();
  CHECK(a->drain(10, [&](const StoredEvent& e) { seqs.push_back(e.seq); }) == 2);
  CHECK(seqs == std::vector<int64_t>{5, 6});
  auto e5 = c->next(std::chrono::milliseconds(0));
  REQUIRE(e5);
  CHECK(e5->seq == 5);
  CHECK(e5->json.find("\"value\":5") != std::string::npos);
  CHECK(c->drain(10, [&](const StoredEvent& e) { CHECK(e.seq == 6); }) == 1);
  a->close();
  CHECK(a->drain(10, [](const StoredEvent&) { FAIL("closed"); }) == 0);
}

namespace {

// A store whose reads of events fail while `failing` is set.
class FailingReads final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  std::vector<StoredEvent> events_after(std::string_view thread_id, int64_t after_seq, size_t limit) override {
    if (failing) throw Error(ErrorCode::io, "events_after: disk I/O error");
    auto rows = inner->events_after(thread_id, after_seq, limit);
    if (fail_after_this) failing = true;
    return rows;
  }
  bool failing = false;
  bool fail_after_this = false;
};

}  // namespace

TEST_CASE("event hub: a drain that fails reading the store hands over what it read first; the next one throws") {
  TempDir dir;
  auto inner = std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("hub.db")});
  FailingReads store(inner);
  EventHub hub;
  std::vector<int> values(515);
  for (int i = 0; i < 515; ++i) values[static_cast<size_t>(i)] = i + 1;
  commit_events(*inner, "t", values);  // not published: the subscription reads the store, 512 a page
  auto sub = std::make_shared<SubscriptionImpl>(store, hub, "t", 0);
  sub->start();
  store.fail_after_this = true;  // the first page is read, the second read fails
  int64_t last = 0;
  CHECK(sub->drain(1000, [&](const StoredEvent& e) { CHECK(e.seq == ++last); }) == 512);
  CHECK_THROWS_WITH_AS(sub->drain(1000, [](const StoredEvent&) { FAIL("nothing read"); }),
                       "events_after: disk I/O error", Error);
  store.failing = store.fail_after_this = false;  // the disk is back: it goes on from where it was
  CHECK(sub->drain(1000, [&](const StoredEvent& e) { CHECK(e.seq == ++last); }) == 3);
  CHECK(last == 515);
}

TEST_CASE("Subscription::drain of a host's own subscription: next(0) until nothing, at most max, failures as next's") {
  struct Listed final : Subscription {
    std::vector<StoredEvent> events;
    size_t at = 0;
    size_t fail_at = SIZE_MAX;
    std::optional<StoredEvent> next(std::chrono::milliseconds) override {
      if (at == fail_at) throw Error(ErrorCode::io, "cannot read");
      if (at == events.size()) return std::nullopt;
      return events[at++];
    }
    void close() override {}
    bool closed() const override { return false; }
    void on_ready(std::function<void()>) override {}
  } s;
  for (int64_t i = 1; i <= 5; ++i) s.events.push_back(StoredEvent{i, "run_1", "{}"});
  std::vector<int64_t> seqs;
  auto take = [&](const StoredEvent& e) { seqs.push_back(e.seq); };
  CHECK(s.drain(2, take) == 2);
  s.fail_at = 3;
  CHECK(s.drain(10, take) == 1);  // the failure after one event: that one handed over, no throw
  CHECK_THROWS_WITH_AS(s.drain(10, take), "cannot read", Error);
  s.fail_at = SIZE_MAX;
  CHECK(s.drain(10, take) == 2);
  CHECK(seqs == std::vector<int64_t>{1, 2, 3, 4, 5});
  CHECK(s.drain(10, take) == 0);
}
