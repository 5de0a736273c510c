#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include <sqlite3.h>

#include "store/sqlite/event_body.hpp"
#include "store/sqlite_store.hpp"
#include "store/store_conformance.hpp"
#include "support/condition.hpp"
#include "support/error_of.hpp"
#include "support/fault_vfs.hpp"
#include "support/runtime_fixture.hpp"
#include "support/sqlite_text.hpp"
#include "util/crypto.hpp"

using namespace agentrt;
using namespace agentrt::testing;

TEST_CASE("SqliteStore passes the store conformance suite") {
  TempDir dir;
  int n = 0;
  run_store_conformance([&] {
    return std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("conf" + std::to_string(n++) + ".db")});
  });
}

TEST_CASE("SqliteStore migrates a new file to the current schema version and refuses a newer one") {
  TempDir dir;
  {
    SqliteStore s(SqliteStoreOptions{dir.file("v.db")});
    CHECK(s.schema_version() == SqliteStore::kSchemaVersion);
  }
  {
    SqliteStore again(SqliteStoreOptions{dir.file("v.db")});  // reopening migrates nothing
    CHECK(again.schema_version() == SqliteStore::kSchemaVersion);
  }
  sqlite3* db = nullptr;
  sqlite3_open(dir.file("v.db").c_str(), &db);
  sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  CHECK(error_of([&] { SqliteStore newer(SqliteStoreOptions{dir.file("v.db")}); }, "a newer schema").code() ==
        ErrorCode::unsupported);
  CHECK_THROWS_AS(SqliteStore(SqliteStoreOptions{dir.file("x.db"), "SOMETIMES"}), Error);
  CHECK_THROWS_AS(SqliteStore(SqliteStoreOptions{"/nonexistent-dir/x/y.db"}), Error);
}

TEST_CASE("SqliteStore refuses a UTF-16 database file and reads its UTF-8 texts back byte for byte") {
  TempDir dir;
  {
    // A file made elsewhere, UTF-16 from its first table: the readers take stored texts as UTF-8 bytes.
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(dir.file("u16.db").c_str(), &db) == SQLITE_OK);
    sqlite_exec(db, "PRAGMA encoding='UTF-16le'; CREATE TABLE other(x TEXT)");
    sqlite3_close(db);
    const Error e = error_of([&] { SqliteStore s(SqliteStoreOptions{dir.file("u16.db")}); }, "a UTF-16 database");
    CHECK(e.code() == ErrorCode::unsupported);
    CHECK(e.message() == "sqlite: '" + dir.file("u16.db") + "' is a UTF-16le database; the store needs UTF-8");
  }
  SqliteStore s(SqliteStoreOptions{dir.file("u8.db")});
  const std::string text = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \\ \" \n end";  // é € 😀, escapes
  CommitBatch b;
  b.thread_id = "t";
  Message m;
  m.id = "m1";
  m.role = Role::user;
  m.content = text;
  m.metadata = json{{"k", text}};
  b.messages.push_back(MessageRecord{"t", 0, "turn_1", "run_1", m});
  s.commit(b);
  const auto records = s.messages("t");
  REQUIRE(records.size() == 1);
  CHECK(records[0].message.content == text);
  CHECK(records[0].message.metadata == json{{"k", text}});
  const auto history = s.thread_messages("t");
  REQUIRE(history.size() == 1);
  CHECK(history[0].content == text);
  CHECK(history[0].metadata == json{{"k", text}});
}

TEST_CASE("the database runs in WAL mode with the configured synchronous level") {
  TempDir dir;
  SqliteStore s(SqliteStoreOptions{dir.file("w.db"), "FULL"});
  sqlite3* db = nullptr;
  sqlite3_open(dir.file("w.db").c_str(), &db);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, nullptr);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  CHECK(std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, 0))) == "wal");
  sqlite3_finalize(st);
  sqlite3_close(db);
}

