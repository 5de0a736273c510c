// A turn through the Runtime over the Anthropic protocol: the model thinks, calls a tool, and answers.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "agentrt/anthropic.hpp"
#include "agentrt/runtime.hpp"
#include "store/sqlite_store.hpp"
#include "support/mock_openai_server.hpp"
#include "support/runtime_fixture.hpp"

using namespace std::chrono_literals;
using namespace agentrt;
using agentrt::testing::MockOpenAIServer;
using agentrt::testing::MockResponse;

namespace {

std::string sse(const json& event) {
  return "event: " + event["type"].get<std::string>() + "\ndata: " + event.dump() + "\n\n";
}

std::vector<std::string> answer(const std::vector<json>& blocks_events, const std::string& stop_reason) {
  std::vector<std::string> out = {sse({{"type", "message_start"},
                                       {"message",
                                        {{"id", "msg_t"},
                                         {"type", "message"},
                                         {"role", "assistant"},
                                         {"model", "claude-test"},
                                         {"content", json::array()},
                                         {"usage", {{"input_tokens", 30}, {"cache_read_input_tokens", 100}}}}}})};
  for (const auto& e : blocks_events) out.push_back(sse(e));
  out.push_back(
      sse({{"type", "message_delta"}, {"delta", {{"stop_reason", stop_reason}}}, {"usage", {{"output_tokens", 12}}}}));
  out.push_back(sse({{"type", "message_stop"}}));
  return out;
}

std::vector<std::string> text_answer(const std::string& text) {
  return answer({{{"type", "content_block_start"}, {"index", 0}, {"content_block", {{"type", "text"}, {"text", ""}}}},
                 {{"type", "content_block_delta"}, {"index", 0}, {"delta", {{"type", "text_delta"}, {"text", text}}}},
                 {{"type", "content_block_stop"}, {"index", 0}}},
                "end_turn");
}

const json kThinkingBlock = {
    {"type", "thinking"}, {"thinking", "The clock tool knows."}, {"signature", "c2lnLXR1cm4tMQ=="}};

// Thinks, then calls clock {"city":"Paris"}.
std::vector<std::string> thinking_tool_answer() {
  return answer(
      {{{"type", "content_block_start"}, {"index", 0}, {"content_block", {{"type", "thinking"}, {"thinking", ""}}}},
       {{"type", "content_block_delta"},
        {"index", 0},
        {"delta", {{"type", "thinking_delta"}, {"thinking", "The clock tool knows."}}}},
       {{"type", "content_block_delta"},
        {"index", 0},
        {"delta", {{"type", "signature_delta"}, {"signature", "c2lnLXR1cm4tMQ=="}}}},
       {{"type", "content_block_stop"}, {"index", 0}},
       {{"type", "content_block_start"},
        {"index", 1},
        {"content_block", {{"type", "tool_use"}, {"id", "toolu_t1"}, {"name", "clock"}, {"input", json::object()}}}},
       {{"type", "content_block_delta"},
        {"index", 1},
        {"delta", {{"type", "input_json_delta"}, {"partial_json", "{\"city\":"}}}},
       {{"type", "content_block_delta"},
        {"index", 1},
        {"delta", {{"type", "input_json_delta"}, {"partial_json", "\"Paris\"}"}}}},
       {{"type", "content_block_stop"}, {"index", 1}}},
      "tool_use");
}

std::vector<json> thread_events(Runtime& rt, const std::string& thread) {
  auto sub = rt.subscribe(thread, 0);
  std::vector<json> out;
  for (;;) {
    auto e = sub->next(10s);
    REQUIRE_MESSAGE(e.has_value(), "no event within 10 s after " << out.size() << " events");
    out.push_back(json::parse(e->json));
    const auto type = out.back()["type"].get<std::string>();
    if (type == "RUN_FINISHED" || type == "RUN_ERROR") return out;
  }
}

std::string joined(const std::vector<json>& events, const std::string& type, const std::string& field) {
  std::string out;
  for (const auto& e : events)
    if (e["type"] == type) out += e[field].get<std::string>();
  return out;
}

// Runs one turn (intent, then execution: think + tool call, then the answer) and returns what went over the wire.
std::vector<agentrt::testing::RecordedRequest> run_thinking_turn(std::vector<json>& events, json& tool_args,
                                                                 int& runs) {
  MockOpenAIServer server;
  server.push_messages(MockResponse::stream(text_answer("wants the time")));  // intent
  server.push_messages(MockResponse::stream(thinking_tool_answer()));         // execution: thinks, calls clock
  server.push_messages(MockResponse::stream(text_answer("It is 10:00 in Paris.")));

  AnthropicConfig ac;
  ac.base_url = server.origin();
  ac.api_key = "sk-ant-turn-test-000111";
  ac.model = "claude-test";
  ac.params = {{"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}}};
  ac.retry_base_backoff = 1ms;
  ac.retry_max_backoff = 2ms;

  agentrt::testing::TempDir dir;
  auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("agentrt.db")});
  Runtime rt(agentrt::testing::test_config(store, make_anthropic_provider(ac)));
  std::mutex mutex;
  ToolSpec spec;
  spec.name = "clock";
  spec.description = "The time in a city";
  spec.parameters = json::parse(R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})");
  spec.handler = sync_tool([&](const ToolCallContext& c) {
    std::lock_guard<std::mutex> lock(mutex);
    ++runs;
    tool_args = c.args;
    ToolResult r;
    r.result = json{{"time", "10:00"}};
    return r;
  });
  rt.tools().add(std::move(spec));

