// The "agentrt-wal" VFS (src/store/sqlite_wal_vfs.cpp): a commit's WAL frames reach the file in one write, and
// nothing SQLite guarantees changes: what is committed is in the file before anyone can see it, a failed write
// fails the commit, a crash loses no acknowledged commit.
#include <doctest/doctest.h>

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

#include "store/sqlite_store.hpp"
#include "store/sqlite_wal_vfs.hpp"
#include "support/runtime_fixture.hpp"

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

WalWriteCounts counts_since(const WalWriteCounts& before) {
  auto now = wal_write_counts();
  return {now.sqlite_writes - before.sqlite_writes, now.file_writes - before.file_writes};
}

// A connection of SQLite's default VFS, not the store's: what another program on the same file sees.
struct PlainDb {
  sqlite3* db = nullptr;
  explicit PlainDb(const std::string& path, const char* vfs = nullptr, int flags = SQLITE_OPEN_READWRITE) {
    REQUIRE(sqlite3_open_v2(path.c_str(), &db, flags, vfs) == SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
  }
  ~PlainDb() { sqlite3_close_v2(db); }
  PlainDb(const PlainDb&) = delete;
  PlainDb& operator=(const PlainDb&) = delete;
  void exec(const std::string& sql) {
    char* err = nullptr;
    int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    std::string msg = err ? err : "";
    sqlite3_free(err);
    INFO(sql, ": ", msg);
    REQUIRE(rc == SQLITE_OK);
  }
  std::string text(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK);
    std::string out;
    if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0))
      out = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
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

TEST_CASE("the WAL VFS is registered once, under its own name, and the process's default VFS stays SQLite's") {
  const char* name = wal_vfs_name();
  REQUIRE(name != nullptr);
  CHECK(std::string(name) == "agentrt-wal");
  CHECK(wal_vfs_name() == name);
  REQUIRE(sqlite3_vfs_find(name) != nullptr);
  CHECK(std::string(sqlite3_vfs_find(nullptr)->zName) == "unix");
}

TEST_CASE("a commit of many pages reaches the WAL in one write where SQLite asks for two per frame") {
  TempDir dir;
  const std::string path = dir.file("count.db");
  SqliteStoreOptions o{path};
  o.wal_autocheckpoint = 0;  // the WAL only grows: its size counts the frames
  SqliteStore s(o);
  auto first = messages_batch("t", 1, 100);
  s.commit(first);
  for (size_t bytes : {size_t{3000}, size_t{9000}}) {
    auto b = messages_batch("t", 6, bytes);
    const int64_t wal_before = wal_bytes(path);
    const auto before = wal_write_counts();
    s.commit(b);
    const auto d = counts_since(before);
    const int64_t frames = (wal_bytes(path) - wal_before) / kFrameBytes;
    INFO("frames ", frames, ", SQLite writes ", d.sqlite_writes, ", file writes ", d.file_writes);
    CHECK(frames >= 6);
    CHECK(d.sqlite_writes == static_cast<uint64_t>(2 * frames));  // what the default VFS would have written
    CHECK(d.file_writes == 1);
  }
  CHECK(s.messages("t").size() == 13);
}

TEST_CASE("every commit is visible at once to a default-VFS connection and to a second store on the file") {
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
    CHECK(plain.integer("SELECT count(*) FROM messages WHERE thread_id='v'") == last.index + 1);
    CHECK(plain.integer("SELECT max(last_seq) FROM events WHERE thread_id='v'") == i + 1);
  }
  CHECK(plain.text("PRAGMA integrity_check") == "ok");
}

TEST_CASE("a transaction larger than the buffer (it spills to the WAL before the commit) commits and reads back") {
  TempDir dir;
  const std::string path = dir.file("big.db");
  SqliteStore a(SqliteStoreOptions{path});
  // 3 MB: more than the buffer (128 KiB) and than SQLite's page cache (2 MB), which spills pages to the WAL
  // in the middle of the transaction and rewrites some of those frames in place later.
  auto big = messages_batch("big", 600, 5000);
  const auto before = wal_write_counts();
  a.commit(big);
  const auto d = counts_since(before);
  INFO("SQLite writes ", d.sqlite_writes, ", file writes ", d.file_writes);
  CHECK(d.sqlite_writes >= 1500);               // two per frame, 750 pages and more
  CHECK(d.file_writes * 20 < d.sqlite_writes);  // coalesced: about 30 frames a write
  SqliteStore b(SqliteStoreOptions{path});
  auto got = b.messages("big");
  REQUIRE(got.size() == 600);
  for (size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].index == static_cast<int64_t>(i));
    CHECK(got[i].message.content == big.messages[i].message.content);
  }
  PlainDb plain(path);
  CHECK(plain.integer("SELECT sum(length(body)) FROM messages WHERE thread_id='big'") > 600 * 5000);
  CHECK(plain.text("PRAGMA integrity_check") == "ok");
}

