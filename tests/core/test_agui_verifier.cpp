#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "agentrt/json.hpp"
#include "support/agui_verifier.hpp"

using agentrt::json;
using agentrt::testing::AguiVerifier;
using agentrt::testing::check_agui_event_schema;
using agentrt::testing::check_run_ids_agree;
using agentrt::testing::verify_agui_stream;

namespace {

json ev(const char* type, json fields = json::object()) {
  fields["type"] = type;
  return fields;
}

json run_started(const char* run_id = "r1") { return ev("RUN_STARTED", {{"threadId", "t1"}, {"runId", run_id}}); }
json run_finished(const char* run_id = "r1") { return ev("RUN_FINISHED", {{"threadId", "t1"}, {"runId", run_id}}); }

// Feeds every event but the last, which must all be accepted, and returns what the last event causes.
std::optional<std::string> last_event_violation(const std::vector<json>& events) {
  AguiVerifier verifier;
  for (std::size_t i = 0; i + 1 < events.size(); ++i) {
    const auto m = verifier.feed(events[i]);
    REQUIRE_MESSAGE(!m.has_value(), "event ", i, " was refused: ", m.value_or(""));
  }
  return verifier.feed(events.back());
}

// Two sequential runs of one thread: text, a tool call paused for approval, then the resumed run with
// reasoning, a subagent and usage.
std::vector<json> valid_stream() {
  const json user_message = {{"id", "u1"}, {"role", "user"}, {"content", "Weather in Oslo?"}};
  const json assistant_message = {{"id", "m1"},
                                  {"role", "assistant"},
                                  {"content", "Let me check."},
                                  {"toolCalls",
                                   {{{"id", "c1"},
                                     {"type", "function"},
                                     {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Oslo\"}"}}}}}}};
  return {
      ev("RUN_STARTED",
         {{"threadId", "t1"},
          {"runId", "r1"},
          {"protocolVersion", "1.0"},
          {"timestamp", 1767225600000},
          {"input",
           {{"threadId", "t1"},
            {"runId", "r1"},
            {"messages", {user_message}},
            {"tools", {{{"name", "get_weather"}, {"description", "Weather"}, {"parameters", {{"type", "object"}}}}}},
            {"context", json::array()},
            {"state", json::object()},
            {"forwardedProps", json::object()}}}}),
      ev("STEP_STARTED", {{"stepName", "execution"}}),
      ev("TEXT_MESSAGE_START", {{"messageId", "m1"}, {"role", "assistant"}}),
      ev("TEXT_MESSAGE_CONTENT", {{"messageId", "m1"}, {"delta", "Let me check."}}),
      ev("TEXT_MESSAGE_CONTENT", {{"messageId", "m1"}, {"delta", ""}}),
      ev("TEXT_MESSAGE_END", {{"messageId", "m1"}}),
      ev("TOOL_CALL_START", {{"toolCallId", "c1"}, {"toolCallName", "get_weather"}, {"parentMessageId", "m1"}}),
      ev("TOOL_CALL_ARGS", {{"toolCallId", "c1"}, {"delta", "{\"city\":"}}),
      ev("TOOL_CALL_ARGS", {{"toolCallId", "c1"}, {"delta", "\"Oslo\"}"}}),
      ev("TOOL_CALL_END", {{"toolCallId", "c1"}}),
      ev("STEP_FINISHED", {{"stepName", "execution"}}),
      ev("STATE_SNAPSHOT", {{"snapshot", {{"pending", true}}}}),
      ev("STATE_DELTA", {{"delta", {{{"op", "replace"}, {"path", "/pending"}, {"value", false}}}}}),
      ev("MESSAGES_SNAPSHOT", {{"messages", {user_message, assistant_message}}}),
      ev("RUN_FINISHED", {{"threadId", "t1"},
                          {"runId", "r1"},
                          {"metadata", {{"turn", 1}}},
                          {"outcome",
                           {{"type", "interrupt"},
                            {"interrupts",
                             {{{"id", "i1"},
                               {"reason", "tool_call"},
                               {"toolCallId", "c1"},
                               {"message", "Run get_weather?"},
                               {"responseSchema", {{"type", "object"}}},
                               {"expiresAt", "2026-01-01T00:05:00Z"}}}}}}}),
      ev("RUN_STARTED",
         {{"threadId", "t1"},
          {"runId", "r2"},
          {"parentRunId", "r1"},
          {"input",
           {{"threadId", "t1"},
            {"runId", "r2"},
            {"messages", {user_message, assistant_message}},
            {"resume", {{{"interruptId", "i1"}, {"status", "resolved"}, {"payload", {{"approved", true}}}}}}}}}),
      ev("TOOL_CALL_RESULT", {{"messageId", "tm1"}, {"toolCallId", "c1"}, {"content", "12 C"}, {"role", "tool"}}),
      ev("REASONING_START", {{"messageId", "rs1"}}),
      ev("REASONING_MESSAGE_START", {{"messageId", "rs1"}, {"role", "reasoning"}}),
      ev("REASONING_MESSAGE_CONTENT", {{"messageId", "rs1"}, {"delta", "It is mild."}}),
      ev("REASONING_MESSAGE_END", {{"messageId", "rs1"}}),
      ev("REASONING_END", {{"messageId", "rs1"}}),
      ev("SUBAGENT_STARTED", {{"subagentRunId", "s1"}, {"name", "summarizer"}, {"parentToolCallId", "c1"}}),
      ev("STEP_STARTED", {{"stepName", "execution"}, {"subagentRunId", "s1"}}),
      ev("STEP_STARTED", {{"stepName", "execution"}}),
      ev("STEP_FINISHED", {{"stepName", "execution"}, {"subagentRunId", "s1"}}),
      ev("SUBAGENT_FINISHED", {{"subagentRunId", "s1"}, {"outcome", {{"type", "success"}}}}),
      ev("TEXT_MESSAGE_START", {{"messageId", "m2"}}),
      ev("TEXT_MESSAGE_CONTENT", {{"messageId", "m2"}, {"delta", "It is 12 C in Oslo."}}),
      ev("TEXT_MESSAGE_END", {{"messageId", "m2"}}),
      ev("STEP_FINISHED", {{"stepName", "execution"}}),
      ev("CUSTOM", {{"name", "agentrt.summary"}, {"value", {{"words", 6}}}}),
      ev("RUN_FINISHED", {{"threadId", "t1"},
                          {"runId", "r2"},
                          {"result", "done"},
                          {"outcome", {{"type", "success"}}},
                          {"usage", {{{"model", "m"}, {"inputTokens", 10}, {"outputTokens", 5}}}}}),
  };
}

}  // namespace

