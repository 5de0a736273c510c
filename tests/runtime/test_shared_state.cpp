// A thread's shared state (AG-UI state): the client's in, a run's STATE_SNAPSHOT first, tools reading it and
// changing it with JSON Patch deltas (STATE_DELTA, committed with the result), stored per thread, kept across runs
// and a restart, and the limits on it. Every harness replays its threads' logs: the stored state is what the
// events say.
#include <doctest/doctest.h>

#include <mutex>
#include <string>
#include <vector>

#include "support/runtime_fixture.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {

// A tool the booking script calls (as book_room, no approval): it answers with the delta the test sets, and
// records the state it was called with.
struct StateTool {
  std::mutex mutex;
  json next_delta;
  std::vector<json> seen;
  void add(Runtime& rt) {
    ToolSpec spec;
    spec.name = "book_room";
    spec.description = "Book a room";
    spec.parameters =
        json::parse(R"({"type":"object","properties":{"room":{"type":"string"},"day":{"type":"string"}}})");
    spec.handler = sync_tool([this](const ToolCallContext& c) {
      std::lock_guard lock(mutex);
      seen.push_back(c.state);
      ToolResult r;
      r.result = json{{"ok", true}};
      r.state_delta = next_delta;
      return r;
    });
    rt.tools().add(std::move(spec));
  }
};

std::vector<json> state_events(const std::vector<json>& evs) {
  std::vector<json> out;
  for (const auto& e : evs)
    if (e["type"] == "STATE_SNAPSHOT" || e["type"] == "STATE_DELTA") out.push_back(e);
  return out;
}

TurnInput with_state(const std::string& thread, const std::string& text, std::optional<json> state) {
  TurnInput in = turn_input(thread, user_message(text));
  in.state = std::move(state);
  return in;
}

}  // namespace

TEST_CASE("the client's state starts the run as STATE_SNAPSHOT; a tool's delta streams as STATE_DELTA and is stored") {
  Harness h;
  StateTool tool;
  tool.add(*h.rt);
  tool.next_delta = json::parse(R"([{"op":"replace","path":"/theme","value":"dark"},
                                    {"op":"add","path":"/bookings","value":["A1"]}])");
  h.threads.insert("t-state");
  auto first = h.rt->start_turn(with_state("t-state", "book it", json{{"theme", "light"}}));
  CHECK(h.wait(first.turn_id).status == TurnStatus::completed);
  auto evs = h.events("t-state");
  check_agui(evs);
  REQUIRE(evs.size() > 3);
  CHECK(evs[0]["type"] == "RUN_STARTED");
  CHECK(evs[1]["type"] == "STATE_SNAPSHOT");
  CHECK(evs[1]["snapshot"] == json{{"theme", "light"}});
  const auto states = state_events(evs);
  REQUIRE(states.size() == 2);
  CHECK(states[1]["type"] == "STATE_DELTA");
  CHECK(states[1]["delta"] == tool.next_delta);
  // The delta comes right before the result it goes with.
  for (size_t i = 0; i < evs.size(); ++i)
    if (evs[i]["type"] == "STATE_DELTA") CHECK(evs[i + 1]["type"] == "TOOL_CALL_RESULT");
  {
    std::lock_guard lock(tool.mutex);
    REQUIRE(tool.seen.size() == 1);
    CHECK(tool.seen[0] == json{{"theme", "light"}});  // the tool read the client's state
  }
  const json after = json{{"theme", "dark"}, {"bookings", {"A1"}}};
  CHECK(json::parse(*h.store->thread_state("t-state")) == after);

  // The next run, without a state from the client: it starts with the stored one, which its tool reads.
  tool.next_delta = json::parse(R"([{"op":"add","path":"/bookings/-","value":"B2"}])");
  auto second = h.start("t-state", "book another");
  h.wait(second.turn_id);
  auto all = h.events("t-state", 2);
  const auto second_states = state_events(std::vector<json>(all.begin() + static_cast<long>(evs.size()), all.end()));
  REQUIRE(second_states.size() == 2);
  CHECK(second_states[0]["type"] == "STATE_SNAPSHOT");
  CHECK(second_states[0]["snapshot"] == after);
  {
    std::lock_guard lock(tool.mutex);
    CHECK(tool.seen.back() == after);
  }
  CHECK(json::parse(*h.store->thread_state("t-state")) == json{{"theme", "dark"}, {"bookings", {"A1", "B2"}}});
}

