#include <doctest/doctest.h>
#include <sqlite3.h>

#include "agentrt/attachments.hpp"
#include "runtime/runtime_impl.hpp"
#include "store/fs_object_store.hpp"
#include "support/forwarding_store.hpp"
#include "support/runtime_fixture.hpp"
#include "support/sqlite_text.hpp"
#include "util/crypto.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {

const std::string kBase = "http://127.0.0.1:8080/api/v1/objects";

std::shared_ptr<FsObjectStore> make_objects(const TempDir& dir, const std::string& bucket = "agentrt") {
  return std::make_shared<FsObjectStore>(FsObjectStoreOptions{dir.file("objects-" + bucket), bucket, "s3cret", kBase});
}

// An ObjectStore that fails its writes on demand.
struct FlakyObjects final : ObjectStore {
  std::shared_ptr<ObjectStore> inner;
  std::atomic<bool> fail_put{false};
  explicit FlakyObjects(std::shared_ptr<ObjectStore> i) : inner(std::move(i)) {}
  std::string bucket() const override { return inner->bucket(); }
  void put(std::string_view k, std::string_view b, std::string_view c) override {
    if (fail_put) throw Error(ErrorCode::io, "disk full");
    inner->put(k, b, c);
  }
  bool put_if_absent(std::string_view k, std::string_view b, std::string_view c) override {
    return inner->put_if_absent(k, b, c);
  }
  std::optional<std::string> get(std::string_view k) override { return inner->get(k); }
  std::optional<ObjectInfo> head(std::string_view k) override { return inner->head(k); }
  bool remove(std::string_view k) override { return inner->remove(k); }
  std::vector<ObjectInfo> list(std::string_view p) override { return inner->list(p); }
  std::string sign_url(std::string_view k, int64_t e) const override { return inner->sign_url(k, e); }
  std::string verify_url(std::string_view u, int64_t n) const override { return inner->verify_url(u, n); }
};

// An ObjectStore that counts its reads.
struct CountingObjects final : ObjectStore {
  std::shared_ptr<ObjectStore> inner;
  std::atomic<int> gets{0};
  explicit CountingObjects(std::shared_ptr<ObjectStore> i) : inner(std::move(i)) {}
  std::string bucket() const override { return inner->bucket(); }
  void put(std::string_view k, std::string_view b, std::string_view c) override { inner->put(k, b, c); }
  bool put_if_absent(std::string_view k, std::string_view b, std::string_view c) override {
    return inner->put_if_absent(k, b, c);
  }
  std::optional<std::string> get(std::string_view k) override {
    ++gets;
    return inner->get(k);
  }
  std::optional<ObjectInfo> head(std::string_view k) override { return inner->head(k); }
  bool remove(std::string_view k) override { return inner->remove(k); }
  std::vector<ObjectInfo> list(std::string_view p) override { return inner->list(p); }
  std::string sign_url(std::string_view k, int64_t e) const override { return inner->sign_url(k, e); }
  std::string verify_url(std::string_view u, int64_t n) const override { return inner->verify_url(u, n); }
};

// Runs `sql` on the harness's database file through a connection of its own.
void exec_sql(const Harness& h, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(h.dir.file("agentrt.db").c_str(), &db) == SQLITE_OK);
  sqlite_exec(db, sql);
  sqlite3_close(db);
}

// A Store whose next commit that writes a tool message fails (once).
struct FlakyStore final : ForwardingStore {
  std::atomic<bool> fail_tool_commit{false};
  explicit FlakyStore(std::shared_ptr<Store> i) : ForwardingStore(std::move(i)) {}
  void commit(CommitBatch& b) override {
    for (const auto& m : b.messages)
      if (m.message.role == Role::tool && fail_tool_commit.exchange(false))
        throw Error(ErrorCode::io, "database is locked");
    inner->commit(b);
  }
};

ModelResult one_tool_script(const ModelRequest& req) {
  if (req.stage == "intent") return text_result("x");
  if (tool_results_since_last_user(req) == 0)
    return tool_call_result("call_1", "book_room", R"({"room":"A1","day":"mon"})");
  return text_result("booked");
}

}  // namespace