TEST_CASE("a valid stream of two sequential runs passes") {
  const auto events = valid_stream();
  AguiVerifier verifier;
  for (const auto& e : events) {
    const auto m = verifier.feed(e);
    CHECK_MESSAGE(!m.has_value(), e.dump(), " -> ", m.value_or(""));
  }
  CHECK(verifier.events_accepted() == events.size());
  CHECK_FALSE(verifier.finish().has_value());
  CHECK(verify_agui_stream(events) == std::nullopt);
}

TEST_CASE("the first event must be RUN_STARTED or RUN_ERROR") {
  CHECK(verify_agui_stream({ev("TEXT_MESSAGE_START", {{"messageId", "m1"}})}) ==
        "event 0: First event must be 'RUN_STARTED'");
  // A stream may open with RUN_ERROR (a refused run) and then start a new run.
  CHECK(verify_agui_stream({ev("RUN_ERROR", {{"message", "busy"}}), run_started(), run_finished()}) == std::nullopt);
}

TEST_CASE("only RUN_STARTED may follow RUN_ERROR") {
  CHECK(last_event_violation({run_started(), ev("TEXT_MESSAGE_START", {{"messageId", "m1"}}),
                              ev("RUN_ERROR", {{"message", "model failed"}, {"code", "model"}}),
                              ev("TEXT_MESSAGE_END", {{"messageId", "m1"}})}) ==
        "Cannot send event type 'TEXT_MESSAGE_END': The run has already errored with 'RUN_ERROR'. No further events "
        "can be sent.");
  CHECK(last_event_violation({run_started(), ev("RUN_ERROR", {{"message", "x"}}), run_finished()}) ==
        "Cannot send event type 'RUN_FINISHED': The run has already errored with 'RUN_ERROR'. No further events can "
        "be sent.");
  CHECK(last_event_violation({run_started(), ev("RUN_ERROR", {{"message", "x"}}), run_started("r2")}) == std::nullopt);
}

