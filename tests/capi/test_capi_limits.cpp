// Hostile input through the C ABI: every JSON argument nested too deep (200,000 levels, and one over the
// limit) is AGENTRT_E_INVALID_ARGUMENT with a clear last error, one at the limit is taken; host tool results
// too deep fail the call (the turn goes on); the size and count limits are AGENTRT_E_TOO_LARGE.
#include <doctest/doctest.h>

#include <condition_variable>
#include <mutex>

#include "capi_fixture.hpp"

using namespace capi_test;

namespace {

constexpr size_t kHuge = 200000;

std::string nested_text(size_t depth) {
  if (depth == 0) return "0";
  return std::string(depth, '[') + std::string(depth, ']');
}

// {"deep": nested(depth - 1)} as text: an object `depth` deep.
std::string deep_object_text(size_t depth) { return R"({"deep":)" + nested_text(depth - 1) + "}"; }

void check_deep(int32_t rc, const char* function, const std::string& name, size_t limit = 64) {
  CHECK_MESSAGE(rc == AGENTRT_E_INVALID_ARGUMENT, function << " returned " << rc << ": " << last_error());
  CHECK(last_error() ==
        std::string(function) + ": " + name + " is nested deeper than " + std::to_string(limit) + " levels");
}

// Not refused for its nesting (it may be refused for what it is).
void check_not_deep(int32_t rc, const char* function) {
  CHECK_MESSAGE((rc == AGENTRT_OK || last_error().find("nested deeper") == std::string::npos),
                function << ": " << last_error());
}

// A host book_room that completes with the texts it is given and records what agentrt_tool_call_complete said.
struct AnsweringTool {
  std::string result_json = "{}";
  std::string ui_json;
  std::string job_json;  // non-empty: agentrt_tool_call_start_job first
  std::mutex mutex;
  std::vector<int32_t> codes;
  std::vector<std::string> errors;

  static void run(agentrt_tool_call* call, const char*, void* ud) {
    auto* self = static_cast<AnsweringTool*>(ud);
    std::lock_guard<std::mutex> lock(self->mutex);
    if (!self->job_json.empty()) {
      self->codes.push_back(agentrt_tool_call_start_job(call, self->job_json.c_str()));
      self->errors.push_back(agentrt_last_error());
    }
    self->codes.push_back(agentrt_tool_call_complete(call, self->result_json.c_str(),
                                                     self->ui_json.empty() ? nullptr : self->ui_json.c_str()));
    self->errors.push_back(agentrt_last_error());
    agentrt_tool_call_free(call);
  }
  void add(agentrt_runtime* rt) {
    REQUIRE_MESSAGE(
        agentrt_tool_register(rt, R"({"name":"book_room","approval":"never"})", run, this, nullptr) == AGENTRT_OK,
        last_error());
  }
};

const json* find(const std::vector<json>& evs, const std::string& type) {
  for (const auto& e : evs)
    if (e["type"] == type) return &e;
  return nullptr;
}

// The tool_agent_output of the thread's first TOOL_CALL_RESULT, after its turn ended.
json tool_output(Runtime& r, const std::string& thread, const std::string& text) {
  json h = r.start(thread, text);
  json t = r.wait(h["turnId"]);
  CHECK(t["status"] == "COMPLETED");
  auto evs = r.events(thread);
  const json* res = find(evs, "TOOL_CALL_RESULT");
  REQUIRE(res != nullptr);
  return (*res)["metadata"]["tool_agent_output"];
}

}  // namespace