TEST_CASE("two connections appending to one thread keep its event seqs and message indexes consecutive") {
  // Each connection remembers the tails of the threads it committed to; a commit by the other one must make
  // it read them again (PRAGMA data_version), and a rolled-back commit must not move them.
  TempDir dir;
  SqliteStore a(SqliteStoreOptions{dir.file("two.db")});
  SqliteStore b(SqliteStoreOptions{dir.file("two.db")});
  auto batch = [](int n) {
    CommitBatch c;
    c.thread_id = "t";
    for (int i = 0; i < n; ++i) {
      c.events.push_back(StoredEvent{0, "run_1", R"({"type":"CUSTOM","name":"x","value":1})"});
      Message m;
      m.role = Role::user;
      m.content = "m";
      c.messages.push_back(MessageRecord{"t", 0, "turn_1", "run_1", m});
    }
    return c;
  };
  auto c1 = batch(2);
  a.commit(c1);
  auto c2 = batch(3);
  b.commit(c2);
  auto c3 = batch(1);
  a.commit(c3);
  CHECK(c3.events[0].seq == 6);
  CHECK(c3.messages[0].index == 5);
  // A commit that fails (a bad event) changes nothing, the next one goes on from the same tails.
  auto bad = batch(1);
  bad.events[0].json = "two\nlines";
  CHECK_THROWS(a.commit(bad));
  auto c4 = batch(1);
  a.commit(c4);
  CHECK(c4.events[0].seq == 7);
  CHECK(c4.messages[0].index == 6);
  auto c5 = batch(1);
  b.commit(c5);
  CHECK(c5.events[0].seq == 8);
  CHECK(c5.messages[0].index == 7);
  auto evs = a.events_after("t", 0, 100);
  REQUIRE(evs.size() == 8);
  for (size_t i = 0; i < evs.size(); ++i) CHECK(evs[i].seq == static_cast<int64_t>(i + 1));
  auto msgs = b.messages("t");
  REQUIRE(msgs.size() == 8);
  for (size_t i = 0; i < msgs.size(); ++i) CHECK(msgs[i].index == static_cast<int64_t>(i));
}

namespace {

CommitBatch thread_batch(const std::string& thread, const std::vector<std::string>& contents) {
  CommitBatch c;
  c.thread_id = thread;
  for (const auto& text : contents) {
    Message m;
    m.role = Role::user;
    m.content = text;
    c.messages.push_back(MessageRecord{thread, 0, "turn_1", "run_1", m});
  }
  return c;
}

}  // namespace

TEST_CASE("a thread's messages are one span of rowids: threads written in turns by two connections read back whole") {
  // Each connection remembers the spans it has seen; a span never moves, so what one connection learnt stays true
  // while the other one adds threads and messages.
  TempDir dir;
  const std::string path = dir.file("spans.db");
  SqliteStore a(SqliteStoreOptions{path});
  SqliteStore b(SqliteStoreOptions{path});
  std::map<std::string, std::vector<std::string>> want;
  auto commit = [&](SqliteStore& s, const std::string& thread, int n) {
    std::vector<std::string> texts;
    for (int i = 0; i < n; ++i) texts.push_back(fmt::format("{} #{}", thread, want[thread].size() + texts.size()));
    auto c = thread_batch(thread, texts);
    s.commit(c);
    CHECK(c.messages.front().index == static_cast<int64_t>(want[thread].size()));
    want[thread].insert(want[thread].end(), texts.begin(), texts.end());
  };
  auto check_all = [&](SqliteStore& s) {
    for (const auto& [thread, texts] : want) {
      CAPTURE(thread);
      auto records = s.messages(thread);
      auto plain = s.thread_messages(thread);
      REQUIRE(records.size() == texts.size());
      REQUIRE(plain.size() == texts.size());
      for (size_t i = 0; i < texts.size(); ++i) {
        CHECK(records[i].index == static_cast<int64_t>(i));
        CHECK(records[i].thread_id == thread);
        CHECK(records[i].message.content == texts[i]);
        CHECK(plain[i].content == texts[i]);
      }
    }
    CHECK(s.messages("nobody").empty());
    CHECK(s.thread_messages("nobody").empty());
  };
  commit(a, "t1", 2);
  commit(b, "t2", 1);
  check_all(a);  // t2: a looks its span up
  commit(a, "t2", 2);
  commit(b, "t1", 1);
  commit(a, "t3", 3);
  commit(b, "t3", 1);
  check_all(a);
  check_all(b);
  // A commit that fails for a new thread leaves it no span; its next commit gives it one.
  auto bad = thread_batch("t4", {"lost"});
  bad.events.push_back(StoredEvent{0, "run_1", "two\nlines"});
  CHECK_THROWS(a.commit(bad));
  commit(b, "t5", 1);
  commit(a, "t4", 2);
  check_all(a);
  check_all(b);
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  CHECK(sqlite_text(db, "SELECT base, thread_id FROM thread_spans ORDER BY base") ==
        "1|t1|\n2|t2|\n3|t3|\n4|t5|\n5|t4|\n");
  // A row a commit (each commit's messages are one run's), in its thread's span, keyed by its last message's index.
  CHECK(sqlite_text(db,
                    "SELECT count(*) FROM messages m JOIN thread_spans s ON s.thread_id = m.thread_id "
                    "WHERE m.id / 16777216 <> s.base OR m.id % 16777216 < m.idx") == "0|\n");
  CHECK(sqlite_text(db, "SELECT count(*), sum(id % 16777216 - idx + 1) FROM messages") == "8|13|\n");
  sqlite3_close(db);
}

