// The example streams of Anthropic's streaming documentation (tests/fixtures/anthropic-streams/) and the
// Messages stream accumulator's rules.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "agentrt/error.hpp"
#include "model/anthropic_stream.hpp"
#include "net/sse_parser.hpp"
#include "support/sink_log.hpp"

#ifndef AGENTRT_FIXTURES_DIR
#error "AGENTRT_FIXTURES_DIR must name tests/fixtures (the build sets it)"
#endif

using agentrt::Error;
using agentrt::ErrorCode;
using agentrt::json;
using agentrt::ModelResult;
using agentrt::anthropic::MessageStreamAccumulator;
using agentrt::testing::SinkLog;
using Calls = std::vector<std::string>;

namespace {

std::string fixture(const std::string& name) {
  const auto path = std::filesystem::path(AGENTRT_FIXTURES_DIR) / "anthropic-streams" / name;
  std::ifstream f(path, std::ios::binary);
  REQUIRE_MESSAGE(f.good(), "cannot read ", path.string());
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Feeds a body to the accumulator as the provider does, cut into reads of `step` bytes.
ModelResult run(MessageStreamAccumulator& acc, const std::string& body, size_t step = 4096) {
  agentrt::net::SseParser parser;
  for (size_t at = 0; at < body.size(); at += step) {
    parser.feed(std::string_view(body).substr(at, step), [&](const agentrt::net::SseEvent& e) { acc.on_event(e); });
  }
  if (auto last = parser.finish()) acc.on_last_event(*last);
  return acc.finish();
}

std::string sse(const json& event) {
  return "event: " + event["type"].get<std::string>() + "\ndata: " + event.dump() + "\n\n";
}

json start(int index, const json& block) {
  return {{"type", "content_block_start"}, {"index", index}, {"content_block", block}};
}
json delta(int index, const json& d) { return {{"type", "content_block_delta"}, {"index", index}, {"delta", d}}; }
json stop(int index) { return {{"type", "content_block_stop"}, {"index", index}}; }
const json kMessageStart = {{"type", "message_start"},
                            {"message", {{"id", "msg_1"}, {"model", "claude-test"}, {"usage", {{"input_tokens", 3}}}}}};
const json kMessageStop = {{"type", "message_stop"}};

}  // namespace

TEST_SUITE("anthropic") {
  TEST_CASE("the documentation's basic stream: text, ping passed over, end_turn, usage from start and delta") {
    SinkLog sink;
    MessageStreamAccumulator acc(&sink);
    const ModelResult r = run(acc, fixture("basic-text.sse"));
    CHECK(sink.calls == Calls{"text:Hello", "text:!"});
    CHECK(r.text == "Hello!");
    CHECK(r.reasoning.empty());
    CHECK(r.tool_calls.empty());
    CHECK(r.finish_reason == "stop");
    CHECK(r.encrypted_value.empty());
    REQUIRE(r.usage.has_value());
    CHECK(r.usage->provider == "anthropic");
    CHECK(r.usage->model == "claude-opus-4-6");
    CHECK(r.usage->input_tokens == 25);
    CHECK(r.usage->output_tokens == 15);
    CHECK(r.usage->total_tokens == 40);
    CHECK(r.usage->cached_input_tokens == 0);
    CHECK(r.usage->cache_write_input_tokens == 0);
  }

  TEST_CASE("the documentation's tool-use stream: text, then the call announced with its id and its input fragments") {
    SinkLog sink;
    MessageStreamAccumulator acc(&sink);
    const ModelResult r = run(acc, fixture("tool-use.sse"), 97);  // reads that cut events anywhere
    const Calls expected = {"text:Okay",
                            "text:,",
                            "text: let",
                            "text:'s",
                            "text: check",
                            "text: the",
                            "text: weather",
                            "text: for",
                            "text: San",
                            "text: Francisco",
                            "text:,",
                            "text: CA",
                            "text::",
                            "start:1:toolu_01T1x1fJ34qAmk2tNTrN7Up6:get_weather",
                            "args:1:{\"location\":",
                            "args:1: \"San",
                            "args:1: Francisc",
                            "args:1:o,",
                            "args:1: CA\"",
                            "args:1:,",
                            "args:1: \"unit\": \"fah",
                            "args:1:renheit\"}"};
    CHECK(sink.calls == expected);
    CHECK(r.text == "Okay, let's check the weather for San Francisco, CA:");
    REQUIRE(r.tool_calls.size() == 1);
    CHECK(r.tool_calls[0].id == "toolu_01T1x1fJ34qAmk2tNTrN7Up6");
    CHECK(r.tool_calls[0].name == "get_weather");
    CHECK(r.tool_calls[0].arguments == R"({"location": "San Francisco, CA", "unit": "fahrenheit"})");
    CHECK(r.finish_reason == "tool_calls");
    CHECK(r.encrypted_value.empty());
    REQUIRE(r.usage.has_value());
    CHECK(r.usage->input_tokens == 472);
    CHECK(r.usage->output_tokens == 89);
    CHECK(r.usage->total_tokens == 561);
  }

  TEST_CASE("the documentation's extended-thinking stream: reasoning, and the block with its signature kept") {
    SinkLog sink;
    MessageStreamAccumulator acc(&sink);
    const ModelResult r = run(acc, fixture("extended-thinking.sse"), 5);  // "×" is cut across reads
    const std::string thinking =
        "I need to find the GCD of 1071 and 462 using the Euclidean algorithm.\n\n1071 = 2 × 462 + 147"
        "\n462 = 3 × 147 + 21\n147 = 7 × 21 + 0\nThe remainder is 0, so GCD(1071, 462) = 21.";
    const Calls expected = {
        "reasoning:I need to find the GCD of 1071 and 462 using the Euclidean algorithm.\n\n1071 = 2 × 462 + 147",
        "reasoning:\n462 = 3 × 147 + 21", "reasoning:\n147 = 7 × 21 + 0",
        "reasoning:\nThe remainder is 0, so GCD(1071, 462) = 21.",
        "text:The greatest common divisor of 1071 and 462 is **21**."};
    CHECK(sink.calls == expected);
    CHECK(r.reasoning == thinking);
    CHECK(r.text == "The greatest common divisor of 1071 and 462 is **21**.");
    CHECK(r.finish_reason == "stop");
    CHECK_FALSE(r.usage.has_value());  // this example reports none
    const json ev = json::parse(r.encrypted_value);
    CHECK(ev == json{{"provider", "anthropic"},
                     {"model", "claude-opus-4-6"},
                     {"blocks",
                      {{{"type", "thinking"},
                        {"thinking", thinking},
                        {"signature", "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds..."}}}}});
    // What the next request sends back is exactly that block.
    CHECK(agentrt::anthropic::thinking_blocks_from(r.encrypted_value) == ev["blocks"]);
  }

  TEST_CASE(
      "the documentation's web-search stream as printed: its elided event is reported, after the text before it") {
    SinkLog sink;
    MessageStreamAccumulator acc(&sink);
    try {
      run(acc, fixture("web-search.sse"));
      FAIL("the elided event was taken");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::model);
      CHECK(std::string(e.message()).find("'content_block_start' event that is not a JSON object") !=
            std::string::npos);
    }
    // The server tool's input never reaches the sink as a tool call of ours.
    CHECK(sink.calls == Calls{"text:I'll check", "text: the current weather in New York City for you", "text:."});
  }

