// Test support: a Store that hands every call to another, for tests that change one method of a real store
// (fail a commit, hold a read open).
#pragma once

#include <memory>

#include "agentrt/storage.hpp"

namespace agentrt::testing {

class ForwardingStore : public Store {
 public:
  explicit ForwardingStore(std::shared_ptr<Store> to) : inner(std::move(to)) {}

  void commit(CommitBatch& b) override { inner->commit(b); }
  std::optional<ThreadRecord> get_thread(std::string_view t) override { return inner->get_thread(t); }
  std::vector<ThreadRecord> list_threads(std::string_view u, bool d) override { return inner->list_threads(u, d); }
  void set_thread_title(std::string_view t, std::string_view ti) override { inner->set_thread_title(t, ti); }
  std::optional<std::string> thread_state(std::string_view t) override { return inner->thread_state(t); }
  void soft_delete_thread(std::string_view t) override { inner->soft_delete_thread(t); }
  std::optional<TurnRecord> get_turn(std::string_view t) override { return inner->get_turn(t); }
  std::optional<TurnRecord> find_turn_by_client_message(std::string_view t, std::string_view c) override {
    return inner->find_turn_by_client_message(t, c);
  }
  std::optional<TurnRecord> active_turn(std::string_view t) override { return inner->active_turn(t); }
  std::optional<TurnRecord> last_turn(std::string_view t) override { return inner->last_turn(t); }
  std::vector<TurnRecord> turns_in_status(TurnStatus s) override { return inner->turns_in_status(s); }
  std::vector<MessageRecord> messages(std::string_view t) override { return inner->messages(t); }
  std::vector<StoredEvent> events_after(std::string_view t, int64_t a, size_t l) override {
    return inner->events_after(t, a, l);
  }
  std::vector<LedgerEntry> ledger(std::string_view t) override { return inner->ledger(t); }
  StoredSpend spend(std::string_view th, std::string_view u, std::string_view x) override {
    return inner->spend(th, u, x);
  }
  std::optional<ApprovalRecord> get_approval(std::string_view a) override { return inner->get_approval(a); }
  std::optional<JobRecord> get_job(std::string_view j) override { return inner->get_job(j); }
  std::vector<JobRecord> thread_jobs(std::string_view t) override { return inner->thread_jobs(t); }
  std::vector<JobRecord> jobs_due(int64_t now) override { return inner->jobs_due(now); }
  void heartbeat(std::string_view i, int64_t n) override { inner->heartbeat(i, n); }
  void remove_instance(std::string_view i) override { inner->remove_instance(i); }
  std::optional<int64_t> instance_heartbeat(std::string_view i) override { return inner->instance_heartbeat(i); }
  int64_t write_transactions() const override { return inner->write_transactions(); }

  std::shared_ptr<Store> inner;
};

}  // namespace agentrt::testing