TEST_CASE("a thread holds at most 2^24 messages: the commit past that is refused with too_large and changes nothing") {
  TempDir dir;
  const std::string path = dir.file("full.db");
  {
    SqliteStore s(SqliteStoreOptions{path});
    auto first = thread_batch("t", {"first"});
    s.commit(first);
  }
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  // The span's last message, as a thread of 2^24 messages would have it.
  sqlite_exec(db,
              "INSERT INTO messages(id,thread_id,idx,turn_id,run_id,body) SELECT base*16777216+16777215,'t',16777215,"
              "'turn_1','run_1','{\"id\":\"m_last\",\"role\":\"user\",\"content\":\"last\"}' FROM thread_spans WHERE "
              "thread_id='t'");
  sqlite3_close(db);
  SqliteStore s(SqliteStoreOptions{path});
  auto more = thread_batch("t", {"one too many"});
  const Error e = error_of([&] { s.commit(more); }, "a message past the span");
  CHECK(e.code() == ErrorCode::too_large);
  CHECK(e.message() == "thread t cannot hold more than 16777216 messages");
  auto got = s.messages("t");
  REQUIRE(got.size() == 2);
  CHECK(got[0].message.content == "first");
  CHECK(got[1].index == 16777215);
  CHECK(got[1].message.content == "last");
  // Other threads go on.
  auto other = thread_batch("u", {"fine"});
  s.commit(other);
  CHECK(s.messages("u").size() == 1);
}

TEST_CASE("a thread's event rows are its span's rowids; a thread holds at most 2^32 - 1 events, then too_large") {
  TempDir dir;
  const std::string path = dir.file("events.db");
  auto events = [](const std::string& thread, int n, const std::string& run) {
    CommitBatch b;
    b.thread_id = thread;
    for (int i = 0; i < n; ++i) b.events.push_back(StoredEvent{0, run, fmt::format(R"({{"n":{}}})", i)});
    return b;
  };
  {
    SqliteStore s(SqliteStoreOptions{path});
    auto a = events("e1", 2, "r1");  // events and no messages: the thread gets a span all the same
    s.commit(a);
    auto m = thread_batch("m1", {"hello"});
    m.create_thread = ThreadRecord{"m1", "u", "", false, 0, 0, 0};
    s.commit(m);
    auto b = events("e1", 3, "r2");
    s.commit(b);
    auto c = events("m1", 1, "r3");
    s.commit(c);
    CHECK(s.events_after("e1", 0, 100).size() == 5);
    CHECK(s.events_after("e1", 2, 100).size() == 3);
    CHECK(s.events_after("e1", 3, 100).front().seq == 4);
    CHECK(s.events_after("e1", 5, 100).empty());
    CHECK(s.events_after("e1", -7, 100).size() == 5);
    CHECK(s.events_after("e1", INT64_MAX, 100).empty());
    CHECK(s.events_after("nobody", 0, 100).empty());
    CHECK_FALSE(s.get_thread("e1"));  // events alone make no thread row
    auto m1 = s.get_thread("m1");
    REQUIRE(m1);
    CHECK(m1->last_seq == 1);
  }
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  CHECK(sqlite_text(db, "SELECT base, thread_id FROM thread_spans ORDER BY base") == "1|e1|\n2|m1|\n");
  CHECK(sqlite_text(db,
                    "SELECT id - 4294967296 * (SELECT base FROM thread_spans s WHERE s.thread_id = e.thread_id), "
                    "first_seq, last_seq FROM events e ORDER BY id") == "1|1|2|\n3|3|5|\n1|1|1|\n");
  CHECK(sqlite_text(db,
                    "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND tbl_name IN ('events', "
                    "'thread_spans')") == "0|\n");
  // The span's last event, as a thread of 2^32 - 1 events would have it.
  sqlite_exec(db,
              "INSERT INTO events(id,thread_id,first_seq,last_seq,run_id,body) SELECT base*4294967296+4294967295,'e1',"
              "4294967295,4294967295,'r9','{\"n\":9}' FROM thread_spans WHERE thread_id='e1'");
  sqlite3_close(db);
  SqliteStore s(SqliteStoreOptions{path});
  auto more = events("e1", 1, "r10");
  const Error e = error_of([&] { s.commit(more); }, "an event past the span");
  CHECK(e.code() == ErrorCode::too_large);
  CHECK(e.message() == "thread e1 cannot hold more than 4294967295 events");
  const auto got = s.events_after("e1", 4, 100);
  REQUIRE(got.size() == 2);
  CHECK(got[0].seq == 5);
  CHECK(got[1].seq == 4294967295);
  CHECK(got[1].json == R"({"n":9})");
  // A new thread's span is one past the highest any row uses.
  auto next = events("e2", 1, "r11");
  s.commit(next);
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  CHECK(sqlite_text(db, "SELECT base FROM thread_spans WHERE thread_id = 'e2'") == "3|\n");
  sqlite3_close(db);
  CHECK(s.events_after("e2", 0, 10).size() == 1);
}