TEST_CASE("every JSON argument nested deeper than the limit is AGENTRT_E_INVALID_ARGUMENT naming it") {
  Runtime r;
  for (size_t depth : {kHuge, size_t{65}}) {
    const std::string deep = nested_text(depth);
    agentrt_runtime* rt = nullptr;
    check_deep(agentrt_runtime_open(&rt, deep.c_str()), "agentrt_runtime_open", "config_json");
    CHECK(rt == nullptr);
    int destroyed = 0;
    check_deep(agentrt_runtime_open_with_model(
                   &rt, deep.c_str(), [](agentrt_model_call*, const char*, void*) {}, &destroyed,
                   [](void* p) { ++*static_cast<int*>(p); }),
               "agentrt_runtime_open_with_model", "config_json");
    CHECK(destroyed == 1);
    check_deep(agentrt_tool_register(r.rt, deep.c_str(), AnsweringTool::run, nullptr, nullptr), "agentrt_tool_register",
               "spec_json");
    char* out = reinterpret_cast<char*>(0x1);
    check_deep(agentrt_turn_start(&out, r.rt, deep.c_str()), "agentrt_turn_start", "input_json");
    CHECK(out == nullptr);
    check_deep(agentrt_turn_resume(&out, r.rt, "turn_x", "apr_x", deep.c_str()), "agentrt_turn_resume",
               "decisions_json");
    check_deep(agentrt_job_update(&out, r.rt, "job_x", deep.c_str()), "agentrt_job_update", "progress_json");
    check_deep(agentrt_job_complete(&out, r.rt, "job_x", deep.c_str()), "agentrt_job_complete", "result_json");
    const char audio[] = "RIFF";
    check_deep(agentrt_transcribe(&out, r.rt, audio, 4, "audio/wav", deep.c_str()), "agentrt_transcribe",
               "options_json");
  }
  // At the limit the nesting is no reason to refuse (what the value is may be).
  const std::string at = nested_text(64);
  agentrt_runtime* rt = nullptr;
  check_not_deep(agentrt_runtime_open(&rt, at.c_str()), "agentrt_runtime_open");
  CHECK(last_error() == "agentrt_runtime_open: config_json must be a JSON object");
  check_not_deep(agentrt_tool_register(r.rt, at.c_str(), AnsweringTool::run, nullptr, nullptr),
                 "agentrt_tool_register");
  char* out = nullptr;
  check_not_deep(agentrt_turn_start(&out, r.rt, at.c_str()), "agentrt_turn_start");
  check_not_deep(agentrt_turn_resume(&out, r.rt, "turn_x", "apr_x", at.c_str()), "agentrt_turn_resume");
  check_not_deep(agentrt_job_update(&out, r.rt, "job_x", at.c_str()), "agentrt_job_update");
  const std::string result_at = R"({"result":)" + nested_text(63) + "}";
  CHECK(agentrt_job_complete(&out, r.rt, "job_x", result_at.c_str()) == AGENTRT_E_NOT_FOUND);
}

TEST_CASE("a turn input at the nesting limit runs; one level over is refused; the runtime's limit applies") {
  Runtime r;
  // {threadId, userId, message: {role, content, metadata: X}}: 2 + depth(X).
  auto input = [](const std::string& thread, size_t metadata_depth) {
    return R"({"threadId":")" + thread + R"(","userId":"u1","message":{"role":"user","content":"hi","metadata":)" +
           deep_object_text(metadata_depth) + "}}";
  };
  char* out = nullptr;
  check_deep(agentrt_turn_start(&out, r.rt, input("t1", 63).c_str()), "agentrt_turn_start", "input_json");
  REQUIRE_MESSAGE(agentrt_turn_start(&out, r.rt, input("t1", 62).c_str()) == AGENTRT_OK, last_error());
  json h = json::parse(take(out));
  CHECK(r.wait(h["turnId"])["status"] == "COMPLETED");
  json hist = r.history("t1");
  CHECK(hist[0]["metadata"].dump() == deep_object_text(62));

  // max_json_depth 8: the same shapes, eight levels.
  TempDir dir;
  json cfg = test_config(dir);
  cfg["max_json_depth"] = 8;
  Runtime tight(cfg);
  check_deep(agentrt_turn_start(&out, tight.rt, input("t2", 7).c_str()), "agentrt_turn_start", "input_json", 8);
  REQUIRE_MESSAGE(agentrt_turn_start(&out, tight.rt, input("t2", 6).c_str()) == AGENTRT_OK, last_error());
  CHECK(tight.wait(json::parse(take(out))["turnId"])["status"] == "COMPLETED");
  cfg["max_json_depth"] = 300;
  agentrt_runtime* rt = nullptr;
  CHECK(agentrt_runtime_open(&rt, cfg.dump().c_str()) == AGENTRT_E_INVALID_ARGUMENT);
  CHECK(last_error() == "agentrt_runtime_open: config: 'max_json_depth' must be between 1 and 256, not 300");
}