TEST_CASE("only RUN_STARTED or RUN_ERROR may follow RUN_FINISHED") {
  CHECK(last_event_violation({run_started(), run_finished(), ev("STEP_STARTED", {{"stepName", "s"}})}) ==
        "Cannot send event type 'STEP_STARTED': The run has already finished with 'RUN_FINISHED'. Start a new run "
        "with 'RUN_STARTED'.");
  CHECK(last_event_violation({run_started(), run_finished(), ev("RUN_ERROR", {{"message", "late"}})}) == std::nullopt);
}

TEST_CASE("a RUN_STARTED inside an active run is refused") {
  CHECK(last_event_violation({run_started(), run_started("r2")}) ==
        "Cannot send 'RUN_STARTED' while a run is still active. The previous run must be finished with "
        "'RUN_FINISHED' before starting a new run.");
}

TEST_CASE("RUN_FINISHED names what is still open, in the client's order") {
  CHECK(last_event_violation({run_started(), ev("STEP_STARTED", {{"stepName", "execution"}}),
                              ev("TEXT_MESSAGE_START", {{"messageId", "m1"}}), run_finished()}) ==
        "Cannot send 'RUN_FINISHED' while steps are still active: execution");
  CHECK(last_event_violation({run_started(), ev("STEP_STARTED", {{"stepName", "a"}}),
                              ev("STEP_STARTED", {{"stepName", "b"}, {"subagentRunId", "s1"}}), run_finished()}) ==
        "Cannot send 'RUN_FINISHED' while steps are still active: a, b (subagent 's1')");
  CHECK(last_event_violation({run_started(), ev("TEXT_MESSAGE_START", {{"messageId", "m2"}}),
                              ev("TEXT_MESSAGE_START", {{"messageId", "m1"}}), run_finished()}) ==
        "Cannot send 'RUN_FINISHED' while text messages are still active: m2, m1");
  CHECK(last_event_violation({run_started(), ev("REASONING_START", {{"messageId", "r"}}),
                              ev("REASONING_MESSAGE_START", {{"messageId", "r"}, {"role", "reasoning"}}),
                              run_finished()}) ==
        "Cannot send 'RUN_FINISHED' while reasoning messages are still active: r");
  CHECK(last_event_violation({run_started(), ev("REASONING_START", {{"messageId", "r"}}), run_finished()}) ==
        "Cannot send 'RUN_FINISHED' while reasoning spans are still active: r");
  CHECK(last_event_violation({run_started(), ev("TOOL_CALL_START", {{"toolCallId", "c1"}, {"toolCallName", "f"}}),
                              run_finished()}) == "Cannot send 'RUN_FINISHED' while tool calls are still active: c1");
  CHECK(last_event_violation({run_started(), ev("SUBAGENT_STARTED", {{"subagentRunId", "s1"}, {"name", "n"}}),
                              run_finished()}) == "Cannot send 'RUN_FINISHED' while subagents are still active: s1");
}

TEST_CASE("RUN_ERROR is accepted with messages and tool calls still open") {
  CHECK(verify_agui_stream({run_started(), ev("TEXT_MESSAGE_START", {{"messageId", "m1"}}),
                            ev("TOOL_CALL_START", {{"toolCallId", "c1"}, {"toolCallName", "f"}}),
                            ev("RUN_ERROR", {{"message", "cancelled by host"}})}) == std::nullopt);
}