TEST_CASE("the WAL is checkpointed off the committing thread and stays bounded; nothing committed is lost") {
  TempDir dir;
  const std::string path = dir.file("ckpt.db");
  SqliteStoreOptions o{path};
  o.wal_autocheckpoint = 20;  // pages
  const std::string body(3000, 'x');
  auto wal_pages = [&] {
    std::error_code ec;
    auto n = std::filesystem::file_size(path + "-wal", ec);
    return ec ? 0 : static_cast<int64_t>(n / 4096);
  };
  int64_t largest = 0;
  {
    SqliteStore s(o);
    for (int i = 0; i < 400; ++i) {
      CommitBatch b;
      b.thread_id = "t" + std::to_string(i % 7);
      b.events.push_back(StoredEvent{0, "run_1", R"({"type":"CUSTOM","name":")" + body + R"(","value":1})"});
      s.commit(b);
      largest = std::max(largest, wal_pages());
    }
    // A commit does not wait for the thread's checkpoints; the WAL is started over at four times the mark
    // (and at eight at the latest, when the commit there waits for the thread), plus the commit that crossed it.
    CHECK(largest <= 8 * 20 + 8);
    // The file holds what the checkpoints wrote back; everything committed is readable.
    SqliteStore reader(SqliteStoreOptions{path});
    size_t n = 0;
    for (int t = 0; t < 7; ++t) n += reader.events_after("t" + std::to_string(t), 0, 1000).size();
    CHECK(n == 400);
  }
  // Closed cleanly: the WAL was checkpointed into the database, which holds everything.
  SqliteStore again(SqliteStoreOptions{path});
  size_t n = 0;
  for (int t = 0; t < 7; ++t) n += again.events_after("t" + std::to_string(t), 0, 1000).size();
  CHECK(n == 400);
}

namespace {

// The page cache's dirty pages of a file (Linux's cachestat(2), 6.5 and later), or nullopt where the kernel
// does not have it.
std::optional<uint64_t> dirty_pages(const std::string& file) {
  struct Range {
    uint64_t off = 0, len = 0;  // the whole file
  } range;
  struct Stat {
    uint64_t cache, dirty, writeback, evicted, recently_evicted;
  } stat{};
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  const long rc = ::syscall(451 /* cachestat */, fd, &range, &stat, 0);
  const int error = errno;
  ::close(fd);
  if (rc != 0) {
    REQUIRE(error == ENOSYS);
    return std::nullopt;
  }
  return stat.dirty;
}

}  // namespace

TEST_CASE("synchronous=NORMAL: the WAL's writeback starts each ~1 MiB, not all at the checkpoint's sync") {
  // The checkpoint syncs the WAL before it writes pages back; the thread starts the writeback of what commits
  // wrote each 256 frames, so that sync finds little left and no core takes megabytes of completions at once.
  TempDir dir;
  const std::string path = dir.file("writeback.db");
  SqliteStoreOptions o{path};
  o.wal_autocheckpoint = 100000;  // no checkpoint in this test: only the writebacks
  SqliteStore s(o);
  auto frames = [&] {
    std::error_code ec;
    const auto n = std::filesystem::file_size(path + "-wal", ec);
    return ec || n < 32 ? int64_t{0} : static_cast<int64_t>((n - 32) / (4096 + 24));
  };
  const std::string body(3000, 'w');
  int committed = 0;
  auto commit_until = [&](int64_t mark) {  // small commits, up to the one that takes the WAL to `mark` frames
    while (frames() < mark) {
      CommitBatch b;
      b.thread_id = "t" + std::to_string(committed % 5);
      b.events.push_back(StoredEvent{0, "run_1", R"({"type":"CUSTOM","name":")" + body + R"(","value":1})"});
      s.commit(b);
      ++committed;
    }
  };
  commit_until(200);
  CHECK(s.wal_writebacks() == 0);
  const auto before = dirty_pages(path + "-wal");
  if (before) CHECK(*before >= 200);  // all of it still dirty
  commit_until(256);
  REQUIRE(eventually([&] { return s.wal_writebacks() == 1; }));
  commit_until(512);
  REQUIRE(eventually([&] { return s.wal_writebacks() == 2; }));
  if (const auto after = dirty_pages(path + "-wal")) {
    // Everything the commits wrote is under write-out or written; a page that a commit wrote to again while
    // the previous writeback still had it in flight (frames do not end on page boundaries) waits for the next.
    CHECK(*after <= 2);
  } else {
    WARN_MESSAGE(false, "cachestat(2) is not in this kernel: the dirty pages were not counted");
  }
  CHECK(s.wal_writebacks() == 2);
  size_t n = 0;
  for (int t = 0; t < 5; ++t) n += s.events_after("t" + std::to_string(t), 0, 100000).size();
  CHECK(n == static_cast<size_t>(committed));

  // None with synchronous=FULL (every commit syncs the WAL), OFF (nothing is synced), or a VFS of the host's (its
  // files are its own): 300 frames, and no writeback within 200 ms, where the one above came within milliseconds.
  auto writebacks_with = [&](const std::string& name, const std::string& synchronous, const std::string& vfs) {
    SqliteStoreOptions other{dir.file(name)};
    other.wal_autocheckpoint = 100000;
    other.synchronous = synchronous;
    other.vfs = vfs;
    SqliteStore store(other);
    for (int i = 0; i < 300; ++i) {
      CommitBatch b;
      b.thread_id = "f";
      b.events.push_back(StoredEvent{0, "run_1", R"({"type":"CUSTOM","name":")" + body + R"(","value":1})"});
      store.commit(b);
    }
    eventually([&] { return store.wal_writebacks() > 0; }, std::chrono::milliseconds(200));
    return store.wal_writebacks();
  };
  CHECK(writebacks_with("full.db", "FULL", "") == 0);
  CHECK(writebacks_with("off.db", "OFF", "") == 0);
  FaultVfs::instance().reset();
  CHECK(writebacks_with("vfs.db", "NORMAL", FaultVfs::kName) == 0);
  FaultVfs::instance().reset();
}