TEST_CASE("a tool result is stored as payload object plus an index, and history restores its ui") {
  TempDir objdir;
  auto objects = make_objects(objdir);
  Harness h(one_tool_script, [&](RuntimeConfig& c) { c.objects = objects; });
  h.add_book_room(ApprovalPolicy::never());
  auto t = h.rt->run_turn(turn_input("t-pay", user_message("book")));
  REQUIRE(t.status == TurnStatus::completed);

  auto stored = h.store->messages("t-pay");
  REQUIRE(stored.size() == 4);
  const Message& tool = stored[2].message;
  CHECK(tool.role == Role::tool);
  // The tool message: content is the summary, metadata only the index (exact keys).
  std::vector<std::string> keys;
  for (auto it = tool.metadata.begin(); it != tool.metadata.end(); ++it) keys.push_back(it.key());
  CHECK(keys == std::vector<std::string>{"payload_has_ui", "payload_sha256", "run_id", "stage", "storage_bucket",
                                         "storage_path", "summary_version", "tool_call_id", "tool_name"});
  CHECK(tool.metadata["payload_has_ui"] == true);
  CHECK(tool.metadata["tool_call_id"] == "call_1");
  CHECK(tool.metadata["tool_name"] == "book_room");
  CHECK(tool.metadata["run_id"] == t.run_id);
  CHECK(tool.metadata["stage"] == "execution");
  CHECK(tool.metadata["storage_bucket"] == "agentrt");
  CHECK(tool.metadata["summary_version"] == kSummaryVersion);
  const std::string path = tool.metadata["storage_path"];
  CHECK(path == "agent-outputs/t-pay/" + t.run_id + "/call_1.json");
  auto bytes = objects->get(path);
  REQUIRE(bytes);
  CHECK(crypto::sha256_hex(*bytes) == tool.metadata["payload_sha256"]);
  json payload = json::parse(*bytes);
  CHECK(payload["ui"]["type"] == "booking_card");
  CHECK(payload["args"] == json{{"room", "A1"}, {"day", "mon"}});
  CHECK(payload["result"]["booking_id"] == "BK-t-pay");
  CHECK(payload["status"] == "succeeded");
  CHECK(payload["thread_id"] == "t-pay");
  CHECK(payload["timings"]["started_at"].is_number_integer());
  CHECK(tool.content == payload["result_summary"]);
  CHECK(tool.content.find('{') == std::string::npos);  // a summary, never raw JSON
  // The stored message itself holds no ui and no result.
  CHECK_FALSE(tool.metadata.contains("ui"));

  auto hist = h.rt->history("t-pay");
  REQUIRE(hist.size() == 4);
  CHECK(hist[2].metadata["ui"] == payload["ui"]);
  CHECK(hist[3].metadata["worker_agent_output"]["answer"] == "booked");
  CHECK(hist[3].metadata["worker_agent_output"]["tools"][0]["tool_call_id"] == "call_1");
}

