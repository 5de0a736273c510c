// Every entry point of agentrt.h with bad arguments: the status code and the thread's last-error message.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>

#include "capi_fixture.hpp"

using namespace capi_test;

namespace {

struct Counter {
  std::atomic<int> n{0};
};
void count_destroy(void* p) { ++static_cast<Counter*>(p)->n; }
void noop_tool(agentrt_tool_call* call, const char*, void*) {
  agentrt_tool_call_complete(call, "{}", nullptr);
  agentrt_tool_call_free(call);
}
void noop_model(agentrt_model_call* call, const char*, void*) {
  agentrt_model_call_finish(call, R"({"text":"ok"})");
  agentrt_model_call_free(call);
}

// The status is `code` and the message names the function and contains `needle`.
void check_error(int32_t rc, int32_t code, const char* function, const std::string& needle) {
  CHECK_MESSAGE(rc == code, function << " returned " << rc << " (" << agentrt_status_name(rc) << "): " << last_error());
  const std::string msg = last_error();
  CHECK_MESSAGE(msg.rfind(std::string(function) + ": ", 0) == 0, "message: " << msg);
  CHECK_MESSAGE(msg.find(needle) != std::string::npos, "message: " << msg << "\nexpected to contain: " << needle);
}

}  // namespace

TEST_CASE("version, ABI version and status names are those of the header") {
  CHECK(std::string(agentrt_version()) == AGENTRT_VERSION_STRING);
  CHECK(std::string(agentrt_version()) == std::to_string(AGENTRT_VERSION_MAJOR) + "." +
                                              std::to_string(AGENTRT_VERSION_MINOR) + "." +
                                              std::to_string(AGENTRT_VERSION_PATCH));
  CHECK(agentrt_abi_version() == AGENTRT_ABI_VERSION);
  const std::vector<std::pair<int32_t, std::string>> names = {{AGENTRT_OK, "ok"},
                                                              {AGENTRT_E_INVALID_ARGUMENT, "invalid_argument"},
                                                              {AGENTRT_E_NOT_FOUND, "not_found"},
                                                              {AGENTRT_E_CONFLICT, "conflict"},
                                                              {AGENTRT_E_EXPIRED, "expired"},
                                                              {AGENTRT_E_TOO_LARGE, "too_large"},
                                                              {AGENTRT_E_CANCELLED, "cancelled"},
                                                              {AGENTRT_E_TIMEOUT, "timeout"},
                                                              {AGENTRT_E_IO, "io"},
                                                              {AGENTRT_E_INVALID_STATE, "invalid_state"},
                                                              {AGENTRT_E_MODEL, "model"},
                                                              {AGENTRT_E_UNAUTHORIZED, "unauthorized"},
                                                              {AGENTRT_E_UNSUPPORTED, "unsupported"},
                                                              {AGENTRT_E_INTERNAL, "internal"},
                                                              {-14, "unknown"},
                                                              {1, "unknown"}};
  for (const auto& [code, name] : names) CHECK(std::string(agentrt_status_name(code)) == name);
}

TEST_CASE("the last error belongs to the calling thread and the next call clears it") {
  CHECK(std::string(agentrt_last_error()).empty());
  CHECK(agentrt_runtime_open(nullptr, "{}") == AGENTRT_E_INVALID_ARGUMENT);
  CHECK(last_error() == "agentrt_runtime_open: out is NULL");
  std::string other = "unset";
  std::thread([&] { other = agentrt_last_error(); }).join();
  CHECK(other.empty());
  CHECK(last_error() == "agentrt_runtime_open: out is NULL");  // reading it does not clear it
  agentrt_free(nullptr);
  CHECK(last_error().empty());
}

