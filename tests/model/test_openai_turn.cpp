// Golden path B with the real provider: the Runtime talks the OpenAI protocol to the mock server.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "agentrt/openai.hpp"
#include "agentrt/runtime.hpp"
#include "store/sqlite_store.hpp"
#include "support/mock_openai_server.hpp"
#include "support/runtime_fixture.hpp"

using namespace std::chrono_literals;
using namespace agentrt;
using agentrt::testing::MockOpenAIServer;
using agentrt::testing::MockResponse;

namespace {

// Every event of the thread after `after`, until `runs` runs have ended.
std::vector<json> thread_events(Runtime& rt, const std::string& thread, int runs, int64_t after = 0) {
  auto sub = rt.subscribe(thread, after);
  std::vector<json> out;
  int ended = 0;
  while (ended < runs) {
    auto e = sub->next(10s);
    REQUIRE_MESSAGE(e.has_value(), "no event within 10 s after " << out.size() << " events");
    out.push_back(json::parse(e->json));
    const auto type = out.back()["type"].get<std::string>();
    if (type == "RUN_FINISHED" || type == "RUN_ERROR") ++ended;
  }
  return out;
}

std::string joined(const std::vector<json>& events, const std::string& type, const std::string& field) {
  std::string out;
  for (const auto& e : events)
    if (e["type"] == type) out += e[field].get<std::string>();
  return out;
}

size_t count_of(const std::vector<json>& events, const std::string& type) {
  size_t n = 0;
  for (const auto& e : events) n += e["type"] == type ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("golden path B over the OpenAI protocol: streamed tool arguments, approval, one execution, an answer") {
  MockOpenAIServer server;
  const std::vector<std::string> arg_pieces = {"{\"ro", "om\":\"A", "1\",\"d", "ay\":\"mon\"}"};
  const std::string full_args = R"({"room":"A1","day":"mon"})";
  server.push_chat(MockResponse::stream(MockOpenAIServer::text_stream({"wants a ", "room"}, 20, 4)));  // intent
  MockResponse tool_call =
      MockResponse::stream(MockOpenAIServer::tool_call_stream("call_bk1", "book_room", arg_pieces));
  tool_call.delay_between = 2ms;  // the pieces arrive as separate reads
  server.push_chat(tool_call);    // execution
  server.push_chat(MockResponse::stream(MockOpenAIServer::text_stream({"Booked ", "room A1 ", "for Monday."}, 40, 6)));

  OpenAIConfig oc;
  oc.base_url = server.base_url();
  oc.api_key = "sk-turn-test-000111";
  oc.model = "mock-model";
  oc.retry_base_backoff = 1ms;
  oc.retry_max_backoff = 2ms;
  oc.idle_timeout = 5s;

  agentrt::testing::TempDir dir;
  auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("agentrt.db")});
  Runtime rt(agentrt::testing::test_config(store, make_openai_provider(oc)));