TEST_CASE("text messages must be started once before content and end") {
  CHECK(last_event_violation({run_started(), ev("TEXT_MESSAGE_START", {{"messageId", "m1"}}),
                              ev("TEXT_MESSAGE_START", {{"messageId", "m1"}})}) ==
        "Cannot send 'TEXT_MESSAGE_START' event: A text message with ID 'm1' is already in progress. Complete it "
        "with 'TEXT_MESSAGE_END' first.");
  CHECK(last_event_violation({run_started(), ev("TEXT_MESSAGE_CONTENT", {{"messageId", "m1"}, {"delta", "x"}})}) ==
        "Cannot send 'TEXT_MESSAGE_CONTENT' event: No active text message found with ID 'm1'. Start a text message "
        "with 'TEXT_MESSAGE_START' first.");
  CHECK(last_event_violation({run_started(), ev("TEXT_MESSAGE_START", {{"messageId", "m1"}}),
                              ev("TEXT_MESSAGE_END", {{"messageId", "m1"}}),
                              ev("TEXT_MESSAGE_END", {{"messageId", "m1"}})}) ==
        "Cannot send 'TEXT_MESSAGE_END' event: No active text message found with ID 'm1'. A 'TEXT_MESSAGE_START' "
        "event must be sent first.");
}

TEST_CASE("tool call args and end need an open tool call, results do not") {
  CHECK(last_event_violation({run_started(), ev("TOOL_CALL_ARGS", {{"toolCallId", "c9"}, {"delta", "{}"}})}) ==
        "Cannot send 'TOOL_CALL_ARGS' event: No active tool call found with ID 'c9'. Start a tool call with "
        "'TOOL_CALL_START' first.");
  CHECK(last_event_violation({run_started(), ev("TOOL_CALL_END", {{"toolCallId", "c9"}})}) ==
        "Cannot send 'TOOL_CALL_END' event: No active tool call found with ID 'c9'. A 'TOOL_CALL_START' event must "
        "be sent first.");
  CHECK(last_event_violation({run_started(), ev("TOOL_CALL_START", {{"toolCallId", "c1"}, {"toolCallName", "f"}}),
                              ev("TOOL_CALL_START", {{"toolCallId", "c1"}, {"toolCallName", "f"}})}) ==
        "Cannot send 'TOOL_CALL_START' event: A tool call with ID 'c1' is already in progress. Complete it with "
        "'TOOL_CALL_END' first.");
  CHECK(last_event_violation(
            {run_started(), ev("TOOL_CALL_RESULT", {{"messageId", "x"}, {"toolCallId", "never"}, {"content", "r"}})}) ==
        std::nullopt);
}

TEST_CASE("steps are keyed by subagent and name") {
  CHECK(last_event_violation(
            {run_started(), ev("STEP_STARTED", {{"stepName", "plan"}}), ev("STEP_STARTED", {{"stepName", "plan"}})}) ==
        "Step \"plan\" is already active for 'STEP_STARTED'");
  CHECK(last_event_violation({run_started(), ev("STEP_FINISHED", {{"stepName", "plan"}})}) ==
        "Cannot send 'STEP_FINISHED' for step \"plan\" that was not started");
  CHECK(last_event_violation({run_started(), ev("STEP_STARTED", {{"stepName", "plan"}}),
                              ev("STEP_FINISHED", {{"stepName", "plan"}, {"subagentRunId", "s1"}})}) ==
        "Cannot send 'STEP_FINISHED' for step \"plan\" attributed to subagent 's1': that step is open under the "
        "parent agent. A step must be finished by whoever started it.");
}

