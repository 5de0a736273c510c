// SqliteStore on a real file: what is committed is in the file before anyone can see it, a failed write fails
// the commit and leaves nothing of it, a killed process loses no commit it reported done.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "store/sqlite/wal_buffer.hpp"
#include "store/sqlite_store.hpp"
#include "support/fault_vfs.hpp"
#include "support/runtime_fixture.hpp"
#include "support/sqlite_text.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {

constexpr int64_t kFrameBytes = 4096 + 24;  // a WAL frame of the default page size

// `n` messages of about `bytes` bytes each, their text numbered so that a mix-up shows.
CommitBatch messages_batch(const std::string& thread, int n, size_t bytes, char fill = 'x') {
  CommitBatch b;
  b.thread_id = thread;
  for (int i = 0; i < n; ++i) {
    Message m;
    m.role = Role::user;
    m.content = "m" + std::to_string(i) + ":" + std::string(bytes, fill);
    b.messages.push_back(MessageRecord{thread, 0, "turn_1", "run_1", m});
  }
  return b;
}

int64_t wal_bytes(const std::string& path) {
  std::error_code ec;
  auto n = std::filesystem::file_size(path + "-wal", ec);
  return ec ? 0 : static_cast<int64_t>(n);
}

// How many messages a thread's rows hold (a row holds one run's messages of a commit: its rowid's offset in the
// thread's span is its last message's index, `idx` its first's), followed by the thread's id as an SQL literal.
#define AGENTRT_MESSAGES_OF "SELECT coalesce(sum(id % 16777216 - idx + 1), 0) FROM messages WHERE thread_id="

// A connection of SQLite's default VFS, not the store's: what another program on the same file sees.
struct PlainDb {
  sqlite3* db = nullptr;
  explicit PlainDb(const std::string& path, int flags = SQLITE_OPEN_READWRITE) {
    REQUIRE(sqlite3_open_v2(path.c_str(), &db, flags, nullptr) == SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
  }
  ~PlainDb() { sqlite3_close_v2(db); }
  PlainDb(const PlainDb&) = delete;
  PlainDb& operator=(const PlainDb&) = delete;
  void exec(const std::string& sql) { sqlite_exec(db, sql); }
  std::string text(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK);
    std::string out;
    // The column's bytes, all of them (a packed message's hold zero bytes).
    if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_blob(s, 0))
      out.assign(static_cast<const char*>(sqlite3_column_blob(s, 0)), static_cast<size_t>(sqlite3_column_bytes(s, 0)));
    sqlite3_finalize(s);
    return out;
  }
  int64_t integer(const std::string& sql) { return std::stoll(text(sql)); }
};

