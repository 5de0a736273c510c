#include <doctest/doctest.h>

#include <fmt/format.h>
#include <sqlite3.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "store/document_layout.hpp"
#include "store/fs_object_store.hpp"
#include "store/messages_of_turn.hpp"
#include "store/sqlite_store.hpp"
#include "store/store_conformance.hpp"
#include "support/runtime_fixture.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {

std::shared_ptr<FsObjectStore> fs_objects(const std::string& root) {
  FsObjectStoreOptions o;
  o.root = root;
  o.bucket = "agentrt";
  o.signing_secret = "test-secret";
  o.public_base_url = "http://127.0.0.1:8080/api/v1/objects";
  return std::make_shared<FsObjectStore>(o);
}

DocumentLayoutOptions doc_options(const std::string& path, uint64_t cap = 2 * 1024 * 1024) {
  DocumentLayoutOptions o;
  o.path = path;
  o.max_document_bytes = cap;
  return o;
}

// An ObjectStore that remembers the last bytes written under each key (to rebuild crash states).
class RecordingObjects final : public ObjectStore {
 public:
  explicit RecordingObjects(std::shared_ptr<ObjectStore> inner) : inner_(std::move(inner)) {}
  std::string bucket() const override { return inner_->bucket(); }
  void put(std::string_view key, std::string_view bytes, std::string_view type) override {
    record(key, bytes);
    inner_->put(key, bytes, type);
  }
  bool put_if_absent(std::string_view key, std::string_view bytes, std::string_view type) override {
    record(key, bytes);
    return inner_->put_if_absent(key, bytes, type);
  }
  std::optional<std::string> get(std::string_view key) override { return inner_->get(key); }
  std::optional<ObjectInfo> head(std::string_view key) override { return inner_->head(key); }
  bool remove(std::string_view key) override { return inner_->remove(key); }
  std::vector<ObjectInfo> list(std::string_view prefix) override { return inner_->list(prefix); }
  std::string sign_url(std::string_view key, int64_t expires) const override { return inner_->sign_url(key, expires); }
  std::string verify_url(std::string_view url, int64_t now) const override { return inner_->verify_url(url, now); }
  std::string written(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    REQUIRE_MESSAGE(puts_.count(key) == 1, "nothing was written under " << key);
    return puts_[key];
  }

 private:
  void record(std::string_view key, std::string_view bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    puts_[std::string(key)] = std::string(bytes);
  }
  std::shared_ptr<ObjectStore> inner_;
  std::mutex mutex_;
  std::map<std::string, std::string> puts_;
};

// One "process": a SQLite store whose messages the document layout keeps, and its object store, on files
// of `dir`.
struct DocStack {
  std::shared_ptr<ObjectStore> objects;
  DocumentLayout* layout = nullptr;  // owned by store
  std::shared_ptr<SqliteStore> store;
  DocStack(const TempDir& dir, uint64_t cap = 2 * 1024 * 1024, std::shared_ptr<ObjectStore> objs = {}) {
    objects = objs ? std::move(objs) : fs_objects(dir.file("objects"));
    auto l = std::make_unique<DocumentLayout>(objects, doc_options(dir.file("agentrt.db.docs"), cap));
    layout = l.get();
    store = std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("agentrt.db")}, std::move(l));
  }
  std::optional<ConversationDocument> document(std::string_view thread_id) {
    return layout->document(*store, thread_id);
  }
};

MessageRecord text_message(const std::string& id, const std::string& text, const std::string& turn = "t1") {
  Message m;
  m.id = id;
  m.role = Role::assistant;
  m.content = text;
  return MessageRecord{"", 0, turn, "run_" + turn, m};
}

CommitBatch message_batch(const std::string& thread, std::vector<MessageRecord> msgs, bool with_event = true) {
  CommitBatch b;
  b.thread_id = thread;
  b.messages = std::move(msgs);
  if (with_event) b.events.push_back(StoredEvent{0, "run_t1", to_json_string(events::step_started("execution"))});
  return b;
}

std::vector<std::string> ids_of(const std::vector<MessageRecord>& msgs) {
  std::vector<std::string> out;
  for (const auto& m : msgs) out.push_back(m.message.id);
  return out;
}

// Rows in the store database's own messages table, read with SQLite directly.
int64_t inner_message_rows(const std::string& db_path) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(db_path.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "SELECT count(*) FROM messages", -1, &st, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  int64_t n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return n;
}