TEST_CASE("reasoning spans and messages are opened and closed separately") {
  CHECK(last_event_violation({run_started(), ev("REASONING_START", {{"messageId", "r1"}}),
                              ev("REASONING_START", {{"messageId", "r1"}})}) ==
        "Cannot send 'REASONING_START' event: A reasoning span with ID 'r1' is already in progress. Complete it with "
        "'REASONING_END' first.");
  CHECK(
      last_event_violation({run_started(), ev("REASONING_MESSAGE_START", {{"messageId", "r1"}, {"role", "reasoning"}}),
                            ev("REASONING_MESSAGE_START", {{"messageId", "r1"}, {"role", "reasoning"}})}) ==
      "Cannot send 'REASONING_MESSAGE_START' event: A reasoning message with ID 'r1' is already in progress. "
      "Complete it with 'REASONING_MESSAGE_END' first.");
  CHECK(last_event_violation({run_started(), ev("REASONING_END", {{"messageId", "r1"}})}) ==
        "Cannot send 'REASONING_END' event: No active reasoning span found with ID 'r1'. A 'REASONING_START' event "
        "must be sent first.");
  CHECK(last_event_violation({run_started(), ev("REASONING_START", {{"messageId", "r1"}}),
                              ev("REASONING_MESSAGE_CONTENT", {{"messageId", "r1"}, {"delta", "x"}})}) ==
        "Cannot send 'REASONING_MESSAGE_CONTENT' event: No active reasoning message found with ID 'r1'. Start a "
        "reasoning message with 'REASONING_MESSAGE_START' first.");
}

TEST_CASE("subagents start once, name known parents and end only when active") {
  const json s1 = ev("SUBAGENT_STARTED", {{"subagentRunId", "s1"}, {"name", "n"}});
  CHECK(last_event_violation({run_started(), ev("SUBAGENT_STARTED", {{"name", "n"}})}) ==
        "Cannot send 'SUBAGENT_STARTED' without a 'subagentRunId'.");
  CHECK(last_event_violation({run_started(), ev("SUBAGENT_STARTED", {{"subagentRunId", "s1"}, {"name", 3}})}) ==
        "Cannot send 'SUBAGENT_STARTED' without a 'name'.");
  CHECK(last_event_violation({run_started(), s1, ev("SUBAGENT_ERROR", {{"subagentRunId", "s1"}})}) ==
        "Cannot send 'SUBAGENT_ERROR' without a 'message'.");
  CHECK(last_event_violation({run_started(), s1, s1}) ==
        "Cannot send 'SUBAGENT_STARTED': subagent 's1' is already active. Finish it with 'SUBAGENT_FINISHED' first.");
  CHECK(last_event_violation({run_started(), s1, ev("SUBAGENT_FINISHED", {{"subagentRunId", "s1"}}), s1}) ==
        "Cannot send 'SUBAGENT_STARTED': subagent 's1' has already finished in this run. Subagent IDs are "
        "per-invocation and cannot be reused.");
  CHECK(last_event_violation(
            {run_started(),
             ev("SUBAGENT_STARTED", {{"subagentRunId", "s2"}, {"name", "n"}, {"parentSubagentRunId", "s0"}})}) ==
        "Cannot send 'SUBAGENT_STARTED': parentSubagentRunId 's0' has not been started in this run.");
  CHECK(last_event_violation({run_started(), ev("SUBAGENT_ERROR", {{"subagentRunId", "s1"}, {"message", "boom"}})}) ==
        "Cannot send 'SUBAGENT_ERROR': no active subagent found with ID 's1'. A 'SUBAGENT_STARTED' event must be "
        "sent first.");
}