TEST_CASE("agentrt_runtime_open refuses NULL, malformed JSON and unknown keys") {
  TempDir dir;
  agentrt_runtime* rt = reinterpret_cast<agentrt_runtime*>(0x1);
  check_error(agentrt_runtime_open(&rt, "{"), AGENTRT_E_INVALID_ARGUMENT, "agentrt_runtime_open",
              "config_json is not valid JSON");
  CHECK(rt == nullptr);  // out is cleared on failure
  check_error(agentrt_runtime_open(&rt, "[1]"), AGENTRT_E_INVALID_ARGUMENT, "agentrt_runtime_open",
              "config_json must be a JSON object");
  json cfg = test_config(dir);
  cfg["colour"] = "blue";
  check_error(agentrt_runtime_open(&rt, cfg.dump().c_str()), AGENTRT_E_INVALID_ARGUMENT, "agentrt_runtime_open",
              "unknown key 'colour'");
  cfg = test_config(dir);
  cfg["demo_tools"] = "yes";
  check_error(agentrt_runtime_open(&rt, cfg.dump().c_str()), AGENTRT_E_INVALID_ARGUMENT, "agentrt_runtime_open",
              "config_json: 'demo_tools' must be a boolean");
  cfg = test_config(dir, json{{"type", "telepathy"}});
  check_error(agentrt_runtime_open(&rt, cfg.dump().c_str()), AGENTRT_E_INVALID_ARGUMENT, "agentrt_runtime_open",
              "model: type 'telepathy' is unknown");
  CHECK(rt == nullptr);

  cfg = test_config(dir);
  cfg["demo_tools"] = true;
  REQUIRE(agentrt_runtime_open(&rt, cfg.dump().c_str()) == AGENTRT_OK);
  CHECK(last_error().empty());
  // The demo tools are registered: a second book_room conflicts.
  check_error(agentrt_tool_register(rt, R"({"name":"book_room"})", noop_tool, nullptr, nullptr), AGENTRT_E_CONFLICT,
              "agentrt_tool_register", "book_room");
  agentrt_runtime_free(rt);
  agentrt_runtime_free(nullptr);
}

