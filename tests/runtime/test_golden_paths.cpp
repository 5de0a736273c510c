#include <doctest/doctest.h>

#include "support/runtime_fixture.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {
ModelResult answer_script(const ModelRequest& req) {
  if (req.stage == "intent") return text_result("a greeting");
  return text_result("Hello there, friend.");
}
}  // namespace

TEST_CASE("golden path A: a turn without tools runs three stages and streams the final answer") {
  Harness h(answer_script, {}, ScriptedModelOptions{6, std::chrono::milliseconds(0), true});
  auto handle = h.start("t-a", "hi");
  CHECK_FALSE(handle.existing);
  CHECK(handle.first_seq == 1);
  auto turn = h.wait(handle.turn_id);
  CHECK(turn.status == TurnStatus::completed);
  CHECK(turn.intent == "a greeting");

  auto evs = h.events("t-a");
  check_agui(evs);
  std::vector<std::string> expected = {"RUN_STARTED",          "STEP_STARTED",         "CUSTOM",
                                       "STEP_FINISHED",        "STEP_STARTED",         "TEXT_MESSAGE_START",
                                       "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CONTENT",
                                       "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",     "STEP_FINISHED",
                                       "STEP_STARTED",         "STEP_FINISHED",        "RUN_FINISHED"};
  CHECK(types_of(evs) == expected);
  CHECK(evs[0]["threadId"] == "t-a");
  CHECK(evs[0]["runId"] == handle.run_id);
  CHECK(evs.back()["runId"] == handle.run_id);
  CHECK(evs.back()["outcome"] == json{{"type", "success"}});
  CHECK(evs[1]["stepName"] == "intent");
  CHECK(evs[4]["stepName"] == "execution");
  CHECK(evs[12]["stepName"] == "organization");
  std::string streamed;
  for (const auto& e : evs)
    if (e["type"] == "TEXT_MESSAGE_CONTENT") streamed += e["delta"].get<std::string>();
  CHECK(streamed == "Hello there, friend.");
  const json& end = evs[10];
  CHECK(end["metadata"]["worker_agent_output"]["answer"] == "Hello there, friend.");
  CHECK(end["metadata"]["worker_agent_output"]["intent"] == "a greeting");
  CHECK(end["metadata"]["worker_agent_output"]["turn_id"] == handle.turn_id);
  for (const auto& e : evs) CHECK(e["timestamp"].is_number_integer());

  auto hist = h.rt->history("t-a");
  REQUIRE(hist.size() == 2);
  CHECK(hist[0].role == Role::user);
  CHECK(hist[0].content == "hi");
  CHECK(hist[1].role == Role::assistant);
  CHECK(hist[1].content == "Hello there, friend.");
  CHECK(hist[1].metadata["worker_agent_output"]["answer"] == "Hello there, friend.");
  CHECK(h.model->calls() == 2);  // intent + execution; organization does not call the model by default
}

TEST_CASE("golden path B: a tool call pauses for approval and the resumed run executes it once") {
  Harness h;
  h.add_book_room();
  auto handle = h.start("t-b", "book a room");
  auto turn = h.wait(handle.turn_id);
  REQUIRE(turn.status == TurnStatus::waiting_approval);
  CHECK(h.tool_runs == 0);

  auto run1 = h.events("t-b");
  check_agui(run1);
  std::vector<std::string> expected1 = {"RUN_STARTED",   "STEP_STARTED",    "CUSTOM",         "STEP_FINISHED",
                                        "STEP_STARTED",  "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_ARGS",
                                        "TOOL_CALL_END", "STEP_FINISHED",   "RUN_FINISHED"};
  CHECK(types_of(run1) == expected1);
  const json& fin = run1.back();
  REQUIRE(fin["outcome"]["type"] == "interrupt");
  REQUIRE(fin["outcome"]["interrupts"].size() == 1);
  const json& intr = fin["outcome"]["interrupts"][0];
  CHECK(intr["reason"] == "tool_call");
  CHECK(intr["toolCallId"] == "call_1");
  CHECK(intr["expiresAt"].is_string());
  CHECK(intr["metadata"]["approvalRequestId"] == turn.approval_request_id);
  CHECK(intr["metadata"]["toolName"] == "book_room");
  CHECK(intr["responseSchema"]["properties"].contains("editedArgs"));

  json answer = h.rt->resume(handle.turn_id, turn.approval_request_id,
                             {Decision{intr["id"].get<std::string>(), Decision::Action::approve, std::nullopt, ""}});
  CHECK(answer["status"] == "accepted");
  CHECK(answer["turnId"] == handle.turn_id);
  const std::string run2_id = answer["runId"];
  CHECK(run2_id != handle.run_id);
  auto done = h.wait(handle.turn_id);
  CHECK(done.status == TurnStatus::completed);
  CHECK(h.tool_runs == 1);

  auto all = h.events("t-b", 2);
  check_agui(all);
  std::vector<json> run2(all.begin() + static_cast<long>(run1.size()), all.end());
  std::vector<std::string> expected2 = {"RUN_STARTED",      "STEP_STARTED",       "CUSTOM",
                                        "TOOL_CALL_RESULT", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT",
                                        "TEXT_MESSAGE_END", "STEP_FINISHED",      "STEP_STARTED",
                                        "STEP_FINISHED",    "RUN_FINISHED"};
  CHECK(types_of(run2) == expected2);
  CHECK(run2[0]["runId"] == run2_id);
  CHECK(run2[0]["parentRunId"] == handle.run_id);
  // The resumed run's start carries the decision the ledger and the approval record are derived from.
  CHECK(run2[0]["metadata"]["agentrt"]["decision"]["calls"] == json{{"call_1", {{"action", "approve"}}}});
  CHECK(run2[0]["metadata"]["agentrt"]["decision"]["approvalRequestId"] == intr["metadata"]["approvalRequestId"]);
  // The call is durable as started before the tool runs.
  CHECK(run2[2]["name"] == "agentrt.started");
  CHECK(run2[2]["value"] == json{{"toolCallIds", {"call_1"}}});
  CHECK(run2[3]["toolCallId"] == "call_1");
  CHECK(run2[3]["metadata"]["tool_agent_output"]["status"] == "succeeded");
  CHECK(run2[3]["metadata"]["tool_agent_output"]["result"]["booking_id"] == "BK-t-b");
  CHECK(run2[3]["metadata"]["ui"]["type"] == "booking_card");
  CHECK(run2[3]["content"] == run2[3]["metadata"]["tool_agent_output"]["result_summary"]);
  CHECK(run2.back()["outcome"]["type"] == "success");

  auto hist = h.rt->history("t-b");
  REQUIRE(hist.size() == 4);
  CHECK(hist[0].role == Role::user);
  CHECK(hist[1].role == Role::assistant);
  REQUIRE(hist[1].tool_calls.size() == 1);
  CHECK(hist[1].tool_calls[0].name == "book_room");
  CHECK(hist[2].role == Role::tool);
  CHECK(hist[2].tool_call_id == "call_1");
  CHECK(hist[2].metadata["tool_name"] == "book_room");
  CHECK(hist[3].role == Role::assistant);
  // The model saw the full result in the turn that ran the tool (not only the summary).
  CHECK(hist[3].content.find("BK-t-b") != std::string::npos);
}