TEST_CASE("history reads back only a payload that has a ui; one with a ui is still read and checked") {
  TempDir objdir;
  auto objects = std::make_shared<CountingObjects>(make_objects(objdir));
  Harness h(one_tool_script, [&](RuntimeConfig& c) { c.objects = objects; });
  // book_room without a card: its payload has no ui.
  ToolSpec plain;
  plain.name = "book_room";
  plain.description = "Book a room";
  plain.parameters = json::parse(R"({"type":"object","properties":{"room":{"type":"string"}}})");
  plain.approval = ApprovalPolicy::never();
  plain.handler = sync_tool([](const ToolCallContext&) {
    return ToolResult{json{{"ok", true}}, std::nullopt, nullptr};
  });
  h.rt->tools().add(plain);
  REQUIRE(h.rt->run_turn(turn_input("t-noui", user_message("book"))).status == TurnStatus::completed);
  const Message tool = h.store->messages("t-noui")[2].message;
  CHECK(tool.metadata["payload_has_ui"] == false);
  const std::string path = tool.metadata["storage_path"];
  REQUIRE(objects->get(path));  // the payload is stored all the same
  objects->gets = 0;
  auto hist = h.rt->history("t-noui");
  REQUIRE(hist.size() == 4);
  CHECK(objects->gets == 0);  // not read: there is no card in it
  CHECK_FALSE(hist[2].metadata.contains("ui"));
  CHECK(hist[2].content == tool.content);

  // A payload with a card: read, its sha256 checked, its ui shown; a forged one is refused.
  h.rt->tools().remove("book_room");
  h.add_book_room(ApprovalPolicy::never());
  REQUIRE(h.rt->run_turn(turn_input("t-ui", user_message("book"))).status == TurnStatus::completed);
  const std::string ui_path = h.store->messages("t-ui")[2].message.metadata["storage_path"];
  objects->gets = 0;
  hist = h.rt->history("t-ui");
  CHECK(objects->gets == 1);
  CHECK(hist[2].metadata["ui"]["type"] == "booking_card");
  objects->put(ui_path, R"({"ui":{"type":"forged","version":"v1"}})", "application/json");
  hist = h.rt->history("t-ui");
  CHECK(objects->gets == 2);
  CHECK_FALSE(hist[2].metadata.contains("ui"));

  // A row written before the flag existed (no payload_has_ui): its payload is read, as it always was.
  REQUIRE(h.rt->run_turn(turn_input("t-old", user_message("book"))).status == TurnStatus::completed);
  // (Its rows as schema 11 wrote them: a row a message, JSON text.)
  std::vector<MessageRecord> old = h.store->messages("t-old");
  old[2].message.metadata.erase("payload_has_ui");
  exec_sql(h, "DELETE FROM messages WHERE thread_id='t-old'");
  for (const auto& m : old) {
    std::string body = to_json_string(m.message);
    for (size_t at = body.find('\''); at != std::string::npos; at = body.find('\'', at + 2)) body.insert(at, 1, '\'');
    exec_sql(h, fmt::format("INSERT INTO messages(id,thread_id,idx,turn_id,run_id,body) SELECT base*16777216+{0},"
                            "'t-old',{0},'{1}','{2}','{3}' FROM thread_spans WHERE thread_id='t-old'",
                            m.index, m.turn_id, m.run_id, body));
  }
  REQUIRE_FALSE(h.store->messages("t-old")[2].message.metadata.contains("payload_has_ui"));
  objects->gets = 0;
  hist = h.rt->history("t-old");
  CHECK(objects->gets == 1);
  CHECK(hist[2].metadata["ui"]["type"] == "booking_card");
}

TEST_CASE("a missing or corrupt payload object gives the summary alone, never an error") {
  TempDir objdir;
  auto objects = make_objects(objdir);
  Harness h(one_tool_script, [&](RuntimeConfig& c) { c.objects = objects; });
  h.add_book_room(ApprovalPolicy::never());
  h.rt->run_turn(turn_input("t-c1", user_message("book")));
  h.rt->run_turn(turn_input("t-c2", user_message("book")));
  auto path1 = h.store->messages("t-c1")[2].message.metadata["storage_path"].get<std::string>();
  auto path2 = h.store->messages("t-c2")[2].message.metadata["storage_path"].get<std::string>();
  objects->remove(path1);
  objects->put(path2, R"({"ui":{"type":"forged","version":"v1"}})", "application/json");
  for (const char* t : {"t-c1", "t-c2"}) {
    auto hist = h.rt->history(t);
    REQUIRE(hist.size() == 4);
    CHECK_FALSE(hist[2].metadata.contains("ui"));
    CHECK_FALSE(hist[2].content.empty());
  }
}

TEST_CASE("when the payload write fails the turn goes on and the index says the payload is missing") {
  TempDir objdir;
  auto flaky = std::make_shared<FlakyObjects>(make_objects(objdir));
  flaky->fail_put = true;
  Harness h(one_tool_script, [&](RuntimeConfig& c) { c.objects = flaky; });
  h.add_book_room(ApprovalPolicy::never());
  auto t = h.rt->run_turn(turn_input("t-miss", user_message("book")));
  CHECK(t.status == TurnStatus::completed);
  auto tool = h.store->messages("t-miss")[2].message;
  CHECK(tool.metadata["payload_missing"] == true);
  CHECK(tool.metadata["storage_path"] == "");
  CHECK(tool.metadata["payload_sha256"] == "");
  CHECK(h.tool_runs == 1);
}