  TEST_CASE("the documentation's web-search stream with its elision closed: server tool blocks passed over") {
    std::string body = fixture("web-search.sse");
    const std::string elided = "\"page_age\":null},...]}}";
    REQUIRE(body.find(elided) != std::string::npos);
    body.replace(body.find(elided), elided.size(), "\"page_age\":null}]}}");
    SinkLog sink;
    MessageStreamAccumulator acc(&sink);
    const ModelResult r = run(acc, body);
    CHECK(r.text ==
          "I'll check the current weather in New York City for you.Here's the current weather information for New "
          "York City:\n\n# Weather in New York City\n\n");
    CHECK(r.tool_calls.empty());
    for (const auto& c : sink.calls) CHECK(c.rfind("text:", 0) == 0);
    CHECK(r.finish_reason == "stop");
    REQUIRE(r.usage.has_value());
    CHECK(r.usage->input_tokens == 10682);  // message_delta's count (server tool iterations) wins over the start's
    CHECK(r.usage->output_tokens == 510);
  }

  TEST_CASE("the documentation's overloaded_error event fails the stream with the server's words") {
    SinkLog sink;
    MessageStreamAccumulator acc(&sink);
    try {
      run(acc, fixture("overloaded-error.sse"));
      FAIL("an error event was taken as an answer");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::model);
      CHECK(e.message() == "error in the stream (overloaded_error): Overloaded");
    }
    REQUIRE(acc.stream_error().has_value());
    CHECK(acc.stream_error()->type == "overloaded_error");
    CHECK(sink.calls.empty());
  }

  TEST_CASE("redacted thinking, thinking and a tool call: the blocks in order, the input of a call without fragments") {
    const std::string body =
        sse(kMessageStart) + sse(start(0, {{"type", "redacted_thinking"}, {"data", "EmwKAhgBEgy3va3pzix"}})) +
        sse(stop(0)) + sse(start(1, {{"type", "thinking"}, {"thinking", ""}})) +
        sse(delta(1, {{"type", "thinking_delta"}, {"thinking", "Look it up."}})) +
        sse(delta(1, {{"type", "signature_delta"}, {"signature", "c2ln"}})) + sse(stop(1)) +
        sse(start(2, {{"type", "tool_use"}, {"id", "toolu_9"}, {"name", "now"}, {"input", json::object()}})) +
        sse(stop(2)) +
        sse({{"type", "message_delta"}, {"delta", {{"stop_reason", "tool_use"}}}, {"usage", {{"output_tokens", 9}}}}) +
        sse(kMessageStop);
    SinkLog sink;
    MessageStreamAccumulator acc(&sink);
    const ModelResult r = run(acc, body);
    CHECK(sink.calls == Calls{"reasoning:Look it up.", "start:2:toolu_9:now", "args:2:{}"});
    REQUIRE(r.tool_calls.size() == 1);
    CHECK(r.tool_calls[0].arguments == "{}");
    CHECK(json::parse(r.encrypted_value)["blocks"] ==
          json::array({{{"type", "redacted_thinking"}, {"data", "EmwKAhgBEgy3va3pzix"}},
                       {{"type", "thinking"}, {"thinking", "Look it up."}, {"signature", "c2ln"}}}));
    CHECK(json::parse(r.encrypted_value)["model"] == "claude-test");
  }

  TEST_CASE("cached input counts are parts of the input; stop reasons map to finish reasons") {
    const json usage = {{"input_tokens", 10},
                        {"cache_read_input_tokens", 200},
                        {"cache_creation_input_tokens", 30},
                        {"output_tokens", 7}};
    const auto u = agentrt::anthropic::token_usage_from_anthropic(usage, "m");
    CHECK(u.input_tokens == 240);
    CHECK(u.cached_input_tokens == 200);
    CHECK(u.cache_write_input_tokens == 30);
    CHECK(u.output_tokens == 7);
    CHECK(u.total_tokens == 247);
    using agentrt::anthropic::finish_reason_from_stop_reason;
    CHECK(finish_reason_from_stop_reason("end_turn") == "stop");
    CHECK(finish_reason_from_stop_reason("tool_use") == "tool_calls");
    CHECK(finish_reason_from_stop_reason("max_tokens") == "length");
    CHECK(finish_reason_from_stop_reason("stop_sequence") == "stop_sequence");
    CHECK(finish_reason_from_stop_reason("pause_turn") == "pause_turn");
    CHECK(finish_reason_from_stop_reason("refusal") == "refusal");
  }

  TEST_CASE("unknown events and blocks are passed over; nothing after message_stop is taken") {
    const std::string body = sse(kMessageStart) + sse({{"type", "future_event"}, {"x", 1}}) +
                             sse(start(0, {{"type", "hologram"}, {"payload", {1, 2}}})) +
                             sse(delta(0, {{"type", "hologram_delta"}, {"bits", "01"}})) + sse(stop(0)) +
                             sse(start(1, {{"type", "text"}, {"text", ""}})) +
                             sse(delta(1, {{"type", "text_delta"}, {"text", "ok"}})) +
                             sse(delta(1, {{"type", "citations_delta"}, {"citation", json::object()}})) + sse(stop(1)) +
                             sse(kMessageStop) + sse(delta(1, {{"type", "text_delta"}, {"text", "late"}}));
    SinkLog sink;
    MessageStreamAccumulator acc(&sink);
    const ModelResult r = run(acc, body);
    CHECK(sink.calls == Calls{"text:ok"});
    CHECK(r.text == "ok");
    REQUIRE(r.usage.has_value());
    CHECK(r.usage->input_tokens == 3);
  }

  TEST_CASE("a stream that ends without message_stop is a cut answer") {
    const std::string body = sse(kMessageStart) + sse(start(0, {{"type", "text"}, {"text", ""}})) +
                             sse(delta(0, {{"type", "text_delta"}, {"text", "Hal"}}));
    SinkLog sink;
    MessageStreamAccumulator acc(&sink);
    try {
      run(acc, body);
      FAIL("a cut stream was taken as an answer");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::model);
      CHECK(e.message() == "the model stream ended without message_stop after 3 events: the answer was cut off");
    }
    CHECK(acc.emitted());
    CHECK_FALSE(acc.done());
  }

  TEST_CASE("a non-streamed Message is taken as if it had been streamed") {
    const json message = {{"id", "msg_2"},
                          {"type", "message"},
                          {"role", "assistant"},
                          {"model", "claude-test"},
                          {"content",
                           {{{"type", "thinking"}, {"thinking", "Hmm."}, {"signature", "sig"}},
                            {{"type", "text"}, {"text", "Let me look."}},
                            {{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "search"}, {"input", {{"q", "x"}}}}}},
                          {"stop_reason", "tool_use"},
                          {"usage", {{"input_tokens", 4}, {"output_tokens", 6}}}};
    SinkLog sink;
    MessageStreamAccumulator acc(&sink);
    acc.on_message(message);
    const ModelResult r = acc.finish();
    CHECK(sink.calls == Calls{"reasoning:Hmm.", "text:Let me look.", "start:2:toolu_1:search", "args:2:{\"q\":\"x\"}"});
    CHECK(r.finish_reason == "tool_calls");
    CHECK(r.tool_calls.at(0).arguments == R"({"q":"x"})");
    CHECK(json::parse(r.encrypted_value)["blocks"][0]["signature"] == "sig");
    CHECK(r.usage->total_tokens == 10);
  }
}
