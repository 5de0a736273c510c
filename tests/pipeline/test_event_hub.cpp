// A subscription's catching up with the store: a poke that comes while it reads is not lost.
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
