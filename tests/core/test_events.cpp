#include <algorithm>
#include <random>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "agentrt/events.hpp"
#include "agentrt/outputs.hpp"
#include "agentrt/turn_state.hpp"
#include "support/agui_verifier.hpp"
#include "util/utf8.hpp"

using namespace agentrt;

TEST_CASE("every AG-UI event type round-trips through JSON and passes the closed schema") {
  const char* samples[] = {
      R"({"type":"RUN_STARTED","threadId":"t","runId":"r","parentRunId":"p","timestamp":1700000000000})",
      R"({"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"interrupt","interrupts":[{"id":"i","reason":"tool_call","toolCallId":"c"}]},"usage":[{"inputTokens":3}]})",
      R"({"type":"RUN_ERROR","message":"m","code":"c"})",
      R"({"type":"STEP_STARTED","stepName":"s"})",
      R"({"type":"STEP_FINISHED","stepName":"s"})",
      R"({"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"})",
      R"({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":""})",
      R"({"type":"TEXT_MESSAGE_END","messageId":"m","metadata":{"worker_agent_output":{"answer":"a"}}})",
      R"({"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"x"})",
      R"({"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"n","parentMessageId":"m"})",
      R"({"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{}"})",
      R"({"type":"TOOL_CALL_END","toolCallId":"c"})",
      R"({"type":"TOOL_CALL_CHUNK","toolCallId":"c","toolCallName":"n","delta":"{"})",
      R"({"type":"TOOL_CALL_RESULT","messageId":"m","toolCallId":"c","content":"ok","role":"tool"})",
      R"({"type":"STATE_SNAPSHOT","snapshot":{"a":1}})",
      R"({"type":"STATE_DELTA","delta":[{"op":"add","path":"/a","value":1}]})",
      R"({"type":"MESSAGES_SNAPSHOT","messages":[{"id":"u","role":"user","content":"hi"}]})",
      R"({"type":"ACTIVITY_SNAPSHOT","messageId":"m","activityType":"a","content":{},"replace":false})",
      R"({"type":"ACTIVITY_DELTA","messageId":"m","activityType":"a","patch":[]})",
      R"({"type":"RAW","event":{"x":1},"source":"s"})",
      R"({"type":"CUSTOM","name":"agentrt.intent","value":{"text":"t"}})",
      R"({"type":"REASONING_START","messageId":"m"})",
      R"({"type":"REASONING_MESSAGE_START","messageId":"m","role":"reasoning"})",
      R"({"type":"REASONING_MESSAGE_CONTENT","messageId":"m","delta":"d"})",
      R"({"type":"REASONING_MESSAGE_END","messageId":"m"})",
      R"({"type":"REASONING_MESSAGE_CHUNK","messageId":"m","delta":"d"})",
      R"({"type":"REASONING_END","messageId":"m"})",
      R"({"type":"REASONING_ENCRYPTED_VALUE","subtype":"message","entityId":"e","encryptedValue":"v"})",
      R"({"type":"SUBAGENT_STARTED","subagentRunId":"s","name":"n"})",
      R"({"type":"SUBAGENT_FINISHED","subagentRunId":"s","outcome":{"type":"success"}})",
      R"({"type":"SUBAGENT_ERROR","subagentRunId":"s","message":"m"})",
  };
  CHECK(std::size(samples) == 31);
  for (const char* s : samples) {
    INFO(s);
    json in = json::parse(s);
    Event e = event_from_json(in);
    CHECK(to_string(e.type) == in["type"].get<std::string>());
    json out = to_json(e);
    CHECK(out == in);
    CHECK(json::parse(to_json_string(e)) == in);
    auto v = testing::check_agui_event_schema(out);
    CHECK_MESSAGE(!v, (v ? *v : ""));
  }
}

TEST_CASE("event JSON omits unset optional fields and refuses nulls, unknown fields and float timestamps") {
  Event e = events::tool_call_start("c1", "book_room");
  json j = to_json(e);
  CHECK_FALSE(j.contains("parentMessageId"));
  CHECK_FALSE(j.contains("metadata"));
  CHECK(j["timestamp"].is_number_integer());
  CHECK_THROWS_WITH_AS(
      event_from_json(json::parse(R"({"type":"TOOL_CALL_END","toolCallId":"c","subagentRunId":null})")),
      doctest::Contains("null"), Error);
  CHECK_THROWS_WITH_AS(
      event_from_json(json::parse(R"({"type":"TOOL_CALL_END","toolCallId":"c","extra":1})")),
      doctest::Contains(
          "TOOL_CALL_END: unknown key 'extra' (type, toolCallId, subagentRunId, timestamp, rawEvent, metadata)"),
      Error);
  CHECK_THROWS_WITH_AS(event_from_json(json::parse(R"({"type":"TOOL_CALL_END","toolCallId":"c","timestamp":1.5})")),
                       doctest::Contains("integer"), Error);
  CHECK_THROWS_WITH_AS(event_from_json(json::parse(R"({"type":"TOOL_CALL_END"})")),
                       doctest::Contains("TOOL_CALL_END: 'toolCallId' is required"), Error);
  CHECK_THROWS_WITH_AS(event_from_json(json::parse(R"({"type":"THINKING_START"})")),
                       doctest::Contains("unknown event type 'THINKING_START' (expected one of: RUN_STARTED, "), Error);
}

