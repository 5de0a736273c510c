// The SQLite store's group commit: batches handed in while a commit is under way are committed together, in one
// transaction, and each ends as it would have ended alone (committed, or refused without a trace).
#include <doctest/doctest.h>
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "store/sqlite_store.hpp"
#include "support/fault_vfs.hpp"
#include "support/runtime_fixture.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {

// Waits (without a fixed sleep) until `ready` holds; fails the test after a generous minute.
void wait_until(const std::function<bool()>& ready) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while (!ready()) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::yield();
  }
}

CommitBatch appended(const std::string& thread, int events) {
  CommitBatch c;
  c.thread_id = thread;
  for (int i = 0; i < events; ++i) {
    c.events.push_back(StoredEvent{0, "run_1", R"({"type":"CUSTOM","name":"x","value":1})"});
    Message m;
    m.role = Role::user;
    m.content = "m";
    c.messages.push_back(MessageRecord{thread, 0, "turn_1", "run_1", m});
  }
  return c;
}

// Holds the database's write lock from a connection of its own until release().
struct WriteLockHolder {
  sqlite3* db = nullptr;
  explicit WriteLockHolder(const std::string& path) {
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  }
  void release() {
    if (!db) return;
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(db);
    db = nullptr;
  }
  ~WriteLockHolder() { release(); }
};

