// Client tools (AG-UI client-provided tools): offered to the model for one run, a call to one waits for the
// client's answer (WAITING_CLIENT, or WAITING_APPROVAL beside an approval), the answer resumes the turn and is
// stored as the call's result; expiry, cancel, a restart, and every refusal.
#include <doctest/doctest.h>

#include <mutex>
#include <string>
#include <vector>

#include "agentrt/clock.hpp"
#include "agentrt/config.hpp"
#include "agentrt/scripted_model.hpp"
#include "support/runtime_fixture.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {

ToolDefinition change_theme() {
  return ToolDefinition{"change_theme", "Change the page's colour theme",
                        json::parse(R"({"type":"object","properties":{"theme":{"type":"string",
                          "enum":["dark","light"]}},"required":["theme"],"additionalProperties":false})")};
}

// Calls change_theme (and book_room too when the message says "both") until a tool result follows the user
// message, then quotes what the tool messages say.
ModelResult theme_script(const ModelRequest& req) {
  if (req.stage == "intent") return text_result("theme");
  if (req.stage == "organization") return text_result("organized");
  const Message* user = last_user_message(req);
  const std::string text = user ? user->text() : std::string();
  if (!last_tool_result_since_last_user(req)) {
    ModelResult r =
        tool_call_result("call_c1", "change_theme",
                         text.find("badargs") != std::string::npos ? R"({"theme":"pink"})" : R"({"theme":"dark"})");
    if (text.find("both") != std::string::npos)
      r.tool_calls.push_back(ModelToolCall{"call_b1", "book_room", R"({"room":"A1","day":"mon"})"});
    return r;
  }
  std::string out = "Tools said:";
  bool after_user = false;
  for (const auto& m : req.messages) {
    if (&m == user) after_user = true;
    if (after_user && m.role == Role::tool) out += " [" + m.tool_call_id + ": " + m.content + "]";
  }
  return text_result(out);
}

// What the model was offered, per stage.
struct Offers {
  std::mutex mutex;
  std::vector<std::pair<std::string, std::vector<std::string>>> seen;
  void note(const ModelRequest& req) {
    std::lock_guard lock(mutex);
    std::vector<std::string> names;
    for (const auto& t : req.tools) names.push_back(t.name);
    seen.emplace_back(req.stage, std::move(names));
  }
};

TurnInput theme_input(const std::string& thread, const std::string& text = "make it dark") {
  TurnInput in = turn_input(thread, user_message(text));
  in.client_tools = {change_theme()};
  return in;
}

ResumeInput answer_of(const TurnRecord& paused, std::vector<ToolAnswer> answers) {
  ResumeInput r;
  r.turn_id = paused.id;
  r.approval_request_id = paused.approval_request_id;
  r.answers = std::move(answers);
  return r;
}

const LedgerEntry* entry_of(const std::vector<LedgerEntry>& ledger, const std::string& id) {
  for (const auto& l : ledger)
    if (l.tool_call_id == id) return &l;
  return nullptr;
}

}  // namespace