TEST_CASE("a stored message row nested deeper than the stored limit is refused with io, one at the limit is read") {
  // Rows written by an older build or a hostile host with access to the file: read back, they must never be
  // built (a copy or a dump of a value 200,000 levels deep overflows the stack).
  TempDir dir;
  auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("deep.db")});
  CommitBatch b;
  b.thread_id = "th1";
  Message m;
  m.id = "m1";
  m.role = Role::user;
  m.content = "hi";
  b.messages.push_back(MessageRecord{"th1", 0, "t1", "r1", m});
  store->commit(b);
  auto set_body = [&](const std::string& body) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(dir.file("deep.db").c_str(), &db) == SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, "UPDATE messages SET body=? WHERE thread_id='th1'", -1, &st, nullptr) == SQLITE_OK);
    sqlite3_bind_text(st, 1, body.c_str(), static_cast<int>(body.size()), SQLITE_TRANSIENT);
    REQUIRE(sqlite3_step(st) == SQLITE_DONE);
    sqlite3_finalize(st);
    sqlite3_close(db);
  };
  // {"id","role","content","metadata":{"deep": N arrays}} is N + 2 deep.
  auto body = [](size_t arrays) {
    return R"({"id":"m1","role":"user","content":"hi","metadata":{"deep":)" + std::string(arrays, '[') +
           std::string(arrays, ']') + "}}";
  };
  // Both readers of a thread's rows: the records (messages) and the history read's (thread_messages).
  const std::vector<std::function<void()>> readers = {[&] { store->messages("th1"); },
                                                      [&] { store->thread_messages("th1"); }};
  for (const auto& read : readers) {
    for (size_t arrays : {size_t{200000}, kMaxStoredJsonDepth - 1}) {
      set_body(body(arrays));
      CAPTURE(arrays);
      const Error e = error_of(read, "reading a message row nested too deep");
      CHECK(e.code() == ErrorCode::io);
      CHECK(e.message() == "thread th1: stored message 0 is unreadable: JSON text is nested deeper than 512 levels");
    }
    // A row that is JSON but not a message is unreadable too (io: the store's fault, not the caller's).
    set_body(R"({"id":5,"role":"user","content":"hi"})");
    const Error e = error_of(read, "reading a message row with a numeric id");
    CHECK(e.code() == ErrorCode::io);
    CHECK(e.message() == "thread th1: stored message 0 is unreadable: message: 'id' must be a string");
  }
  set_body(body(kMaxStoredJsonDepth - 2));
  auto msgs = store->messages("th1");
  REQUIRE(msgs.size() == 1);
  CHECK(json_depth(msgs[0].message.metadata) == kMaxStoredJsonDepth - 1);
  auto alone = store->thread_messages("th1");
  REQUIRE(alone.size() == 1);
  CHECK(json_depth(alone[0].metadata) == kMaxStoredJsonDepth - 1);
}