  std::atomic<int> runs{0};
  std::mutex mutex;
  json seen_args;
  ToolSpec spec;
  spec.name = "book_room";
  spec.description = "Book a hotel room";
  spec.parameters = json::parse(R"({"type":"object","properties":{"room":{"type":"string"},
      "day":{"type":"string","enum":["mon","tue","wed"]}},"required":["room","day"],"additionalProperties":false})");
  spec.approval = ApprovalPolicy::always();
  spec.handler = sync_tool([&](const ToolCallContext& c) {
    ++runs;
    {
      std::lock_guard<std::mutex> lock(mutex);
      seen_args = c.args;
    }
    ToolResult r;
    r.result = json{{"ok", true}, {"booking_id", "BK-42"}};
    return r;
  });
  rt.tools().add(std::move(spec));

  TurnInput in;
  in.thread_id = "t-openai";
  in.user_id = "u1";
  in.message.role = Role::user;
  in.message.content = "book a room";
  auto handle = rt.start_turn(in);
  auto paused = rt.wait(handle.turn_id, 10s);
  REQUIRE(paused.status == TurnStatus::waiting_approval);
  CHECK(runs == 0);

  auto run1 = thread_events(rt, "t-openai", 1);
  agentrt::testing::check_agui(run1);
  const json* start = agentrt::testing::find_event(run1, "TOOL_CALL_START");
  REQUIRE(start != nullptr);
  CHECK((*start)["toolCallId"] == "call_bk1");
  CHECK((*start)["toolCallName"] == "book_room");
  CHECK(joined(run1, "TOOL_CALL_ARGS", "delta") == full_args);
  CHECK(count_of(run1, "TOOL_CALL_ARGS") == arg_pieces.size());  // one event per streamed piece
  const json& finished1 = run1.back();
  REQUIRE(finished1["type"] == "RUN_FINISHED");
  REQUIRE(finished1["outcome"]["type"] == "interrupt");
  const json& interrupt = finished1["outcome"]["interrupts"][0];
  CHECK(interrupt["toolCallId"] == "call_bk1");
  REQUIRE(finished1.contains("usage"));
  CHECK(finished1["usage"].dump().find("openai-compatible") != std::string::npos);

  json accepted =
      rt.resume(handle.turn_id, paused.approval_request_id,
                {Decision{interrupt["id"].get<std::string>(), Decision::Action::approve, std::nullopt, ""}});
  CHECK(accepted["status"] == "accepted");
  auto done = rt.wait(handle.turn_id, 10s);
  CHECK(done.status == TurnStatus::completed);
  CHECK(runs == 1);
  {
    std::lock_guard<std::mutex> lock(mutex);
    CHECK(seen_args == json::parse(full_args));
  }

  auto all = thread_events(rt, "t-openai", 2);
  agentrt::testing::check_agui(all);
  std::vector<json> run2(all.begin() + static_cast<long>(run1.size()), all.end());
  CHECK(joined(run2, "TEXT_MESSAGE_CONTENT", "delta") == "Booked room A1 for Monday.");
  CHECK(count_of(run2, "TEXT_MESSAGE_CONTENT") == 3);
  CHECK(count_of(run2, "TOOL_CALL_RESULT") == 1);
  CHECK(run2.back()["type"] == "RUN_FINISHED");
  CHECK(run2.back()["outcome"]["type"] == "success");

  // What went over the wire: tools offered in the execution stage, and the round trip sent back.
  auto reqs = server.requests();
  REQUIRE(reqs.size() == 3);
  json exec1 = reqs[1].json_body();
  REQUIRE(exec1.contains("tools"));
  CHECK(exec1["tools"][0]["function"]["name"] == "book_room");
  CHECK(exec1["stream"] == true);
  json exec2 = reqs[2].json_body();
  const json& msgs = exec2["messages"];
  bool saw_call = false, saw_result = false;
  for (const auto& m : msgs) {
    if (m["role"] == "assistant" && m.contains("tool_calls")) {
      saw_call = true;
      CHECK(m["tool_calls"] == json::array({{{"id", "call_bk1"},
                                             {"type", "function"},
                                             {"function", {{"name", "book_room"}, {"arguments", full_args}}}}}));
    }
    if (m["role"] == "tool") {
      saw_result = true;
      CHECK(m["tool_call_id"] == "call_bk1");
      CHECK(m["content"].is_string());
    }
  }
  CHECK(saw_call);
  CHECK(saw_result);
  for (const auto& r : reqs) CHECK(r.header("Authorization") == "Bearer sk-turn-test-000111");
}

TEST_CASE("a model server that cannot be reached fails the run as the model's failure, not the store's") {
  OpenAIConfig oc;
  oc.base_url = MockOpenAIServer::closed_base_url();
  const std::string port = oc.base_url.substr(17, oc.base_url.size() - 20);  // "http://127.0.0.1:" <port> "/v1"
  oc.api_key = "sk-turn-test-000111";
  oc.model = "mock-model";
  oc.max_retries = 1;
  oc.retry_base_backoff = 1ms;
  oc.retry_max_backoff = 2ms;
  agentrt::testing::TempDir dir;
  auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("agentrt.db")});
  Runtime rt(agentrt::testing::test_config(store, make_openai_provider(oc)));

  TurnInput in;
  in.thread_id = "t-down";
  in.user_id = "u1";
  in.message.content = "hello";
  const auto turn = rt.wait(rt.start_turn(in).turn_id, 10s);
  CHECK(turn.status == TurnStatus::failed);
  const auto events = thread_events(rt, "t-down", 1);
  const json& end = events.back();
  REQUIRE(end["type"] == "RUN_ERROR");
  CHECK(end["code"] == "model_error");
  const std::string message = end["message"].get<std::string>();
  CHECK(message.find("openai-compatible model 'mock-model': HTTP request to 127.0.0.1:" + port) == 0);
  CHECK(message.find("(gave up after 2 attempts)") != std::string::npos);
  CHECK(message.find("sk-turn-test") == std::string::npos);
  CHECK(turn.error == message);
  // The ERROR message the next turn's model sees says the same.
  const auto history = rt.history("t-down");
  REQUIRE(history.size() == 2);
  CHECK(history[1].role == Role::system);
  CHECK(history[1].content == "ERROR model_error: " + message);
}
