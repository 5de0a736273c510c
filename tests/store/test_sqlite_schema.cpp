// SqliteStore's schema as SQLite sees it: migrations of existing files, and the query plans the store's
// speed depends on.
#include <doctest/doctest.h>

#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <vector>

#include "store/sqlite/rows.hpp"
#include "store/sqlite_store.hpp"
#include "support/runtime_fixture.hpp"
#include "support/sqlite_text.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {

TurnRecord active_turn(const std::string& id, const std::string& thread) {
  TurnRecord t;
  t.id = id;
  t.thread_id = thread;
  t.user_id = "u";
  t.status = TurnStatus::waiting_approval;
  t.run_id = "run_" + id;
  t.expires_at = 1;
  return t;
}

void insert(SqliteStore& s, const TurnRecord& t) {
  CommitBatch b;
  b.thread_id = t.thread_id;
  b.create_thread = ThreadRecord{t.thread_id, "u", "", false, 0, 0, 0};
  b.turn = t;
  b.expected_version = -1;
  s.commit(b);
}

// Back to schema 13's turns indexes, on (thread_id, ...), and no turns.span.
#define AGENTRT_BACK_TO_TURNS_V13                                                                                      \
  "DROP INDEX turns_by_client_message; DROP INDEX turns_by_thread; ALTER TABLE turns DROP COLUMN span; "               \
  "CREATE UNIQUE INDEX turns_by_client_message ON turns(thread_id, client_message_id) WHERE client_message_id <> ''; " \
  "CREATE INDEX turns_by_thread ON turns(thread_id, created_at); "

// Back to schema 9's messages table: the index on (thread_id, idx), no thread_spans, and the threads' rows interleaved
// (index by index) as threads written in turns have them.
const char* const kBackToMessagesV9 = AGENTRT_BACK_TO_TURNS_V13
    "CREATE TABLE messages_v9(id INTEGER PRIMARY KEY, thread_id TEXT NOT NULL, idx INTEGER NOT NULL, "
    "turn_id TEXT NOT NULL, run_id TEXT NOT NULL, body TEXT NOT NULL); "
    "INSERT INTO messages_v9(thread_id, idx, turn_id, run_id, body) "
    "SELECT thread_id, idx, turn_id, run_id, body FROM messages ORDER BY idx, id; "
    "DROP TABLE messages; ALTER TABLE messages_v9 RENAME TO messages; "
    "CREATE UNIQUE INDEX messages_by_thread ON messages(thread_id, idx); DROP TABLE thread_spans; ";

}  // namespace