TEST_CASE(
    "a commit's messages are a row for each run, packed (a part list alone stays JSON text); old text rows "
    "read as they are; damaged rows fail") {
  TempDir dir;
  const std::string path = dir.file("messages.db");
  auto text_message = [](const std::string& id, Role role, const std::string& content) {
    Message m;
    m.id = id;
    m.role = role;
    m.content = content;
    return m;
  };
  Message call = text_message("m1", Role::assistant, "");
  call.has_content = false;
  call.tool_calls = {{"call_1", "book_room", R"({"room":"A1"})"}};
  Message tool = text_message("m2", Role::tool, "booked");
  tool.tool_call_id = "call_1";
  tool.metadata = {{"run_id", "r1"}, {"summary_version", 1}, {"nested", {{"list", {1, -2, 0.5, nullptr}}}}};
  Message parts = text_message("m3", Role::user, "");
  parts.parts.push_back(ContentPart{});
  parts.parts.back().type = "text";
  parts.parts.back().text = "look";
  std::vector<MessageRecord> written = {
      {"t", 0, "turn_1", "r1", text_message("m0", Role::user, "book a room")},
      {"t", 0, "turn_1", "r1", call},
      {"t", 0, "turn_1", "r1", tool},
      {"t", 0, "turn_1", "r1", parts},  // a part list inside a group: its JSON text
      {"t", 0, "turn_1", "r2", text_message("m4", Role::assistant, "next run")},
      {"t", 0, "turn_2", "r3", parts},  // alone: the row is JSON text
  };
  {
    SqliteStore s(SqliteStoreOptions{path});
    CommitBatch b;
    b.thread_id = "t";
    b.messages = written;
    s.commit(b);
    for (size_t i = 0; i < b.messages.size(); ++i) CHECK(b.messages[i].index == static_cast<int64_t>(i));
  }
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  // One row a run: keyed by its last message's index, `idx` its first's.
  CHECK(sqlite_text(
            db, "SELECT idx, id % 16777216, run_id, typeof(body), hex(substr(body, 1, 2)) FROM messages ORDER BY id") ==
        "0|3|r1|blob|0304|\n4|4|r2|blob|0202|\n5|5|r3|text|7B22|\n");
  // A row as schema 11 wrote it (one message, JSON text), after them.
  Message old = text_message("m6", Role::assistant, "done");
  old.metadata = {{"worker_agent_output", {{"answer", "done"}}}};
  sqlite_exec(db,
              "INSERT INTO messages(id,thread_id,idx,turn_id,run_id,body) SELECT base*16777216+6,'t',6,'turn_2',"
              "'r3','" +
                  to_json_string(old) + "' FROM thread_spans WHERE thread_id='t'");
  sqlite3_close(db);
  written.push_back({"t", 6, "turn_2", "r3", old});
  {
    SqliteStore s(SqliteStoreOptions{path});
    const auto history = s.thread_messages("t");
    const auto records = s.messages("t");
    REQUIRE(history.size() == written.size());
    REQUIRE(records.size() == written.size());
    for (size_t i = 0; i < written.size(); ++i) {
      CAPTURE(i);
      CHECK(to_json_string(history[i]) == to_json_string(written[i].message));
      CHECK(history[i].has_content == written[i].message.has_content);
      CHECK(to_json_string(records[i].message) == to_json_string(written[i].message));
      CHECK(records[i].index == static_cast<int64_t>(i));
      CHECK(records[i].run_id == written[i].run_id);
      CHECK(records[i].turn_id == written[i].turn_id);
    }
    CHECK(history[2].metadata["nested"]["list"][1].is_number_integer());
    CHECK(history[2].metadata["summary_version"].is_number_unsigned());
    // The next commit goes on from the last row's key.
    CommitBatch more;
    more.thread_id = "t";
    more.messages = {{"t", 0, "turn_3", "r4", text_message("m7", Role::user, "again")}};
    s.commit(more);
    CHECK(more.messages[0].index == 7);
  }
  // Damaged rows (the first one, messages 0..3; the text row, message 5), each in a copy of the file: Error(io)
  // naming the thread and the message, from both readers.
  const std::string group = "06020301016900";  // a user message "i" with content "", packed
  const std::tuple<std::string, int, const char*> damaged[] = {
      {"x'02ff00'", 0, "the row holds 1 messages, its key 4"},
      {"x'04'", 0, "the row holds 1 messages, its key 4"},
      {"x'030402'", 0, "packed message: a count runs past its end"},
      {"x'0302010203'", 0, "packed message: a string runs past its end"},
      {"x'0301020102'", 0, "packed message: a group of 1 messages"},
      {"x'03040141014101410141'", 0, "not a message: [json.exception.parse_error.101]"},
      {"x'0304" + std::string("050203010169") + group + group + group + "'", 0, "packed message: it ends early"},
      {"x'0304" + group + group + group + group + "000000'", 0, "packed message: 3 bytes after the group's end"},
      {"x'0303" + group + group + group + "'", 0, "the row holds 3 messages, its key 4"},
      {"x''", 5, "not a message: [json.exception.parse_error.101]"},
      {"'{\"id\":'", 5, "not a message: [json.exception.parse_error.101]"},
      {"x'02ff00'", 5, "packed message: an unknown role (code 255)"},
      {"x'02030101'", 5, "packed message: a string runs past its end"}};
  const std::string pristine = dir.file("pristine.db");
  std::filesystem::copy_file(path, pristine);
  for (const auto& [body, first, what] : damaged) {
    const std::string row = body;
    CAPTURE(row);
    std::filesystem::copy_file(pristine, path, std::filesystem::copy_options::overwrite_existing);
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    sqlite_exec(db, fmt::format("UPDATE messages SET body={} WHERE idx={}", body, first));
    sqlite3_close(db);
    SqliteStore s(SqliteStoreOptions{path});
    for (const auto& read :
         std::vector<std::function<void()>>{[&] { s.thread_messages("t"); }, [&] { s.messages("t"); }}) {
      const Error e = error_of(read, "reading a damaged message row");
      CAPTURE(e.message());
      CHECK(e.code() == ErrorCode::io);
      CHECK(e.message().rfind(fmt::format("thread t: stored message {} is unreadable: ", first), 0) == 0);
      CHECK(e.message().find(what) != std::string::npos);
    }
  }
}