TEST_CASE("a null field is refused, with the client's message for optional fields") {
  CHECK(last_event_violation(
            {run_started(), ev("TEXT_MESSAGE_START", {{"messageId", "m1"}}),
             ev("TEXT_MESSAGE_CONTENT", {{"messageId", "m1"}, {"delta", "x"}, {"subagentRunId", nullptr}})}) ==
        "Cannot send 'TEXT_MESSAGE_CONTENT' with 'subagentRunId: null'. The field is optional — omit it entirely.");
  CHECK(last_event_violation({ev("RUN_STARTED", {{"threadId", "t1"}, {"runId", "r1"}, {"parentRunId", nullptr}})}) ==
        "Cannot send 'RUN_STARTED' with 'parentRunId: null'. The field is optional — omit it entirely.");
  CHECK(last_event_violation({run_started(), ev("TEXT_MESSAGE_START", {{"messageId", nullptr}})}) ==
        "Cannot send 'TEXT_MESSAGE_START' without a 'messageId'.");
  CHECK(last_event_violation({run_started(), ev("SUBAGENT_STARTED", {{"subagentRunId", "s1"}, {"name", "n"}}),
                              ev("SUBAGENT_FINISHED", {{"subagentRunId", "s1"}, {"outcome", {{"type", "done"}}}})}) ==
        "Cannot send 'SUBAGENT_FINISHED' with outcome type 'done'. The outcome is either { type: \"success\" } or { "
        "type: \"suspended\" }.");
  CHECK(last_event_violation(
            {run_started(), ev("SUBAGENT_STARTED", {{"subagentRunId", "s1"}, {"name", "n"}}),
             ev("SUBAGENT_FINISHED",
                {{"subagentRunId", "s1"}, {"outcome", {{"type", "suspended"}, {"interruptIds", nullptr}}}})}) ==
        "Cannot send 'SUBAGENT_FINISHED' with 'outcome.interruptIds: null'. The field is optional — omit it "
        "entirely.");
  CHECK(last_event_violation(
            {run_started(),
             ev("RUN_FINISHED",
                {{"threadId", "t1"},
                 {"runId", "r1"},
                 {"outcome",
                  {{"type", "interrupt"},
                   {"interrupts", {{{"id", "i1"}, {"reason", "confirmation"}, {"subagentRunId", nullptr}}}}}}})}) ==
        "Cannot send 'RUN_FINISHED' with an interrupt (id 'i1') carrying 'subagentRunId: null'. The field is optional "
        "— omit it entirely.");
}

TEST_CASE("a continuation tagged with another subagent than its opener is refused") {
  CHECK(last_event_violation(
            {run_started(), ev("TEXT_MESSAGE_START", {{"messageId", "m1"}, {"subagentRunId", "s1"}}),
             ev("TEXT_MESSAGE_CONTENT", {{"messageId", "m1"}, {"delta", "x"}, {"subagentRunId", "s2"}})}) ==
        "Cannot send 'TEXT_MESSAGE_CONTENT': subagentRunId 's2' does not match the message 'm1' opener's subagent "
        "'s1'.");
  CHECK(
      last_event_violation({run_started(), ev("TOOL_CALL_START", {{"toolCallId", "c1"}, {"toolCallName", "f"}}),
                            ev("TOOL_CALL_ARGS", {{"toolCallId", "c1"}, {"delta", "{}"}, {"subagentRunId", "s1"}})}) ==
      "Cannot send 'TOOL_CALL_ARGS': subagentRunId 's1' does not match the tool call 'c1' opener's subagent '(the "
      "parent agent)'.");
}

TEST_CASE("event types and properties outside the 1.0 schema are refused") {
  CHECK(check_agui_event_schema(json::parse(R"({"type": "THINKING_START"})")) == "Unknown event type 'THINKING_START'");
  CHECK(check_agui_event_schema(json::parse(R"({"messageId": "m1"})")) ==
        "An event must be a JSON object with a non-empty string 'type'");
  CHECK(check_agui_event_schema(json::parse(R"({"type": "STEP_STARTED", "stepName": "a", "step": 1})")) ==
        "Cannot send 'STEP_STARTED' with unknown property 'step'");
  CHECK(check_agui_event_schema(json::parse(R"({"type": "RUN_STARTED", "threadId": "t", "runId": "r",
                                                 "subagentRunId": "s1"})")) ==
        "Cannot send 'RUN_STARTED' with unknown property 'subagentRunId'");
  CHECK(check_agui_event_schema(json::parse(R"({"type": "RUN_ERROR"})")) ==
        "Cannot send 'RUN_ERROR' without a 'message'.");
  CHECK(check_agui_event_schema(json::parse(R"({"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": 5})")) ==
        "Cannot send 'TOOL_CALL_ARGS': 'delta' must be a string, found number 5");
}