TEST_CASE("when the index write fails for good the payload object is deleted again and nothing is stored") {
  TempDir objdir, dbdir;
  auto objects = make_objects(objdir);
  auto flaky = std::make_shared<FlakyStore>(std::make_shared<SqliteStore>(SqliteStoreOptions{dbdir.file("db")}));
  RuntimeConfig c = test_config(flaky, std::make_shared<ScriptedModel>(one_tool_script));
  c.objects = objects;
  c.commit_retries = 0;
  Runtime rt(c);
  std::atomic<int> runs{0};
  ToolSpec spec;
  spec.name = "book_room";
  spec.idempotent = true;  // no commit of its own before it runs: the result shares the run's only commit
  spec.handler = sync_tool([&](const ToolCallContext&) {
    ++runs;
    return ToolResult{json{{"ok", true}}, std::nullopt, nullptr};
  });
  rt.tools().add(spec);
  flaky->fail_tool_commit = true;
  // run_turn's start rides on that commit: it fails, and nothing of the turn is stored.
  try {
    rt.run_turn(turn_input("t-comp", user_message("book")));
    FAIL("run_turn returned although its only commit failed");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::io);
    CHECK(std::string(e.what()).find("database is locked") == std::string::npos);  // details are for the log
  }
  CHECK(runs == 1);
  CHECK(objects->list("agent-outputs/t-comp/").empty());
  CHECK_FALSE(flaky->get_thread("t-comp"));
  CHECK(flaky->events_after("t-comp", 0, 100).empty());
}

TEST_CASE("a commit that fails once is tried again: the run goes on and its payload stays") {
  TempDir objdir, dbdir;
  auto objects = make_objects(objdir);
  auto flaky = std::make_shared<FlakyStore>(std::make_shared<SqliteStore>(SqliteStoreOptions{dbdir.file("db")}));
  RuntimeConfig c = test_config(flaky, std::make_shared<ScriptedModel>(one_tool_script));
  c.objects = objects;
  c.commit_retries = 1;
  c.commit_retry_backoff = std::chrono::milliseconds(1);
  Runtime rt(c);
  std::atomic<int> runs{0};
  ToolSpec spec;
  spec.name = "book_room";
  spec.idempotent = true;
  spec.handler = sync_tool([&](const ToolCallContext&) {
    ++runs;
    return ToolResult{json{{"ok", true}}, std::nullopt, nullptr};
  });
  rt.tools().add(spec);
  flaky->fail_tool_commit = true;
  auto t = rt.run_turn(turn_input("t-retry", user_message("book")));
  CHECK(t.status == TurnStatus::completed);
  CHECK(runs == 1);
  CHECK(objects->list("agent-outputs/t-retry/").size() == 1);
  auto hist = rt.history("t-retry");
  REQUIRE(hist.size() == 4);
  CHECK(hist[2].role == Role::tool);
  CHECK(hist[3].role == Role::assistant);
}

TEST_CASE("inline image data is stored as an upload; the message keeps bucket, path and mime only") {
  TempDir objdir;
  auto objects = make_objects(objdir);
  std::vector<ModelRequest> seen;
  std::mutex m;
  Harness h(
      [&](const ModelRequest& req) {
        std::lock_guard<std::mutex> lock(m);
        seen.push_back(req);
        return text_result("nice picture");
      },
      [&](RuntimeConfig& c) { c.objects = objects; });
  const std::string png = std::string("\x89PNG\r\n\x1a\n", 8) + std::string(100, '\x01');
  Message msg;
  msg.role = Role::user;
  msg.parts = {ContentPart::make_text("what is this?")};
  ContentPart img;
  img.type = "image";
  img.source = PartSource{"data", crypto::base64_encode(png), "image/png", ""};
  msg.parts.push_back(img);
  auto t = h.rt->run_turn(turn_input("t-img", msg, "u1"));
  REQUIRE(t.status == TurnStatus::completed);

  auto stored = h.store->messages("t-img")[0].message;
  REQUIRE(stored.parts.size() == 2);
  const auto& part = stored.parts[1];
  CHECK(part.type == "image");
  REQUIRE(part.source);
  CHECK(part.source->type == "file");
  CHECK(part.source->mime_type == "image/png");
  const std::string key = part.source->value;
  CHECK(key_belongs_to(key, "u1", "t-img"));
  CHECK(key.rfind("agent-inputs/u1/t-img/uploads/", 0) == 0);
  CHECK(part.metadata["storage_bucket"] == "agentrt");
  CHECK(part.metadata["storage_path"] == key);
  CHECK(objects->get(key) == png);
  const std::string raw = to_json_string(stored);
  CHECK(raw.find(crypto::base64_encode(png)) == std::string::npos);  // no bytes in the database

  // The model got the image as a native part and a stable ref in the text, never the path or a URL.
  REQUIRE(!seen.empty());
  const Message* user = last_user_message(seen.back());
  REQUIRE(user);
  REQUIRE(user->parts.size() == 3);
  const std::string ref = image_ref_id("agentrt", key);
  CHECK(user->parts[1].type == "text");
  CHECK(user->parts[1].text == "[image " + ref + "]");
  CHECK(user->parts[2].type == "image");
  CHECK(user->parts[2].source->type == "data");
  CHECK(user->parts[2].source->value == crypto::base64_encode(png));
  for (const auto& p : user->parts) {
    CHECK(p.text.find("agent-inputs") == std::string::npos);
    CHECK(p.text.find("http") == std::string::npos);
  }

  // History re-signs the URL on every read.
  auto hist = h.rt->history("t-img");
  REQUIRE(hist[0].parts.size() == 2);
  REQUIRE(hist[0].parts[1].source);
  CHECK(hist[0].parts[1].source->type == "url");
  CHECK(objects->verify_url(hist[0].parts[1].source->value, now_ms()) == key);
}