// Puts the pointer row back to `d` by hand: the state a commit leaves when it dies after its inner commit.
void set_pointer(const std::string& docs_path, const ConversationDocument& d) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(docs_path.c_str(), &db) == SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "UPDATE thread_documents SET doc_key=?,version=?,bytes=?,messages=? WHERE thread_id=?",
                             -1, &st, nullptr) == SQLITE_OK);
  sqlite3_bind_text(st, 1, d.key.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 2, d.version);
  sqlite3_bind_int64(st, 3, static_cast<int64_t>(d.bytes));
  sqlite3_bind_int64(st, 4, d.messages);
  sqlite3_bind_text(st, 5, d.thread_id.c_str(), -1, SQLITE_TRANSIENT);
  REQUIRE(sqlite3_step(st) == SQLITE_DONE);
  CHECK(sqlite3_changes(db) == 1);
  sqlite3_finalize(st);
  sqlite3_close(db);
}

std::vector<std::string> conversation_keys(ObjectStore& objects) {
  std::vector<std::string> out;
  for (const auto& o : objects.list(kConversationPrefix)) out.push_back(o.key);
  return out;
}

}  // namespace

TEST_CASE("the document layout passes the store conformance suite") {
  TempDir dir;
  int n = 0;
  run_store_conformance([&] {
    const std::string name = "conf" + std::to_string(n++);
    return std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file(name + ".db")},
                                         std::make_unique<DocumentLayout>(fs_objects(dir.file(name + "-objects")),
                                                                          doc_options(dir.file(name + ".db.docs"))));
  });
}

TEST_CASE("document layout: messages live in one versioned document per thread, the inner messages table stays empty") {
  TempDir dir;
  DocStack s(dir);
  auto b = new_turn_batch(conformance_turn("t1", "th1", TurnStatus::running));
  s.store->commit(b);
  auto b2 = message_batch("th1", {text_message("m2", "second"), text_message("m3", "third é\"\\")});
  s.store->commit(b2);
  CHECK(b2.messages[0].index == 1);
  CHECK(b2.messages[1].index == 2);
  CHECK(b2.messages[1].thread_id == "th1");
  CHECK(b2.events[0].seq == 2);

  auto doc = s.document("th1");
  REQUIRE(doc);
  CHECK(doc->key == "agent-conversations/th1/v2.json");
  CHECK(doc->version == 2);
  CHECK(doc->messages == 3);
  // The previous version is gone once the pointer moved: one object per thread.
  CHECK(conversation_keys(*s.objects) == std::vector<std::string>{"agent-conversations/th1/v2.json"});
  auto head = s.objects->head(doc->key);
  REQUIRE(head);
  CHECK(head->size == doc->bytes);
  CHECK(head->content_type == "application/json");
  json stored = json::parse(*s.objects->get(doc->key));
  CHECK(stored["thread_id"] == "th1");
  CHECK(stored["version"] == 2);
  CHECK(stored["messages"].size() == 3);
  CHECK(stored["messages"][2]["message"]["content"] == "third é\"\\");

  auto msgs = s.store->messages("th1");
  CHECK(ids_of(msgs) == std::vector<std::string>{"m_t1", "m2", "m3"});
  for (size_t i = 0; i < msgs.size(); ++i) CHECK(msgs[i].index == static_cast<int64_t>(i));
  CHECK(msgs[2].message.content == "third é\"\\");
  CHECK(msgs[2].turn_id == "t1");
  CHECK(msgs[2].run_id == "run_t1");

  CHECK(SqliteStore(SqliteStoreOptions{dir.file("agentrt.db")}).messages("th1").empty());  // its own rows
  CHECK(inner_message_rows(dir.file("agentrt.db")) == 0);
  CHECK(s.store->messages("nothing-here").empty());
  CHECK_FALSE(s.document("nothing-here"));

  // A batch without messages leaves the document alone.
  CommitBatch ev;
  ev.thread_id = "th1";
  ev.events.push_back(StoredEvent{0, "run_t1", to_json_string(events::step_finished("execution"))});
  s.store->commit(ev);
  CHECK(s.document("th1")->version == 2);
}