  TurnInput in;
  in.thread_id = "t-anthropic";
  in.user_id = "u1";
  in.message.role = Role::user;
  in.message.content = "What time is it in Paris?";
  auto handle = rt.start_turn(in);
  auto done = rt.wait(handle.turn_id, 10s);
  CHECK(done.status == TurnStatus::completed);
  events = thread_events(rt, "t-anthropic");
  return server.requests();
}

}  // namespace

TEST_SUITE("anthropic") {
  TEST_CASE(
      "a turn over the Anthropic protocol: thinking streamed as reasoning, one tool call, its result, the answer") {
    std::vector<json> events;
    json tool_args;
    int runs = 0;
    const auto reqs = run_thinking_turn(events, tool_args, runs);
    agentrt::testing::check_agui(events);
    CHECK(runs == 1);
    CHECK(tool_args == json{{"city", "Paris"}});
    CHECK(joined(events, "REASONING_MESSAGE_CONTENT", "delta") == "The clock tool knows.");
    const json* start = agentrt::testing::find_event(events, "TOOL_CALL_START");
    REQUIRE(start != nullptr);
    CHECK((*start)["toolCallId"] == "toolu_t1");
    CHECK((*start)["toolCallName"] == "clock");
    CHECK(joined(events, "TOOL_CALL_ARGS", "delta") == R"({"city":"Paris"})");
    CHECK(joined(events, "TEXT_MESSAGE_CONTENT", "delta") == "It is 10:00 in Paris.");
    REQUIRE(events.back()["type"] == "RUN_FINISHED");
    CHECK(events.back()["usage"].dump().find("anthropic") != std::string::npos);

    REQUIRE(reqs.size() == 3);
    for (const auto& r : reqs) CHECK(r.header("x-api-key") == "sk-ant-turn-test-000111");
    const json exec1 = reqs[1].json_body();
    CHECK(exec1["tools"][0]["name"] == "clock");
    CHECK(exec1["thinking"] == json{{"type", "enabled"}, {"budget_tokens", 1024}});
    // The second request of the execution stage carries the call and its result, in alternating messages.
    const json msgs = reqs[2].json_body()["messages"];
    bool saw_call = false, saw_result = false;
    for (size_t i = 0; i < msgs.size(); ++i) {
      if (i > 0) CHECK(msgs[i]["role"] != msgs[i - 1]["role"]);
      for (const auto& b : msgs[i]["content"]) {
        if (b["type"] == "tool_use") {
          saw_call = true;
          CHECK(msgs[i]["role"] == "assistant");
          CHECK(b == json{{"type", "tool_use"}, {"id", "toolu_t1"}, {"name", "clock"}, {"input", {{"city", "Paris"}}}});
        }
        if (b["type"] == "tool_result") {
          saw_result = true;
          CHECK(msgs[i]["role"] == "user");
          CHECK(b["tool_use_id"] == "toolu_t1");
        }
      }
    }
    CHECK(saw_call);
    CHECK(saw_result);
  }

  // The runtime stores ModelResult::encrypted_value in the assistant message and hands it back in
  // ModelRequest::messages.
  TEST_CASE("a turn over the Anthropic protocol sends the thinking block, signed, before the tool_use it led to") {
    std::vector<json> events;
    json tool_args;
    int runs = 0;
    const auto reqs = run_thinking_turn(events, tool_args, runs);
    REQUIRE(reqs.size() == 3);
    const json msgs = reqs[2].json_body()["messages"];
    const json* assistant = nullptr;
    for (const auto& m : msgs) {
      for (const auto& b : m["content"])
        if (b["type"] == "tool_use") assistant = &m;
    }
    REQUIRE(assistant != nullptr);
    const json& content = (*assistant)["content"];
    REQUIRE(content.size() >= 2);
    CHECK(content[0] == kThinkingBlock);
    CHECK(content.back()["type"] == "tool_use");
  }
}