TEST_CASE("base fields have their fixed types") {
  CHECK(last_event_violation(
            {ev("RUN_STARTED", {{"threadId", "t1"}, {"runId", "r1"}, {"timestamp", 1767225600000.5}})}) ==
        "Cannot send 'RUN_STARTED': 'timestamp' must be an integer, found number 1767225600000.5");
  CHECK(check_agui_event_schema(json::parse(R"({"type": "RUN_ERROR", "message": "m", "timestamp": 1.0})")) ==
        "Cannot send 'RUN_ERROR': 'timestamp' must be an integer, found number 1.0");
  CHECK(check_agui_event_schema(json::parse(R"({"type": "RUN_ERROR", "message": "m", "metadata": []})")) ==
        "Cannot send 'RUN_ERROR': 'metadata' must be an object, found array");
  CHECK(check_agui_event_schema(json::parse(R"({"type": "RUN_ERROR", "message": "m", "rawEvent": null})")) ==
        "Cannot send 'RUN_ERROR' with 'rawEvent: null'. The field is optional — omit it entirely.");
  CHECK(check_agui_event_schema(
            json::parse(R"({"type": "RUN_ERROR", "message": "m", "timestamp": 5, "rawEvent": 1, "metadata": {}})")) ==
        std::nullopt);
}

TEST_CASE("RUN_FINISHED outcomes have the 1.0 shapes") {
  const auto finished_with = [](const char* outcome) {
    json e = run_finished();
    e["outcome"] = json::parse(outcome);
    return check_agui_event_schema(e);
  };
  CHECK(finished_with(R"({"type": "success", "pendingToolCallIds": ["c1"]})") == std::nullopt);
  CHECK(finished_with(R"({"type": "cancelled"})") == std::nullopt);
  CHECK(finished_with(R"({"type": "interrupt", "interrupts": [{"id": "i1", "reason": "acme:review"}]})") ==
        std::nullopt);
  CHECK(finished_with(R"({"type": "paused"})") ==
        "Cannot send 'RUN_FINISHED' with outcome type 'paused'. The outcome is { type: \"success\" }, { type: "
        "\"interrupt\" } or { type: \"cancelled\" }.");
  CHECK(finished_with(R"({"type": "interrupt", "interrupts": []})") ==
        "Cannot send 'RUN_FINISHED' with an empty 'outcome.interrupts': an interrupt outcome has at least one "
        "interrupt");
  CHECK(finished_with(R"({"type": "interrupt"})") == "Cannot send 'RUN_FINISHED' without a 'outcome.interrupts'.");
  CHECK(finished_with(R"({"type": "interrupt", "interrupts": [{"reason": "confirmation"}]})") ==
        "Cannot send 'RUN_FINISHED' without a 'outcome.interrupts[0].id'.");
  CHECK(finished_with(R"({"type": "interrupt", "interrupts": [{"id": "i1"}]})") ==
        "Cannot send 'RUN_FINISHED' without a 'outcome.interrupts[0].reason'.");
  CHECK(finished_with(R"({"type": "interrupt", "interrupts": [{"id": "i1", "reason": "tool_call"}]})") ==
        "Cannot send 'RUN_FINISHED' with an interrupt (id 'i1') of reason 'tool_call' without a 'toolCallId'");
  CHECK(finished_with(R"({"type": "interrupt", "interrupts": [{"id": "i1", "reason": "approval"}]})") ==
        "Cannot send 'RUN_FINISHED' with an interrupt (id 'i1') of reason 'approval': a reason is 'tool_call', "
        "'input_required', 'confirmation' or a namespaced '<framework>:<name>' ('core:' is reserved)");
  CHECK(finished_with(R"({"type": "interrupt", "interrupts": [{"id": "i1", "reason": "confirmation"},
                                                                {"id": "i1", "reason": "confirmation"}]})") ==
        "Cannot send 'RUN_FINISHED' with two interrupts of id 'i1': interrupt ids are unique within a run");
  CHECK(finished_with(R"({"type": "cancelled", "reason": "user"})") ==
        "Cannot send 'RUN_FINISHED' with unknown property 'outcome.reason'");
  json e = run_finished();
  e["usage"] = json::parse(R"([{"inputTokens": -1}])");
  CHECK(check_agui_event_schema(e) ==
        "Cannot send 'RUN_FINISHED': 'usage[0].inputTokens' must be a non-negative integer, found number -1");
}