TEST_CASE("document keys stay under agent-conversations/ whatever the thread id") {
  CHECK(conversation_document_key("th:1.x_y-Z", 7) == "agent-conversations/th:1.x_y-Z/v7.json");
  for (const std::string& bad :
       std::vector<std::string>{"..", ".", "a/b", "../x", "", ".agentrt-tmp", "a\\b", "x y", std::string(129, 'a')}) {
    CAPTURE(bad);
    try {
      conversation_document_key(bad, 1);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::invalid_argument);
    }
  }
  TempDir dir;
  DocStack s(dir);
  auto b = message_batch("..", {text_message("m1", "hi")});
  b.create_thread = ThreadRecord{"..", "u1", "", false, 0, 0, 0};
  try {
    s.store->commit(b);
    FAIL("a thread id that escapes the prefix was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
  }
  CHECK_FALSE(s.store->get_thread(".."));  // nothing of the batch was written
  CHECK(s.objects->list("").empty());
  CHECK(s.store->messages("..").empty());
}

TEST_CASE(
    "the document size cap: 2 MiB by default; a document at the cap is written and read, one past it is refused") {
  CHECK(DocumentLayoutOptions{}.max_document_bytes == 2 * 1024 * 1024);
  const uint64_t cap = 4096;
  // The size of the second document for a message of empty text, found on a store without a small cap (the
  // document's size grows byte for byte with the text).
  uint64_t base = 0;
  {
    TempDir scratch;
    DocStack s(scratch);
    auto b = new_turn_batch(conformance_turn("t1", "th1", TurnStatus::running));
    s.store->commit(b);
    auto b2 = message_batch("th1", {text_message("m2", "")}, false);
    s.store->commit(b2);
    base = s.document("th1")->bytes;
  }
  REQUIRE(base < cap);

  TempDir dir;
  {
    DocStack s(dir, cap);
    auto b = new_turn_batch(conformance_turn("t1", "th1", TurnStatus::running));
    s.store->commit(b);
    auto at_cap = message_batch("th1", {text_message("m2", std::string(cap - base, 'x'))}, false);
    s.store->commit(at_cap);
    auto doc = s.document("th1");
    REQUIRE(doc);
    CHECK(doc->bytes == cap);
    CHECK(s.store->messages("th1").size() == 2);  // exactly at the cap: readable

    auto over = message_batch("th1", {text_message("m3", "y")});  // with an event: all or nothing
    try {
      s.store->commit(over);
      FAIL("a document over the cap was written");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::too_large);
      CHECK(std::string(e.what()).find("th1") != std::string::npos);
      CHECK(std::string(e.what()).find("limit is 4096") != std::string::npos);
    }
    CHECK(s.document("th1")->version == 2);
    CHECK(s.store->messages("th1").size() == 2);
    CHECK(s.store->events_after("th1", 0, 10).size() == 1);  // the refused batch's event is not there
    CHECK_FALSE(s.objects->head("agent-conversations/th1/v3.json"));
    // Other threads are not affected.
    auto other = new_turn_batch(conformance_turn("t2", "th2", TurnStatus::running));
    s.store->commit(other);
    CHECK(s.store->messages("th2").size() == 1);
  }
  {
    // The cap lowered below a stored document: reading it is refused, naming its size.
    DocStack s(dir, cap - 1);
    try {
      s.store->messages("th1");
      FAIL("a document over the cap was read");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::too_large);
      CHECK(std::string(e.what()).find("is 4096 bytes") != std::string::npos);
      CHECK(std::string(e.what()).find("limit is 4095") != std::string::npos);
    }
    auto more = message_batch("th1", {text_message("m3", "y")});
    CHECK_THROWS_AS(s.store->commit(more), Error);
    CHECK(s.store->messages("th2").size() == 1);
  }
}