TEST_CASE("a commit's events are a row for each run, packed, whatever their size") {
  TempDir dir;
  const std::string path = dir.file("rows.db");
  SqliteStore s(SqliteStoreOptions{path});
  // Event JSON of `n` bytes (a CUSTOM event's value padded).
  auto event = [](const std::string& run, size_t n) {
    std::string j = R"({"type":"CUSTOM","name":"x","value":")";
    j += std::string(n - j.size() - 2, 'v');
    j += "\"}";
    REQUIRE(j.size() == n);
    return StoredEvent{0, run, j};
  };
  auto commit = [&](std::vector<StoredEvent> events) {
    CommitBatch b;
    b.thread_id = "t";
    b.create_thread = ThreadRecord{"t", "u", "", false, 0, 0, 0};
    b.events = std::move(events);
    s.commit(b);
    return b.events;
  };
  // 6 events of 300 bytes (1,805 with their newlines): one row.
  commit({event("r1", 300), event("r1", 300), event("r1", 300), event("r1", 300), event("r1", 300), event("r1", 300)});
  // 20 events of 300 bytes (6,019): more than a page, one row.
  std::vector<StoredEvent> big;
  for (int i = 0; i < 20; ++i) big.push_back(event("r2", 300));
  auto stored = commit(big);
  CHECK(stored.front().seq == 7);
  CHECK(stored.back().seq == 26);
  // Runs never share a row.
  commit({event("r3", 100), event("r3", 1500), event("r4", 100)});
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "SELECT first_seq, last_seq, run_id, body FROM events ORDER BY first_seq", -1, &st,
                             nullptr) == SQLITE_OK);
  // Each row's text length (the padding packs: every row is a BLOB).
  std::string rows;
  while (sqlite3_step(st) == SQLITE_ROW) {
    CHECK(sqlite3_column_type(st, 3) == SQLITE_BLOB);
    const std::string blob(static_cast<const char*>(sqlite3_column_blob(st, 3)),
                           static_cast<size_t>(sqlite3_column_bytes(st, 3)));
    rows += std::to_string(sqlite3_column_int64(st, 0)) + "-" + std::to_string(sqlite3_column_int64(st, 1)) + " " +
            reinterpret_cast<const char*>(sqlite3_column_text(st, 2)) + " " +
            std::to_string(sqlite::unpack_events(blob, "t", sqlite3_column_int64(st, 0), 1 << 20).size()) + "\n";
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  CHECK(rows ==
        "1-6 r1 1805\n"
        "7-26 r2 6019\n"
        "27-28 r3 1601\n"
        "29-29 r4 100\n");
  // Read back whole and in order, from any seq.
  auto all = s.events_after("t", 0, 100);
  REQUIRE(all.size() == 29);
  for (size_t i = 0; i < all.size(); ++i) CHECK(all[i].seq == static_cast<int64_t>(i + 1));
  auto tail = s.events_after("t", 5, 100);
  REQUIRE(tail.size() == 24);
  CHECK(tail.front().seq == 6);
  CHECK(tail.front().run_id == "r1");
}

TEST_CASE("the event dictionary is part of the stored format: it never changes") {
  // Another dictionary needs another format byte (store/sqlite/event_body.hpp): rows packed with this one must
  // keep decoding. Its bytes are event_dictionary.txt's lines, joined.
  const std::string& bytes = sqlite::event_dictionary().bytes();
  CHECK(bytes.size() == 3455);
  CHECK(bytes.find('\n') == std::string::npos);
  CHECK(crypto::sha256_hex(bytes) == "73969dd3f12d12221bc0cc54a876f056232326207d9057ea8830965fc06a5dcd");
}