TEST_CASE("invalid UTF-8 in event text is replaced, so the event log is always valid JSON") {
  Event e = events::text_content("m", std::string("ok \xff\xfe end \xe2\x82", 12));
  std::string s = to_json_string(e);
  json j = json::parse(s);  // would throw on invalid UTF-8
  CHECK(j["delta"] == "ok \xEF\xBF\xBD\xEF\xBF\xBD end \xEF\xBF\xBD\xEF\xBF\xBD");
  std::string ctrl;
  append_json_string(ctrl, std::string("a\nb\t\x01\"\\", 7));
  CHECK(ctrl == R"("a\nb\t\u0001\"\\")");
}

TEST_CASE("a JSON string is written as nlohmann writes it, for every byte at every place in a run of plain ones") {
  // The writer takes plain bytes sixteen at a time (eight without SSE2), its last step over the text's last bytes,
  // and a text under eight bytes byte by byte: each byte value at each offset of texts of 0 to 49 bytes, beside
  // the same text through nlohmann (invalid UTF-8 replaced as ours is). Failures are counted, the first shown.
  size_t checked = 0, failed = 0;
  std::string first_failure;
  for (size_t size = 0; size < 50; ++size) {
    for (size_t at = 0; at < std::max<size_t>(size, 1); ++at) {
      for (int b = 0; b < 256; ++b) {
        std::string text(size, 'a');
        if (size > 0) text[at] = static_cast<char>(b);
        std::string ours = "x";
        append_json_string(ours, text);
        ++checked;
        if (ours != "x" + json(text).dump(-1, ' ', false, json::error_handler_t::replace) && failed++ == 0)
          first_failure = fmt::format("size {} byte {:#04x} at {}: {}", size, b, at, ours);
      }
    }
  }
  CHECK(checked == 256 + 256 * 49 * 50 / 2);
  CHECK(failed == 0);
  CHECK(first_failure == "");
}

TEST_CASE("a JSON string is written as nlohmann writes it for random texts of escapes, UTF-8 and broken UTF-8") {
  // Texts drawn from pieces that each take another path of the writer, at every alignment.
  const std::vector<std::string> pieces = {"a",    "plain text ", "\"",           "\\",           "\n",
                                           "\x01", "\x7f",        "\xc3\xa9",     "\xe2\x82\xac", "\xf0\x9f\x98\x80",
                                           "\xff", "\xc3",        "\xed\xa0\x80", "\xc0\xaf",     "0123456789abcdef"};
  std::mt19937 rng(7);
  for (int round = 0; round < 3000; ++round) {
    std::string text;
    const int count = static_cast<int>(rng() % 12);
    for (int k = 0; k < count; ++k) text += pieces[rng() % pieces.size()];
    std::string ours = "prefix";
    append_json_string(ours, text);
    CAPTURE(text);
    CHECK(ours == "prefix" + json(text).dump(-1, ' ', false, json::error_handler_t::replace));
  }
}

TEST_CASE("a JSON value is written as nlohmann writes it: objects (keys that need escapes too), arrays, numbers") {
  const json cases[] = {
      json::object(),
      json::array(),
      json{{"a", 1}},
      json{{"", nullptr}, {"k\"q", "v"}, {"line\nbreak", json::array()}, {"\xc3\xa9t\xc3\xa9", json::object()}},
      json{{"nested", {{"deeper", {{"list", {1, -2, 3.5, true, false, nullptr, "s"}}}}}}, {"empty", json::object()}},
      json{{"max", UINT64_MAX}, {"min", INT64_MIN}, {"zero", 0}, {"neg", -1}},
      json::array({json::object(), json::array(), json{{"x", json::array({json::object()})}}}),
      json("plain"),
      json(42),
  };
  for (const auto& j : cases) {
    std::string ours = "x";
    append_json(ours, j);
    CAPTURE(j.dump());
    CHECK(ours == "x" + j.dump());
  }
}