TEST_CASE("version-2 and version-3 files migrate to the active column and keep their turns and the one-active rule") {
  // Schema 2 stated the active-turn index's predicate as an IN list, schema 3 as ORs; both on `status`.
  const std::pair<int, const char*> olds[] = {
      {2, "status IN ('RUNNING','WAITING_APPROVAL','RESUMING')"},
      {3, "status='RUNNING' OR status='WAITING_APPROVAL' OR status='RESUMING'"}};
  for (const auto& [version, predicate] : olds) {
    CAPTURE(version);
    TempDir dir;
    const std::string path = dir.file("old.db");
    {
      SqliteStore s(SqliteStoreOptions{path});
      insert(s, active_turn("turn_a", "t1"));
      TurnRecord done = active_turn("turn_c", "t2");
      done.status = TurnStatus::completed;
      insert(s, done);
    }
    // Back to what that schema had: no `active` column, the index on `status`, no thread_states, no ledger.client,
    // no turns.trace, the interrupts in the turn's row.
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    const std::string back =
        kBackToMessagesV9 +
        fmt::format(
            "DROP INDEX turns_one_active; ALTER TABLE turns DROP COLUMN active; CREATE UNIQUE INDEX turns_one_active "
            "ON turns(thread_id) WHERE {}; DROP TABLE thread_states; ALTER TABLE ledger DROP COLUMN client; "
            "DROP TABLE turn_waits; ALTER TABLE turns ADD COLUMN interrupts TEXT NOT NULL DEFAULT '[]'; "
            "PRAGMA user_version={};",
            predicate, version);
    REQUIRE(sqlite3_exec(db, back.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);

    SqliteStore s(SqliteStoreOptions{path});
    CHECK(s.schema_version() == SqliteStore::kSchemaVersion);
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    const std::string sql = sqlite_text(db, "SELECT sql FROM sqlite_schema WHERE name='turns_one_active'");
    CHECK(sql.find("WHERE active=1") != std::string::npos);
    CHECK(sql.find("status") == std::string::npos);
    CHECK(sqlite_text(db, "SELECT id, active FROM turns ORDER BY id") == "turn_a|1|\nturn_c|0|\n");
    CHECK(sqlite_text(db, "SELECT count(*) FROM turn_waits") == "0|\n");
    sqlite3_close(db);
    // The waiting turn is still its thread's one active turn; the ended one is not.
    auto a = s.active_turn("t1");
    REQUIRE(a);
    CHECK(a->id == "turn_a");
    CHECK_FALSE(s.active_turn("t2"));
    CHECK_THROWS_AS(insert(s, active_turn("turn_b", "t1")), Error);
    insert(s, active_turn("turn_d", "t2"));
    CHECK(s.turns_in_status(TurnStatus::waiting_approval).size() == 2);
    CHECK(s.turns_expired(2).size() == 2);
  }
}

TEST_CASE("a version-7 file's waiting turns keep their interrupts and trace context, moved beside their rows") {
  TempDir dir;
  const std::string path = dir.file("v7.db");
  TurnRecord waiting = active_turn("turn_w", "t1");
  waiting.interrupts = json::array({{{"id", "int_call_1"}, {"reason", "tool_call"}, {"message", "Approve?"}}});
  waiting.trace = R"({"traceId":"4bf92f3577b34da6a3ce929d0e0e4736"})";
  TurnRecord traced = active_turn("turn_x", "t2");
  traced.trace = R"({"traceId":"00f067aa0ba902b700f067aa0ba902b7"})";
  TurnRecord done = active_turn("turn_d", "t3");
  done.status = TurnStatus::completed;
  {
    SqliteStore s(SqliteStoreOptions{path});
    for (const auto& t : {waiting, traced, done}) insert(s, t);
  }
  // Schema 7: the interrupts and the trace context were columns of the turn's row.
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  REQUIRE(sqlite3_exec(
              db,
              (kBackToMessagesV9 + std::string("ALTER TABLE turns ADD COLUMN interrupts TEXT NOT NULL DEFAULT '[]'; ") +
               "ALTER TABLE turns ADD COLUMN trace TEXT NOT NULL DEFAULT ''; "
               "UPDATE turns SET interrupts=(SELECT interrupts FROM turn_waits WHERE turn_id=turns.id), "
               "trace=(SELECT trace FROM turn_waits WHERE turn_id=turns.id) "
               "WHERE id IN (SELECT turn_id FROM turn_waits); "
               "DROP TABLE turn_waits; PRAGMA user_version=7;")
                  .c_str(),
              nullptr, nullptr, nullptr) == SQLITE_OK);
  CHECK(sqlite_text(db, "SELECT id, trace<>'', interrupts FROM turns ORDER BY id") ==
        "turn_d|0|[]|\nturn_w|1|" + waiting.interrupts.dump() + "|\nturn_x|1|[]|\n");
  sqlite3_close(db);

  SqliteStore s(SqliteStoreOptions{path});
  CHECK(s.schema_version() == SqliteStore::kSchemaVersion);
  for (const auto& want : {waiting, traced, done}) {
    CAPTURE(want.id);
    auto got = s.get_turn(want.id);
    REQUIRE(got);
    CHECK(got->interrupts == want.interrupts);
    CHECK(got->trace == want.trace);
  }
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  CHECK(sqlite_text(db, "SELECT turn_id FROM turn_waits ORDER BY turn_id") == "turn_w|\nturn_x|\n");
  CHECK(sqlite_text(db, "SELECT count(*) FROM pragma_table_info('turns') WHERE name IN ('interrupts','trace')") ==
        "0|\n");
  sqlite3_close(db);
}

TEST_CASE("a version-9 file's messages move into one span of rowids per thread, in order, and new ones follow them") {
  TempDir dir;
  const std::string path = dir.file("v9.db");
  // Threads written in turns: in schema 9 their rows interleave in the table.
  const std::vector<std::pair<std::string, int>> commits = {{"t1", 2}, {"t2", 1}, {"t1", 1}, {"t3", 2}, {"t2", 2}};
  std::map<std::string, std::vector<std::string>> want;
  {
    SqliteStore s(SqliteStoreOptions{path});
    for (const auto& [thread, n] : commits) {
      for (int i = 0; i < n; ++i) {  // a row a message, as schema 9 wrote them (a row is one run's since 13)
        CommitBatch b;
        b.thread_id = thread;
        Message m;
        m.role = Role::user;
        m.content = fmt::format("{} #{}", thread, want[thread].size());
        want[thread].push_back(m.content);
        b.messages.push_back(MessageRecord{thread, 0, "turn_1", "run_1", m});
        s.commit(b);
      }
    }
  }
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite_exec(db, kBackToMessagesV9 + std::string("PRAGMA user_version=9;"));
  CHECK(sqlite_text(db, "SELECT thread_id FROM messages ORDER BY id") == "t1|\nt2|\nt3|\nt1|\nt2|\nt3|\nt1|\nt2|\n");
  sqlite3_close(db);

  SqliteStore s(SqliteStoreOptions{path});
  CHECK(s.schema_version() == SqliteStore::kSchemaVersion);
  for (const auto& [thread, contents] : want) {
    CAPTURE(thread);
    auto got = s.messages(thread);
    REQUIRE(got.size() == contents.size());
    for (size_t i = 0; i < got.size(); ++i) {
      CHECK(got[i].index == static_cast<int64_t>(i));
      CHECK(got[i].message.content == contents[i]);
    }
  }
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  // Spans in the order of each thread's first message; each message at its span's base + its index.
  CHECK(sqlite_text(db, "SELECT base, thread_id FROM thread_spans ORDER BY base") == "1|t1|\n2|t2|\n3|t3|\n");
  CHECK(sqlite_text(db,
                    "SELECT count(*) FROM messages m JOIN thread_spans s ON s.thread_id = m.thread_id "
                    "WHERE m.id <> s.base * 16777216 + m.idx") == "0|\n");
  CHECK(sqlite_text(db, "SELECT count(*) FROM sqlite_schema WHERE name = 'messages_by_thread'") == "0|\n");
  CHECK(sqlite_text(db, "PRAGMA integrity_check") == "ok|\n");
  sqlite3_close(db);
  CommitBatch more;
  more.thread_id = "t2";
  Message m;
  m.role = Role::user;
  m.content = "t2 #3";
  more.messages.push_back(MessageRecord{"t2", 0, "turn_2", "run_2", m});
  s.commit(more);
  CHECK(more.messages[0].index == 3);
  auto t2 = s.thread_messages("t2");
  REQUIRE(t2.size() == 4);
  CHECK(t2[3].content == "t2 #3");
  CHECK(s.messages("t1").size() == 3);
}

TEST_CASE("a version-10 file's event rows move into their threads' spans; threads with events alone get spans after") {
  TempDir dir;
  const std::string path = dir.file("v10.db");
  auto batch = [](const std::string& thread, int events, int messages, bool create) {
    CommitBatch b;
    b.thread_id = thread;
    if (create) b.create_thread = ThreadRecord{thread, "u", "", false, 0, 0, 0};
    for (int i = 0; i < events; ++i)
      b.events.push_back(StoredEvent{0, "run_" + thread, fmt::format(R"({{"thread":"{}","i":{}}})", thread, i)});
    for (int i = 0; i < messages; ++i) {
      Message m;
      m.role = Role::user;
      m.content = fmt::format("{} #{}", thread, i);
      b.messages.push_back(MessageRecord{thread, 0, "turn_1", "run_1", m});
    }
    return b;
  };
  std::map<std::string, std::vector<StoredEvent>> before;
  {
    SqliteStore s(SqliteStoreOptions{path});
    for (auto b : {batch("t1", 2, 1, true), batch("t2", 3, 0, true), batch("t1", 1, 1, false), batch("t3", 0, 2, true),
                   batch("t2", 2, 0, false), batch("t4", 1, 0, false)})
      s.commit(b);
    for (const char* t : {"t1", "t2", "t3", "t4"}) before[t] = s.events_after(t, 0, 100);
  }
  CHECK(before["t1"].size() == 3);
  CHECK(before["t2"].size() == 5);
  CHECK(before["t4"].size() == 1);
  // Back to schema 10: thread_spans a rowid table of the threads with messages; the event rows in the order they
  // were written, found by the index on (thread_id, first_seq).
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite_exec(db, AGENTRT_BACK_TO_TURNS_V13
              "CREATE TABLE spans10(base INTEGER PRIMARY KEY, thread_id TEXT NOT NULL UNIQUE); "
              "INSERT INTO spans10 SELECT base, thread_id FROM thread_spans WHERE thread_id IN "
              "(SELECT thread_id FROM messages); DROP TABLE thread_spans; ALTER TABLE spans10 RENAME TO thread_spans; "
              "CREATE TABLE events10(id INTEGER PRIMARY KEY, thread_id TEXT NOT NULL, first_seq INTEGER NOT NULL, "
              "last_seq INTEGER NOT NULL, run_id TEXT NOT NULL, body TEXT NOT NULL); "
              "INSERT INTO events10(thread_id, first_seq, last_seq, run_id, body) "
              "SELECT thread_id, first_seq, last_seq, run_id, body FROM events ORDER BY first_seq, id; "
              "DROP TABLE events; ALTER TABLE events10 RENAME TO events; "
              "CREATE UNIQUE INDEX events_by_thread ON events(thread_id, first_seq); PRAGMA user_version=10;");
  CHECK(sqlite_text(db, "SELECT base, thread_id FROM thread_spans ORDER BY base") == "1|t1|\n3|t3|\n");
  sqlite3_close(db);

  SqliteStore s(SqliteStoreOptions{path});
  CHECK(s.schema_version() == SqliteStore::kSchemaVersion);
  for (const auto& [thread, events] : before) {
    CAPTURE(thread);
    const auto got = s.events_after(thread, 0, 100);
    REQUIRE(got.size() == events.size());
    for (size_t i = 0; i < got.size(); ++i) {
      CHECK(got[i].seq == events[i].seq);
      CHECK(got[i].run_id == events[i].run_id);
      CHECK(got[i].json == events[i].json);
    }
  }
  CHECK(s.get_thread("t1")->last_seq == 3);
  CHECK(s.get_thread("t2")->last_seq == 5);
  CHECK(s.get_thread("t3")->last_seq == 0);
  CHECK(s.thread_messages("t3").size() == 2);
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  // The spans with messages keep their bases; t2 and t4 follow, in the order of their first events.
  CHECK(sqlite_text(db, "SELECT base, thread_id FROM thread_spans ORDER BY base") == "1|t1|\n3|t3|\n4|t2|\n5|t4|\n");
  CHECK(sqlite_text(db,
                    "SELECT count(*) FROM events e JOIN thread_spans s ON s.thread_id = e.thread_id "
                    "WHERE e.id <> s.base * 4294967296 + e.first_seq") == "0|\n");
  CHECK(sqlite_text(db, "SELECT count(*) FROM events") == "5|\n");  // a row a commit that had events
  CHECK(sqlite_text(db,
                    "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND tbl_name IN ('events', "
                    "'thread_spans')") == "0|\n");
  CHECK(sqlite_text(db, "PRAGMA integrity_check") == "ok|\n");
  sqlite3_close(db);
  // New rows follow: t2's seqs go on, a new thread's span is the next.
  auto more = batch("t2", 1, 0, false);
  s.commit(more);
  CHECK(more.events[0].seq == 6);
  auto fresh = batch("t5", 1, 1, true);
  s.commit(fresh);
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  CHECK(sqlite_text(db, "SELECT base FROM thread_spans WHERE thread_id = 't5'") == "6|\n");
  sqlite3_close(db);
  CHECK(s.events_after("t2", 5, 100).size() == 1);
  CHECK(s.get_thread("t5")->last_seq == 1);
}

TEST_CASE("a version-11 file's JSON message rows read as they are; new rows beside them are packed and grouped") {
  TempDir dir;
  const std::string path = dir.file("v11.db");
  auto batch = [](const std::string& thread, int from, int count) {
    CommitBatch b;
    b.thread_id = thread;
    for (int i = from; i < from + count; ++i) {
      Message m;
      m.id = fmt::format("m{}", i);
      m.role = i % 2 ? Role::assistant : Role::user;
      m.content = fmt::format("{} #{}", thread, i);
      if (i % 2) m.metadata = {{"i", i}, {"neg", -i}, {"half", i + 0.5}};
      b.messages.push_back(MessageRecord{thread, 0, "turn_1", "run_1", m});
    }
    return b;
  };
  std::vector<MessageRecord> before;
  {
    SqliteStore s(SqliteStoreOptions{path});
    auto b = batch("t1", 0, 3);
    s.commit(b);
    before = s.messages("t1");
  }
  // Back to schema 11: a row a message, its rowid the span plus its index, its body JSON text.
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite_exec(db, "DELETE FROM messages WHERE thread_id='t1'");
  for (const auto& m : before) {
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(db,
                               "INSERT INTO messages(id,thread_id,idx,turn_id,run_id,body) SELECT base*16777216+?2,"
                               "'t1',?2,'turn_1','run_1',?1 FROM thread_spans WHERE thread_id='t1'",
                               -1, &st, nullptr) == SQLITE_OK);
    const std::string body = to_json_string(m.message);
    sqlite3_bind_text(st, 1, body.data(), static_cast<int>(body.size()), SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, m.index);
    REQUIRE(sqlite3_step(st) == SQLITE_DONE);
    sqlite3_finalize(st);
  }
  sqlite_exec(db, AGENTRT_BACK_TO_TURNS_V13 "PRAGMA user_version=11");
  CHECK(sqlite_text(db, "SELECT group_concat(typeof(body)) FROM messages") == "text,text,text|\n");
  sqlite3_close(db);

  SqliteStore s(SqliteStoreOptions{path});
  CHECK(s.schema_version() == SqliteStore::kSchemaVersion);
  auto more = batch("t1", 3, 2);
  s.commit(more);
  const auto after = s.messages("t1");
  const auto history = s.thread_messages("t1");
  REQUIRE(after.size() == 5);
  REQUIRE(history.size() == 5);
  for (size_t i = 0; i < after.size(); ++i) {
    CAPTURE(i);
    const Message& want = i < 3 ? before[i].message : more.messages[i - 3].message;
    CHECK(to_json_string(after[i].message) == to_json_string(want));
    CHECK(to_json_string(history[i]) == to_json_string(want));
    CHECK(after[i].index == static_cast<int64_t>(i));
  }
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  CHECK(sqlite_text(db, "SELECT group_concat(typeof(body)) FROM (SELECT body FROM messages ORDER BY idx)") ==
        "text,text,text,blob|\n");  // the two new ones, one run's: one row
  CHECK(sqlite_text(db, "PRAGMA integrity_check") == "ok|\n");
  sqlite3_close(db);
}