TEST_CASE("one id rule: the ids that start a turn also upload, the ids that cannot upload start nothing") {
  TempDir objdir;
  auto objects = make_objects(objdir);
  Harness h([](const ModelRequest&) { return text_result("ok"); }, [&](RuntimeConfig& c) { c.objects = objects; });
  const std::string user = "alice@example.com", thread = "th:1.x";
  auto up = h.rt->upload(user, thread, "hello", "text/plain");
  CHECK(up.key == "agent-inputs/alice@example.com/th:1.x/uploads/" + up.id);
  Message msg;
  msg.role = Role::user;
  ContentPart p;
  p.type = "document";
  p.source = PartSource{"file", up.id, "", ""};
  msg.parts = {ContentPart::make_text("read this"), p};
  CHECK(h.rt->run_turn(turn_input(thread, msg, user)).status == TurnStatus::completed);
  for (const auto& [bad_user, bad_thread] : std::vector<std::pair<std::string, std::string>>{
           {"alice smith", "t1"}, {"u1", ".hidden"}, {"u1", "a/b"}, {"", "t1"}, {"u1", std::string(129, 't')}}) {
    CAPTURE(bad_user);
    CAPTURE(bad_thread);
    CHECK_THROWS_AS(h.rt->upload(bad_user, bad_thread, "x", "text/plain"), Error);
    CHECK_THROWS_AS(h.rt->run_turn(turn_input(bad_thread, msg, bad_user)), Error);
  }
  CHECK(h.rt->threads(user).size() == 1);
}