TEST_CASE("concurrent writers in two store instances on the same files keep every message exactly once") {
  TempDir dir;
  DocStack a(dir), b(dir);
  {
    CommitBatch create;
    create.thread_id = "shared";
    create.create_thread = ThreadRecord{"shared", "u1", "", false, 0, 0, 0};
    create.events.push_back(StoredEvent{0, "run_0", to_json_string(events::run_started("shared", "run_0"))});
    a.store->commit(create);
  }
  constexpr int kWriters = 4, kCommits = 25;
  std::vector<std::thread> writers;
  std::atomic<int> failures{0};
  for (int w = 0; w < kWriters; ++w)
    writers.emplace_back([&, w] {
      Store& store = *(w % 2 == 0 ? a.store : b.store);
      for (int i = 0; i < kCommits; ++i) {
        auto batch = message_batch("shared", {text_message(fmt::format("w{}-{}-a", w, i), "a"),
                                              text_message(fmt::format("w{}-{}-b", w, i), "b")});
        try {
          store.commit(batch);
        } catch (const std::exception& e) {
          ++failures;
          MESSAGE(e.what());
        }
      }
    });
  for (auto& t : writers) t.join();
  CHECK(failures == 0);

  for (DocStack* s : {&a, &b}) {
    auto msgs = s->store->messages("shared");
    REQUIRE(msgs.size() == kWriters * kCommits * 2);
    std::set<std::string> ids;
    std::map<int, int> next_of_writer;  // each writer's commits appear in its order, each pair together
    for (size_t i = 0; i < msgs.size(); ++i) {
      CHECK(msgs[i].index == static_cast<int64_t>(i));
      ids.insert(msgs[i].message.id);
      int w = 0, n = 0;
      char part = 0;
      REQUIRE(std::sscanf(msgs[i].message.id.c_str(), "w%d-%d-%c", &w, &n, &part) == 3);
      if (part == 'a') {
        CHECK(n == next_of_writer[w]);
        REQUIRE(i + 1 < msgs.size());
        CHECK(msgs[i + 1].message.id == fmt::format("w{}-{}-b", w, n));
        next_of_writer[w] = n + 1;
      }
    }
    CHECK(ids.size() == msgs.size());  // no duplicates
    CHECK(s->document("shared")->version == kWriters * kCommits);
    CHECK(s->store->events_after("shared", 0, 1000).size() == 1 + kWriters * kCommits);
  }
  CHECK(conversation_keys(*a.objects) ==
        std::vector<std::string>{fmt::format("agent-conversations/shared/v{}.json", kWriters * kCommits)});
  CHECK(inner_message_rows(dir.file("agentrt.db")) == 0);
}

TEST_CASE("soft delete marks the thread row and keeps its document") {
  TempDir dir;
  DocStack s(dir);
  auto b = new_turn_batch(conformance_turn("t1", "th1", TurnStatus::completed));
  s.store->commit(b);
  auto key = s.document("th1")->key;
  s.store->soft_delete_thread("th1");
  CHECK(s.store->get_thread("th1")->deleted);
  CHECK(s.store->list_threads("u1", false).empty());
  CHECK(s.objects->head(key));
  CHECK(s.document("th1")->key == key);
  CHECK(ids_of(s.store->messages("th1")) == std::vector<std::string>{"m_t1"});
}

TEST_CASE("a document written by a commit that died before its inner commit is never read and is replaced") {
  TempDir dir;
  auto rec = std::make_shared<RecordingObjects>(fs_objects(dir.file("objects")));
  DocStack s(dir, 2 * 1024 * 1024, rec);
  auto b = new_turn_batch(conformance_turn("t1", "th1", TurnStatus::waiting_approval));
  s.store->commit(b);
  const auto v1 = *s.document("th1");

  SUBCASE("events proof") {
    // A second active turn: written as v2, refused by the inner store, v2 removed.
    auto loser = new_turn_batch(conformance_turn("t2", "th1", TurnStatus::running));
    loser.messages[0].message.id = "m_lost";
    CHECK_THROWS_AS(s.store->commit(loser), Error);
    CHECK_FALSE(s.objects->head("agent-conversations/th1/v2.json"));
    // Dying between writing v2 and the inner commit would have left it there.
    s.objects->put("agent-conversations/th1/v2.json", rec->written("agent-conversations/th1/v2.json"),
                   "application/json");
  }
  SUBCASE("turn proof") {
    CommitBatch stale;  // a message with a lost compare-and-set and no events
    stale.thread_id = "th1";
    stale.turn = conformance_turn("t1", "th1", TurnStatus::resuming);
    stale.expected_version = 5;
    stale.messages.push_back(text_message("m_lost", "never"));
    CHECK_THROWS_AS(s.store->commit(stale), Error);
    s.objects->put("agent-conversations/th1/v2.json", rec->written("agent-conversations/th1/v2.json"),
                   "application/json");
  }
  SUBCASE("no proof: messages alone") {
    // A commit of messages alone whose pointer commit never happened.
    DocStack other(dir, 2 * 1024 * 1024, rec);
    auto lone = message_batch("th1", {text_message("m_lost", "never")}, false);
    other.store->commit(lone);
    std::string v2 = *s.objects->get("agent-conversations/th1/v2.json");
    set_pointer(dir.file("agentrt.db.docs"), v1);
    s.objects->put(v1.key, rec->written(v1.key), "application/json");
    // Make it look like nothing committed: the pointer commit *was* the commit point.
    s.objects->put("agent-conversations/th1/v2.json", v2, "application/json");
  }
  CHECK(ids_of(s.store->messages("th1")) == std::vector<std::string>{"m_t1"});
  CHECK(s.document("th1")->version == 1);
  CHECK_FALSE(s.objects->head("agent-conversations/th1/v2.json"));  // the read's recovery removed it
  s.objects->put("agent-conversations/th1/v2.json", "garbage", "application/json");
  auto next = message_batch("th1", {text_message("m_next", "next")});
  s.store->commit(next);
  CHECK(ids_of(s.store->messages("th1")) == std::vector<std::string>{"m_t1", "m_next"});
  CHECK(s.document("th1")->version == 2);
}

