// Threads list, thread delete, uploads and events pages through the C ABI: exact records, ownership (another
// user's thread looks exactly like an unknown one) and the codes for bad arguments.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "capi_fixture.hpp"
#include "support/otlp_receiver.hpp"

using namespace capi_test;

namespace {

const std::string kPng = std::string("\x89PNG\r\n\x1a\n", 8) + std::string(64, 'p');

// The status is `code` and the message is exactly "<function>: <message>".
void check_error(int32_t rc, int32_t code, const std::string& function, const std::string& message) {
  CHECK_MESSAGE(rc == code, function << " returned " << rc << " (" << agentrt_status_name(rc) << "): " << last_error());
  CHECK(last_error() == function + ": " + message);
}

json threads_of(agentrt_runtime* rt, const char* user) {
  char* out = nullptr;
  REQUIRE_MESSAGE(agentrt_threads_list(&out, rt, user) == AGENTRT_OK, last_error());
  return json::parse(take(out));
}

json page_of(agentrt_runtime* rt, const char* thread, const char* user, int64_t after, int32_t limit) {
  char* out = nullptr;
  REQUIRE_MESSAGE(agentrt_events_page(&out, rt, thread, user, after, limit) == AGENTRT_OK, last_error());
  return json::parse(take(out));
}

json upload(agentrt_runtime* rt, const char* user, const char* thread, const std::string& bytes, const char* mime) {
  char* out = nullptr;
  REQUIRE_MESSAGE(agentrt_upload_create(&out, rt, user, thread, bytes.data(), bytes.size(), mime) == AGENTRT_OK,
                  last_error());
  return json::parse(take(out));
}

json start_as(agentrt_runtime* rt, const std::string& thread, const std::string& user, const json& content) {
  json in{{"threadId", thread}, {"userId", user}, {"message", {{"role", "user"}, {"content", content}}}};
  char* out = nullptr;
  REQUIRE_MESSAGE(agentrt_turn_start(&out, rt, in.dump().c_str()) == AGENTRT_OK, last_error());
  return json::parse(take(out));
}

std::set<std::string> ids_of(const json& threads) {
  std::set<std::string> out;
  for (const auto& t : threads) out.insert(t["id"].get<std::string>());
  return out;
}

}  // namespace

TEST_CASE("agentrt_threads_list lists the user's threads only, each record exactly {id, title, createdAt, ...}") {
  Runtime r;
  r.wait(r.start("t-a", "hello")["turnId"]);
  r.wait(r.start("t-b", "hello")["turnId"]);
  r.wait(start_as(r.rt, "t-c", "u2", "hello")["turnId"]);
  const auto events_a = r.events("t-a");

  const json mine = threads_of(r.rt, "u1");
  REQUIRE(mine.is_array());
  CHECK(ids_of(mine) == std::set<std::string>{"t-a", "t-b"});
  for (const auto& t : mine) {
    std::set<std::string> keys;
    for (auto it = t.begin(); it != t.end(); ++it) keys.insert(it.key());
    CHECK(keys == std::set<std::string>{"id", "title", "createdAt", "updatedAt", "lastSeq"});
    CHECK(t["title"] == "");
    CHECK(t["createdAt"].get<int64_t>() > 0);
    CHECK(t["updatedAt"].get<int64_t>() >= t["createdAt"].get<int64_t>());
    if (t["id"] == "t-a") CHECK(t["lastSeq"] == events_a.back()["_seq"]);  // the listing carries the last seq
  }
  // Most recently updated first.
  CHECK(mine[0]["updatedAt"].get<int64_t>() >= mine[1]["updatedAt"].get<int64_t>());
  CHECK(ids_of(threads_of(r.rt, "u2")) == std::set<std::string>{"t-c"});
  CHECK(threads_of(r.rt, "nobody") == json::array());

  char* out = reinterpret_cast<char*>(0x1);
  check_error(agentrt_threads_list(&out, r.rt, nullptr), AGENTRT_E_INVALID_ARGUMENT, "agentrt_threads_list",
              "user_id is NULL");
  CHECK(out == nullptr);
  check_error(agentrt_threads_list(&out, r.rt, ""), AGENTRT_E_INVALID_ARGUMENT, "agentrt_threads_list",
              "user_id is empty");
  check_error(agentrt_threads_list(nullptr, r.rt, "u1"), AGENTRT_E_INVALID_ARGUMENT, "agentrt_threads_list",
              "out is NULL");
  check_error(agentrt_threads_list(&out, nullptr, "u1"), AGENTRT_E_INVALID_ARGUMENT, "agentrt_threads_list",
              "rt is NULL");
}