TEST_CASE(
    "a delta that is malformed, does not apply, or leaves a state over the limit fails the call; the state stays") {
  Harness h(booking_script, [](RuntimeConfig& c) { c.max_state_bytes = 64; });
  StateTool tool;
  tool.add(*h.rt);
  h.threads.insert("t-bad");
  const json start = json{{"n", 1}};
  struct Case {
    json delta;
    std::string message;
  };
  const std::vector<Case> cases = {
      {json{{"op", "add"}}, "state_delta must be a JSON Patch: an array of operations"},
      {json::parse(R"([{"op":"test","path":"/n","value":2}])"), "state_delta does not apply to the thread's state"},
      {json::parse(R"([{"op":"remove","path":"/missing"}])"), "state_delta does not apply to the thread's state"},
      {json::parse(R"([{"op":"add","path":"/big","value":")" + std::string(80, 'x') + R"("}])"),
       "state: 96 bytes; the limit is 64"},
  };
  int runs = 0;
  for (const auto& c : cases) {
    tool.next_delta = c.delta;
    auto t = h.rt->start_turn(with_state("t-bad", "book it", runs == 0 ? std::optional<json>(start) : std::nullopt));
    CHECK(h.wait(t.turn_id).status == TurnStatus::completed);
    ++runs;
    auto evs = h.events("t-bad", runs);
    int deltas = 0;
    for (const auto& e : evs) deltas += e["type"] == "STATE_DELTA";
    CHECK(deltas == 0);
    const json* result = nullptr;
    for (const auto& e : evs)
      if (e["type"] == "TOOL_CALL_RESULT") result = &e;
    REQUIRE(result);
    const json out = (*result)["metadata"]["tool_agent_output"];
    CHECK(out["status"] == "failed");
    CHECK(out["error"]["code"] == "invalid_state_delta");
    CHECK_MESSAGE(out["error"]["message"].get<std::string>().find(c.message) == 0, out["error"]["message"]);
    CHECK(json::parse(*h.store->thread_state("t-bad")) == start);
  }
}

TEST_CASE("{} from a client on a thread without state shows nothing; on one with a state it clears it") {
  Harness h;
  h.add_book_room(ApprovalPolicy::never());
  h.threads.insert("t-empty");
  h.wait(h.rt->start_turn(with_state("t-empty", "hello", json::object())).turn_id);
  CHECK(state_events(h.events("t-empty")).empty());
  CHECK_FALSE(h.store->thread_state("t-empty").has_value());

  h.wait(h.rt->start_turn(with_state("t-empty", "hello", json{{"a", 1}})).turn_id);
  h.wait(h.rt->start_turn(with_state("t-empty", "hello", json::object())).turn_id);
  auto evs = state_events(h.events("t-empty", 3));
  REQUIRE(evs.size() == 2);
  CHECK(evs[0]["snapshot"] == json{{"a", 1}});
  CHECK(evs[1]["snapshot"] == json::object());
  CHECK(*h.store->thread_state("t-empty") == "{}");
}

TEST_CASE("a resumed run starts with the stored state, and a new runtime on the store finds it") {
  TempDir dir;
  auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("agentrt.db")});
  {
    auto model = std::make_shared<ScriptedModel>(booking_script);
    Runtime rt(test_config(store, model));
    ToolSpec spec;
    spec.name = "book_room";
    spec.description = "Book";
    spec.approval = ApprovalPolicy::always();
    spec.handler = sync_tool([](const ToolCallContext& c) {
      ToolResult r;
      r.result = json{{"ok", true}, {"saw", c.state}};
      r.state_delta = json::parse(R"([{"op":"add","path":"/booked","value":true}])");
      return r;
    });
    rt.tools().add(std::move(spec));
    auto paused = rt.run_turn(with_state("t-restart", "book it", json{{"step", "asked"}}));
    REQUIRE(paused.status == TurnStatus::waiting_approval);
    Decision d;
    d.interrupt_id = "call_1";
    auto done = rt.resume_turn(paused.id, paused.approval_request_id, {d});
    CHECK(done.status == TurnStatus::completed);
    auto sub = rt.subscribe("t-restart");
    std::vector<json> evs;
    while (auto e = sub->next(std::chrono::milliseconds(0))) evs.push_back(json::parse(e->json));
    // The resumed run: RUN_STARTED, then the stored state, then the result with its delta.
    size_t second_start = 0;
    for (size_t i = 1; i < evs.size(); ++i)
      if (evs[i]["type"] == "RUN_STARTED") second_start = i;
    REQUIRE(second_start > 0);
    CHECK(evs[second_start + 1]["type"] == "STATE_SNAPSHOT");
    CHECK(evs[second_start + 1]["snapshot"] == json{{"step", "asked"}});
    CHECK(json::parse(*store->thread_state("t-restart")) == json{{"step", "asked"}, {"booked", true}});
    CHECK_FALSE(replay_difference(*store, "t-restart").has_value());
  }
  auto model = std::make_shared<ScriptedModel>([](const ModelRequest&) { return text_result("hi"); });
  Runtime again(test_config(store, model));
  auto t = again.run_turn(turn_input("t-restart", user_message("hello")));
  CHECK(t.status == TurnStatus::completed);
  auto page = again.events_page("t-restart", "u1", 0, kMaxEventsPage);
  std::vector<json> last_run;
  for (const auto& e : page) {
    json j = json::parse(e.json);
    if (j["type"] == "RUN_STARTED") last_run.clear();
    last_run.push_back(j);
  }
  REQUIRE(last_run.size() > 1);
  CHECK(last_run[1]["type"] == "STATE_SNAPSHOT");
  CHECK(last_run[1]["snapshot"] == json{{"step", "asked"}, {"booked", true}});
  CHECK_FALSE(replay_difference(*store, "t-restart").has_value());
}