TEST_CASE("an attachment URL is accepted only as this deployment's signed URL for the same user and thread") {
  TempDir objdir, otherdir;
  auto objects = make_objects(objdir);
  auto other_bucket = make_objects(otherdir, "elsewhere");
  Harness h([](const ModelRequest&) { return text_result("ok"); }, [&](RuntimeConfig& c) { c.objects = objects; });
  auto up = h.rt->upload("u1", "t-url", "hello", "text/plain");
  CHECK(up.key == "agent-inputs/u1/t-url/uploads/" + up.id);
  auto other_user = h.rt->upload("u2", "t-url2", "secret", "text/plain");

  auto start_with = [&](const std::string& thread, PartSource src, const std::string& user = "u1") {
    Message msg;
    msg.role = Role::user;
    ContentPart p;
    p.type = "document";
    p.source = std::move(src);
    msg.parts = {ContentPart::make_text("read this"), p};
    return h.rt->run_turn(turn_input(thread, msg, user));
  };
  auto expect_422 = [&](PartSource src, const char* why) {
    INFO(why);
    try {
      start_with("t-url", std::move(src));
      FAIL("accepted: " << why);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::invalid_argument);
    }
  };
  CHECK(start_with("t-url", PartSource{"url", up.url, "", ""}).status == TurnStatus::completed);
  CHECK(start_with("t-url", PartSource{"file", up.id, "", ""}).status == TurnStatus::completed);

  const int64_t later = now_ms() + 60000;
  expect_422(PartSource{"url", "https://evil.example.com/x.png", "", ""}, "foreign host");
  expect_422(PartSource{"url", std::string(up.url).replace(0, 16, "http://127.0.0.2"), "", ""}, "other host");
  expect_422(PartSource{"url", other_user.url, "", ""}, "another user's prefix");
  expect_422(PartSource{"url", other_bucket->sign_url(up.key, later), "", ""}, "other bucket");
  expect_422(PartSource{"url", objects->sign_url(up.key, now_ms() - 1000), "", ""}, "expired");
  std::string tampered = up.url;
  tampered.back() = tampered.back() == '0' ? '1' : '0';
  expect_422(PartSource{"url", tampered, "", ""}, "tampered signature");
  expect_422(PartSource{"url", "file:///etc/passwd", "", ""}, "file://");
  expect_422(PartSource{"file", "up_nonexistent", "", ""}, "unknown upload");
  expect_422(PartSource{"file", "../../u2/t-url2/uploads/" + other_user.id, "", ""}, "path climbing upload id");
  expect_422(PartSource{"data", "not base64!", "image/png", ""}, "bad base64");
  try {
    start_with("t-url", PartSource{"data", crypto::base64_encode("MZ"), "application/x-msdownload", ""});
    FAIL("a forbidden type was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
  }
  // A legacy 0.x binary part is upgraded and stored like any other.
  json legacy = json::parse(R"({"id":"m-legacy","role":"user","content":[{"type":"text","text":"see"},
    {"type":"binary","mimeType":"image/png","data":"iVBORw0KGgo=","filename":"a.png"}]})");
  auto t = h.rt->run_turn(turn_input("t-url", legacy.get<Message>(), "u1"));
  CHECK(t.status == TurnStatus::completed);
  auto last = h.store->messages("t-url");
  const Message* lu = nullptr;
  for (const auto& r : last)
    if (r.message.id == "m-legacy") lu = &r.message;
  REQUIRE(lu);
  CHECK(lu->parts[1].type == "image");
  CHECK(lu->parts[1].metadata["filename"] == "a.png");
  CHECK(lu->parts[1].source->type == "file");
}

TEST_CASE("a tool that names an image by its ref receives the stored object") {
  TempDir objdir;
  auto objects = make_objects(objdir);
  std::string ref;
  Harness h(
      [&](const ModelRequest& req) -> ModelResult {
        if (req.stage == "intent") return text_result("x");
        if (tool_results_since_last_user(req) == 0) {
          // The model read the ref from the text part and passes it on.
          std::string r;
          for (const auto& p : last_user_message(req)->parts)
            if (p.type == "text" && p.text.rfind("[image ", 0) == 0) r = p.text.substr(7, 20);
          return tool_call_result("c1", "describe", json{{"image", r}}.dump());
        }
        return text_result("done");
      },
      [&](RuntimeConfig& c) { c.objects = objects; });
  std::vector<AttachmentRef> got;
  ToolSpec spec;
  spec.name = "describe";
  spec.parameters = json::parse(R"({"type":"object","properties":{"image":{"type":"string"}},"required":["image"]})");
  spec.handler = sync_tool([&](const ToolCallContext& c) {
    got = c.attachments;
    return ToolResult{json{{"ok", true}}, std::nullopt, nullptr};
  });
  h.rt->tools().add(spec);
  auto up = h.rt->upload("u1", "t-ref", std::string(32, 'x'), "image/png");
  Message msg;
  msg.role = Role::user;
  ContentPart p;
  p.type = "image";
  p.source = PartSource{"file", up.id, "", ""};
  msg.parts = {ContentPart::make_text("describe"), p};
  CHECK(h.rt->run_turn(turn_input("t-ref", msg, "u1")).status == TurnStatus::completed);
  REQUIRE(got.size() == 1);
  CHECK(got[0].ref == up.ref);
  CHECK(got[0].key == up.key);
  CHECK(got[0].mime_type == "image/png");
  CHECK(objects->verify_url(got[0].url, now_ms()) == up.key);
}