TEST_CASE("the event reads search a thread's span by rowid: no scan, no temporary b-tree") {
  TempDir dir;
  SqliteStore s(SqliteStoreOptions{dir.file("plan.db")});
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(dir.file("plan.db").c_str(), &db) == SQLITE_OK);
  for (const char* sql : {AGENTRT_EVENTS_FROM, "SELECT id, " AGENTRT_THREAD_LAST_SEQ " FROM threads WHERE id='t'"}) {
    const std::string plan = sqlite_text(db, std::string("EXPLAIN QUERY PLAN ") + sql);
    CAPTURE(plan);
    CHECK(plan.find("SCAN") == std::string::npos);
    CHECK(plan.find("TEMP B-TREE") == std::string::npos);
    CHECK(plan.find("SEARCH e USING INTEGER PRIMARY KEY") + plan.find("SEARCH events USING INTEGER PRIMARY KEY") !=
          2 * std::string::npos);
  }
  sqlite3_close(db);
}

TEST_CASE("a turn's wait lives in turn_waits while it waits: ended waits leave no empty room in the turns table") {
  TempDir dir;
  const std::string path = dir.file("waits.db");
  SqliteStore s(SqliteStoreOptions{path});
  // Each turn pauses with a large interrupt (as a tool call's approval carries its arguments and response schema),
  // then completes; its row is rewritten in place each time.
  const json interrupt = json::array({{{"id", "int_call_1"}, {"message", std::string(900, 'a')}}});
  constexpr int kTurns = 300;
  for (int i = 0; i < kTurns; ++i) {
    TurnRecord t = active_turn(fmt::format("turn_{:04}", i), fmt::format("t{}", i));
    t.interrupts = interrupt;
    insert(s, t);
  }
  CHECK(s.get_turn("turn_0007")->interrupts == interrupt);
  CHECK(s.turns_in_status(TurnStatus::waiting_approval).size() == kTurns);
  for (int i = 0; i < kTurns; ++i) {
    TurnRecord t = *s.get_turn(fmt::format("turn_{:04}", i));
    t.status = TurnStatus::completed;
    t.interrupts = json::array();
    CommitBatch b;
    b.thread_id = t.thread_id;
    b.expected_version = t.version;
    b.turn = t;
    s.commit(b);
  }
  CHECK(s.get_turn("turn_0007")->interrupts == json::array());
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  CHECK(sqlite_text(db, "SELECT count(*) FROM turn_waits") == "0|\n");
  // The turns table's pages hold its rows (~100 bytes each), not the room the waits left: with the interrupts in
  // the row (schema 7) it took ~1 KB a turn, nine tenths of it empty.
  const std::string stat = sqlite_text(db, "SELECT sum(pgsize), sum(unused) FROM dbstat WHERE name='turns'");
  const auto bar = stat.find('|');
  const double bytes = std::stod(stat.substr(0, bar)), unused = std::stod(stat.substr(bar + 1));
  CAPTURE(stat);
  CHECK(bytes <= kTurns * 128);
  CHECK(unused < 0.5 * bytes);
  sqlite3_close(db);
}

