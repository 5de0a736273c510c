// The SQLite store's group commit (SqliteStore::commit_rows and the commits of a group: see below).
#include <sqlite3.h>

#include <algorithm>
#include <exception>
#include <vector>

#include "store/sqlite/connection.hpp"
#include "store/sqlite/statement.hpp"
#include "store/sqlite_store.hpp"
#include "util/futex.hpp"

namespace agentrt {
inline namespace v1 {

// A group commit: the thread that finds no commit under way commits its batch together with every batch queued
// meanwhile, in one transaction, each batch inside a savepoint of its own: a batch the store refuses (a conflict,
// a size limit) is rolled back alone and gets its error; the others commit. When the transaction itself is lost
// (an I/O error ends it, COMMIT fails), each batch of the group is committed again on its own, so that every
// batch ends as it would have ended alone. A batch alone (no other waiting) commits as before, without savepoints.
//
// A waiting thread sleeps on its own word (a futex), set and woken by the committing thread after it has let the
// queue's lock go: with the wake-ups under that lock (a system call each) every thread that came to queue its
// batch meanwhile waited for all of them, and for the committing thread's time slice when it was preempted there.
struct SqliteStore::Pending {
  static constexpr uint32_t kWaiting = 0, kDone = 1, kLead = 2;
  CommitBatch* batch;
  std::exception_ptr error;
  bool settled = false;                  // committed, or refused with `error` (under mutex_)
  std::atomic<uint32_t> told{kWaiting};  // done (`error` set), or handed the next commit by the one before
  void tell(uint32_t what) {
    std::atomic<uint32_t>& word = told;
    word.store(what, std::memory_order_release);
    futex_wake(word);  // the address only: the waiter may already be gone with it
  }
};

void SqliteStore::commit_rows(CommitBatch& b) {
  if (b.empty()) return;  // a layout took all there was (messages alone)
  Pending me{&b, nullptr, false};
  if (!options_.group_commit) {
    std::lock_guard<std::mutex> lock(mutex_);
    commit_alone(me);
    if (me.error) std::rethrow_exception(me.error);
    return;
  }
  std::unique_lock<std::mutex> q(queue_mutex_);
  queue_.push_back(&me);
  if (committing_) {
    q.unlock();
    uint32_t told = Pending::kWaiting;
    while ((told = me.told.load(std::memory_order_acquire)) == Pending::kWaiting) futex_wait(me.told, told);
    if (told == Pending::kDone) {
      if (me.error) std::rethrow_exception(me.error);
      return;
    }
    q.lock();
  }
  // This thread commits: its batch with those queued before and after it, then what queued meanwhile, group by
  // group, while it is running anyway (a thread woken to commit would leave the connection idle until it runs).
  committing_ = true;
  for (int round = 0;; ++round) {
    std::vector<Pending*> group;
    if (round == 0) {
      group.push_back(&me);
      queue_.erase(std::find(queue_.begin(), queue_.end(), &me));
    }
    const size_t more = std::min(queue_.size(), kMaxGroup - group.size());
    group.insert(group.end(), queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(more));
    queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(more));
    q.unlock();
    try {
      std::lock_guard<std::mutex> lock(mutex_);
      commit_group(group);
    } catch (...) {
      // Not from SQLite (each batch's outcome is caught there): out of memory. The rest of the group fails with it.
      for (auto* p : group)
        if (!p->settled) p->error = std::current_exception();
    }
    q.lock();
    Pending* next = nullptr;  // the next committing thread, when this one stops
    const bool last = queue_.empty();
    if (last)
      committing_ = false;
    else if (round + 1 == kMaxRounds)
      next = queue_.front();  // enough for this caller: the first batch still queued commits next
    q.unlock();
    for (auto* p : group)
      if (p != &me) p->tell(Pending::kDone);
    if (next) next->tell(Pending::kLead);
    if (last || next) break;
    q.lock();
  }
  if (me.error) std::rethrow_exception(me.error);
}

size_t SqliteStore::commits_waiting() {
  std::lock_guard<std::mutex> q(queue_mutex_);
  return queue_.size();
}

bool SqliteStore::commit_under_way() {
  std::lock_guard<std::mutex> q(queue_mutex_);
  return committing_;
}

void SqliteStore::commit_group(const std::vector<Pending*>& group) {
  if (group.size() > 1 && commit_together(group)) return;
  for (auto* p : group) {
    p->error = nullptr;
    commit_alone(*p);
  }
}

void SqliteStore::commit_alone(Pending& p) {
  try {
    begin_write();
    Tails written;
    const Tail tail = write_rows(*p.batch, written);
    end_write(true);
    if (tail.seq || tail.idx) written[p.batch->thread_id] = tail;
    remember_tails(written);
  } catch (...) {
    end_write(false);
    p.error = std::current_exception();
  }
  p.settled = true;
}

bool SqliteStore::commit_together(const std::vector<Pending*>& group) {
  try {
    begin_write();
  } catch (...) {
    end_write(false);
    return false;
  }
  Tails written;
  bool any = false;
  for (auto* p : group) {
    try {
      stmt("SAVEPOINT batch").run();
      const Tail tail = write_rows(*p->batch, written);
      stmt("RELEASE batch").run();
      if (tail.seq || tail.idx) written[p->batch->thread_id] = tail;
      any = true;
    } catch (...) {
      p->error = std::current_exception();
      // SQLite may have ended the whole transaction (an I/O error, a full disk): the group goes batch by batch.
      if (sqlite3_get_autocommit(db_->get())) return false;
      try {
        stmt("ROLLBACK TO batch").run();
        stmt("RELEASE batch").run();
      } catch (...) {
        end_write(false);
        return false;
      }
    }
  }
  try {
    if (any) {
      end_write(true);
    } else {
      end_write(false);  // every batch refused: nothing to commit
    }
  } catch (...) {
    end_write(false);
    return false;
  }
  remember_tails(written);
  for (auto* p : group) p->settled = true;
  return true;
}

}  // namespace v1
}  // namespace agentrt