TEST_CASE("agentrt_runtime_open reads the objects section of the config: s3 keys, refused bad values") {
  TempDir dir;
  agentrt_runtime* rt = nullptr;
  ::setenv("AGENTRT_CAPI_TEST_S3_KEY", "AKIDEXAMPLE", 1);
  ::setenv("AGENTRT_CAPI_TEST_S3_SECRET", "not-printed", 1);
  auto s3 = [&](json extra) {
    json cfg = test_config(dir);
    json o = {{"type", "s3"},
              {"endpoint", "http://127.0.0.1:9"},
              {"bucket", "agentrt-test"},
              {"path_style", true},
              {"access_key_env", "AGENTRT_CAPI_TEST_S3_KEY"},
              {"secret_key_env", "AGENTRT_CAPI_TEST_S3_SECRET"}};
    o.update(extra);
    cfg["objects"] = o;
    return cfg.dump();
  };
  // Opening makes no request: a store whose endpoint nobody serves opens.
  REQUIRE(agentrt_runtime_open(&rt, s3(json::object()).c_str()) == AGENTRT_OK);
  agentrt_runtime_free(rt);
  rt = nullptr;
  check_error(agentrt_runtime_open(&rt, s3({{"url_signing", "cdn"}}).c_str()), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_runtime_open", "config: objects: 'url_signing' must be \"s3\" or \"server\"");
  check_error(agentrt_runtime_open(&rt, s3({{"bucket", "Bad_Bucket"}}).c_str()), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_runtime_open", "config: objects: invalid S3 bucket 'Bad_Bucket'");
  check_error(agentrt_runtime_open(&rt, s3({{"secret_key_env", "AGENTRT_CAPI_TEST_UNSET"}}).c_str()),
              AGENTRT_E_INVALID_ARGUMENT, "agentrt_runtime_open",
              "config: objects: environment variable AGENTRT_CAPI_TEST_UNSET (S3 secret key) is not set");
  check_error(agentrt_runtime_open(&rt, s3({{"path_style", "yes"}}).c_str()), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_runtime_open", "'path_style' must be a boolean");
  check_error(agentrt_runtime_open(&rt, s3({{"root", "/tmp"}}).c_str()), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_runtime_open", "unknown key 'root'");
  CHECK(last_error().find("not-printed") == std::string::npos);
  CHECK(rt == nullptr);
}

TEST_CASE("agentrt_runtime_open_with_model calls destroy exactly once, also when it fails") {
  TempDir dir;
  Counter c;
  agentrt_runtime* rt = nullptr;
  check_error(agentrt_runtime_open_with_model(&rt, test_config(dir).dump().c_str(), nullptr, &c, count_destroy),
              AGENTRT_E_INVALID_ARGUMENT, "agentrt_runtime_open_with_model", "model is NULL");
  CHECK(c.n == 1);
  check_error(agentrt_runtime_open_with_model(nullptr, "{}", noop_model, &c, count_destroy), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_runtime_open_with_model", "out is NULL");
  CHECK(c.n == 2);
  check_error(agentrt_runtime_open_with_model(&rt, R"({"workers":0})", noop_model, &c, count_destroy),
              AGENTRT_E_INVALID_ARGUMENT, "agentrt_runtime_open_with_model", "workers");
  CHECK(c.n == 3);
  json cfg = test_config(dir);
  REQUIRE(agentrt_runtime_open_with_model(&rt, cfg.dump().c_str(), noop_model, &c, count_destroy) == AGENTRT_OK);
  CHECK(c.n == 3);
  agentrt_runtime_free(rt);
  CHECK(c.n == 4);
}

TEST_CASE("agentrt_tool_register refuses bad specs and calls destroy exactly once") {
  Runtime r;
  Counter c;
  check_error(agentrt_tool_register(nullptr, R"({"name":"t"})", noop_tool, &c, count_destroy),
              AGENTRT_E_INVALID_ARGUMENT, "agentrt_tool_register", "rt is NULL");
  CHECK(c.n == 1);
  check_error(agentrt_tool_register(r.rt, R"({"name":"t"})", nullptr, &c, count_destroy), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_tool_register", "cb is NULL");
  CHECK(c.n == 2);
  check_error(agentrt_tool_register(r.rt, nullptr, noop_tool, &c, count_destroy), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_tool_register", "spec_json is NULL");
  CHECK(c.n == 3);
  check_error(agentrt_tool_register(r.rt, "{'name':1}", noop_tool, &c, count_destroy), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_tool_register", "spec_json is not valid JSON");
  CHECK(c.n == 4);
  check_error(agentrt_tool_register(r.rt, R"({"name":"t","approval":"sometimes"})", noop_tool, &c, count_destroy),
              AGENTRT_E_INVALID_ARGUMENT, "agentrt_tool_register", "'approval' must be \"never\" or \"always\"");
  check_error(agentrt_tool_register(r.rt, R"({"name":"t","colour":1})", noop_tool, &c, count_destroy),
              AGENTRT_E_INVALID_ARGUMENT, "agentrt_tool_register", "unknown key 'colour'");
  check_error(agentrt_tool_register(r.rt, R"({"name":"t","stages":["planning"]})", noop_tool, &c, count_destroy),
              AGENTRT_E_INVALID_ARGUMENT, "agentrt_tool_register",
              "tool spec: 'stages' must be stage names (intent, execution, organization), not \"planning\"");
  check_error(agentrt_tool_register(r.rt, R"({"name":"t","timeoutMs":0})", noop_tool, &c, count_destroy),
              AGENTRT_E_INVALID_ARGUMENT, "agentrt_tool_register", "'timeoutMs' must be an integer");
  check_error(agentrt_tool_register(r.rt, R"({"description":"no name"})", noop_tool, &c, count_destroy),
              AGENTRT_E_INVALID_ARGUMENT, "agentrt_tool_register", "tool spec: 'name' is required");
  check_error(agentrt_tool_register(r.rt, R"({"name":""})", noop_tool, &c, count_destroy), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_tool_register", "tool spec: 'name' must not be empty");
  check_error(agentrt_tool_register(r.rt, R"({"name":"t","idempotent":"yes"})", noop_tool, &c, count_destroy),
              AGENTRT_E_INVALID_ARGUMENT, "agentrt_tool_register", "tool spec: 'idempotent' must be a boolean");
  check_error(agentrt_tool_register(r.rt, "[]", noop_tool, &c, count_destroy), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_tool_register", "tool spec must be a JSON object");
  check_error(agentrt_tool_register(r.rt, R"({"name":"bad name!"})", noop_tool, &c, count_destroy),
              AGENTRT_E_INVALID_ARGUMENT, "agentrt_tool_register", "bad name!");
  check_error(
      agentrt_tool_register(r.rt, R"({"name":"t","parameters":{"type":"nonsense"}})", noop_tool, &c, count_destroy),
      AGENTRT_E_INVALID_ARGUMENT, "agentrt_tool_register", "");
  CHECK(c.n == 14);

  Counter first;
  REQUIRE(agentrt_tool_register(r.rt, R"({"name":"t"})", noop_tool, &first, count_destroy) == AGENTRT_OK);
  check_error(agentrt_tool_register(r.rt, R"({"name":"t"})", noop_tool, &c, count_destroy), AGENTRT_E_CONFLICT,
              "agentrt_tool_register", "t");
  CHECK(c.n == 15);
  CHECK(first.n == 0);  // the registered tool is untouched
  REQUIRE(agentrt_tool_unregister(r.rt, "t") == AGENTRT_OK);
  CHECK(first.n == 1);
  check_error(agentrt_tool_unregister(r.rt, "t"), AGENTRT_E_NOT_FOUND, "agentrt_tool_unregister", "no tool named 't'");
  check_error(agentrt_tool_unregister(r.rt, nullptr), AGENTRT_E_INVALID_ARGUMENT, "agentrt_tool_unregister",
              "name is NULL");
  check_error(agentrt_tool_unregister(nullptr, "t"), AGENTRT_E_INVALID_ARGUMENT, "agentrt_tool_unregister",
              "rt is NULL");
}

TEST_CASE("tool and model call functions refuse NULL handles") {
  check_error(agentrt_tool_call_complete(nullptr, "{}", nullptr), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_tool_call_complete", "call is NULL");
  check_error(agentrt_tool_call_fail(nullptr, "x", "y"), AGENTRT_E_INVALID_ARGUMENT, "agentrt_tool_call_fail",
              "call is NULL");
  agentrt_tool_call_free(nullptr);
  CHECK(last_error().empty());
  check_error(agentrt_model_call_text(nullptr, "x"), AGENTRT_E_INVALID_ARGUMENT, "agentrt_model_call_text",
              "call is NULL");
  check_error(agentrt_model_call_reasoning(nullptr, "x"), AGENTRT_E_INVALID_ARGUMENT, "agentrt_model_call_reasoning",
              "call is NULL");
  check_error(agentrt_model_call_tool_call_start(nullptr, 0, "id", "n"), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_model_call_tool_call_start", "call is NULL");
  check_error(agentrt_model_call_tool_call_args(nullptr, 0, "{}"), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_model_call_tool_call_args", "call is NULL");
  check_error(agentrt_model_call_finish(nullptr, "{}"), AGENTRT_E_INVALID_ARGUMENT, "agentrt_model_call_finish",
              "call is NULL");
  check_error(agentrt_model_call_fail(nullptr, AGENTRT_E_MODEL, "x"), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_model_call_fail", "call is NULL");
  agentrt_model_call_free(nullptr);
  CHECK(last_error().empty());
}

TEST_CASE("agentrt_turn_start refuses NULL, malformed input and non-user messages") {
  Runtime r;
  char* out = reinterpret_cast<char*>(0x1);
  const char* good = R"({"threadId":"t1","userId":"u1","message":{"role":"user","content":"hi"}})";
  check_error(agentrt_turn_start(nullptr, r.rt, good), AGENTRT_E_INVALID_ARGUMENT, "agentrt_turn_start", "out is NULL");
  check_error(agentrt_turn_start(&out, nullptr, good), AGENTRT_E_INVALID_ARGUMENT, "agentrt_turn_start", "rt is NULL");
  CHECK(out == nullptr);
  check_error(agentrt_turn_start(&out, r.rt, nullptr), AGENTRT_E_INVALID_ARGUMENT, "agentrt_turn_start",
              "input_json is NULL");
  check_error(agentrt_turn_start(&out, r.rt, "{\"threadId\":"), AGENTRT_E_INVALID_ARGUMENT, "agentrt_turn_start",
              "input_json is not valid JSON");
  check_error(agentrt_turn_start(&out, r.rt, R"({"threadId":"t1","message":{"content":"hi"}})"),
              AGENTRT_E_INVALID_ARGUMENT, "agentrt_turn_start", "input_json: 'userId' is required");
  check_error(agentrt_turn_start(&out, r.rt, R"({"threadId":"t1","userId":5,"message":{"content":"hi"}})"),
              AGENTRT_E_INVALID_ARGUMENT, "agentrt_turn_start", "input_json: 'userId' must be a string");
  check_error(agentrt_turn_start(&out, r.rt, R"({"threadId":"t1","userId":"u1"})"), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_turn_start", "input_json: 'message' is required");
  check_error(agentrt_turn_start(&out, r.rt, R"({"threadId":"t1","userId":"u1","message":"hi"})"),
              AGENTRT_E_INVALID_ARGUMENT, "agentrt_turn_start", "input_json: 'message' must be a JSON object");
  check_error(agentrt_turn_start(&out, r.rt, R"({"threadId":"t1","userId":"u1","message":{"content":"hi"},"x":1})"),
              AGENTRT_E_INVALID_ARGUMENT, "agentrt_turn_start",
              "input_json: unknown key 'x' (threadId, userId, message, runId, clientMessageId, context, state, tools, "
              "traceparent; or "
              "an AG-UI RunAgentInput with 'messages')");
  check_error(agentrt_turn_start(&out, r.rt,
                                 R"({"threadId":"t1","userId":"u1","message":{"role":"assistant","content":"hi"}})"),
              AGENTRT_E_INVALID_ARGUMENT, "agentrt_turn_start", "must be a user message");
  check_error(agentrt_turn_start(&out, r.rt, R"({"threadId":"bad id!","userId":"u1","message":{"content":"hi"}})"),
              AGENTRT_E_INVALID_ARGUMENT, "agentrt_turn_start", "bad id!");
  check_error(agentrt_turn_start(&out, r.rt, R"({"threadId":"t1","runId":"r1","userId":"u1","messages":[]})"),
              AGENTRT_E_INVALID_ARGUMENT, "agentrt_turn_start", "no user message");
  CHECK(out == nullptr);
}

TEST_CASE("turn functions answer unknown ids with AGENTRT_E_NOT_FOUND and bad ones with AGENTRT_E_INVALID_ARGUMENT") {
  Runtime r;
  char* out = nullptr;
  const char* dec = R"([{"interruptId":"i1","action":"approve"}])";
  check_error(agentrt_turn_resume(&out, r.rt, "turn_nope", "apr_1", dec), AGENTRT_E_NOT_FOUND, "agentrt_turn_resume",
              "turn turn_nope not found");
  check_error(agentrt_turn_resume(&out, r.rt, nullptr, "apr_1", dec), AGENTRT_E_INVALID_ARGUMENT, "agentrt_turn_resume",
              "turn_id is NULL");
  check_error(agentrt_turn_resume(&out, r.rt, "turn_nope", "", dec), AGENTRT_E_INVALID_ARGUMENT, "agentrt_turn_resume",
              "approval_request_id is empty");
  check_error(agentrt_turn_resume(&out, r.rt, "turn_nope", "apr_1", "{oops"), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_turn_resume", "decisions_json is not valid JSON");
  check_error(agentrt_turn_resume(&out, r.rt, "turn_nope", "apr_1", R"([{"interruptId":"i1","action":"maybe"}])"),
              AGENTRT_E_INVALID_ARGUMENT, "agentrt_turn_resume", "unknown action 'maybe'");
  check_error(agentrt_turn_resume(&out, r.rt, "turn_nope", "apr_1", R"({"runId":"r9"})"), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_turn_resume", "decisions_json: needs 'decisions' (or 'resume', or 'answers')");
  check_error(agentrt_turn_resume(&out, r.rt, "turn_nope", "apr_1", R"({"decisions":{}})"), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_turn_resume", "decisions_json: 'decisions' must be an array");
  check_error(
      agentrt_turn_resume(&out, r.rt, "turn_nope", "apr_1", R"({"decisions":[],"why":1})"), AGENTRT_E_INVALID_ARGUMENT,
      "agentrt_turn_resume",
      "decisions_json: unknown key 'why' (decisions, resume, answers, runId, context, tools, state, traceparent)");
  check_error(agentrt_turn_resume(&out, r.rt, "turn_nope", "apr_1", "7"), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_turn_resume", "decisions_json must be an array of decisions or a JSON object");
  check_error(agentrt_turn_resume(nullptr, r.rt, "turn_nope", "apr_1", dec), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_turn_resume", "out is NULL");
  check_error(agentrt_turn_cancel(r.rt, "turn_nope"), AGENTRT_E_NOT_FOUND, "agentrt_turn_cancel",
              "turn turn_nope not found");
  check_error(agentrt_turn_cancel(nullptr, "turn_nope"), AGENTRT_E_INVALID_ARGUMENT, "agentrt_turn_cancel",
              "rt is NULL");
  check_error(agentrt_turn_get(&out, r.rt, "turn_nope"), AGENTRT_E_NOT_FOUND, "agentrt_turn_get",
              "turn turn_nope not found");
  check_error(agentrt_turn_get(&out, r.rt, nullptr), AGENTRT_E_INVALID_ARGUMENT, "agentrt_turn_get", "turn_id is NULL");
  check_error(agentrt_turn_wait(&out, r.rt, "turn_nope", 10), AGENTRT_E_NOT_FOUND, "agentrt_turn_wait",
              "turn turn_nope not found");
  check_error(agentrt_turn_wait(&out, r.rt, "turn_nope", -1), AGENTRT_E_INVALID_ARGUMENT, "agentrt_turn_wait",
              "timeout_ms must not be negative");
  check_error(agentrt_turn_interrupts(&out, r.rt, "turn_nope"), AGENTRT_E_NOT_FOUND, "agentrt_turn_interrupts",
              "turn turn_nope not found");
  check_error(agentrt_turn_interrupts(nullptr, r.rt, "turn_nope"), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_turn_interrupts", "out is NULL");
  check_error(agentrt_thread_history(&out, nullptr, "t1"), AGENTRT_E_INVALID_ARGUMENT, "agentrt_thread_history",
              "rt is NULL");
  check_error(agentrt_thread_history(&out, r.rt, nullptr), AGENTRT_E_INVALID_ARGUMENT, "agentrt_thread_history",
              "thread_id is NULL");
  CHECK(out == nullptr);
  // An unknown thread has an empty history.
  REQUIRE(agentrt_thread_history(&out, r.rt, "never_used") == AGENTRT_OK);
  CHECK(take(out) == "[]");
}

TEST_CASE("resume of a turn that is not waiting is AGENTRT_E_INVALID_STATE") {
  Runtime r;
  auto h = r.start("t-done", "hello");
  auto t = r.wait(h["turnId"]);
  REQUIRE(t["status"] == "COMPLETED");
  char* out = nullptr;
  check_error(agentrt_turn_resume(&out, r.rt, t["id"].get<std::string>().c_str(), "apr_x",
                                  R"([{"interruptId":"i","action":"approve"}])"),
              AGENTRT_E_INVALID_STATE, "agentrt_turn_resume", "not waiting for approval");
  // Cancelling a finished turn is a no-op.
  CHECK(agentrt_turn_cancel(r.rt, t["id"].get<std::string>().c_str()) == AGENTRT_OK);
  // A second turn while... none is active: a start on the same thread works.
  auto h2 = r.start("t-done", "again");
  CHECK(h2["existing"] == false);
}

TEST_CASE("event streams refuse bad arguments, time out, and report a closed stream") {
  Runtime r;
  agentrt_events* s = reinterpret_cast<agentrt_events*>(0x1);
  check_error(agentrt_events_open(&s, nullptr, "t1", 0), AGENTRT_E_INVALID_ARGUMENT, "agentrt_events_open",
              "rt is NULL");
  CHECK(s == nullptr);
  check_error(agentrt_events_open(&s, r.rt, nullptr, 0), AGENTRT_E_INVALID_ARGUMENT, "agentrt_events_open",
              "thread_id is NULL");
  check_error(agentrt_events_open(&s, r.rt, "t1", -5), AGENTRT_E_INVALID_ARGUMENT, "agentrt_events_open",
              "after_seq must not be negative");
  check_error(agentrt_events_open(nullptr, r.rt, "t1", 0), AGENTRT_E_INVALID_ARGUMENT, "agentrt_events_open",
              "out is NULL");
  REQUIRE(agentrt_events_open(&s, r.rt, "t1", 0) == AGENTRT_OK);
  char* e = nullptr;
  int64_t seq = 99;
  check_error(agentrt_events_next(nullptr, &seq, s, 0), AGENTRT_E_INVALID_ARGUMENT, "agentrt_events_next",
              "out is NULL");
  check_error(agentrt_events_next(&e, &seq, nullptr, 0), AGENTRT_E_INVALID_ARGUMENT, "agentrt_events_next",
              "stream is NULL");
  check_error(agentrt_events_next(&e, &seq, s, -1), AGENTRT_E_INVALID_ARGUMENT, "agentrt_events_next",
              "timeout_ms must not be negative");
  auto t0 = std::chrono::steady_clock::now();
  check_error(agentrt_events_next(&e, &seq, s, 50), AGENTRT_E_TIMEOUT, "agentrt_events_next", "no event within 50 ms");
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(45));
  CHECK(e == nullptr);
  CHECK(seq == 0);
  check_error(agentrt_events_close(nullptr), AGENTRT_E_INVALID_ARGUMENT, "agentrt_events_close", "stream is NULL");
  REQUIRE(agentrt_events_close(s) == AGENTRT_OK);
  check_error(agentrt_events_next(&e, &seq, s, 1000), AGENTRT_E_CANCELLED, "agentrt_events_next",
              "the stream is closed");
  agentrt_events_free(s);
  agentrt_events_free(nullptr);
}

TEST_CASE("agentrt_transcribe refuses bad arguments, and is unsupported with the demo model") {
  Runtime r;
  char* out = nullptr;
  const char audio[] = "RIFF....WAVE";
  check_error(agentrt_transcribe(&out, nullptr, audio, sizeof audio, "audio/wav", nullptr), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_transcribe", "rt is NULL");
  check_error(agentrt_transcribe(&out, r.rt, nullptr, 10, "audio/wav", nullptr), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_transcribe", "audio is NULL");
  check_error(agentrt_transcribe(&out, r.rt, audio, 0, "audio/wav", nullptr), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_transcribe", "audio is empty");
  check_error(agentrt_transcribe(&out, r.rt, audio, sizeof audio, nullptr, nullptr), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_transcribe", "mime_type is NULL");
  check_error(agentrt_transcribe(&out, r.rt, audio, sizeof audio, "audio/wav", "{x"), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_transcribe", "options_json is not valid JSON");
  check_error(agentrt_transcribe(&out, r.rt, audio, sizeof audio, "audio/wav", R"({"speed":"2x"})"),
              AGENTRT_E_INVALID_ARGUMENT, "agentrt_transcribe",
              "options_json: unknown key 'speed' (model, language, prompt, responseFormat, filename)");
  check_error(agentrt_transcribe(&out, r.rt, audio, sizeof audio, "audio/wav", R"({"language":1})"),
              AGENTRT_E_INVALID_ARGUMENT, "agentrt_transcribe", "options_json: 'language' must be a string");
  check_error(agentrt_transcribe(nullptr, r.rt, audio, sizeof audio, "audio/wav", nullptr), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_transcribe", "out is NULL");
  check_error(agentrt_transcribe(&out, r.rt, audio, sizeof audio, "audio/wav", R"({"language":"en"})"),
              AGENTRT_E_UNSUPPORTED, "agentrt_transcribe", "the model type is \"demo\"");
  CHECK(out == nullptr);
}