// Runs fn in a forked child and returns its exit status (what fn returned), or -1 if it did not exit. The
// child must not use the parent's connections to the file: open none before this.
int in_child(const std::function<int()>& fn) {
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int rc = 99;
    try {
      rc = fn();
    } catch (const std::exception& e) {
      fprintf(stderr, "child: %s\n", e.what());
      rc = 98;
    }
    _exit(rc);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("every commit is visible at once to a plain connection and to a second store on the file") {
  TempDir dir;
  const std::string path = dir.file("seen.db");
  SqliteStore a(SqliteStoreOptions{path});
  SqliteStore b(SqliteStoreOptions{path});
  PlainDb plain(path);
  for (int i = 0; i < 60; ++i) {
    auto batch =
        messages_batch("v", 1 + i % 3, static_cast<size_t>(200 + (i % 7) * 1500), static_cast<char>('a' + i % 26));
    batch.events.push_back(
        StoredEvent{0, "run_1", R"({"type":"CUSTOM","name":"n","value":)" + std::to_string(i) + "}"});
    a.commit(batch);
    const auto last = batch.messages.back();
    auto seen = b.messages("v");
    REQUIRE(!seen.empty());
    CHECK(seen.back().index == last.index);
    CHECK(seen.back().message.content == last.message.content);
    CHECK(b.events_after("v", 0, 1000).size() == static_cast<size_t>(i + 1));
    CHECK(plain.integer(AGENTRT_MESSAGES_OF "'v'") == last.index + 1);
    CHECK(plain.integer("SELECT max(last_seq) FROM events WHERE thread_id='v'") == i + 1);
  }
  CHECK(plain.text("PRAGMA integrity_check") == "ok");
}

TEST_CASE("a process that exits without closing leaves every commit it made readable (WAL recovery)") {
  TempDir dir;
  const std::string path = dir.file("exit.db");
  int status = in_child([&] {
    auto s = std::make_unique<SqliteStore>(SqliteStoreOptions{path});
    for (int i = 0; i < 25; ++i) {
      auto b = messages_batch("e", 2, 2500, static_cast<char>('a' + i));
      s->commit(b);
    }
    _exit(0);  // no close: no checkpoint, the WAL and its index stay as the commits left them
    return 1;
  });
  REQUIRE(status == 0);
  CHECK(wal_bytes(path) > 25 * kFrameBytes);  // the commits are in the WAL only
  PlainDb plain(path);                        // the first connection recovers the WAL index from the WAL
  CHECK(plain.integer(AGENTRT_MESSAGES_OF "'e'") == 50);
  CHECK(plain.text("PRAGMA integrity_check") == "ok");
  SqliteStore s(SqliteStoreOptions{path});
  auto got = s.messages("e");
  REQUIRE(got.size() == 50);
  CHECK(got[49].message.content == "m1:" + std::string(2500, static_cast<char>('a' + 24)));
}

TEST_CASE("a process killed in the middle of its commits loses none that it reported done") {
  TempDir dir;
  const std::string path = dir.file("killed.db");
  int64_t reported_total = 0;
  for (int round = 0; round < 3; ++round) {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      close(fds[0]);
      try {
        SqliteStore s(SqliteStoreOptions{path});
        for (int i = 0;; ++i) {
          auto b = messages_batch("k", 1, static_cast<size_t>(500 + (i % 5) * 3000), static_cast<char>('a' + i % 26));
          b.events.push_back(StoredEvent{0, "run_1", R"({"type":"CUSTOM","name":"c","value":1})"});
          b.events.push_back(StoredEvent{0, "run_2", R"({"type":"CUSTOM","name":"c","value":2})"});
          s.commit(b);
          int64_t index = b.messages[0].index;
          if (write(fds[1], &index, sizeof index) != static_cast<ssize_t>(sizeof index)) _exit(3);
        }
      } catch (const std::exception& e) {
        fprintf(stderr, "child: %s\n", e.what());
      }
      _exit(2);
    }
    close(fds[1]);
    int64_t index = -1, last = -1;
    for (int got = 0; got < 60 + 40 * round && read(fds[0], &index, sizeof index) == sizeof index; ++got) last = index;
    std::this_thread::sleep_for(std::chrono::microseconds(round * 700));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status));
    while (read(fds[0], &index, sizeof index) == sizeof index) last = index;  // done before the kill
    close(fds[0]);
    REQUIRE(last >= reported_total);
    reported_total = last + 1;

    PlainDb plain(path);
    CHECK(plain.text("PRAGMA integrity_check") == "ok");
    const int64_t n = plain.integer(AGENTRT_MESSAGES_OF "'k'");
    INFO("round ", round, ": reported ", reported_total, ", found ", n);
    CHECK(n >= reported_total);      // nothing reported done is lost
    CHECK(n <= reported_total + 1);  // at most the commit the kill interrupted after it was done
    CHECK(plain.integer("SELECT max(id % 16777216) FROM messages WHERE thread_id='k'") == n - 1);
    CHECK(plain.integer("SELECT max(last_seq) FROM events WHERE thread_id='k'") == 2 * n);  // whole commits only
    reported_total = n;
  }
}

TEST_CASE("a failed WAL write (EFBIG) fails the commit, nothing of it is left, and the next commit goes on") {
  // A file size limit makes a WAL write fail with EFBIG in a child process (SIGXFSZ ignored): first a commit
  // of ~16 frames, then one far larger that spills frames before its commit, then a small one, which fits.
  TempDir dir;
  auto one_write = [] { return messages_batch("f", 5, 12000, 'o'); };  // ~16 frames: one buffer
  const std::string path = dir.file("efbig.db");
  int status = in_child([&] {
    SqliteStoreOptions o{path};
    o.wal_autocheckpoint = 0;  // no checkpoint writes into the database file
    SqliteStore s(o);
    auto first = messages_batch("f", 1, 100);
    s.commit(first);
    signal(SIGXFSZ, SIG_IGN);
    const auto limit = static_cast<rlim_t>(wal_bytes(path) + 48 * 1024);
    rlimit r{limit, limit};
    if (setrlimit(RLIMIT_FSIZE, &r) != 0) return 10;
    for (auto b : {one_write(), messages_batch("f", 600, 5000, 'g')}) {
      try {
        s.commit(b);
        return 11;  // committed past the limit?
      } catch (const Error& e) {
        if (e.code() != ErrorCode::io) return 12;
      }
      if (s.messages("f").size() != 1) return 13;
    }
    auto small = messages_batch("f", 1, 200, 's');
    s.commit(small);
    if (small.messages[0].index != 1 || s.messages("f").size() != 2) return 14;
    _exit(0);
    return 15;
  });
  REQUIRE(status == 0);
  PlainDb plain(path);
  CHECK(plain.text("PRAGMA integrity_check") == "ok");
  CHECK(plain.integer(AGENTRT_MESSAGES_OF "'f'") == 2);
  SqliteStore s(SqliteStoreOptions{path});
  auto got = s.messages("f");
  REQUIRE(got.size() == 2);
  CHECK(got[1].message.content == "m0:" + std::string(200, 's'));
}