TEST_CASE("a state over the limits, nested too deep or null is refused at the start and nothing is stored") {
  Harness h(booking_script, [](RuntimeConfig& c) { c.max_state_bytes = 20; });
  auto e = error_of([&] { h.rt->start_turn(with_state("t-limit", "hi", json{{"text", std::string(30, 'x')}})); });
  CHECK(e == std::pair{ErrorCode::too_large, std::string("state: 41 bytes; the limit is 20")});
  e = error_of([&] { h.rt->start_turn(with_state("t-limit", "hi", json(nullptr))); });
  CHECK(e == std::pair{ErrorCode::invalid_argument, std::string("state must not be null")});
  json deep = json::array();
  for (int i = 0; i < 70; ++i) deep = json::array({deep});
  e = error_of([&] { h.rt->start_turn(with_state("t-limit", "hi", deep)); });
  CHECK(e == std::pair{ErrorCode::invalid_argument, std::string("state is nested deeper than 64 levels")});
  CHECK_FALSE(h.rt->thread("t-limit").has_value());

  // From a RunAgentInput: the same checks; null there means none.
  json in = json{{"threadId", "t1"},
                 {"runId", "r1"},
                 {"messages", json::array({{{"id", "m1"}, {"role", "user"}, {"content", "hi"}}})},
                 {"state", nullptr}};
  CHECK_FALSE(turn_input_from_agui(in, "u1").state.has_value());
  in["state"] = json{{"a", 1}};
  CHECK(turn_input_from_agui(in, "u1").state == json{{"a", 1}});
  InputLimits small;
  small.max_state_bytes = 4;
  e = error_of([&] { turn_input_from_agui(in, "u1", small); });
  CHECK(e == std::pair{ErrorCode::too_large, std::string("state: 7 bytes; the limit is 4")});
}

TEST_CASE("a resume's state becomes the thread's: the continuation starts with it and its tool sees it") {
  Harness h;
  h.threads.insert("t-resume-state");
  ToolSpec spec;
  std::vector<json> seen;
  spec.name = "book_room";
  spec.description = "Book";
  spec.approval = ApprovalPolicy::always();
  spec.handler = sync_tool([&seen](const ToolCallContext& c) {
    seen.push_back(c.state);
    ToolResult r;
    r.result = json{{"ok", true}};
    return r;
  });
  h.rt->tools().add(std::move(spec));
  auto paused = h.rt->run_turn(with_state("t-resume-state", "book it", json{{"theme", "light"}}));
  REQUIRE(paused.status == TurnStatus::waiting_approval);
  ResumeInput in;
  in.turn_id = paused.id;
  in.approval_request_id = paused.approval_request_id;
  in.decisions.push_back(Decision{"call_1", Decision::Action::approve, std::nullopt, ""});
  in.state = json{{"theme", std::string(300000, 'x')}};
  CHECK(error_of([&] { h.rt->resume(in); }).first == ErrorCode::too_large);  // the limits hold here too
  in.state = json{{"theme", "dark"}};
  CHECK(h.rt->resume_turn(in).status == TurnStatus::completed);
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] == json{{"theme", "dark"}});
  CHECK(h.rt->thread_state("t-resume-state") == json{{"theme", "dark"}});
  auto evs = h.events("t-resume-state", 2);
  auto states = state_events(evs);
  REQUIRE(states.size() == 2);
  CHECK(states[1]["snapshot"] == json{{"theme", "dark"}});
}