TEST_CASE("a commit that died after its inner commit, before moving the pointer, is rolled forward") {
  TempDir dir;
  auto rec = std::make_shared<RecordingObjects>(fs_objects(dir.file("objects")));
  ConversationDocument v1;
  {
    DocStack s(dir, 2 * 1024 * 1024, rec);
    auto t = conformance_turn("t1", "th1", TurnStatus::running);
    auto b = new_turn_batch(t);
    s.store->commit(b);
    v1 = *s.document("th1");
    CommitBatch b2;
    SUBCASE("events proof") { b2 = message_batch("th1", {text_message("m2", "kept")}); }
    SUBCASE("turn proof") {
      b2.thread_id = "th1";
      t.status = TurnStatus::completed;
      b2.turn = t;
      b2.expected_version = 0;
      b2.messages.push_back(text_message("m2", "kept"));
    }
    SUBCASE("ledger proof") {
      b2.thread_id = "th1";
      LedgerEntry l;
      l.tool_call_id = "c1";
      l.turn_id = "t1";
      l.thread_id = "th1";
      l.tool_name = "book_room";
      l.arguments = "{}";
      l.status = LedgerStatus::finished;
      l.output = R"({"status":"succeeded"})";
      b2.ledger.push_back(l);
      b2.messages.push_back(text_message("m2", "kept"));
    }
    s.store->commit(b2);
    // Undo the pointer move and restore v1: exactly what dying after the inner commit leaves.
    set_pointer(dir.file("agentrt.db.docs"), v1);
    rec->put(v1.key, rec->written(v1.key), "application/json");
  }
  DocStack s(dir, 2 * 1024 * 1024, rec);  // a new process
  CHECK(ids_of(s.store->messages("th1")) == std::vector<std::string>{"m_t1", "m2"});
  CHECK(s.document("th1")->version == 2);
  CHECK_FALSE(s.objects->head(v1.key));  // the superseded version is removed
  auto next = message_batch("th1", {text_message("m3", "after")});
  s.store->commit(next);
  CHECK(ids_of(s.store->messages("th1")) == std::vector<std::string>{"m_t1", "m2", "m3"});
}

namespace {

// A Harness whose runtime stores messages in documents: a second store on the harness's database, with the
// document layout; the harness's own store reads that database's messages table.
struct DocHarness {
  TempDir dir;
  std::shared_ptr<FsObjectStore> objects = fs_objects(dir.file("objects"));
  DocumentLayout* layout = nullptr;  // owned by docs
  std::shared_ptr<SqliteStore> docs;
  Harness h;
  explicit DocHarness(ModelScript script = booking_script)
      : h(std::move(script), [this](RuntimeConfig& c) {
          c.objects = objects;
          auto l = std::make_unique<DocumentLayout>(objects, doc_options(dir.file("agentrt.db.docs")));
          layout = l.get();
          docs = std::make_shared<SqliteStore>(SqliteStoreOptions{h.dir.file("agentrt.db")}, std::move(l));
          c.store = docs;
        }) {}
  std::optional<ConversationDocument> document(std::string_view thread_id) {
    return layout->document(*docs, thread_id);
  }
};

}  // namespace