// The page numbers of the WAL's frames from frame `from` on (SQLite's WAL format: a 32-byte header, then
// frames of a 24-byte header, whose first 4 bytes are the page number, and a page).
std::vector<uint32_t> wal_pages(const std::string& wal_path, size_t from, size_t* frames = nullptr) {
  std::ifstream in(wal_path, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto be32 = [&](size_t at) {
    return (uint32_t(uint8_t(data[at])) << 24) | (uint32_t(uint8_t(data[at + 1])) << 16) |
           (uint32_t(uint8_t(data[at + 2])) << 8) | uint32_t(uint8_t(data[at + 3]));
  };
  std::vector<uint32_t> out;
  if (data.size() < 32) return out;
  const size_t page = be32(8);
  size_t n = 0;
  for (size_t at = 32; at + 24 + page <= data.size(); at += 24 + page, ++n)
    if (n >= from) out.push_back(be32(at));
  if (frames) *frames = n;
  return out;
}

TEST_CASE("a turn's moves between active statuses leave the one-active index unwritten; a start and an end write it") {
  TempDir dir;
  const std::string path = dir.file("moves.db");
  SqliteStore s(SqliteStoreOptions{path});
  TurnRecord t = active_turn("turn_m", "t1");
  insert(s, t);
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  auto update = [&](TurnStatus to) {
    CommitBatch b;
    b.thread_id = "t1";
    t.status = to;
    b.turn = t;
    b.expected_version = t.version;
    s.commit(b);
    t.version = b.turn->version;
  };
  const uint32_t index_page = static_cast<uint32_t>(
      std::stoul(sqlite_text(db, "SELECT rootpage FROM sqlite_schema WHERE name='turns_one_active'")));
  const uint32_t table_page =
      static_cast<uint32_t>(std::stoul(sqlite_text(db, "SELECT rootpage FROM sqlite_schema WHERE name='turns'")));
  auto written_by = [&](TurnStatus to) {  // how often the update's commit wrote the index's page
    size_t before = 0;
    wal_pages(path + "-wal", 0, &before);
    update(to);
    auto pages = wal_pages(path + "-wal", before);
    REQUIRE_FALSE(pages.empty());
    CHECK(std::count(pages.begin(), pages.end(), table_page) == 1);
    return std::count(pages.begin(), pages.end(), index_page);
  };
  CHECK(written_by(TurnStatus::resuming) == 0);
  CHECK(written_by(TurnStatus::running) == 0);
  CHECK(sqlite_text(db, "SELECT active, status, version FROM turns") == "1|RUNNING|2|\n");
  CHECK_THROWS_AS(insert(s, active_turn("turn_x", "t1")), Error);
  CHECK(written_by(TurnStatus::completed) == 1);
  CHECK(sqlite_text(db, "SELECT active, status, version FROM turns") == "0|COMPLETED|3|\n");
  insert(s, active_turn("turn_y", "t1"));  // the thread is free again
  // A stale version is refused whichever form the update takes.
  CommitBatch stale;
  stale.thread_id = "t1";
  TurnRecord old = t;
  old.status = TurnStatus::failed;
  stale.turn = old;
  stale.expected_version = 1;
  CHECK_THROWS_AS(s.commit(stale), Error);
  sqlite3_close(db);
}

TEST_CASE("the active-turn queries read the partial index, not the table") {
  // The planner uses a partial index only when the query states its predicate word for word; a query that
  // drifted from the index would scan every turn ever written.
  TempDir dir;
  SqliteStore s(SqliteStoreOptions{dir.file("plan.db")});
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(dir.file("plan.db").c_str(), &db) == SQLITE_OK);
  const std::string active = "active=1";
  for (const std::string& where :
       {"thread_id='t' AND " + active,
        "status='WAITING_APPROVAL' AND " + active + " AND expires_at > 0 AND expires_at <= 5",
        "status='RUNNING' AND " + active}) {
    CAPTURE(where);
    const std::string plan = sqlite_text(db, "EXPLAIN QUERY PLAN SELECT id FROM turns WHERE " + where);
    CHECK(plan.find("turns_one_active") != std::string::npos);
    // The store's own form, which joins each turn to its wait's row.
    const std::string joined =
        sqlite_text(db, std::string("EXPLAIN QUERY PLAN " AGENTRT_SQLITE_SELECT_TURNS " WHERE ") + where);
    CAPTURE(joined);
    CHECK(joined.find("turns_one_active") != std::string::npos);
    CHECK(joined.find("SEARCH w USING PRIMARY KEY (turn_id=?)") != std::string::npos);  // a probe, no scan of waits
  }
  sqlite3_close(db);
}