// The WAL write buffer (src/store/sqlite/wal_buffer): the store's connections write a commit's frames to the
// WAL in one write, over whatever VFS they are given (here the fault VFS, which counts the writes it sees).
namespace {

struct CountedStore {
  FaultVfs& vfs = FaultVfs::instance();
  std::unique_ptr<SqliteStore> store;
  explicit CountedStore(const std::string& path, const std::string& synchronous = "NORMAL") {
    vfs.reset();
    SqliteStoreOptions o{path};
    o.vfs = FaultVfs::kName;
    o.synchronous = synchronous;
    o.wal_autocheckpoint = 0;  // no checkpoint writes into the database file between the counts
    store = std::make_unique<SqliteStore>(o);
    auto first = messages_batch("w", 1, 10);  // the WAL's header is written by the first commit
    store->commit(first);
  }
  ~CountedStore() {
    store.reset();
    vfs.reset();
  }
};

}  // namespace

TEST_CASE("WAL buffer: a commit's frames reach the WAL in one write, seen by every connection once it returns") {
  TempDir dir;
  const std::string path = dir.file("buffered.db");
  CountedStore c(path);
  PlainDb plain(path);
  int64_t messages = 1;
  const int64_t syncs_before = c.vfs.count(IoKind::sync);
  for (int n : {2, 4, 12, 40}) {  // a one-frame commit is two writes (wal_buffer.hpp): two messages fill two pages
    auto b = messages_batch("w", n, 3000, static_cast<char>('a' + n % 26));
    const int64_t wal_before = wal_bytes(path), writes_before = c.vfs.count(IoKind::write);
    c.store->commit(b);
    messages += n;
    const int64_t frames = (wal_bytes(path) - wal_before) / kFrameBytes;
    INFO(n, " messages: ", frames, " frames");
    CHECK(frames >= n * 3000 / 4096);  // page-sized frames: without the buffer, two writes each
    // One write, or pieces of at most 128 KiB (what the unix VFS writes in one call).
    const int64_t writes = c.vfs.count(IoKind::write) - writes_before;
    CHECK(writes >= (frames * kFrameBytes + 0x1fffe) / 0x1ffff);
    CHECK(writes <= 1 + frames * kFrameBytes / 0x1ffff);
    if (frames * kFrameBytes < 0x1ffff) CHECK(writes == 1);
    CHECK(plain.integer(AGENTRT_MESSAGES_OF "'w'") == messages);
    CHECK(plain.text("SELECT body FROM messages WHERE thread_id='w' ORDER BY idx DESC LIMIT 1")
              .find("m" + std::to_string(n - 1) + ":" + std::string(3000, static_cast<char>('a' + n % 26))) !=
          std::string::npos);
  }
  CHECK(c.vfs.count(IoKind::sync) == syncs_before);  // synchronous=NORMAL: no sync at a commit, as without it
  CHECK(plain.text("PRAGMA integrity_check") == "ok");
}