TEST_CASE("a runtime's event rows are packed BLOBs that read back as the events' text, byte for byte") {
  std::string path;
  std::vector<std::string> texts;
  {
    Harness h;
    h.add_book_room(ApprovalPolicy::never());
    path = h.dir.file("agentrt.db");
    CHECK(h.wait(h.start("t-packed", "book a room").turn_id).status == TurnStatus::completed);
    for (const auto& e : h.store->events_after("t-packed", 0, 1000)) texts.push_back(e.json);
    REQUIRE(texts.size() > 10);
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    const std::string rows = sqlite_text(db,
                                         "SELECT count(*), sum(typeof(body)='blob'), sum(length(body)) FROM events "
                                         "WHERE thread_id='t-packed'");
    sqlite3_close(db);
    size_t text_bytes = 0;
    for (const auto& t : texts) text_bytes += t.size() + 1;
    CAPTURE(rows);
    CAPTURE(text_bytes);
    const auto count = std::stoul(rows);
    const auto blobs = std::stoul(rows.substr(rows.find('|') + 1));
    const auto stored = std::stoul(rows.substr(rows.rfind('|', rows.size() - 3) + 1));
    CHECK(blobs == count);
    CHECK(stored * 2 < text_bytes);  // the dictionary and the repeats: less than half
    // Another store on the file reads what the runtime wrote, the same text.
    SqliteStore s(SqliteStoreOptions{path});
    const auto again = s.events_after("t-packed", 0, 1000);
    REQUIRE(again.size() == texts.size());
    for (size_t i = 0; i < texts.size(); ++i) CHECK(again[i].json == texts[i]);
  }
}

TEST_CASE("event rows stored as text (schema 8, or when packing saves nothing) read as they are; damaged ones fail") {
  TempDir dir;
  const std::string path = dir.file("mixed.db");
  {
    SqliteStore s(SqliteStoreOptions{path});
    CommitBatch b;
    b.thread_id = "t";
    b.create_thread = ThreadRecord{"t", "u", "", false, 0, 0, 0};
    b.events = {StoredEvent{0, "r1", R"({"type":"STEP_STARTED","stepName":"intent","timestamp":1796522861662})"},
                StoredEvent{0, "r1", "{}"}};
    s.commit(b);
    b.create_thread.reset();
    b.events = {StoredEvent{0, "r2", "{}"}};  // 2 bytes: packed would be longer
    s.commit(b);
  }
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  CHECK(sqlite_text(db, "SELECT first_seq, typeof(body) FROM events ORDER BY first_seq") == "1|blob|\n3|text|\n");
  // A row as schema 8 wrote it.
  sqlite_exec(db,
              "INSERT INTO events(id,thread_id,first_seq,last_seq,run_id,body) SELECT base*4294967296+4,'t',4,5,'r3',"
              "'{\"a\":1}\n{\"b\":2}' FROM thread_spans WHERE thread_id='t'");
  sqlite3_close(db);
  {
    SqliteStore s(SqliteStoreOptions{path});
    const auto all = s.events_after("t", 0, 10);
    REQUIRE(all.size() == 5);
    CHECK(all[0].json == R"({"type":"STEP_STARTED","stepName":"intent","timestamp":1796522861662})");
    CHECK(all[1].json == "{}");
    CHECK(all[2].json == "{}");
    CHECK(all[2].run_id == "r2");
    CHECK(all[3].json == R"({"a":1})");
    CHECK(all[4].json == R"({"b":2})");
    CHECK(s.events_after("t", 4, 10).size() == 1);
  }
  // A damaged packed row, and one of a format this build does not know: Error(io) naming where, not garbage.
  for (const char* body : {"x'01ff'", "x'0102033000'", "x'02'", "x''"}) {
    CAPTURE(body);
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    sqlite_exec(db, std::string("UPDATE events SET body=") + body + " WHERE first_seq=1");
    sqlite3_close(db);
    SqliteStore s(SqliteStoreOptions{path});
    const Error e = error_of([&] { s.events_after("t", 0, 10); }, "reading a damaged row");
    CHECK(e.code() == ErrorCode::io);
    CHECK(e.message().find("thread t: the stored events from seq 1 are") != std::string::npos);
    CHECK(s.events_after("t", 2, 10).size() == 3);  // the rows after it still read
  }
}

TEST_CASE("the event packer keeps its buffers from row to row, up to 1 MiB") {
  sqlite::EventPacker packer;
  std::string row;
  for (int i = 0; i < 2000; ++i)
    row += R"({"type":"STEP_STARTED","stepName":"intent","timestamp":17965228)" + std::to_string(i) + "}\n";
  const auto packed = packer.pack(row);
  REQUIRE(packed.has_value());
  CHECK(sqlite::unpack_events(*packed, "t", 1, row.size()) == row);
  const size_t held = packer.held();
  CHECK(held > row.size());  // the read-back copy, and the encoding's room
  packer.trim();
  CHECK(packer.held() == held);
  CHECK(packer.pack(row).has_value());
  CHECK(packer.held() == held);  // nothing new allocated for a row of the same size
  // A row of 3 MB grows them past 1 MiB; trim lets go of them.
  const std::string big(3u << 20, 'x');
  REQUIRE(packer.pack(big).has_value());
  CHECK(packer.held() > sqlite::EventPacker::kKeepBytes);
  packer.trim();
  CHECK(packer.held() < 100);
  CHECK_FALSE(packer.pack("{}").has_value());  // packing would not shorten it
}