TEST_CASE("agentrt_thread_delete deletes the user's own thread only, cancelling its waiting turn first") {
  Runtime r;
  // A thread paused for approval (the demo tools' book_room needs it).
  agentrt_runtime* rt = nullptr;
  TempDir dir;
  json cfg = test_config(dir);
  cfg["demo_tools"] = true;
  REQUIRE(agentrt_runtime_open(&rt, cfg.dump().c_str()) == AGENTRT_OK);
  const json h = start_as(rt, "t-del", "u1", "book room A1 on monday");
  char* rec = nullptr;
  REQUIRE(agentrt_turn_wait(&rec, rt, h["turnId"].get<std::string>().c_str(), kLongWaitMs) == AGENTRT_OK);
  REQUIRE(json::parse(take(rec))["status"] == "WAITING_APPROVAL");

  check_error(agentrt_thread_delete(rt, "t-del", "u2"), AGENTRT_E_NOT_FOUND, "agentrt_thread_delete",
              "thread t-del not found");
  CHECK(ids_of(threads_of(rt, "u1")) == std::set<std::string>{"t-del"});  // untouched

  REQUIRE_MESSAGE(agentrt_thread_delete(rt, "t-del", "u1") == AGENTRT_OK, last_error());
  CHECK(last_error().empty());
  CHECK(threads_of(rt, "u1") == json::array());
  REQUIRE(agentrt_turn_get(&rec, rt, h["turnId"].get<std::string>().c_str()) == AGENTRT_OK);
  CHECK(json::parse(take(rec))["status"] == "CANCELLED");
  // No turn starts on it again; deleting it again is not found, as an unknown thread is.
  json in{{"threadId", "t-del"}, {"userId", "u1"}, {"message", {{"content", "again"}}}};
  char* out = nullptr;
  CHECK(agentrt_turn_start(&out, rt, in.dump().c_str()) == AGENTRT_E_NOT_FOUND);
  check_error(agentrt_thread_delete(rt, "t-del", "u1"), AGENTRT_E_NOT_FOUND, "agentrt_thread_delete",
              "thread t-del not found");
  check_error(agentrt_thread_delete(rt, "t-never", "u1"), AGENTRT_E_NOT_FOUND, "agentrt_thread_delete",
              "thread t-never not found");
  agentrt_runtime_free(rt);

  check_error(agentrt_thread_delete(r.rt, nullptr, "u1"), AGENTRT_E_INVALID_ARGUMENT, "agentrt_thread_delete",
              "thread_id is NULL");
  check_error(agentrt_thread_delete(r.rt, "t", ""), AGENTRT_E_INVALID_ARGUMENT, "agentrt_thread_delete",
              "user_id is empty");
  check_error(agentrt_thread_delete(nullptr, "t", "u1"), AGENTRT_E_INVALID_ARGUMENT, "agentrt_thread_delete",
              "rt is NULL");
  CHECK(agentrt_thread_delete(r.rt, "bad/id", "u1") == AGENTRT_E_INVALID_ARGUMENT);
}