TEST_CASE("WAL buffer: a transaction larger than the page cache goes out in pieces, whole") {
  // 4 MB in one commit, twice the page cache: SQLite spills frames to the WAL before the commit frame, and the
  // whole is written in pieces the unix VFS takes in one call each. (Frames rewritten in place at a commit have
  // a test of their own below.)
  TempDir dir;
  const std::string path = dir.file("large.db");
  CountedStore c(path);
  auto b = messages_batch("w", 800, 5000, 'L');
  const int64_t writes_before = c.vfs.count(IoKind::write);
  c.store->commit(b);
  const int64_t writes = c.vfs.count(IoKind::write) - writes_before;
  const int64_t frames = wal_bytes(path) / kFrameBytes;
  INFO(writes, " writes for ", frames, " frames");
  CHECK(frames >= 800 * 5000 / 4096);
  CHECK(writes >= frames * kFrameBytes / 0x1ffff);  // pieces of at most 128 KiB
  CHECK(writes < frames / 8);                       // not one a frame
  PlainDb plain(path);
  CHECK(plain.text("PRAGMA integrity_check") == "ok");
  CHECK(plain.integer(AGENTRT_MESSAGES_OF "'w'") == 801);
  CHECK(plain.integer("SELECT sum(length(body)) FROM messages WHERE thread_id='w' AND instr(CAST(body AS BLOB), "
                      "CAST('m799:LLL' AS BLOB))") > 5000);
  auto got = c.store->messages("w");
  REQUIRE(got.size() == 801);
  for (size_t i = 1; i < got.size(); ++i)
    REQUIRE(got[i].message.content == "m" + std::to_string(i - 1) + ":" + std::string(5000, 'L'));
}

TEST_CASE("WAL buffer: a failed write of the frames fails the commit, leaves nothing of it, the next goes on") {
  TempDir dir;
  const std::string path = dir.file("failed.db");
  for (int error : {SQLITE_IOERR_WRITE, SQLITE_FULL}) {
    CountedStore c(path);
    const auto before = c.store->messages("w").size();
    auto b = messages_batch("w", 6, 2000, 'x');
    b.events.push_back(StoredEvent{0, "run_1", R"({"type":"CUSTOM","name":"n","value":1})"});
    c.vfs.fail_nth(IoKind::write, 1, error);
    CHECK_THROWS_AS(c.store->commit(b), Error);
    CHECK(c.vfs.fault_fired());
    CHECK(c.store->messages("w").size() == before);
    {
      PlainDb plain(path);
      CHECK(plain.integer(AGENTRT_MESSAGES_OF "'w'") == static_cast<int64_t>(before));
      CHECK(plain.integer("SELECT count(*) FROM events WHERE thread_id='w'") == 0);
    }
    auto next = messages_batch("w", 2, 2000, 'y');
    c.store->commit(next);
    CHECK(next.messages[0].index == static_cast<int64_t>(before));
    PlainDb plain(path);
    CHECK(plain.integer(AGENTRT_MESSAGES_OF "'w'") == static_cast<int64_t>(before) + 2);
    CHECK(plain.text("PRAGMA integrity_check") == "ok");
  }
}

TEST_CASE("WAL buffer: with synchronous=FULL every acknowledged commit survives a power loss") {
  // FULL syncs the WAL at each commit: the buffer's frames must be written before that sync, or the power
  // loss (every write since its file's last sync undone) would take them.
  TempDir dir;
  const std::string path = dir.file("power.db");
  int64_t acknowledged = 0;
  {
    CountedStore c(path, "FULL");
    c.vfs.track_unsynced(true);
    acknowledged = 1;
    for (int i = 0; i < 5; ++i) {
      auto b = messages_batch("w", 3, 2500, static_cast<char>('p' + i));
      c.store->commit(b);
      acknowledged += 3;
    }
    CHECK(c.vfs.count(IoKind::sync) >= 5);
    c.vfs.crash_after(1);
    auto lost = messages_batch("w", 3, 2500, 'z');
    CHECK_THROWS_AS(c.store->commit(lost), Error);  // the process "dies" during this one
    CHECK(c.vfs.crashed());
    c.store.reset();
    c.vfs.power_loss();
  }
  PlainDb plain(path);
  CHECK(plain.text("PRAGMA integrity_check") == "ok");
  CHECK(plain.integer(AGENTRT_MESSAGES_OF "'w'") == acknowledged);
}