TEST_CASE("the size of the stored message and the counts of parts and messages are AGENTRT_E_TOO_LARGE") {
  TempDir dir;
  json cfg = test_config(dir);
  cfg["max_input_bytes"] = 1000;
  cfg["max_input_parts"] = 2;
  cfg["max_input_messages"] = 3;
  Runtime r(cfg);
  char* out = nullptr;
  json in{{"threadId", "t1"},
          {"userId", "u1"},
          {"clientMessageId", "m1"},
          {"message", {{"role", "user"}, {"content", "hi"}, {"metadata", {{"pad", std::string(1000, 'x')}}}}}};
  CHECK(agentrt_turn_start(&out, r.rt, in.dump().c_str()) == AGENTRT_E_TOO_LARGE);
  // {"id":"m1","role":"user","content":"hi","metadata":{"pad":"<1000>"}}
  CHECK(last_error() == "agentrt_turn_start: the input message is 1062 bytes; the limit is 1000");
  in["message"]["metadata"]["pad"] = std::string(938, 'x');
  REQUIRE_MESSAGE(agentrt_turn_start(&out, r.rt, in.dump().c_str()) == AGENTRT_OK, last_error());
  CHECK(r.wait(json::parse(take(out))["turnId"])["status"] == "COMPLETED");

  in = json{{"threadId", "t2"}, {"userId", "u1"}, {"message", {{"role", "user"}, {"content", json::array()}}}};
  for (int i = 0; i < 3; ++i) in["message"]["content"].push_back({{"type", "text"}, {"text", "p"}});
  CHECK(agentrt_turn_start(&out, r.rt, in.dump().c_str()) == AGENTRT_E_TOO_LARGE);
  CHECK(last_error() == "agentrt_turn_start: input_json: the message has 3 content parts; the limit is 2");

  json agui{{"threadId", "t3"}, {"runId", "r1"}, {"userId", "u1"}, {"messages", json::array()}};
  for (int i = 0; i < 4; ++i)
    agui["messages"].push_back({{"id", "m" + std::to_string(i)}, {"role", "user"}, {"content", "hi"}});
  CHECK(agentrt_turn_start(&out, r.rt, agui.dump().c_str()) == AGENTRT_E_TOO_LARGE);
  CHECK(last_error() == "agentrt_turn_start: RunAgentInput: 4 messages; the limit is 3");
  agui["messages"].erase(0);
  REQUIRE_MESSAGE(agentrt_turn_start(&out, r.rt, agui.dump().c_str()) == AGENTRT_OK, last_error());
  CHECK(r.wait(json::parse(take(out))["turnId"])["status"] == "COMPLETED");
}