TEST_CASE("client tools from AG-UI: definitions and tool messages decoded, malformed ones and excess refused") {
  auto tools = client_tools_from_agui(json::parse(R"([{"name":"change_theme","description":"Theme",
    "parameters":{"type":"object"}},{"name":"no-params_2","description":"x"}])"));
  REQUIRE(tools.size() == 2);
  CHECK(tools[0].name == "change_theme");
  CHECK(tools[0].parameters == json{{"type", "object"}});
  CHECK(tools[1].parameters.is_null());
  CHECK(client_tools_from_agui(nullptr).empty());

  auto refused = [](const char* text) { return error_of([&] { client_tools_from_agui(json::parse(text)); }); };
  CHECK(refused(R"({})") ==
        std::pair{ErrorCode::invalid_argument, std::string("tools must be an array of {name, description}")});
  CHECK(refused(R"([{"description":"x"}])") ==
        std::pair{ErrorCode::invalid_argument, std::string("tools[0]: 'name' must be a string")});
  CHECK(refused(R"([{"name":"a b"}])") ==
        std::pair{ErrorCode::invalid_argument,
                  std::string("client tool 'a b': a name is 1 to 64 letters, digits, '_' or '-'")});
  CHECK(refused(R"([{"name":""}])").first == ErrorCode::invalid_argument);
  CHECK(refused(R"([{"name":"a"},{"name":"a"}])") ==
        std::pair{ErrorCode::invalid_argument, std::string("client tool 'a' is offered twice")});
  CHECK(
      refused(R"([{"name":"a","parameters":[1]}])") ==
      std::pair{ErrorCode::invalid_argument, std::string("client tool 'a': parameters must be a JSON Schema object")});
  CHECK(refused(R"([{"name":"a","description":7}])").first == ErrorCode::invalid_argument);

  InputLimits small;
  small.max_client_tools = 1;
  auto e = error_of([&] { client_tools_from_agui(json::parse(R"([{"name":"a"},{"name":"b"}])"), small); });
  CHECK(e == std::pair{ErrorCode::too_large, std::string("client tools: 2 tools; the limit is 1")});
  small.max_client_tools = 8;
  small.max_client_tools_bytes = 10;
  e = error_of([&] { client_tools_from_agui(json::parse(R"([{"name":"abcdef","description":"ghijk"}])"), small); });
  CHECK(e == std::pair{ErrorCode::too_large, std::string("client tools: 11 bytes; the limit is 10")});

  // RunAgentInput.tools reaches the turn input.
  json in = {{"threadId", "t"},
             {"runId", "r"},
             {"messages", json::array({{{"id", "m1"}, {"role", "user"}, {"content", "hi"}}})},
             {"tools", json::array({{{"name", "change_theme"}, {"description", "d"}}})}};
  CHECK(turn_input_from_agui(in, "u1").client_tools.size() == 1);

  // Tool messages: every one, text parts joined; media refused; past the limit refused.
  json run = {{"messages", json::parse(R"([{"id":"m1","role":"user","content":"hi"},
    {"id":"tm1","role":"tool","toolCallId":"c1","content":"plain"},
    {"id":"tm2","role":"tool","toolCallId":"c2","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],
     "error":"it broke"}])")}};
  auto answers = tool_answers_from_agui(run);
  REQUIRE(answers.size() == 2);
  CHECK(answers[0] == ToolAnswer{"c1", "plain", "", "tm1"});
  CHECK(answers[1] == ToolAnswer{"c2", "ab", "it broke", "tm2"});
  run["messages"][1]["content"] = json::parse(R"([{"type":"image","source":{"type":"url","value":"http://x"}}])");
  CHECK(error_of([&] { tool_answers_from_agui(run); }) ==
        std::pair{ErrorCode::invalid_argument,
                  std::string("messages[1] (tool): only text parts can answer a client tool")});
  run["messages"][1].erase("toolCallId");
  CHECK(error_of([&] { tool_answers_from_agui(run); }) ==
        std::pair{ErrorCode::invalid_argument, std::string("messages[1] (tool): 'toolCallId' must be a string")});
  InputLimits tiny;
  tiny.max_answer_bytes = 4;
  run["messages"][1] = {{"id", "tm1"}, {"role", "tool"}, {"toolCallId", "c1"}, {"content", "12345"}};
  CHECK(error_of([&] { tool_answers_from_agui(run, tiny); }) ==
        std::pair{ErrorCode::too_large, std::string("messages[1] (tool): 5 bytes; the limit is 4")});
}

TEST_CASE("a client tool call ends the run with pendingToolCallIds; the answer resumes the turn and is its result") {
  Offers offers;
  Harness h([&](const ModelRequest& req) {
    offers.note(req);
    return theme_script(req);
  });
  h.add_book_room();
  h.threads.insert("t-ct");
  auto handle = h.rt->start_turn(theme_input("t-ct"));
  auto paused = h.wait(handle.turn_id);
  REQUIRE(paused.status == TurnStatus::waiting_client);
  CHECK(!paused.approval_request_id.empty());
  CHECK(paused.expires_at > now_ms());
  CHECK(paused.interrupts == json::array());

  auto first = h.events("t-ct");
  check_agui(first);
  CHECK(types_of(first) == std::vector<std::string>{"RUN_STARTED", "STEP_STARTED", "CUSTOM", "STEP_FINISHED",
                                                    "STEP_STARTED", "TOOL_CALL_START", "TOOL_CALL_ARGS",
                                                    "TOOL_CALL_ARGS", "TOOL_CALL_END", "STEP_FINISHED",
                                                    "RUN_FINISHED"});
  CHECK(find_event(first, "TOOL_CALL_START")->at("toolCallName") == "change_theme");
  CHECK(first.back()["outcome"] == json{{"type", "success"}, {"pendingToolCallIds", {"call_c1"}}});
  // Offered in the execution stage only, beside the server's tools.
  {
    std::lock_guard lock(offers.mutex);
    REQUIRE(offers.seen.size() == 2);
    CHECK(offers.seen[0].first == "intent");
    CHECK(std::find(offers.seen[0].second.begin(), offers.seen[0].second.end(), "change_theme") ==
          offers.seen[0].second.end());
    CHECK(offers.seen[1].second == std::vector<std::string>{"book_room", "change_theme"});
  }
  auto ledger = h.rt->tool_calls(paused.id);
  REQUIRE(ledger.size() == 1);
  CHECK(ledger[0].client);
  CHECK(ledger[0].status == LedgerStatus::requested);
  CHECK(!ledger[0].has_output());

  // A new turn on the thread is refused while it waits.
  CHECK(error_of([&] { h.start("t-ct", "another"); }).first == ErrorCode::conflict);

  // The answer: the pending call's result, the tool message keeping the client's id.
  auto done =
      h.rt->resume_turn(answer_of(paused, {ToolAnswer{"call_c1", R"({"theme":"dark","ok":true})", "", "tm-1"}}));
  CHECK(done.status == TurnStatus::completed);
  CHECK(h.tool_runs == 0);
  auto second = h.events("t-ct", 1, first.size());
  check_agui(second);
  CHECK(types_of(second) == std::vector<std::string>{"RUN_STARTED", "STEP_STARTED", "CUSTOM", "TEXT_MESSAGE_START",
                                                     "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "STEP_FINISHED",
                                                     "STEP_STARTED", "STEP_FINISHED", "RUN_FINISHED"});
  CHECK(find_event(second, "TOOL_CALL_RESULT") == nullptr);  // the client has its answer already
  const json& recorded = *find_event(second, "CUSTOM");
  CHECK(recorded["name"] == "agentrt.tool_answer");
  CHECK(recorded["value"]["toolCallId"] == "call_c1");
  CHECK(recorded["value"]["messageId"] == "tm-1");
  CHECK(second.back()["outcome"] == json{{"type", "success"}});

  ledger = h.rt->tool_calls(paused.id);
  REQUIRE(ledger.size() == 1);
  CHECK(ledger[0].status == LedgerStatus::finished);
  auto out = json::parse(ledger[0].output);
  CHECK(out["status"] == "succeeded");
  CHECK(out["result"] == json{{"theme", "dark"}, {"ok", true}});
  CHECK(out["args"] == json{{"theme", "dark"}});

  auto history = h.rt->history("t-ct");
  REQUIRE(history.size() == 4);  // user, assistant (the call), tool (the answer), assistant
  CHECK(history[2].role == Role::tool);
  CHECK(history[2].id == "tm-1");
  CHECK(history[2].tool_call_id == "call_c1");
  CHECK(history[2].content == out["result_summary"].get<std::string>());
  CHECK(history[2].content == "change_theme completed");
  CHECK(history[3].content == R"(Tools said: [call_c1: {"ok":true,"theme":"dark"}])");  // the turn's own: in full

  // The same answer again: the first answer, nothing run.
  auto again = h.rt->resume(answer_of(paused, {ToolAnswer{"call_c1", "other", "", ""}}));
  CHECK(again["runId"] == done.run_id);
  CHECK(h.rt->history("t-ct").size() == 4);
}

TEST_CASE("a client tool's answer: refused unless it answers every pending call once, within the limits") {
  Harness h(theme_script, [](RuntimeConfig& c) { c.max_input_bytes = 120; });
  h.add_book_room();
  h.threads.insert("t-refuse");
  auto paused = h.wait(h.rt->start_turn(theme_input("t-refuse")).turn_id);
  REQUIRE(paused.status == TurnStatus::waiting_client);

  auto e = error_of([&] { h.rt->resume(answer_of(paused, {})); });
  CHECK(e == std::pair{ErrorCode::invalid_argument,
                       std::string("client tool call 'call_c1' (change_theme) has no answer: a resume must answer "
                                   "every pending call")});
  e = error_of([&] { h.rt->resume(answer_of(paused, {ToolAnswer{"call_forged", "x", "", ""}})); });
  CHECK(e == std::pair{ErrorCode::invalid_argument,
                       "answer for 'call_forged': not a client tool call turn " + paused.id + " waits for"});
  e = error_of([&] {
    h.rt->resume(answer_of(paused, {ToolAnswer{"call_c1", "a", "", ""}, ToolAnswer{"call_c1", "b", "", ""}}));
  });
  CHECK(e == std::pair{ErrorCode::invalid_argument, std::string("two answers for client tool call 'call_c1'")});
  e = error_of([&] { h.rt->resume(answer_of(paused, {ToolAnswer{"call_c1", std::string(121, 'x'), "", ""}})); });
  CHECK(e == std::pair{ErrorCode::too_large,
                       std::string("the answer for client tool call 'call_c1' is 121 bytes; the limit is 120")});
  // A decision where no interrupt is open.
  ResumeInput decided = answer_of(paused, {ToolAnswer{"call_c1", "ok", "", ""}});
  decided.decisions.push_back(Decision{"call_c1", Decision::Action::approve, std::nullopt, ""});
  CHECK(error_of([&] { h.rt->resume(decided); }).first == ErrorCode::invalid_argument);
  CHECK(h.rt->turn(paused.id)->status == TurnStatus::waiting_client);

  // An error answer: the call failed, the model is told.
  auto done = h.rt->resume_turn(answer_of(paused, {ToolAnswer{"call_c1", "", "the page refused", ""}}));
  CHECK(done.status == TurnStatus::completed);
  auto ledger = h.rt->tool_calls(paused.id);
  CHECK(ledger[0].status == LedgerStatus::failed);
  auto out = json::parse(ledger[0].output);
  CHECK(out["error"] == json{{"code", "client_error"}, {"message", "the page refused"}});
  auto history = h.rt->history("t-refuse");
  CHECK(history[2].error == "the page refused");
  CHECK(history[2].id.rfind("msg_", 0) == 0);  // the answer named no id: the runtime's
}

TEST_CASE("client tools: a name of a registered tool, a bad schema or arguments that fail it") {
  Harness h(theme_script);
  h.add_book_room();
  h.threads.insert("t-bad");
  TurnInput clash = theme_input("t-bad");
  clash.client_tools.push_back(ToolDefinition{"book_room", "mine", nullptr});
  CHECK(error_of([&] { h.rt->start_turn(clash); }) ==
        std::pair{ErrorCode::invalid_argument,
                  std::string("client tool 'book_room' has the name of a tool of this runtime")});
  TurnInput bad_schema = theme_input("t-bad");
  bad_schema.client_tools[0].parameters = json{{"type", 7}};
  CHECK(error_of([&] { h.rt->start_turn(bad_schema); }).first == ErrorCode::invalid_argument);
  CHECK(!h.rt->thread("t-bad"));  // nothing stored

  // The model's arguments fail the client's schema: the call fails at once, the turn goes on, nothing waits.
  auto done = h.wait(h.rt->start_turn(theme_input("t-bad", "badargs")).turn_id);
  CHECK(done.status == TurnStatus::completed);
  auto ledger = h.rt->tool_calls(done.id);
  REQUIRE(ledger.size() == 1);
  CHECK(ledger[0].status == LedgerStatus::failed);
  CHECK(json::parse(ledger[0].output)["error"]["code"] == "invalid_arguments");

  // Without the client tool offered, the same call is an unknown tool.
  done = h.wait(h.start("t-bad", "make it dark").turn_id);
  CHECK(done.status == TurnStatus::completed);
  ledger = h.rt->tool_calls(done.id);
  CHECK(json::parse(ledger[0].output)["error"]["code"] == "unknown_tool");
}

TEST_CASE("an approval and a client tool pending in one turn: one resume answers both, the tool runs once") {
  Harness h(theme_script);
  h.add_book_room();  // needs approval
  h.threads.insert("t-both");
  auto paused = h.wait(h.rt->start_turn(theme_input("t-both", "both please")).turn_id);
  REQUIRE(paused.status == TurnStatus::waiting_approval);
  REQUIRE(paused.interrupts.size() == 1);
  CHECK(paused.interrupts[0]["toolCallId"] == "call_b1");
  auto first = h.events("t-both");
  check_agui(first);
  CHECK(first.back()["outcome"]["type"] == "interrupt");

  ResumeInput only_decision = answer_of(paused, {});
  only_decision.decisions.push_back(Decision{"call_b1", Decision::Action::approve, std::nullopt, ""});
  CHECK(error_of([&] { h.rt->resume(only_decision); }).first == ErrorCode::invalid_argument);
  CHECK(error_of([&] {
          h.rt->resume(answer_of(paused, {ToolAnswer{"call_c1", "done", "", ""}}));
        }).first == ErrorCode::invalid_argument);  // the interrupt has no decision
  CHECK(h.tool_runs == 0);

  ResumeInput both = only_decision;
  both.answers.push_back(ToolAnswer{"call_c1", "theme set", "", ""});
  auto done = h.rt->resume_turn(both);
  CHECK(done.status == TurnStatus::completed);
  CHECK(h.tool_runs == 1);
  auto ledger = h.rt->tool_calls(paused.id);
  CHECK(entry_of(ledger, "call_c1")->status == LedgerStatus::finished);
  CHECK(entry_of(ledger, "call_b1")->status == LedgerStatus::finished);
  auto second = h.events("t-both", 1, first.size());
  check_agui(second);
  CHECK(find_event(second, "TOOL_CALL_RESULT")->at("toolCallId") == "call_b1");
  CHECK(find_event(second, "TOOL_CALL_RESULT", 1) == nullptr);
}

TEST_CASE("a client tool call unanswered by its deadline expires the turn; a cancel ends a waiting one") {
  Harness h(theme_script, [](RuntimeConfig& c) { c.approval_timeout = std::chrono::milliseconds(300); });
  h.threads.insert("t-exp");
  auto paused = h.wait(h.rt->start_turn(theme_input("t-exp")).turn_id);
  REQUIRE(paused.status == TurnStatus::waiting_client);
  auto evs = h.events("t-exp", 2);
  CHECK(evs.back()["type"] == "RUN_ERROR");
  CHECK(evs.back()["code"] == "answer_expired");
  auto expired = h.rt->turn(paused.id);
  CHECK(expired->status == TurnStatus::expired);
  CHECK(h.rt->tool_calls(paused.id)[0].status == LedgerStatus::expired);
  auto e = error_of([&] { h.rt->resume(answer_of(paused, {ToolAnswer{"call_c1", "late", "", ""}})); });
  CHECK(e.first == ErrorCode::expired);

  Harness h2(theme_script);
  h2.threads.insert("t-cancel");
  auto waiting = h2.wait(h2.rt->start_turn(theme_input("t-cancel")).turn_id);
  REQUIRE(waiting.status == TurnStatus::waiting_client);
  h2.rt->cancel(waiting.id);
  CHECK(h2.rt->turn(waiting.id)->status == TurnStatus::cancelled);
  CHECK(h2.rt->tool_calls(waiting.id)[0].status == LedgerStatus::rejected);
  auto started = h2.start("t-cancel", "next");  // the thread is free again
  CHECK(h2.wait(started.turn_id).status != TurnStatus::waiting_client);
}

TEST_CASE("a turn waiting for a client tool answer survives a restart and resumes in the new runtime") {
  Harness h(theme_script);
  h.threads.insert("t-restart");
  auto paused = h.wait(h.rt->start_turn(theme_input("t-restart")).turn_id);
  REQUIRE(paused.status == TurnStatus::waiting_client);
  h.rt.reset();
  h.rt = std::make_unique<Runtime>(test_config(h.store, h.model));
  auto stored = h.rt->turn(paused.id);
  REQUIRE(stored);
  CHECK(stored->status == TurnStatus::waiting_client);
  CHECK(stored->approval_request_id == paused.approval_request_id);
  CHECK(h.rt->tool_calls(paused.id)[0].client);
  ResumeInput in = answer_of(paused, {ToolAnswer{"call_c1", "dark now", "", "tm-r"}});
  in.client_tools = {change_theme()};
  auto done = h.rt->resume_turn(in);
  CHECK(done.status == TurnStatus::completed);
  CHECK(h.rt->history("t-restart")[2].id == "tm-r");
}

TEST_CASE("a client tool's answer that is not valid UTF-8 is stored with replacement characters, never a failure") {
  Harness h(theme_script);
  h.threads.insert("t-utf8");
  auto paused = h.wait(h.rt->start_turn(theme_input("t-utf8")).turn_id);
  REQUIRE(paused.status == TurnStatus::waiting_client);
  auto done = h.rt->resume_turn(answer_of(paused, {ToolAnswer{"call_c1", "dark \xff\xfe end", "", ""}}));
  CHECK(done.status == TurnStatus::completed);
  auto history = h.rt->history("t-utf8");
  REQUIRE(history.size() == 4);
  CHECK(history[3].content.find("dark \xEF\xBF\xBD\xEF\xBF\xBD end") != std::string::npos);
}

TEST_CASE("a turn's client tools are offered to it alone; a tool registered or removed between turns is offered so") {
  Offers offers;
  Harness h([&](const ModelRequest& req) {
    offers.note(req);
    return text_result("fine");
  });
  h.add_book_room();
  auto executions = [&] {
    std::lock_guard lock(offers.mutex);
    std::vector<std::vector<std::string>> out;
    for (const auto& [stage, names] : offers.seen)
      if (stage == "execution") out.push_back(names);
    return out;
  };
  h.threads.insert("t-o1");
  h.wait(h.rt->start_turn(theme_input("t-o1", "hello")).turn_id);
  h.wait(h.start("t-o2", "hello").turn_id);
  ToolSpec extra;
  extra.name = "add_note";
  extra.handler = sync_tool([](const ToolCallContext&) { return ToolResult{}; });
  h.rt->tools().add(std::move(extra));
  h.wait(h.start("t-o3", "hello").turn_id);
  h.threads.insert("t-o4");
  h.wait(h.rt->start_turn(theme_input("t-o4", "hello")).turn_id);
  REQUIRE(h.rt->tools().remove("book_room"));
  h.wait(h.start("t-o5", "hello").turn_id);
  h.wait(h.start("t-o6", "hello").turn_id);
  using Names = std::vector<std::string>;
  CHECK(executions() == std::vector<Names>{{"book_room", "change_theme"},
                                           {"book_room"},
                                           {"add_note", "book_room"},
                                           {"add_note", "book_room", "change_theme"},
                                           {"add_note"},
                                           {"add_note"}});
}