TEST_CASE("WAL buffer: a commit that rewrites its own spilled frames is whole in the file when it returns") {
  // A transaction larger than its page cache spills frames to the WAL; pages it changes again after that are
  // rewritten in place at the commit, and SQLite then rewrites the checksums of its frames up to the commit
  // frame's header, last, with no write after it before the commit is published. A process that ends right
  // after the commit must leave it in the file: WAL recovery (a new connection) finds it.
  TempDir dir;
  const std::string path = dir.file("rewrite.db");
  int status = in_child([&] {
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, sqlite::wal_buffer_vfs("")) !=
        SQLITE_OK)
      return 10;
    auto exec = [&](const std::string& sql) { return sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr); };
    if (exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA wal_autocheckpoint=0; "
             "PRAGMA cache_size=8; CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT NOT NULL)") != SQLITE_OK)
      return 11;
    for (int round = 0; round < 3; ++round) {
      if (exec("BEGIN") != SQLITE_OK) return 12;
      for (int i = 0; i < 200; ++i)  // ~200 pages: far over the cache, spilled
        if (exec(fmt::format("INSERT INTO t(v) VALUES('{}')", std::string(3000, static_cast<char>('a' + round)))) !=
            SQLITE_OK)
          return 13;
      // The first pages of this transaction again: spilled already, so rewritten in place at the commit.
      if (exec(fmt::format("UPDATE t SET v='r{}' WHERE k > {} AND k <= {}", round, round * 200, round * 200 + 5)) !=
          SQLITE_OK)
        return 14;
      if (exec("COMMIT") != SQLITE_OK) return 15;
    }
    _exit(0);  // no close: the WAL as the commits left it, its index rebuilt from the file by the next opener
    return 16;
  });
  REQUIRE(status == 0);
  PlainDb plain(path);
  CHECK(plain.integer("SELECT count(*) FROM t") == 600);
  CHECK(plain.integer("SELECT count(*) FROM t WHERE v LIKE 'r%'") == 15);
  CHECK(plain.text("SELECT v FROM t WHERE k=401") == "r2");
  CHECK(plain.text("PRAGMA integrity_check") == "ok");
}

TEST_CASE("WAL buffer: frames of a transaction that rolled back are never written after its write lock is gone") {
  // A spills frames of a transaction, then rolls it back; B then commits frames at the same place in the WAL;
  // A reads B's commit. Had A kept its spilled frames to write later, they would land on B's.
  TempDir dir;
  const std::string path = dir.file("rollback.db");
  auto open = [&](sqlite3** db) {
    REQUIRE(sqlite3_open_v2(path.c_str(), db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, sqlite::wal_buffer_vfs("")) ==
            SQLITE_OK);
    sqlite3_busy_timeout(*db, 5000);
  };
  auto exec = [](sqlite3* db, const std::string& sql) {
    char* err = nullptr;
    int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    INFO(sql.substr(0, 80), ": ", err ? err : "");
    sqlite3_free(err);
    CHECK(rc == SQLITE_OK);
  };
  sqlite3 *a = nullptr, *b = nullptr;
  open(&a);
  exec(a, "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0; CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT)");
  exec(a, "INSERT INTO t(v) VALUES('first')");
  for (int i = 0; i < 30; ++i) exec(a, "INSERT INTO t(v) VALUES('" + std::string(3000, 'x') + "')");
  open(&b);
  exec(a, "PRAGMA cache_size=8");
  for (int round = 0; round < 3; ++round) {
    // Rows changed in place, read from the database file (the WAL is empty after the checkpoint), no page
    // added (the rollback has no page to read back): frames spilled to the WAL, far over A's cache, and no read
    // of the WAL after them. Then thrown away.
    exec(a, "PRAGMA wal_checkpoint(TRUNCATE)");
    exec(a, "BEGIN");
    exec(a, "UPDATE t SET v=replace(v, 'x', 'A') WHERE v LIKE 'x%'");
    exec(a, "ROLLBACK");
    exec(b, "BEGIN");
    for (int i = 0; i < 3; ++i)
      exec(b, fmt::format("INSERT INTO t(v) VALUES('b{}-{}{}')", round, i, std::string(900, 'B')));
    exec(b, "COMMIT");
    PlainDb check(path);
    CHECK(check.integer("SELECT count(*) FROM t") == 31 + 3 * (round + 1));
    CHECK(check.integer("SELECT count(*) FROM t WHERE v LIKE 'A%'") == 0);
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(a, "SELECT count(*), sum(length(v)) FROM t", -1, &st, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_step(st) == SQLITE_ROW);
    CHECK(sqlite3_column_int64(st, 0) == 31 + 3 * (round + 1));  // A reads B's frames from the WAL
    sqlite3_finalize(st);
    CHECK(check.text("PRAGMA integrity_check") == "ok");
  }
  sqlite3_close_v2(b);
  sqlite3_close_v2(a);
  PlainDb after(path);
  CHECK(after.integer("SELECT count(*) FROM t WHERE v LIKE 'b%'") == 9);
  CHECK(after.integer("SELECT count(*) FROM t WHERE v LIKE 'x%'") == 30);
  CHECK(after.text("PRAGMA integrity_check") == "ok");
}