TEST_CASE("golden path B on the document layout: approval, resume, completed; messages only in the document") {
  DocHarness d;
  auto& h = d.h;
  h.add_book_room();
  auto handle = h.start("t-doc", "book a room");
  auto turn = h.wait(handle.turn_id);
  REQUIRE(turn.status == TurnStatus::waiting_approval);
  auto run1 = h.events("t-doc");
  const json& intr = run1.back()["outcome"]["interrupts"][0];
  json answer = h.rt->resume(handle.turn_id, turn.approval_request_id,
                             {Decision{intr["id"].get<std::string>(), Decision::Action::approve, std::nullopt, ""}});
  CHECK(answer["status"] == "accepted");
  CHECK(h.wait(handle.turn_id).status == TurnStatus::completed);
  CHECK(h.tool_runs == 1);
  check_agui(h.events("t-doc", 2));

  auto hist = h.rt->history("t-doc");
  REQUIRE(hist.size() == 4);
  CHECK(hist[0].role == Role::user);
  CHECK(hist[1].tool_calls.size() == 1);
  CHECK(hist[2].role == Role::tool);
  CHECK(hist[2].metadata["ui"]["type"] == "booking_card");  // the payload object is read back
  CHECK(hist[3].content.find("BK-t-doc") != std::string::npos);

  auto doc = d.document("t-doc");
  REQUIRE(doc);
  CHECK(doc->key.rfind("agent-conversations/t-doc/v", 0) == 0);
  CHECK(doc->messages == 4);
  // The superseded document is removed by the committing thread just after its commit, which the turn's end can be
  // seen before: nothing announces the removal, so it is waited for (up to 10 s).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (conversation_keys(*d.objects) != std::vector<std::string>{doc->key} &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(conversation_keys(*d.objects) == std::vector<std::string>{doc->key});
  CHECK(h.store->messages("t-doc").empty());  // the SQLite database's messages table has no message
  CHECK(inner_message_rows(h.dir.file("agentrt.db")) == 0);
  CHECK(d.objects->list("agent-outputs/t-doc/").size() == 1);  // the tool payload, next to it
}

TEST_CASE("a repeated start with the same client message id returns the first turn's delta messages") {
  std::atomic<int> model_calls{0};
  DocHarness d([&](const ModelRequest& req) -> ModelResult {
    ++model_calls;
    if (req.stage == "intent") return text_result("x");
    for (const auto& m : req.messages)
      if (m.role == Role::user && m.content == "fail please") throw Error(ErrorCode::model, "upstream 503: overloaded");
    return text_result("answer to " + req.messages.back().content);
  });
  auto& h = d.h;

  auto first = h.start("t-idem", "hello", "cm-1");
  CHECK_FALSE(first.existing);
  CHECK(h.wait(first.turn_id).status == TurnStatus::completed);
  auto delta = messages_of_turn(*d.docs, "t-idem", first.turn_id);
  REQUIRE(delta.size() == 2);
  CHECK(delta[0].message.role == Role::user);
  CHECK(delta[0].message.id == "cm-1");
  CHECK(delta[1].message.content == "answer to hello");

  auto failed = h.start("t-idem", "fail please", "cm-2");
  CHECK(h.wait(failed.turn_id).status == TurnStatus::failed);
  auto failed_delta = messages_of_turn(*d.docs, "t-idem", failed.turn_id);
  REQUIRE(failed_delta.size() == 2);
  CHECK(failed_delta[1].message.role == Role::system);
  CHECK(failed_delta[1].message.content == "ERROR model_error: upstream 503: overloaded");

  const int calls = model_calls;
  const int64_t version = d.document("t-idem")->version;
  auto again = h.start("t-idem", "hello", "cm-1");
  CHECK(again.existing);
  CHECK(again.turn_id == first.turn_id);
  CHECK(again.run_id == first.run_id);
  auto again_failed = h.start("t-idem", "fail please", "cm-2");
  CHECK(again_failed.existing);
  CHECK(again_failed.turn_id == failed.turn_id);
  // Nothing ran again and nothing was written: the deltas are the first runs' messages, exactly.
  CHECK(model_calls == calls);
  CHECK(d.document("t-idem")->version == version);
  CHECK(ids_of(messages_of_turn(*d.docs, "t-idem", again.turn_id)) == ids_of(delta));
  CHECK(ids_of(messages_of_turn(*d.docs, "t-idem", again_failed.turn_id)) == ids_of(failed_delta));
  CHECK(messages_of_turn(*d.docs, "t-idem", again_failed.turn_id)[1].message.content ==
        "ERROR model_error: upstream 503: overloaded");
  CHECK(d.docs->messages("t-idem").size() == 4);
  // What the repeated starts answered: the same messages, as the Runtime returns them.
  REQUIRE(again.delta_messages.size() == 2);
  CHECK(again.delta_messages[0].id == "cm-1");
  CHECK(again.delta_messages[1].content == "answer to hello");
  REQUIRE(again_failed.delta_messages.size() == 2);
  CHECK(again_failed.delta_messages[1].role == Role::system);
  CHECK(again_failed.delta_messages[1].content == "ERROR model_error: upstream 503: overloaded");
  CHECK(json(h.rt->turn_messages(failed.turn_id)) == json(again_failed.delta_messages));
}