TEST_CASE("new threads' spans never collide when two connections take turns giving them") {
  // Each store counts the spans it gives while nobody else writes; a commit by the other connection makes it read
  // them from the rows again (a stale count would give the other's span twice: rows of two threads in one span).
  TempDir dir;
  SqliteStore a(SqliteStoreOptions{dir.file("spans.db")});
  SqliteStore b(SqliteStoreOptions{dir.file("spans.db")});
  auto start = [](SqliteStore& s, const std::string& thread) {
    CommitBatch c;
    c.thread_id = thread;
    c.create_thread = ThreadRecord{thread, "u", "", false, 0, 0, 0};
    c.events.push_back(StoredEvent{0, "run_" + thread, R"({"type":"CUSTOM","value":")" + thread + "\"}"});
    c.messages.push_back(MessageRecord{thread, 0, "turn_" + thread, "run_" + thread, user_message("hi " + thread)});
    s.commit(c);
  };
  std::vector<std::string> threads;
  for (int i = 0; i < 12; ++i) {
    const std::string t = fmt::format("t{}", i);
    start(i % 3 == 2 ? b : a, t);  // a, a, b, a, a, b, ...: each store gives spans in a row, then the other one
    threads.push_back(t);
  }
  std::set<int64_t> bases;
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(dir.file("spans.db").c_str(), &db) == SQLITE_OK);
  for (const auto& t : threads) {
    sqlite3_stmt* q = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, "SELECT base FROM thread_spans WHERE thread_id=?", -1, &q, nullptr) == SQLITE_OK);
    sqlite3_bind_text(q, 1, t.c_str(), -1, SQLITE_TRANSIENT);
    REQUIRE(sqlite3_step(q) == SQLITE_ROW);
    bases.insert(sqlite3_column_int64(q, 0));
    sqlite3_finalize(q);
    // Each thread reads back its own event and message, from either connection.
    for (SqliteStore* s : {&a, &b}) {
      auto evs = s->events_after(t, 0, 10);
      REQUIRE(evs.size() == 1);
      CHECK(evs[0].json.find("\"" + t + "\"") != std::string::npos);
      auto msgs = s->messages(t);
      REQUIRE(msgs.size() == 1);
      CHECK(msgs[0].message.content == "hi " + t);
    }
  }
  sqlite3_close(db);
  CHECK(bases.size() == threads.size());  // a span of its own each
}