TEST_CASE("UTF-8 is judged as nlohmann judges it, with ASCII runs of every length before, between and after") {
  // The check takes ASCII eight bytes a step and a rest under eight at once: each piece at every offset.
  const std::vector<std::string> pieces = {"\xc3\xa9",     "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xff",     "\xc3",
                                           "\xed\xa0\x80", "\xc0\xaf",     "\xf4\x90\x80\x80", "\xe2\x82", "\x80"};
  size_t checked = 0;
  for (const auto& piece : pieces)
    for (size_t before = 0; before < 19; ++before)
      for (size_t after = 0; after < 19; ++after) {
        const std::string text = std::string(before, 'a') + piece + std::string(after, 'b');
        bool nlohmann_ok = true;
        try {
          (void)json(text).dump();
        } catch (const json::exception&) {
          nlohmann_ok = false;
        }
        CAPTURE(text);
        CHECK(is_valid_utf8(text) == nlohmann_ok);
        ++checked;
      }
  CHECK(checked == 10 * 19 * 19);
  for (size_t n = 0; n < 40; ++n) CHECK(is_valid_utf8(std::string(n, 'x')));
}

TEST_CASE("the turn state machine refuses transitions its table does not list") {
  CHECK(can_transition(TurnStatus::running, TurnStatus::waiting_approval));
  CHECK(can_transition(TurnStatus::waiting_approval, TurnStatus::resuming));
  CHECK(can_transition(TurnStatus::resuming, TurnStatus::running));
  CHECK(can_transition(TurnStatus::waiting_approval, TurnStatus::expired));
  CHECK(can_transition(TurnStatus::waiting_approval, TurnStatus::cancelled));
  CHECK_FALSE(can_transition(TurnStatus::completed, TurnStatus::running));
  CHECK_FALSE(can_transition(TurnStatus::waiting_approval, TurnStatus::completed));
  CHECK_FALSE(can_transition(TurnStatus::running, TurnStatus::expired));
  CHECK(can_transition(TurnStatus::running, TurnStatus::waiting_client));
  CHECK(can_transition(TurnStatus::waiting_client, TurnStatus::resuming));
  CHECK(can_transition(TurnStatus::waiting_client, TurnStatus::expired));
  CHECK(can_transition(TurnStatus::waiting_client, TurnStatus::cancelled));
  CHECK_FALSE(can_transition(TurnStatus::waiting_client, TurnStatus::completed));
  CHECK_FALSE(can_transition(TurnStatus::waiting_client, TurnStatus::waiting_approval));
  CHECK_FALSE(can_transition(TurnStatus::resuming, TurnStatus::waiting_client));
  CHECK(to_string(TurnStatus::waiting_client) == "WAITING_CLIENT");
  CHECK(turn_status_from_string("WAITING_CLIENT") == TurnStatus::waiting_client);
  CHECK_FALSE(can_transition(TurnStatus::expired, TurnStatus::resuming));
  CHECK_THROWS_WITH_AS(check_transition("turn_1", TurnStatus::completed, TurnStatus::running),
                       "turn turn_1: cannot go from COMPLETED to RUNNING", Error);
}

TEST_CASE("UiSchema v1 cards are validated on the way in") {
  auto ui =
      parse_ui_schema(json::parse(R"({"type":"card","version":"v1","data":{"a":1},"actions":[{"type":"button"}]})"));
  CHECK(ui.type == "card");
  CHECK_THROWS_WITH_AS(parse_ui_schema(json::parse(R"({"type":"card","version":"v2"})")), doctest::Contains("v1"),
                       Error);
  CHECK_THROWS_WITH_AS(parse_ui_schema(json::parse(R"({"type":"","version":"v1"})")), doctest::Contains("type"), Error);
  CHECK_THROWS_WITH_AS(parse_ui_schema(json::parse(R"({"type":"c","version":"v1","html":"<b>"})")),
                       doctest::Contains("ui: unknown key 'html' (type, version, data, actions)"), Error);
  CHECK_THROWS_WITH_AS(parse_ui_schema(json::parse(R"({"type":"c","version":"v1","actions":[1]})")),
                       doctest::Contains("actions[0]"), Error);
  ToolAgentOutput o;
  o.tool_call_id = "c";
  o.tool_name = "t";
  o.ui = ui;
  o.error = ToolError{"x", "y"};
  CHECK(json::parse(to_json_string(o)) == json(o));
  CHECK(json(o).get<ToolAgentOutput>().ui->type == "card");
}
