// The Anthropic provider against the in-process mock server: headers and body on the wire, awkward streams
// (UTF-8 cut across writes, pings, error events, cut connections), retries and their waits, errors, cancellation.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "agentrt/anthropic.hpp"
#include "agentrt/error.hpp"
#include "support/mock_openai_server.hpp"
#include "support/provider_calls.hpp"
#include "support/sink_log.hpp"

using namespace std::chrono_literals;
using agentrt::AnthropicConfig;
using agentrt::CancelToken;
using agentrt::Error;
using agentrt::ErrorCode;
using agentrt::json;
using agentrt::ModelRequest;
using agentrt::testing::complete_error;
using agentrt::testing::MockOpenAIServer;
using agentrt::testing::MockResponse;
using agentrt::testing::ms_between;
using agentrt::testing::SinkLog;
using agentrt::testing::user_request;
using Clock = std::chrono::steady_clock;
using Calls = std::vector<std::string>;

namespace {

constexpr const char* kKey = "sk-ant-test-0123456789abcdef";

AnthropicConfig config_for(const MockOpenAIServer& server) {
  return agentrt::testing::provider_test_config<AnthropicConfig>(server.origin(), kKey, "claude-test");
}

std::string sse(const json& event) {
  return "event: " + event["type"].get<std::string>() + "\ndata: " + event.dump() + "\n\n";
}

const std::string kPing = "event: ping\ndata: {\"type\": \"ping\"}\n\n";

std::string message_start(int input_tokens = 9) {
  return sse({{"type", "message_start"},
              {"message",
               {{"id", "msg_mock"},
                {"type", "message"},
                {"role", "assistant"},
                {"model", "claude-test"},
                {"content", json::array()},
                {"usage", {{"input_tokens", input_tokens}, {"output_tokens", 1}}}}}});
}

std::string text_delta(const std::string& text) {
  return sse({{"type", "content_block_delta"}, {"index", 0}, {"delta", {{"type", "text_delta"}, {"text", text}}}});
}

std::string stream_error(const std::string& type, const std::string& message) {
  return sse({{"type", "error"}, {"error", {{"type", type}, {"message", message}}}});
}

// The head of a text answer: message_start and the start of text block 0.
std::vector<std::string> text_head() {
  return {message_start(),
          sse({{"type", "content_block_start"}, {"index", 0}, {"content_block", {{"type", "text"}, {"text", ""}}}})};
}

// The end of an answer: block 0 stops, end_turn with the output count, message_stop.
std::vector<std::string> text_tail(int output_tokens = 5) {
  return {sse({{"type", "content_block_stop"}, {"index", 0}}),
          sse({{"type", "message_delta"},
               {"delta", {{"stop_reason", "end_turn"}}},
               {"usage", {{"output_tokens", output_tokens}}}}),
          sse({{"type", "message_stop"}})};
}

std::vector<std::string> text_stream(const std::vector<std::string>& pieces) {
  auto out = text_head();
  for (const auto& p : pieces) out.push_back(text_delta(p));
  for (auto& s : text_tail()) out.push_back(std::move(s));
  return out;
}

MockResponse anthropic_error(int status, const std::string& type, const std::string& message,
                             std::vector<std::pair<std::string, std::string>> headers = {}) {
  return MockResponse::json(status, {{"type", "error"}, {"error", {{"type", type}, {"message", message}}}},
                            std::move(headers));
}

}  // namespace