TEST_CASE("a host tool result or ui too deep is refused and fails the call with invalid_result; the turn goes on") {
  Runtime r;
  AnsweringTool tool;
  tool.add(r.rt);
  int n = 0;
  for (size_t depth : {kHuge, size_t{65}}) {
    tool.result_json = nested_text(depth);
    tool.ui_json.clear();
    json out = tool_output(r, "t-result-" + std::to_string(n++), "book a room");
    CHECK(out["status"] == "failed");
    CHECK(out["error"]["code"] == "invalid_result");
    CHECK(out["error"]["message"] == "the tool's result_json is nested deeper than 64 levels");
    std::lock_guard<std::mutex> lock(tool.mutex);
    CHECK(tool.codes.back() == AGENTRT_E_INVALID_ARGUMENT);
    CHECK(tool.errors.back() ==
          "agentrt_tool_call_complete: result_json is nested deeper than 64 levels; the call has failed with code "
          "invalid_result");
  }
  tool.result_json = "{}";
  tool.ui_json = R"({"type":"card","version":"v1","data":)" + deep_object_text(64) + "}";
  json out = tool_output(r, "t-ui", "book a room");
  CHECK(out["error"]["code"] == "invalid_result");
  CHECK(out["error"]["message"] == "the tool's ui_json is nested deeper than 64 levels");

  // At the limit: taken whole.
  tool.result_json = nested_text(64);
  tool.ui_json = R"({"type":"card","version":"v1","data":)" + deep_object_text(63) + "}";
  out = tool_output(r, "t-at", "book a room");
  CHECK(out["status"] == "succeeded");
  CHECK(out["result"].dump() == nested_text(64));
  std::lock_guard<std::mutex> lock(tool.mutex);
  CHECK(tool.codes.back() == AGENTRT_OK);
}

TEST_CASE("job_json too deep is refused and leaves the call open") {
  Runtime r;
  AnsweringTool tool;
  tool.add(r.rt);
  tool.job_json = R"({"metadata":)" + deep_object_text(64) + "}";
  json out = tool_output(r, "t-job", "book a room");
  CHECK(out["status"] == "succeeded");  // completed with {} after the refused start
  std::lock_guard<std::mutex> lock(tool.mutex);
  REQUIRE(tool.codes.size() == 2);
  CHECK(tool.codes[0] == AGENTRT_E_INVALID_ARGUMENT);
  CHECK(tool.errors[0] == "agentrt_tool_call_start_job: job_json is nested deeper than 64 levels");
  CHECK(tool.codes[1] == AGENTRT_OK);
}

namespace {

// A host model: its first execution answer is `first` (a finish result, or streamed tool-call arguments);
// when that is refused it finishes with {"text":"fine"}. After a tool result it answers "done".
struct DeepModel {
  std::string first;
  bool stream_args = false;
  std::mutex mutex;
  std::vector<int32_t> codes;
  std::vector<std::string> errors;

  static void run(agentrt_model_call* call, const char* request_json, void* ud) {
    auto* self = static_cast<DeepModel*>(ud);
    const json req = json::parse(request_json);
    const json& msgs = req["messages"];
    if (req["stage"] != "execution") {
      agentrt_model_call_finish(call, R"({"text":"x"})");
    } else if (!msgs.empty() && msgs.back()["role"] == "tool") {
      agentrt_model_call_finish(call, R"({"text":"done"})");
    } else if (self->stream_args) {
      agentrt_model_call_tool_call_start(call, 0, "c1", "noop");
      agentrt_model_call_tool_call_args(call, 0, self->first.c_str());
      agentrt_model_call_finish(call, nullptr);
    } else {
      const int32_t rc = agentrt_model_call_finish(call, self->first.c_str());
      {
        std::lock_guard<std::mutex> lock(self->mutex);
        self->codes.push_back(rc);
        self->errors.push_back(agentrt_last_error());
      }
      if (rc != AGENTRT_OK) agentrt_model_call_finish(call, R"({"text":"fine"})");
    }
    agentrt_model_call_free(call);
  }
};

void noop_tool(agentrt_tool_call* call, const char*, void*) {
  agentrt_tool_call_complete(call, R"({"ok":true})", nullptr);
  agentrt_tool_call_free(call);
}

}  // namespace