TEST_CASE("tool results carry role tool and reasoning messages role reasoning") {
  CHECK(
      check_agui_event_schema(json::parse(
          R"({"type": "TOOL_CALL_RESULT", "messageId": "m", "toolCallId": "c", "content": "x", "role": "assistant"})")) ==
      "Cannot send 'TOOL_CALL_RESULT': 'role' must be \"tool\", found string \"assistant\"");
  CHECK(check_agui_event_schema(json::parse(
            R"({"type": "TOOL_CALL_RESULT", "messageId": "m", "toolCallId": "c",
                "content": [{"type": "text", "text": "a"}, {"type": "image", "source": {"type": "data", "value": "AAAA"}}]})")) ==
        "Cannot send 'TOOL_CALL_RESULT' without a 'content[1].source.mimeType'.");
  CHECK(check_agui_event_schema(json::parse(R"({"type": "REASONING_MESSAGE_START", "messageId": "r"})")) ==
        "Cannot send 'REASONING_MESSAGE_START' without a 'role'.");
  CHECK(check_agui_event_schema(
            json::parse(R"({"type": "REASONING_MESSAGE_START", "messageId": "r", "role": "assistant"})")) ==
        "Cannot send 'REASONING_MESSAGE_START': 'role' must be \"reasoning\", found string \"assistant\"");
}

TEST_CASE("the boundary events of one run agree on threadId and runId") {
  CHECK(check_run_ids_agree(run_started("r1"), run_finished("r1")) == std::nullopt);
  CHECK(check_run_ids_agree(run_started("r1"), run_finished("r2")) ==
        "'RUN_FINISHED' runId \"r2\" does not match its 'RUN_STARTED' runId \"r1\"");
  CHECK(last_event_violation({run_started("r1"), ev("RUN_FINISHED", {{"threadId", "t2"}, {"runId", "r1"}})}) ==
        "'RUN_FINISHED' threadId \"t2\" does not match its 'RUN_STARTED' threadId \"t1\"");
  CHECK(check_agui_event_schema(
            ev("RUN_STARTED", {{"threadId", "t1"},
                               {"runId", "r1"},
                               {"input", {{"threadId", "t1"}, {"runId", "r0"}, {"messages", json::array()}}}})) ==
        "Cannot send 'RUN_STARTED': 'runId' \"r1\" does not match 'input.runId' \"r0\"");
}

TEST_CASE("a stream that ends inside a run, or has no event, is incomplete") {
  CHECK(verify_agui_stream({run_started(), ev("STEP_STARTED", {{"stepName", "a"}})}) ==
        "The stream ended while run 'r1' is still active: a run ends with 'RUN_FINISHED' or 'RUN_ERROR' (truncated "
        "run)");
  CHECK(verify_agui_stream({}) == "The stream has no events: it must start with 'RUN_STARTED'");
}

TEST_CASE("after the first violation every event reports that violation") {
  AguiVerifier verifier;
  CHECK(verifier.feed(run_started()) == std::nullopt);
  const std::string first = "Cannot send 'STEP_FINISHED' for step \"x\" that was not started";
  CHECK(verifier.feed(ev("STEP_FINISHED", {{"stepName", "x"}})) == first);
  CHECK(verifier.feed(run_finished()) == first);
  CHECK(verifier.violation() == first);
  CHECK(verifier.finish() == first);
  CHECK(verifier.events_accepted() == 1);
  CHECK(verify_agui_stream({run_started(), ev("STEP_FINISHED", {{"stepName", "x"}}), run_finished()}) ==
        "event 1: " + first);
}