TEST_CASE("a transaction rolled back after spilling frames leaves nothing, and the next commit goes on") {
  TempDir dir;
  const std::string path = dir.file("rollback.db");
  SqliteStore a(SqliteStoreOptions{path});
  PlainDb plain(path);
  CommitBatch first = messages_batch("r", 1, 10);
  first.approval = ApprovalRecord{"ap-1", "turn_1", "r", json::array(), json::object(), 1};
  a.commit(first);
  // 3 MB of messages, then an approval id that exists: a conflict after the messages were written (and
  // spilled to the WAL, the transaction being larger than the page cache).
  auto doomed = messages_batch("r", 600, 5000, 'd');
  doomed.approval = ApprovalRecord{"ap-1", "turn_1", "r", json::array(), json::object(), 2};
  try {
    a.commit(doomed);
    FAIL("the duplicate approval was committed");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::conflict);
  }
  CHECK(plain.integer("SELECT count(*) FROM messages WHERE thread_id='r'") == 1);
  CHECK(a.messages("r").size() == 1);
  auto next = messages_batch("r", 2, 3000, 'n');
  a.commit(next);
  CHECK(next.messages[0].index == 1);
  CHECK(plain.integer("SELECT count(*) FROM messages WHERE thread_id='r'") == 3);
  CHECK(plain.integer("SELECT count(*) FROM messages WHERE body LIKE '%ddddd%'") == 0);
  CHECK(plain.text("PRAGMA integrity_check") == "ok");
  SqliteStore b(SqliteStoreOptions{path});
  CHECK(b.messages("r").size() == 3);
}

TEST_CASE("pages written again after a spill (frames rewritten in place, checksums redone) commit correctly") {
  // Straight through the VFS with a tiny page cache: the transaction spills its pages to the WAL, then
  // changes them again, which makes SQLite overwrite those frames in place and rewrite the frame headers'
  // checksums at the commit: writes that are not appends, around buffered ones.
  TempDir dir;
  const std::string path = dir.file("rewrite.db");
  PlainDb db(path, wal_vfs_name(), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  db.exec("PRAGMA journal_mode=WAL");
  db.exec("PRAGMA cache_size=5");
  db.exec("PRAGMA wal_autocheckpoint=0");
  db.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT NOT NULL)");
  const int64_t wal_before = wal_bytes(path);
  const auto before = wal_write_counts();
  db.exec("BEGIN");
  db.exec(
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<300) "
      "INSERT INTO t SELECT i, replace(hex(zeroblob(500)),'0','a') FROM n");
  db.exec("UPDATE t SET v=replace(v,'a','b')");
  db.exec("UPDATE t SET v=replace(v,'b','c') WHERE id % 2 = 0");
  db.exec("COMMIT");
  const auto d = counts_since(before);
  const int64_t frames = (wal_bytes(path) - wal_before) / kFrameBytes;
  INFO("frames ", frames, ", SQLite writes ", d.sqlite_writes, ", file writes ", d.file_writes);
  CHECK(d.sqlite_writes > static_cast<uint64_t>(2 * frames));  // some of them were rewrites, not appends
  CHECK(d.file_writes < d.sqlite_writes);
  PlainDb other(path);  // default VFS
  CHECK(other.integer("SELECT count(*) FROM t") == 300);
  CHECK(other.integer("SELECT count(*) FROM t WHERE v=replace(hex(zeroblob(500)),'0','b')") == 150);
  CHECK(other.integer("SELECT count(*) FROM t WHERE v=replace(hex(zeroblob(500)),'0','c')") == 150);
  CHECK(other.text("PRAGMA integrity_check") == "ok");
  // And a rollback of such a transaction leaves the committed rows as they were.
  db.exec("BEGIN");
  db.exec("UPDATE t SET v=replace(hex(zeroblob(600)),'0','z')");
  db.exec("INSERT INTO t SELECT id+1000, v FROM t");
  db.exec("ROLLBACK");
  db.exec("UPDATE t SET v='one' WHERE id=1");
  CHECK(other.integer("SELECT count(*) FROM t") == 300);
  CHECK(other.integer("SELECT count(*) FROM t WHERE v LIKE 'zz%'") == 0);
  CHECK(other.text("SELECT v FROM t WHERE id=1") == "one");
  CHECK(other.text("PRAGMA integrity_check") == "ok");
}