TEST_CASE("a host model's result too deep is refused and leaves the call open; one at the limit runs") {
  DeepModel model;
  Runtime r(DeepModel::run, &model);
  REQUIRE(agentrt_tool_register(r.rt, R"({"name":"noop","approval":"never"})", noop_tool, nullptr, nullptr) ==
          AGENTRT_OK);
  // {toolCalls: [{id, name, arguments: X}]}: 3 + depth(X).
  auto result = [](size_t args_depth) {
    return R"({"toolCalls":[{"id":"c1","name":"noop","arguments":)" + deep_object_text(args_depth) + "}]}";
  };
  model.first = result(62);
  json h = r.start("t-over", "go");
  CHECK(r.wait(h["turnId"])["status"] == "COMPLETED");
  CHECK(r.history("t-over").back()["content"] == "fine");
  {
    std::lock_guard<std::mutex> lock(model.mutex);
    REQUIRE(model.codes.size() == 1);
    CHECK(model.codes[0] == AGENTRT_E_INVALID_ARGUMENT);
    CHECK(model.errors[0] == "agentrt_model_call_finish: result_json is nested deeper than 64 levels");
  }
  model.first = result(61);
  h = r.start("t-at", "go");
  CHECK(r.wait(h["turnId"])["status"] == "COMPLETED");
  auto evs = r.events("t-at");
  const json* res = find(evs, "TOOL_CALL_RESULT");
  REQUIRE(res != nullptr);
  CHECK((*res)["metadata"]["tool_agent_output"]["status"] == "succeeded");
  CHECK(r.history("t-at").back()["content"] == "done");
}

TEST_CASE("a host model's malformed result is refused, naming the key, and leaves the call open") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[1]", "model result must be a JSON object"},
      {R"({"text":1})", "model result: 'text' must be a string"},
      {R"({"finishReason":false})", "model result: 'finishReason' must be a string"},
      {R"({"colour":"red"})", "model result: unknown key 'colour' (text, reasoning, toolCalls, usage, finishReason)"},
      {R"({"toolCalls":{}})", "model result: 'toolCalls' must be an array"},
      {R"({"toolCalls":[7]})", "model result: tool call must be a JSON object"},
      {R"({"toolCalls":[{"name":"noop"}]})", "model result: tool call: 'id' is required"},
      {R"({"toolCalls":[{"id":"","name":"noop"}]})", "model result: tool call: 'id' must not be empty"},
      {R"({"toolCalls":[{"id":"c1","name":2}]})", "model result: tool call: 'name' must be a string"},
      {R"({"toolCalls":[{"id":"c1","name":"noop","arguments":3}]})",
       "model result: tool call: 'arguments' must be JSON text or a JSON object"},
      {R"({"toolCalls":[{"id":"c1","name":"noop","extra":1}]})",
       "model result: tool call: unknown key 'extra' (id, name, arguments)"},
      {R"({"usage":[]})", "model result: 'usage' must be a JSON object"},
  };
  DeepModel model;
  Runtime r(DeepModel::run, &model);
  for (size_t i = 0; i < cases.size(); ++i) {
    CAPTURE(cases[i].first);
    model.first = cases[i].first;
    const std::string thread = "t-bad-" + std::to_string(i);
    json h = r.start(thread, "go");
    CHECK(r.wait(h["turnId"])["status"] == "COMPLETED");
    CHECK(r.history(thread).back()["content"] == "fine");  // the call stayed open for the good result
    std::lock_guard<std::mutex> lock(model.mutex);
    REQUIRE(model.codes.size() == i + 1);
    CHECK(model.codes[i] == AGENTRT_E_INVALID_ARGUMENT);
    CHECK(model.errors[i] == "agentrt_model_call_finish: " + cases[i].second);
  }
}

