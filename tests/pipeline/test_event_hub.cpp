// A subscription's catching up with the store: a poke that comes while it reads is not lost.
#include <doctest/doctest.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "pipeline/event_hub.hpp"
#include "store/sqlite_store.hpp"
#include "support/runtime_fixture.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {

// The store, with a gate in events_after: once armed, the next read takes its rows, then waits for release()
// before answering (a read whose snapshot is older than what is committed meanwhile).
class GatedStore final : public Store {
 public:
  explicit GatedStore(std::shared_ptr<Store> inner) : in_(std::move(inner)) {}

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
    auto rows = in_->events_after(thread_id, after_seq, limit);
    std::unique_lock<std::mutex> lock(m_);
    if (armed_) {
      armed_ = false;
      entered_ = true;
      cv_.notify_all();
      cv_.wait(lock, [&] { return released_; });
    }
    return rows;
  }

  void commit(CommitBatch& b) override { in_->commit(b); }
  std::optional<ThreadRecord> get_thread(std::string_view t) override { return in_->get_thread(t); }
  std::vector<ThreadRecord> list_threads(std::string_view u, bool d) override { return in_->list_threads(u, d); }
  void set_thread_title(std::string_view t, std::string_view title) override { in_->set_thread_title(t, title); }
  std::optional<std::string> thread_state(std::string_view t) override { return in_->thread_state(t); }
  void soft_delete_thread(std::string_view t) override { in_->soft_delete_thread(t); }
  std::optional<TurnRecord> get_turn(std::string_view t) override { return in_->get_turn(t); }
  std::optional<TurnRecord> find_turn_by_client_message(std::string_view t, std::string_view c) override {
    return in_->find_turn_by_client_message(t, c);
  }
  std::optional<TurnRecord> active_turn(std::string_view t) override { return in_->active_turn(t); }
  std::optional<TurnRecord> last_turn(std::string_view t) override { return in_->last_turn(t); }
  std::vector<TurnRecord> turns_in_status(TurnStatus s) override { return in_->turns_in_status(s); }
  std::vector<MessageRecord> messages(std::string_view t) override { return in_->messages(t); }
  std::vector<LedgerEntry> ledger(std::string_view t) override { return in_->ledger(t); }
  StoredSpend spend(std::string_view t, std::string_view u, std::string_view e) override { return in_->spend(t, u, e); }
  std::optional<ApprovalRecord> get_approval(std::string_view a) override { return in_->get_approval(a); }
  std::optional<JobRecord> get_job(std::string_view j) override { return in_->get_job(j); }
  std::vector<JobRecord> thread_jobs(std::string_view t) override { return in_->thread_jobs(t); }
  std::vector<JobRecord> jobs_due(int64_t now) override { return in_->jobs_due(now); }
  void heartbeat(std::string_view i, int64_t now) override { in_->heartbeat(i, now); }
  void remove_instance(std::string_view i) override { in_->remove_instance(i); }
  std::optional<int64_t> instance_heartbeat(std::string_view i) override { return in_->instance_heartbeat(i); }
  int64_t write_transactions() const override { return in_->write_transactions(); }

 private:
  std::shared_ptr<Store> in_;
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