TEST_CASE("agentrt_upload_create stores a file, answers its record and part, and the part sends it in a turn") {
  Runtime r;
  const json up = upload(r.rt, "u1", "t-up", kPng, "Image/PNG; charset=binary");
  std::set<std::string> keys;
  for (auto it = up.begin(); it != up.end(); ++it) keys.insert(it.key());
  CHECK(keys == std::set<std::string>{"id", "url", "mimeType", "size", "expiresAt", "ref", "part"});
  CHECK(up["mimeType"] == "image/png");
  CHECK(up["size"] == kPng.size());
  CHECK(up["id"].get<std::string>().rfind("up", 0) == 0);
  CHECK(up["ref"].get<std::string>().rfind("img_", 0) == 0);
  CHECK(up["url"].get<std::string>().find("agent-inputs/u1/t-up/uploads/" + up["id"].get<std::string>()) !=
        std::string::npos);
  const auto now =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  CHECK(up["expiresAt"].get<int64_t>() > now);
  CHECK(up["part"] ==
        json{{"type", "image"}, {"source", {{"type", "url"}, {"value", up["url"]}, {"mimeType", "image/png"}}}});

  // The thread did not exist yet: the upload's part starts it.
  const json h = start_as(r.rt, "t-up", "u1", json::array({{{"type", "text"}, {"text", "look"}}, up["part"]}));
  CHECK(r.wait(h["turnId"])["status"] == "COMPLETED");
  const json hist = r.history("t-up");
  REQUIRE(hist[0]["content"].size() == 2);
  CHECK(hist[0]["content"][1]["type"] == "image");
  CHECK(hist[0]["content"][1]["source"]["mimeType"] == "image/png");
  // An empty file is a file.
  CHECK(upload(r.rt, "u1", "t-up", std::string(), "text/plain")["size"] == 0);
  char* out = nullptr;
  CHECK(agentrt_upload_create(&out, r.rt, "u1", "t-up", nullptr, 0, "text/plain") == AGENTRT_OK);
  agentrt_free(out);

  // Another user's thread is not found; a type that is not accepted and a file over the limit are refused.
  check_error(agentrt_upload_create(&out, r.rt, "u2", "t-up", kPng.data(), kPng.size(), "image/png"),
              AGENTRT_E_NOT_FOUND, "agentrt_upload_create", "thread t-up not found");
  CHECK(out == nullptr);
  check_error(agentrt_upload_create(&out, r.rt, "u1", "t-up", kPng.data(), kPng.size(), "application/x-msdownload"),
              AGENTRT_E_INVALID_ARGUMENT, "agentrt_upload_create",
              "attachment type 'application/x-msdownload' is not allowed");
  const std::string big(20u * 1024 * 1024 + 1, 'x');
  check_error(agentrt_upload_create(&out, r.rt, "u1", "t-up", big.data(), big.size(), "text/plain"),
              AGENTRT_E_TOO_LARGE, "agentrt_upload_create",
              "attachment of 20971521 bytes exceeds the limit of 20971520 bytes");
  check_error(agentrt_upload_create(&out, r.rt, "u1", "t-up", nullptr, 3, "text/plain"), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_upload_create", "bytes is NULL (len is 3)");
  check_error(agentrt_upload_create(&out, r.rt, nullptr, "t-up", "x", 1, "text/plain"), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_upload_create", "user_id is NULL");
  check_error(agentrt_upload_create(&out, r.rt, "u1", "", "x", 1, "text/plain"), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_upload_create", "thread_id is empty");
  check_error(agentrt_upload_create(&out, r.rt, "u1", "t-up", "x", 1, nullptr), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_upload_create", "mime_type is NULL");
  check_error(agentrt_upload_create(nullptr, r.rt, "u1", "t-up", "x", 1, "text/plain"), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_upload_create", "out is NULL");
  CHECK(agentrt_upload_create(&out, r.rt, "u1", "bad/id", "x", 1, "text/plain") == AGENTRT_E_INVALID_ARGUMENT);
}

TEST_CASE("agentrt_upload_create without an object store is AGENTRT_E_UNSUPPORTED") {
  TempDir dir;
  json cfg = test_config(dir);
  cfg["objects"] = nullptr;
  Runtime r(cfg);
  char* out = nullptr;
  check_error(agentrt_upload_create(&out, r.rt, "u1", "t", kPng.data(), kPng.size(), "image/png"),
              AGENTRT_E_UNSUPPORTED, "agentrt_upload_create", "uploads need an object store (config: objects)");
  CHECK(out == nullptr);
}

TEST_CASE("agentrt_events_page returns the committed events after a seq, in pages, as the stream does") {
  Runtime r;
  r.wait(r.start("t-ev", "hello")["turnId"]);
  std::vector<json> streamed = r.events("t-ev");
  REQUIRE(streamed.size() > 4);

  const json all = page_of(r.rt, "t-ev", "u1", 0, 1000);
  REQUIRE(all.size() == streamed.size());
  for (size_t i = 0; i < all.size(); ++i) {
    json e = streamed[i];
    const int64_t seq = e["_seq"];
    e.erase("_seq");
    CHECK(all[i] == json{{"seq", seq}, {"event", e}});
  }
  // Pages of two, each after the last seq of the one before, add up to the whole log.
  json paged = json::array();
  int64_t after = 0;
  for (;;) {
    const json page = page_of(r.rt, "t-ev", "u1", after, 2);
    if (page.empty()) break;
    CHECK(page.size() <= 2);
    for (const auto& e : page) paged.push_back(e);
    after = page.back()["seq"];
  }
  CHECK(paged == all);
  CHECK(page_of(r.rt, "t-ev", "u1", all.back()["seq"], 10) == json::array());
  CHECK(page_of(r.rt, "t-ev", "u1", 2, 1) == json::array({all[2]}));

  char* out = reinterpret_cast<char*>(0x1);
  check_error(agentrt_events_page(&out, r.rt, "t-ev", "u2", 0, 10), AGENTRT_E_NOT_FOUND, "agentrt_events_page",
              "thread t-ev not found");
  CHECK(out == nullptr);
  check_error(agentrt_events_page(&out, r.rt, "t-none", "u1", 0, 10), AGENTRT_E_NOT_FOUND, "agentrt_events_page",
              "thread t-none not found");
  check_error(agentrt_events_page(&out, r.rt, "t-ev", "u1", -1, 10), AGENTRT_E_INVALID_ARGUMENT, "agentrt_events_page",
              "after_seq must not be negative, not -1");
  for (int32_t limit : {0, -1, 1001})
    check_error(agentrt_events_page(&out, r.rt, "t-ev", "u1", 0, limit), AGENTRT_E_INVALID_ARGUMENT,
                "agentrt_events_page", "limit must be from 1 to 1000, not " + std::to_string(limit));
  check_error(agentrt_events_page(&out, r.rt, nullptr, "u1", 0, 10), AGENTRT_E_INVALID_ARGUMENT, "agentrt_events_page",
              "thread_id is NULL");
  check_error(agentrt_events_page(&out, r.rt, "t-ev", nullptr, 0, 10), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_events_page", "user_id is NULL");
  check_error(agentrt_events_page(nullptr, r.rt, "t-ev", "u1", 0, 10), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_events_page", "out is NULL");
  check_error(agentrt_events_page(&out, nullptr, "t-ev", "u1", 0, 10), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_events_page", "rt is NULL");

  // A deleted thread has no events page.
  REQUIRE(agentrt_thread_delete(r.rt, "t-ev", "u1") == AGENTRT_OK);
  check_error(agentrt_events_page(&out, r.rt, "t-ev", "u1", 0, 10), AGENTRT_E_NOT_FOUND, "agentrt_events_page",
              "thread t-ev not found");
}

TEST_CASE("agentrt_spend reports a turn's, a thread's and a user's spend, and budgets from the config hold") {
  TempDir dir;
  json config = test_config(dir);
  config["budgets"] = json{{"thread", {{"model_calls", 3}}}};  // a demo turn makes 2 calls: intent and answer
  Runtime r(config);
  auto first = r.start("t-spend", "hello");
  CHECK(r.wait(first["turnId"])["status"] == "COMPLETED");
  auto second = r.start("t-spend", "hello again");
  auto refused = r.wait(second["turnId"]);
  CHECK(refused["status"] == "FAILED");
  auto evs = r.events("t-spend", 2);
  CHECK(evs.back()["code"] == "budget_exceeded");

  auto spend = [&](const char* scope, const std::string& id) {
    char* out = nullptr;
    REQUIRE_MESSAGE(agentrt_spend(&out, r.rt, scope, id.c_str()) == AGENTRT_OK, last_error());
    return json::parse(take(out));
  };
  const json turn = spend("turn", first["turnId"]);
  CHECK(turn == json{{"modelCalls", 2},
                     {"toolCalls", 0},
                     {"inputTokens", 0},
                     {"outputTokens", 0},
                     {"cost", 0.0},
                     {"usage", json::array()}});
  CHECK(spend("thread", "t-spend")["modelCalls"] == 3);
  CHECK(spend("user", "u1")["modelCalls"] == 3);
  CHECK(spend("user", "nobody")["modelCalls"] == 0);

  char* out = nullptr;
  check_error(agentrt_spend(&out, r.rt, "team", "x"), AGENTRT_E_INVALID_ARGUMENT, "agentrt_spend",
              "scope must be \"turn\", \"thread\" or \"user\", not \"team\"");
  check_error(agentrt_spend(&out, r.rt, "turn", "turn-unknown"), AGENTRT_E_NOT_FOUND, "agentrt_spend",
              "turn 'turn-unknown' not found");
  check_error(agentrt_spend(&out, r.rt, "user", ""), AGENTRT_E_INVALID_ARGUMENT, "agentrt_spend", "id is empty");
  CHECK(out == nullptr);
}

TEST_CASE("agentrt_flush_traces sends the ended spans now and waits for the collector; a hung one times out") {
  TempDir dir;
  agentrt::testing::OtlpReceiver rx;
  {
    json config = test_config(dir);
    config["tracing"] = json{{"otlp_endpoint", rx.endpoint()}, {"export_interval_ms", 600000}};
    Runtime r(config);
    auto h = r.start("t-flush", "hello");
    CHECK(r.wait(h["turnId"])["status"] == "COMPLETED");
    CHECK(rx.spans().empty());  // nothing leaves before the interval or a flush
    REQUIRE_MESSAGE(agentrt_flush_traces(r.rt, 10000) == AGENTRT_OK, last_error());
    CHECK(agentrt::testing::find_span(rx.spans(), "invoke_agent agentrt").has_value());
    check_error(agentrt_flush_traces(r.rt, -1), AGENTRT_E_INVALID_ARGUMENT, "agentrt_flush_traces",
                "timeout_ms must not be negative, not -1");
  }
  agentrt::testing::OtlpReceiver hung;
  hung.never_answer();
  TempDir dir2;
  json config = test_config(dir2);
  config["tracing"] =
      json{{"otlp_endpoint", hung.endpoint()}, {"export_interval_ms", 600000}, {"export_timeout_ms", 1000}};
  Runtime r(config);
  CHECK(r.wait(r.start("t-flush-hung", "hello")["turnId"])["status"] == "COMPLETED");
  check_error(agentrt_flush_traces(r.rt, 100), AGENTRT_E_TIMEOUT, "agentrt_flush_traces",
              "the collector had not answered for every span after 100 ms");
  TempDir dir3;
  Runtime off(test_config(dir3));
  CHECK(agentrt_flush_traces(off.rt, 0) == AGENTRT_OK);  // tracing off: nothing to wait for
}