TEST_CASE("synchronous=FULL: the commit's frames are written once, then synced, and read by others") {
  TempDir dir;
  const std::string path = dir.file("full.db");
  SqliteStoreOptions o{path, "FULL"};
  o.wal_autocheckpoint = 0;
  SqliteStore a(o);
  SqliteStore b(SqliteStoreOptions{path, "FULL"});
  auto first = messages_batch("f", 1, 10);
  a.commit(first);
  for (int i = 0; i < 5; ++i) {
    auto batch = messages_batch("f", 4, 5000);
    const auto before = wal_write_counts();
    a.commit(batch);
    const auto d = counts_since(before);
    CHECK(d.sqlite_writes >= 12);
    CHECK(d.file_writes == 1);
    CHECK(b.messages("f").size() == static_cast<size_t>(1 + 4 * (i + 1)));
  }
}

TEST_CASE("a WAL whose database lacks powersafe overwrite (sector padding at sync points) is not buffered") {
  // synchronous=FULL without powersafe overwrite pads a commit to the sector with copies of its commit frame
  // and syncs in the middle of one: writes the VFS leaves exactly as SQLite makes them.
  TempDir dir;
  const std::string path = dir.file("psow.db");
  PlainDb db("file:" + path + "?psow=0", wal_vfs_name(), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI);
  db.exec("PRAGMA journal_mode=WAL");
  db.exec("PRAGMA synchronous=FULL");
  db.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT NOT NULL)");
  const auto before = wal_write_counts();
  for (int i = 0; i < 20; ++i)
    db.exec("INSERT INTO t VALUES(" + std::to_string(i) + ", replace(hex(zeroblob(3000)),'0','p'))");
  const auto d = counts_since(before);
  CHECK(d.sqlite_writes >= 40);
  CHECK(d.file_writes == d.sqlite_writes);
  PlainDb other(path);
  CHECK(other.integer("SELECT count(*) FROM t") == 20);
  CHECK(other.text("PRAGMA integrity_check") == "ok");
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
  CHECK(plain.integer("SELECT count(*) FROM messages WHERE thread_id='e'") == 50);
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
    const int64_t n = plain.integer("SELECT count(*) FROM messages WHERE thread_id='k'");
    INFO("round ", round, ": reported ", reported_total, ", found ", n);
    CHECK(n >= reported_total);      // nothing reported done is lost
    CHECK(n <= reported_total + 1);  // at most the commit the kill interrupted after it was done
    CHECK(plain.integer("SELECT max(idx) FROM messages WHERE thread_id='k'") == n - 1);
    CHECK(plain.integer("SELECT max(last_seq) FROM events WHERE thread_id='k'") == 2 * n);  // whole commits only
    reported_total = n;
  }
}

TEST_CASE("a failed WAL write fails the commit (nothing of it is left) and the next commit goes on") {
  // A file size limit makes the buffer's write fail with EFBIG in a child process (SIGXFSZ ignored): first a
  // commit that fits the buffer, which fails in the write its commit frame makes; then one far larger than
  // the buffer, which fails at a write in the middle; then a small one, which fits under the limit.
  TempDir dir;
  auto one_write = [] { return messages_batch("f", 5, 12000, 'o'); };  // ~16 frames: one buffer
  {
    // The same commit on another file: one write, and more than the limit leaves room for.
    SqliteStoreOptions o{dir.file("control.db")};
    o.wal_autocheckpoint = 0;
    SqliteStore control(o);
    auto first = messages_batch("f", 1, 100);
    control.commit(first);
    auto b = one_write();
    const int64_t wal_before = wal_bytes(o.path);
    const auto before = wal_write_counts();
    control.commit(b);
    CHECK(counts_since(before).file_writes == 1);
    CHECK(wal_bytes(o.path) - wal_before > 48 * 1024);
  }
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
  CHECK(plain.integer("SELECT count(*) FROM messages WHERE thread_id='f'") == 2);
  SqliteStore s(SqliteStoreOptions{path});
  auto got = s.messages("f");
  REQUIRE(got.size() == 2);
  CHECK(got[1].message.content == "m0:" + std::string(200, 's'));
}