// Commits batches[0] first and, once it waits for the write lock, the others behind it; then lets the lock go.
// Returns what each commit threw (null: committed).
std::vector<std::exception_ptr> commit_behind_a_lock(SqliteStore& s, const std::string& path,
                                                     std::vector<CommitBatch>& batches,
                                                     const std::function<void()>& before_release = {}) {
  WriteLockHolder lock(path);
  std::vector<std::exception_ptr> errors(batches.size());
  std::vector<std::thread> threads;
  auto commit = [&](size_t i) {
    threads.emplace_back([&, i] {
      try {
        s.commit(batches[i]);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  };
  commit(0);
  wait_until([&] { return s.commit_under_way() && s.commits_waiting() == 0; });  // the first one's own commit
  for (size_t i = 1; i < batches.size(); ++i) commit(i);
  wait_until([&] { return s.commits_waiting() == batches.size() - 1; });
  if (before_release) before_release();
  lock.release();
  for (auto& t : threads) t.join();
  return errors;
}

// A store's options on `path` for these tests: writers wait long for the lock; `faulty`: through the FaultVfs.
SqliteStoreOptions options_for(const std::string& path, bool faulty) {
  SqliteStoreOptions o{path};
  o.busy_timeout_ms = 60000;
  if (faulty) o.vfs = FaultVfs::kName;
  return o;
}

int error_code(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    return static_cast<int>(err.code());
  } catch (...) {
    return -1;
  }
}

}  // namespace

TEST_CASE("batches that wait for a commit under way are committed together, each as it would be alone") {
  TempDir dir;
  SqliteStore s(options_for(dir.file("g.db"), false));
  std::vector<CommitBatch> batches;
  for (int i = 0; i < 8; ++i) batches.push_back(appended("t" + std::to_string(i % 3), 1 + i % 2));
  // Batch 5 is refused after it wrote a row (its thread's state, then an event that is not one line): its
  // savepoint is rolled back alone.
  batches[5].thread_state = R"({"kept":false})";
  batches[5].events[0].json = "two\nlines";
  const int64_t before = s.write_transactions();
  auto errors = commit_behind_a_lock(s, dir.file("g.db"), batches);
  // The first batch alone, then the seven that queued behind it in one transaction.
  CHECK(s.write_transactions() - before == 2);
  for (size_t i = 0; i < batches.size(); ++i) CHECK_MESSAGE((errors[i] != nullptr) == (i == 5), i);
  CHECK(error_code(errors[5]) == static_cast<int>(ErrorCode::invalid_argument));
  CHECK_FALSE(s.thread_state(batches[5].thread_id).has_value());
  // Every thread's events and messages consecutive from the start, and only the committed batches' ones.
  for (int t = 0; t < 3; ++t) {
    const std::string thread = "t" + std::to_string(t);
    size_t expected = 0;
    for (size_t i = 0; i < batches.size(); ++i)
      if (i != 5 && batches[i].thread_id == thread) expected += batches[i].events.size();
    auto evs = s.events_after(thread, 0, 100);
    auto msgs = s.messages(thread);
    REQUIRE(evs.size() == expected);
    REQUIRE(msgs.size() == expected);
    for (size_t i = 0; i < evs.size(); ++i) {
      CHECK(evs[i].seq == static_cast<int64_t>(i + 1));
      CHECK(msgs[i].index == static_cast<int64_t>(i));
    }
  }
  // A committed batch carries the seqs it was given, as a commit alone would write them back.
  for (size_t i = 0; i < batches.size(); ++i)
    if (i != 5) CHECK(batches[i].events.back().seq > 0);
  // The next commit goes on from the tails the group left.
  auto next = appended("t0", 1);
  s.commit(next);
  CHECK(next.events[0].seq == static_cast<int64_t>(s.events_after("t0", 0, 100).size()));
}

TEST_CASE(
    "a group whose transaction fails commits batch by batch: each fails as it would alone, nothing is half stored") {
  auto& vfs = FaultVfs::instance();
  vfs.reset();
  TempDir dir;
  std::vector<CommitBatch> batches;
  {
    SqliteStore s(options_for(dir.file("f.db"), true));
    for (int i = 0; i < 5; ++i) batches.push_back(appended("t" + std::to_string(i % 2), 2));
    // The disk fills while they wait: every commit fails, each with its own error.
    auto errors = commit_behind_a_lock(s, dir.file("f.db"), batches, [&] { vfs.set_disk_full(true); });
    for (size_t i = 0; i < batches.size(); ++i) {
      REQUIRE_MESSAGE(errors[i] != nullptr, i);
      CHECK(error_code(errors[i]) == static_cast<int>(ErrorCode::io));
    }
    vfs.set_disk_full(false);
    CHECK(s.events_after("t0", 0, 100).empty());
    CHECK(s.messages("t1").empty());
    // Space again: the same batches commit, from the first seq.
    for (auto& b : batches) s.commit(b);
    CHECK(s.events_after("t0", 0, 100).size() == 6);
    CHECK(s.events_after("t1", 0, 100).back().seq == 4);
  }
  vfs.reset();
}

TEST_CASE("a group whose commit fails once is committed again batch by batch, and every batch lands") {
  auto& vfs = FaultVfs::instance();
  vfs.reset();
  TempDir dir;
  {
    SqliteStore s(options_for(dir.file("once.db"), true));
    std::vector<CommitBatch> batches;
    // The first commit (alone) is refused before it writes anything; the four behind it form the group.
    batches.push_back(appended("t0", 1));
    batches[0].events[0].json = "two\nlines";
    for (int i = 1; i < 5; ++i) batches.push_back(appended("t" + std::to_string(i % 2), 2));
    const int64_t before = s.write_transactions();
    // The group's first write (its commit) fails, once.
    auto errors = commit_behind_a_lock(s, dir.file("once.db"), batches,
                                       [&] { vfs.fail_nth(IoKind::write, 1, SQLITE_IOERR_WRITE); });
    CHECK(vfs.fault_fired());
    CHECK(error_code(errors[0]) == static_cast<int>(ErrorCode::invalid_argument));
    for (size_t i = 1; i < batches.size(); ++i) CHECK_MESSAGE(errors[i] == nullptr, i);
    CHECK(s.write_transactions() - before == 4);  // the lost group's batches, one transaction each
    for (const char* thread : {"t0", "t1"}) {
      auto evs = s.events_after(thread, 0, 100);
      REQUIRE(evs.size() == 4);
      for (size_t i = 0; i < evs.size(); ++i) CHECK(evs[i].seq == static_cast<int64_t>(i + 1));
    }
  }
  vfs.reset();
}

TEST_CASE("a committing thread hands the queue over after its rounds, and every waiting batch is committed") {
  TempDir dir;
  SqliteStore s(options_for(dir.file("many.db"), false));
  // One batch alone, then more than the first thread's remaining rounds take: the rest are committed by the first
  // batch still waiting, which it hands the queue to.
  const size_t behind = SqliteStore::kMaxGroup * (SqliteStore::kMaxRounds - 1) + SqliteStore::kMaxGroup + 1;
  std::vector<CommitBatch> batches;
  for (size_t i = 0; i <= behind; ++i) batches.push_back(appended("t" + std::to_string(i % 7), 1));
  const int64_t before = s.write_transactions();
  auto errors = commit_behind_a_lock(s, dir.file("many.db"), batches);
  for (size_t i = 0; i < batches.size(); ++i) CHECK_MESSAGE(errors[i] == nullptr, i);
  // The first thread: its own, then kMaxRounds - 1 full groups; the next: one full group and the last batch.
  CHECK(s.write_transactions() - before == 1 + (SqliteStore::kMaxRounds - 1) + 2);
  CHECK_FALSE(s.commit_under_way());
  size_t events = 0;
  for (int t = 0; t < 7; ++t) {
    auto evs = s.events_after("t" + std::to_string(t), 0, 1000);
    for (size_t i = 0; i < evs.size(); ++i) CHECK(evs[i].seq == static_cast<int64_t>(i + 1));
    events += evs.size();
  }
  CHECK(events == batches.size());
}

TEST_CASE("reads do not queue behind a commit: while one waits for the write lock, reads answer from a reader") {
  TempDir dir;
  const std::string path = dir.file("r.db");
  SqliteStore s(options_for(path, false));
  auto first = appended("t", 2);
  s.commit(first);
  CHECK(s.readers_open() == 1);  // one from the start
  CHECK(s.reader_reads() == 0);  // nothing held the store's own connection yet
  // Twice: each time the reader is an idle one, opened before a commit that it must now see.
  for (size_t committed : {size_t{2}, size_t{5}}) {
    const int64_t on_readers = s.reader_reads();
    CAPTURE(committed);
    WriteLockHolder lock(path);
    auto next = appended("t", 3);
    std::thread committer([&] { s.commit(next); });
    wait_until([&] { return s.commit_under_way(); });
    // Reads until one has run on a reader (the first may come before the commit takes the store's connection);
    // each sees what was committed before it began, not the batch that waits.
    auto reads = std::async(std::launch::async, [&] {
      for (;;) {
        auto evs = s.events_after("t", 0, 100);
        auto msgs = s.messages("t");
        auto turn = s.get_turn("turn_none");
        if (evs.size() != committed || msgs.size() != committed || turn) return false;
        if (s.reader_reads() > on_readers) return true;
      }
    });
    const bool answered = reads.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
    lock.release();  // the commit goes on; a read that waited for it returns now
    committer.join();
    CHECK_MESSAGE(answered, "a read waited for the commit");
    CHECK(reads.get());
    CHECK(s.readers_open() == 1);
  }
  CHECK(s.messages("t").size() == 8);
  CHECK(s.events_after("t", 0, 100).size() == 8);
  // A database in memory has no readers: a connection of its own would be another database.
  SqliteStore memory(SqliteStoreOptions{":memory:"});
  CHECK(memory.readers_open() == 0);
}