TEST_CASE(
    "a version-13 file's turns are indexed by their threads' spans; threads with turns and no span get new ones") {
  TempDir dir;
  const std::string path = dir.file("v13.db");
  auto turn_batch = [](const std::string& thread, const std::string& turn, const std::string& client_message,
                       bool with_rows) {
    CommitBatch b;
    b.thread_id = thread;
    b.create_thread = ThreadRecord{thread, "u", "", false, 0, 0, 0};
    TurnRecord t = active_turn(turn, thread);
    t.status = TurnStatus::completed;
    t.client_message_id = client_message;
    t.steps = 2;
    b.turn = t;
    if (with_rows) {
      b.events.push_back(StoredEvent{0, t.run_id, R"({"type":"CUSTOM","value":")" + turn + "\"}"});
      b.messages.push_back(MessageRecord{thread, 0, turn, t.run_id, user_message("hi " + turn)});
    }
    return b;
  };
  {
    SqliteStore s(SqliteStoreOptions{path});
    for (auto b : {turn_batch("ta", "turn_a1", "m1", true), turn_batch("tb", "turn_b1", "m1", false),
                   turn_batch("ta", "turn_a2", "m2", true), turn_batch("tb", "turn_b2", "", false)})
      s.commit(b);
    CommitBatch events_only;
    events_only.thread_id = "tc";
    events_only.events.push_back(StoredEvent{0, "run_c", R"({"type":"CUSTOM"})"});
    s.commit(events_only);
  }
  // Schema 13: a span only for threads with events or messages; the turns' indexes on thread_id.
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite_exec(db, AGENTRT_BACK_TO_TURNS_V13
              "DELETE FROM thread_spans WHERE thread_id NOT IN (SELECT thread_id FROM events UNION "
              "SELECT thread_id FROM messages); PRAGMA user_version=13;");
  CHECK(sqlite_text(db, "SELECT thread_id, base FROM thread_spans ORDER BY base") == "ta|1|\ntc|3|\n");
  sqlite3_close(db);

  SqliteStore s(SqliteStoreOptions{path});
  CHECK(s.schema_version() == SqliteStore::kSchemaVersion);
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  // tb gets the span past every one in use; each turn names its thread's.
  CHECK(sqlite_text(db, "SELECT thread_id, base FROM thread_spans ORDER BY base") == "ta|1|\ntc|3|\ntb|4|\n");
  CHECK(sqlite_text(db, "SELECT id, span FROM turns ORDER BY id") ==
        "turn_a1|1|\nturn_a2|1|\nturn_b1|4|\nturn_b2|4|\n");
  CHECK(sqlite_text(db, "SELECT sql FROM sqlite_schema WHERE name='turns_by_thread'").find("(span, created_at)") !=
        std::string::npos);
  CHECK(sqlite_text(db, "SELECT sql FROM sqlite_schema WHERE name='turns_by_client_message'")
            .find("(span, client_message_id)") != std::string::npos);
  CHECK(sqlite_text(db, "PRAGMA integrity_check") == "ok|\n");
  sqlite3_close(db);
  // The reads by thread find the same turns as before.
  CHECK(s.find_turn_by_client_message("ta", "m2")->id == "turn_a2");
  CHECK(s.find_turn_by_client_message("tb", "m1")->id == "turn_b1");
  CHECK_FALSE(s.find_turn_by_client_message("tb", "m2"));
  CHECK_FALSE(s.find_turn_by_client_message("tc", "m1"));
  CHECK(s.last_turn("tb")->id == "turn_b2");
  CHECK_FALSE(s.last_turn("tc"));
  CHECK(s.spend("tb", "", "").model_calls == 4);
  CHECK(s.spend("ta", "", "turn_a1").model_calls == 2);
  CHECK(s.spend("", "u", "").model_calls == 8);
  // A client message id is one turn's per thread: refused again on tb, taken on a new thread.
  auto again = turn_batch("tb", "turn_b3", "m1", false);
  CHECK_THROWS_WITH_AS(s.commit(again), doctest::Contains("already started turn turn_b1"), Error);
  auto fresh = turn_batch("td", "turn_d1", "m1", true);
  s.commit(fresh);
  CHECK(s.find_turn_by_client_message("td", "m1")->id == "turn_d1");
  // A new thread's span follows tb's (a turn's span counts as in use), its rows in it.
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  CHECK(sqlite_text(db, "SELECT base FROM thread_spans WHERE thread_id='td'") == "5|\n");
  CHECK(sqlite_text(db, "SELECT span FROM turns WHERE id='turn_d1'") == "5|\n");
  sqlite3_close(db);
  CHECK(s.events_after("td", 0, 10).size() == 1);
  CHECK(s.messages("td").size() == 1);
}