TEST_CASE("two runtimes on one document store take turns on the same thread without losing a message") {
  TempDir dir;
  auto objects = fs_objects(dir.file("objects"));
  auto answer = [](const ModelRequest& req) -> ModelResult {
    if (req.stage == "intent") return text_result("x");
    return text_result("re: " + req.messages.back().content);
  };
  std::vector<std::unique_ptr<Runtime>> rts;
  for (int i = 0; i < 2; ++i) {
    auto store = std::make_shared<SqliteStore>(
        SqliteStoreOptions{dir.file("agentrt.db")},
        std::make_unique<DocumentLayout>(objects, doc_options(dir.file("agentrt.db.docs"))));
    auto c = test_config(store, std::make_shared<ScriptedModel>(answer));
    c.objects = objects;
    rts.push_back(std::make_unique<Runtime>(c));
  }
  constexpr int kTurns = 4;
  std::vector<std::thread> ths;
  std::atomic<int> errors{0};
  for (int r = 0; r < 2; ++r)
    ths.emplace_back([&, r] {
      for (int i = 0; i < kTurns; ++i) {
        auto in = turn_input("t-two", user_message(fmt::format("r{}-{}", r, i)));
        for (int attempt = 0;; ++attempt) {
          try {
            auto hd = rts[r]->start_turn(in);
            if (rts[r]->wait(hd.turn_id, kLongWait).status != TurnStatus::completed) ++errors;
            break;
          } catch (const Error& e) {
            // One active turn per thread: the other runtime's turn is running; try again once it has ended.
            if (e.code() != ErrorCode::conflict || attempt > 2000) {
              ++errors;
              break;
            }
            if (auto active = rts[r]->active_turn("t-two")) rts[r]->wait(active->id, kLongWait);
          }
        }
      }
    });
  for (auto& t : ths) t.join();
  CHECK(errors == 0);
  for (auto& rt : rts) {
    auto hist = rt->history("t-two");
    REQUIRE(hist.size() == 2 * 2 * kTurns);
    std::set<std::string> users;
    for (size_t i = 0; i < hist.size(); i += 2) {
      CHECK(hist[i].role == Role::user);
      users.insert(hist[i].content);
      CHECK(hist[i + 1].content == "re: " + hist[i].content);
    }
    CHECK(users.size() == 2 * kTurns);
  }
}

TEST_CASE("document layout: a conversation document nested too deep reads as damaged, never built") {
  TempDir dir;
  DocStack s(dir);
  auto b = message_batch("th1", {text_message("m1", "hi")});
  s.store->commit(b);
  auto doc = s.document("th1");
  REQUIRE(doc);
  // The same document with a message 200,000 levels deep, under the same key and size bound.
  const std::string deep = R"({"format":"agentrt.conversation/1","thread_id":"th1","version":)" +
                           std::to_string(doc->version) + R"(,"messages":[{"index":0,"turn_id":"t1","run_id":"r1",)" +
                           R"("message":{"id":"m1","role":"assistant","content":"hi","metadata":{"d":)" +
                           std::string(200000, '[') + std::string(200000, ']') + "}}}]}";
  s.objects->put(doc->key, deep, "application/json");
  try {
    s.store->messages("th1");
    FAIL("a document 200,000 levels deep was read");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::io);
    CHECK(e.message().find("is damaged") != std::string::npos);
  }
}