TEST_SUITE("anthropic") {
  TEST_CASE("anthropic provider: a streamed answer, its headers (key, version, traceparent) and body on the wire") {
    MockOpenAIServer server;
    server.push_messages(MockResponse::stream(text_stream({"Hel", "lo"})));
    auto provider = agentrt::make_anthropic_provider(config_for(server));
    CHECK(provider->name() == "anthropic");
    SinkLog sink;
    auto r = user_request("hi");
    r.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const auto result = provider->complete(r, sink, {});
    CHECK(sink.calls == Calls{"text:Hel", "text:lo"});
    CHECK(result.text == "Hello");
    CHECK(result.finish_reason == "stop");
    REQUIRE(result.usage.has_value());
    CHECK(result.usage->provider == "anthropic");
    CHECK(result.usage->model == "claude-test");
    CHECK(result.usage->input_tokens == 9);
    CHECK(result.usage->output_tokens == 5);

    const auto reqs = server.requests();
    REQUIRE(reqs.size() == 1);
    CHECK(reqs[0].path == "/v1/messages");
    CHECK(reqs[0].header("x-api-key") == kKey);
    CHECK_FALSE(reqs[0].header("Authorization").has_value());
    CHECK(reqs[0].header("anthropic-version") == "2023-06-01");
    CHECK(reqs[0].header("content-type") == "application/json");
    CHECK(reqs[0].header("traceparent") == r.traceparent);
    CHECK(reqs[0].json_body() ==
          json{{"model", "claude-test"},
               {"max_tokens", 4096},
               {"stream", true},
               {"system", "You are terse."},
               {"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "hi"}}}}}}}});

    server.push_messages(MockResponse::stream(text_stream({"again"})));
    provider->complete(user_request("hi"), sink, {});
    CHECK_FALSE(server.requests().at(1).header("traceparent").has_value());  // only when the call is traced
  }

  TEST_CASE("anthropic provider: thinking blocks of the last answer go back first, with their signature") {
    MockOpenAIServer server;
    server.push_messages(MockResponse::stream(text_stream({"It is 10:00."})));
    auto provider = agentrt::make_anthropic_provider(config_for(server));
    auto r = user_request("time?");
    agentrt::Message assistant;
    assistant.role = agentrt::Role::assistant;
    assistant.has_content = false;
    assistant.tool_calls = {{"toolu_1", "clock", "{}"}};
    assistant.encrypted_value =
        R"({"provider":"anthropic","model":"claude-test","blocks":[{"type":"thinking","thinking":"Ask the clock.","signature":"c2lnLTE="}]})";
    agentrt::Message tool;
    tool.role = agentrt::Role::tool;
    tool.tool_call_id = "toolu_1";
    tool.content = "10:00";
    r.messages.push_back(assistant);
    r.messages.push_back(tool);
    SinkLog sink;
    provider->complete(r, sink, {});
    const json messages = server.requests().at(0).json_body()["messages"];
    REQUIRE(messages.size() == 3);
    CHECK(messages[1] == json::parse(R"({"role":"assistant","content":[
      {"type":"thinking","thinking":"Ask the clock.","signature":"c2lnLTE="},
      {"type":"tool_use","id":"toolu_1","name":"clock","input":{}}]})"));
    CHECK(
        messages[2] ==
        json::parse(R"({"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"10:00"}]})"));
  }

  TEST_CASE("anthropic provider: UTF-8 cut across TCP writes, pings and comments between events") {
    MockOpenAIServer server;
    std::string body;
    for (const auto& s : text_head()) body += s + kPing;
    body += text_delta("Grüße, ") + ": keep-alive\n\n" + kPing + text_delta("日本語 ✓");
    for (const auto& s : text_tail()) body += kPing + s;
    // Every write 3 bytes: each multi-byte character and every event is cut somewhere.
    std::vector<std::string> writes;
    for (size_t at = 0; at < body.size(); at += 3) writes.push_back(body.substr(at, 3));
    MockResponse r = MockResponse::stream(writes);
    r.delay_between = 1ms;
    server.push_messages(r);
    SinkLog sink;
    const auto result = agentrt::make_anthropic_provider(config_for(server))->complete(user_request("x"), sink, {});
    CHECK(sink.calls == Calls{"text:Grüße, ", "text:日本語 ✓"});
    CHECK(result.text == "Grüße, 日本語 ✓");
    CHECK(server.request_count() == 1);
  }

  TEST_CASE("anthropic provider: an overloaded_error event after text fails the call, clearly, without a retry") {
    MockOpenAIServer server;
    auto chunks = text_head();
    chunks.push_back(text_delta("Hel"));
    chunks.push_back(stream_error("overloaded_error", "Overloaded"));
    server.push_messages(MockResponse::stream(chunks));
    server.push_messages(MockResponse::stream(text_stream({"never"})));
    SinkLog sink;
    auto provider = agentrt::make_anthropic_provider(config_for(server));
    const Error e = complete_error(*provider, user_request("x"), sink);
    CHECK(e.code() == ErrorCode::model);
    CHECK(e.message() == "anthropic model 'claude-test': error in the stream (overloaded_error): Overloaded");
    CHECK(sink.calls == Calls{"text:Hel"});
    CHECK(server.request_count() == 1);
  }

  TEST_CASE("anthropic provider: an error event before anything was shown is retried when it is the server's") {
    SUBCASE("overloaded_error, then a whole answer") {
      MockOpenAIServer server;
      server.push_messages(
          MockResponse::stream({message_start(), kPing, stream_error("overloaded_error", "Overloaded")}));
      server.push_messages(MockResponse::stream(text_stream({"fine"})));
      SinkLog sink;
      CHECK(agentrt::make_anthropic_provider(config_for(server))->complete(user_request("x"), sink, {}).text == "fine");
      CHECK(sink.calls == Calls{"text:fine"});
      CHECK(server.request_count() == 2);
    }
    SUBCASE("invalid_request_error is the request's: no retry") {
      MockOpenAIServer server;
      server.push_messages(MockResponse::stream({message_start(), stream_error("invalid_request_error", "bad tool")}));
      SinkLog sink;
      auto provider = agentrt::make_anthropic_provider(config_for(server));
      CHECK(complete_error(*provider, user_request("x"), sink).message() ==
            "anthropic model 'claude-test': error in the stream (invalid_request_error): bad tool");
      CHECK(server.request_count() == 1);
    }
  }

  TEST_CASE("anthropic provider: a cut stream is retried only when nothing reached the sink") {
    SUBCASE("the connection drops after text: an io error, no retry") {
      MockOpenAIServer server;
      auto chunks = text_head();
      chunks.push_back(text_delta("part"));
      chunks.push_back("event: content_block_delta\ndata: {\"type\":\"content_bl");
      MockResponse r = MockResponse::stream(chunks);
      r.cut_connection = true;
      server.push_messages(r);
      server.push_messages(MockResponse::stream(text_stream({"never"})));
      SinkLog sink;
      auto provider = agentrt::make_anthropic_provider(config_for(server));
      const Error e = complete_error(*provider, user_request("x"), sink);
      CHECK(e.code() == ErrorCode::io);
      CHECK(sink.calls == Calls{"text:part"});
      CHECK(server.request_count() == 1);
    }
    SUBCASE("the body ends without message_stop after text: a cut answer, no retry") {
      MockOpenAIServer server;
      auto chunks = text_head();
      chunks.push_back(text_delta("part"));
      server.push_messages(MockResponse::stream(chunks));
      server.push_messages(MockResponse::stream(text_stream({"never"})));
      SinkLog sink;
      auto provider = agentrt::make_anthropic_provider(config_for(server));
      const Error e = complete_error(*provider, user_request("x"), sink);
      CHECK(e.code() == ErrorCode::model);
      CHECK(e.message() ==
            "anthropic model 'claude-test': the model stream ended without message_stop after 3 events: the answer "
            "was cut off");
      CHECK(server.request_count() == 1);
    }
    SUBCASE("the connection drops before any text: retried") {
      MockOpenAIServer server;
      MockResponse r = MockResponse::stream(text_head());
      r.cut_connection = true;
      server.push_messages(r);
      server.push_messages(MockResponse::stream(text_stream({"whole"})));
      SinkLog sink;
      CHECK(agentrt::make_anthropic_provider(config_for(server))->complete(user_request("x"), sink, {}).text ==
            "whole");
      CHECK(sink.calls == Calls{"text:whole"});
      CHECK(server.request_count() == 2);
    }
  }

  TEST_CASE("anthropic provider: 429 and 529 are retried after the retry-after and retry-after-ms they carry") {
    MockOpenAIServer server;
    server.push_messages(anthropic_error(429, "rate_limit_error", "slow down", {{"retry-after", "1"}}));
    server.push_messages(anthropic_error(529, "overloaded_error", "Overloaded", {{"retry-after-ms", "300"}}));
    server.push_messages(MockResponse::stream(text_stream({"ok"})));
    SinkLog sink;
    CHECK(agentrt::make_anthropic_provider(config_for(server))->complete(user_request("x"), sink, {}).text == "ok");
    const auto reqs = server.requests();
    REQUIRE(reqs.size() == 3);
    const auto first_gap = ms_between(reqs[0].received, reqs[1].received);
    const auto second_gap = ms_between(reqs[1].received, reqs[2].received);
    // The configured backoff is 1-4 ms: these waits are the server's. The upper bounds tell them from a wrong unit,
    // with room for a loaded machine.
    CHECK(first_gap >= 1000);
    CHECK(first_gap < 4000);
    CHECK(second_gap >= 300);
    CHECK(second_gap < 2500);
  }

  TEST_CASE("anthropic provider: retries run out into the last failure, saying how many attempts were made") {
    MockOpenAIServer server;
    for (int i = 0; i < 3; ++i) server.push_messages(anthropic_error(529, "overloaded_error", "Overloaded"));
    SinkLog sink;
    auto provider = agentrt::make_anthropic_provider(config_for(server));
    const Error e = complete_error(*provider, user_request("x"), sink);
    CHECK(e.code() == ErrorCode::model);
    CHECK(e.message() ==
          "anthropic model 'claude-test': HTTP 529 (overloaded_error): Overloaded (gave up after 3 attempts)");
    CHECK(server.request_count() == 3);
  }

  TEST_CASE("anthropic provider: 401 is unauthorized and not retried; 400 and 404 are model errors; no key is shown") {
    MockOpenAIServer server;
    server.push_messages(anthropic_error(401, "authentication_error", std::string("invalid x-api-key: ") + kKey));
    server.push_messages(anthropic_error(400, "invalid_request_error", "messages: roles must alternate"));
    server.push_messages(anthropic_error(404, "not_found_error", "model: claude-nope"));
    auto provider = agentrt::make_anthropic_provider(config_for(server));
    SinkLog sink;
    Error e = complete_error(*provider, user_request("x"), sink);
    CHECK(e.code() == ErrorCode::unauthorized);
    CHECK(e.message() ==
          "anthropic model 'claude-test': HTTP 401 (authentication_error): invalid x-api-key: [redacted]");
    CHECK(server.request_count() == 1);
    e = complete_error(*provider, user_request("x"), sink);
    CHECK(e.code() == ErrorCode::model);
    CHECK(e.message() ==
          "anthropic model 'claude-test': HTTP 400 (invalid_request_error): messages: roles must alternate");
    e = complete_error(*provider, user_request("x"), sink);
    CHECK(e.code() == ErrorCode::model);
    CHECK(e.message() == "anthropic model 'claude-test': HTTP 404 (not_found_error): model: claude-nope");
    CHECK(server.request_count() == 3);

    // Without a key: the error says where it should have come from.
    server.push_messages(anthropic_error(401, "authentication_error", "x-api-key header is required"));
    auto config = config_for(server);
    config.api_key.clear();
    config.api_key_env = "AGENTRT_TEST_ANTHROPIC_KEY_UNSET";
    e = complete_error(*agentrt::make_anthropic_provider(config), user_request("x"), sink);
    CHECK(e.code() == ErrorCode::unauthorized);
    CHECK(e.message().find("(no API key was sent: AGENTRT_TEST_ANTHROPIC_KEY_UNSET is not set)") != std::string::npos);
    CHECK_FALSE(server.requests().back().header("x-api-key").has_value());
  }

  TEST_CASE("anthropic provider: cancelling mid-stream stops it promptly and closes the connection") {
    MockOpenAIServer server;
    auto chunks = text_head();
    chunks.push_back(text_delta("first"));
    MockResponse r = MockResponse::stream(chunks);
    r.keep_sending = kPing;  // a stream that would go on for 10 s
    r.keep_sending_every = 5ms;
    server.push_messages(r);
    auto provider = agentrt::make_anthropic_provider(config_for(server));
    CancelToken cancel;
    SinkLog sink;
    Clock::time_point cancelled_at{};
    sink.on_first_text = [&] {
      cancelled_at = Clock::now();
      cancel.cancel();
    };
    const Error e = complete_error(*provider, user_request("x"), sink, cancel);
    CHECK(e.code() == ErrorCode::cancelled);
    CHECK(ms_between(cancelled_at, Clock::now()) < 3000);
    CHECK(sink.calls == Calls{"text:first"});
    REQUIRE(server.wait_client_gone(10s));
    CHECK(ms_between(cancelled_at, *server.client_gone_at()) < 3000);
    CHECK(server.request_count() == 1);
  }

  TEST_CASE("anthropic provider: a server that ignores stream:true and answers one Message is read whole") {
    MockOpenAIServer server;
    server.push_messages(
        MockResponse::json(200, json::parse(R"({"id":"msg_1","type":"message","role":"assistant","model":"claude-test",
          "content":[{"type":"text","text":"Hi!"}],"stop_reason":"end_turn",
          "usage":{"input_tokens":3,"cache_read_input_tokens":4,"output_tokens":2}})")));
    SinkLog sink;
    const auto result = agentrt::make_anthropic_provider(config_for(server))->complete(user_request("x"), sink, {});
    CHECK(sink.calls == Calls{"text:Hi!"});
    CHECK(result.finish_reason == "stop");
    CHECK(result.usage->input_tokens == 7);
    CHECK(result.usage->cached_input_tokens == 4);
  }
}