TEST_CASE("new threads' turns take ascending spans (the indexes' last pages); reads by thread search the indexes") {
  TempDir dir;
  const std::string path = dir.file("spans.db");
  SqliteStore s(SqliteStoreOptions{path});
  // Thread ids in no order (as clients' UUIDs are), committed one after another; one thread has a turn and no rows.
  const std::vector<std::string> threads = {"k9", "a1", "z3", "c7", "m2"};
  for (size_t i = 0; i < threads.size(); ++i) {
    TurnRecord t = active_turn("turn_" + threads[i], threads[i]);
    t.status = TurnStatus::completed;
    t.client_message_id = "m";
    CommitBatch b;
    b.thread_id = threads[i];
    b.create_thread = ThreadRecord{threads[i], "u", "", false, 0, 0, 0};
    b.turn = t;
    if (i != 2) b.events.push_back(StoredEvent{0, t.run_id, R"({"type":"CUSTOM"})"});
    s.commit(b);
  }
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  CHECK(sqlite_text(db, "SELECT group_concat(thread_id) FROM (SELECT thread_id FROM turns ORDER BY span)") ==
        "k9,a1,z3,c7,m2|\n");
  CHECK(sqlite_text(db, "SELECT count(DISTINCT span), min(span) FROM turns") == "5|1|\n");
  for (const std::string& tail :
       {std::string(" AND client_message_id='m'"), std::string(" ORDER BY created_at DESC, turns.rowid DESC LIMIT 1"),
        std::string(" AND id<>'x'")}) {
    std::string sql =
        std::string("EXPLAIN QUERY PLAN " AGENTRT_SQLITE_SELECT_TURNS " WHERE " AGENTRT_TURNS_OF_THREAD) + tail;
    sql.replace(sql.find("?1"), 2, "'a1'");
    sql.replace(sql.find("?1"), 2, "'a1'");
    const std::string plan = sqlite_text(db, sql);
    CAPTURE(plan);
    CHECK(plan.find("SCAN") == std::string::npos);
    CHECK(plan.find("TEMP B-TREE") == std::string::npos);
    CHECK(plan.find("USING INDEX turns_by_") != std::string::npos);
  }
  sqlite3_close(db);
  CHECK(s.last_turn("z3")->id == "turn_z3");
  CHECK(s.find_turn_by_client_message("c7", "m")->id == "turn_c7");
  // A batch of one thread that carries another's turn: the turn takes its own thread's span (given now).
  CommitBatch other;
  other.thread_id = "k9";
  other.events.push_back(StoredEvent{0, "run_x", R"({"type":"CUSTOM"})"});
  TurnRecord y = active_turn("turn_y", "y1");
  y.status = TurnStatus::completed;
  other.turn = y;
  s.commit(other);
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  CHECK(sqlite_text(db,
                    "SELECT s.base, t.span FROM thread_spans s JOIN turns t ON t.thread_id=s.thread_id "
                    "WHERE s.thread_id='y1'") == "6|6|\n");
  sqlite3_close(db);
  CHECK(s.last_turn("y1")->id == "turn_y");
  CHECK(s.last_turn("k9")->id == "turn_k9");
}