TEST_CASE("a host model's streamed tool-call arguments too deep are a failed result invalid_arguments") {
  DeepModel model;
  model.stream_args = true;
  model.first = R"({"x":)" + nested_text(kHuge) + "}";
  Runtime r(DeepModel::run, &model);
  std::atomic<int> runs{0};
  REQUIRE(agentrt_tool_register(
              r.rt, R"({"name":"noop","approval":"never"})",
              [](agentrt_tool_call* call, const char*, void* ud) {
                ++*static_cast<std::atomic<int>*>(ud);
                noop_tool(call, nullptr, nullptr);
              },
              &runs, nullptr) == AGENTRT_OK);
  json h = r.start("t-args", "go");
  CHECK(r.wait(h["turnId"])["status"] == "COMPLETED");
  auto evs = r.events("t-args");
  const json* res = find(evs, "TOOL_CALL_RESULT");
  REQUIRE(res != nullptr);
  const json& out = (*res)["metadata"]["tool_agent_output"];
  CHECK(out["status"] == "failed");
  CHECK(out["error"]["code"] == "invalid_arguments");
  CHECK(out["error"]["message"] == "the arguments of noop are nested deeper than 64 levels");
  CHECK(runs == 0);
  CHECK(r.history("t-args").back()["content"] == "done");
}

TEST_CASE("a host tool's answer of an unexpected shape does not fail the demo model's turn") {
  Runtime r;
  AnsweringTool tool;
  tool.add(r.rt);
  tool.result_json = R"({"ok":"yes","day":7,"room":["A1"],"error":{"message":5}})";
  json h = r.start("t-shape", "book a room");
  CHECK(r.wait(h["turnId"])["status"] == "COMPLETED");
  CHECK(r.history("t-shape").back()["content"] ==
        R"(I did not book the room: {"day":7,"error":{"message":5},"ok":"yes","room":["A1"]})");
  tool.result_json = R"({"ok":true,"day":"tue","room":7})";
  h = r.start("t-shape2", "book a room");
  CHECK(r.wait(h["turnId"])["status"] == "COMPLETED");
  CHECK(r.history("t-shape2").back()["content"] == "Your booking is confirmed: room ? on Tuesday.");
}

TEST_CASE("a turn's context reaches the model for its run; a malformed one or one past the limits is refused") {
  TempDir dir;
  json cfg = test_config(dir);
  cfg["max_context_entries"] = 2;
  Runtime r(cfg);
  char* out = nullptr;
  json in{{"threadId", "t1"},
          {"userId", "u1"},
          {"message", {{"role", "user"}, {"content", "what context?"}}},
          {"context", json::array({{{"description", "theme"}, {"value", "dark"}}})}};
  REQUIRE_MESSAGE(agentrt_turn_start(&out, r.rt, in.dump().c_str()) == AGENTRT_OK, last_error());
  CHECK(r.wait(json::parse(take(out))["turnId"])["status"] == "COMPLETED");
  json hist = r.history("t1");
  REQUIRE(hist.size() == 2);
  CHECK(hist[1]["content"] == "The application told me, for this run:\n- theme: dark");
  CHECK(hist[0].dump().find("dark") == std::string::npos);

  in["threadId"] = "t2";
  in["context"] = json::array({{{"description", "theme"}}});
  CHECK(agentrt_turn_start(&out, r.rt, in.dump().c_str()) == AGENTRT_E_INVALID_ARGUMENT);
  CHECK(last_error() == "agentrt_turn_start: context[0]: 'value' must be a string");
  in["context"] = json::array();
  for (int i = 0; i < 3; ++i) in["context"].push_back({{"description", "d"}, {"value", "v"}});
  CHECK(agentrt_turn_start(&out, r.rt, in.dump().c_str()) == AGENTRT_E_TOO_LARGE);
  CHECK(last_error() == "agentrt_turn_start: context: 3 entries; the limit is 2");
  // A resume's context is checked the same way, before anything is decided.
  CHECK(agentrt_turn_resume(&out, r.rt, "turn_x", "apr_x",
                            json{{"decisions", json::array()}, {"context", 5}}.dump().c_str()) ==
        AGENTRT_E_INVALID_ARGUMENT);
  CHECK(last_error() == "agentrt_turn_resume: context must be an array of {description, value}");
}
