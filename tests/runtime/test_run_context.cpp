// A run's context (TurnInput::context, AG-UI RunAgentInput.context): decoded and limited, given to the model in
// every stage of that run as a section of its system message, replaced by a resume's own, and never stored.
#include <doctest/doctest.h>

#include <mutex>
#include <string>
#include <vector>

#include "agentrt/config.hpp"
#include "agentrt/scripted_model.hpp"
#include "support/runtime_fixture.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {

json agui_input(json context) {
  return json{{"threadId", "t1"},
              {"runId", "r1"},
              {"messages", json::array({{{"id", "m1"}, {"role", "user"}, {"content", "hi"}}})},
              {"context", std::move(context)}};
}

// The system message of every model request, by stage, as the model got it.
struct SystemMessages {
  std::mutex mutex;
  std::vector<std::pair<std::string, std::string>> seen;  // (stage, system message)
  void note(const ModelRequest& req) {
    std::lock_guard lock(mutex);
    for (const auto& m : req.messages)
      if (m.role == Role::system) seen.emplace_back(req.stage, m.content);
  }
  std::vector<std::pair<std::string, std::string>> take() {
    std::lock_guard lock(mutex);
    return std::exchange(seen, {});
  }
};

}  // namespace

TEST_CASE("context_from_agui takes {description, value} strings and refuses anything else, past the limits too") {
  TurnInput t =
      turn_input_from_agui(agui_input(json::array({{{"description", "timezone"}, {"value", "Europe/Paris"}},
                                                   {{"description", "page"}, {"value", "settings\nsecond line"}}})),
                           "u1");
  REQUIRE(t.context.size() == 2);
  CHECK(t.context[0] == ContextEntry{"timezone", "Europe/Paris"});
  CHECK(t.context[1] == ContextEntry{"page", "settings\nsecond line"});
  CHECK(turn_input_from_agui(agui_input(json::array()), "u1").context.empty());
  CHECK(turn_input_from_agui(agui_input(nullptr), "u1").context.empty());

  auto e = error_of([] { turn_input_from_agui(agui_input(json::object()), "u1"); });
  CHECK(e == std::pair{ErrorCode::invalid_argument, std::string("context must be an array of {description, value}")});
  e = error_of([] { turn_input_from_agui(agui_input(json::array({{{"description", "x"}}})), "u1"); });
  CHECK(e == std::pair{ErrorCode::invalid_argument, std::string("context[0]: 'value' must be a string")});
  e = error_of([] {
    turn_input_from_agui(agui_input(json::array({{{"description", "x"}, {"value", "y"}}, {{"description", 1}}})), "u1");
  });
  CHECK(e == std::pair{ErrorCode::invalid_argument, std::string("context[1]: 'description' must be a string")});
  e = error_of([] { turn_input_from_agui(agui_input(json::array({"text"})), "u1"); });
  CHECK(e.first == ErrorCode::invalid_argument);

  InputLimits small;
  small.max_context_entries = 2;
  small.max_context_bytes = 10;
  json three = json::array();
  for (int i = 0; i < 3; ++i) three.push_back({{"description", "d"}, {"value", "v"}});
  e = error_of([&] { context_from_agui(three, small); });
  CHECK(e == std::pair{ErrorCode::too_large, std::string("context: 3 entries; the limit is 2")});
  e = error_of([&] { context_from_agui(json::array({{{"description", "12345"}, {"value", "678901"}}}), small); });
  CHECK(e == std::pair{ErrorCode::too_large, std::string("context: 11 bytes; the limit is 10")});
  CHECK(context_from_agui(json::array({{{"description", "12345"}, {"value", "67890"}}}), small).size() == 1);
}

TEST_CASE("a run's context reaches the model in every stage of that run, and is stored nowhere") {
  SystemMessages systems;
  Harness h([&](const ModelRequest& req) {
    systems.note(req);
    return booking_script(req);
  });
  h.add_book_room(ApprovalPolicy::never());
  h.threads.insert("t-ctx");
  TurnInput in = turn_input("t-ctx", user_message("book it"));
  in.context = {{"The user's timezone", "Europe/Paris"}, {"Open page", "bookings"}};
  auto handle = h.rt->start_turn(in);
  CHECK(h.wait(handle.turn_id).status == TurnStatus::completed);

  const std::string section =
      "Context from the application, for this run:\n- The user's timezone: Europe/Paris\n- Open page: bookings";
  auto seen = systems.take();
  REQUIRE(seen.size() == 3);  // intent, execution (the call), execution (the answer)
  for (const auto& [stage, system] : seen) {
    CHECK_MESSAGE(system.find(section) != std::string::npos, stage << ": " << system);
    CHECK(system.size() >= section.size());
    CHECK(system.substr(system.size() - section.size()) == section);  // the last section
  }
  CHECK(seen[0].first == "intent");

  // Not in history, not in any committed event.
  for (const auto& m : h.rt->history("t-ctx")) CHECK(json(m).dump().find("Europe/Paris") == std::string::npos);
  for (const auto& e : h.rt->events_page("t-ctx", "u1", 0, kMaxEventsPage))
    CHECK(e.json.find("Europe/Paris") == std::string::npos);

  // The next turn, without context: nothing of the first's.
  auto next = h.start("t-ctx", "hello again");
  h.wait(next.turn_id);
  for (const auto& [stage, system] : systems.take())
    CHECK(system.find("Context from the application") == std::string::npos);
}

TEST_CASE("a resumed run is given the resume's context, not the paused run's") {
  SystemMessages systems;
  Harness h([&](const ModelRequest& req) {
    systems.note(req);
    return booking_script(req);
  });
  h.add_book_room();  // needs approval
  h.threads.insert("t-resume");
  TurnInput in = turn_input("t-resume", user_message("book it"));
  in.context = {{"first", "A"}};
  auto handle = h.rt->start_turn(in);
  auto paused = h.wait(handle.turn_id);
  REQUIRE(paused.status == TurnStatus::waiting_approval);
  for (const auto& [stage, system] : systems.take()) CHECK(system.find("- first: A") != std::string::npos);

  Decision approve;
  approve.interrupt_id = "call_1";
  // Past the limits: refused before anything is decided.
  std::vector<ContextEntry> too_many(65, ContextEntry{"d", "v"});
  auto e = error_of([&] { h.rt->resume(paused.id, paused.approval_request_id, {approve}, {}, too_many); });
  CHECK(e == std::pair{ErrorCode::too_large, std::string("context: 65 entries; the limit is 64")});
  CHECK(h.rt->turn(paused.id)->status == TurnStatus::waiting_approval);

  auto done = h.rt->resume_turn(paused.id, paused.approval_request_id, {approve}, {}, {{"second", "B"}});
  CHECK(done.status == TurnStatus::completed);
  CHECK(h.tool_runs == 1);
  auto seen = systems.take();
  REQUIRE(seen.size() == 1);  // the answer after the tool
  CHECK(seen[0].second.find("- second: B") != std::string::npos);
  CHECK(seen[0].second.find("- first: A") == std::string::npos);
}

TEST_CASE("start_turn refuses a context past the runtime's limits and stores nothing; 0 refuses any") {
  Harness h(booking_script, [](RuntimeConfig& c) { c.max_context_bytes = 16; });
  TurnInput in = turn_input("t-limit", user_message("hi"));
  in.context = {{"description", "0123456789"}};
  auto e = error_of([&] { h.rt->start_turn(in); });
  CHECK(e == std::pair{ErrorCode::too_large, std::string("context: 21 bytes; the limit is 16")});
  CHECK_FALSE(h.rt->thread("t-limit").has_value());

  Harness none(booking_script, [](RuntimeConfig& c) { c.max_context_entries = 0; });
  in.context = {{"a", "b"}};
  e = error_of([&] { none.rt->start_turn(in); });
  CHECK(e == std::pair{ErrorCode::too_large, std::string("context: 1 entries; the limit is 0")});

  // The config keys.
  auto cfg = runtime_config_from_json(
      json{{"data_dir", h.dir.file("cfg")}, {"max_context_entries", 3}, {"max_context_bytes", 100}});
  CHECK(cfg.max_context_entries == 3);
  CHECK(cfg.max_context_bytes == 100);
  e = error_of([&] { runtime_config_from_json(json{{"data_dir", h.dir.file("cfg")}, {"max_context_entries", -1}}); });
  CHECK(e.first == ErrorCode::invalid_argument);
}

TEST_CASE("the demo model quotes the context it was given when asked about it") {
  Harness h(booking_script, [](RuntimeConfig& c) { c.model = make_demo_model(); });
  h.threads.insert("t-demo");
  TurnInput in = turn_input("t-demo", user_message("what context do you have?"));
  in.context = {{"theme", "dark"}};
  h.wait(h.rt->start_turn(in).turn_id);
  auto hist = h.rt->history("t-demo");
  REQUIRE(hist.size() == 2);
  CHECK(hist[1].content == "The application told me, for this run:\n- theme: dark");
  h.wait(h.start("t-demo", "and now, any context?").turn_id);
  hist = h.rt->history("t-demo");
  CHECK(hist.back().content == "The application told me nothing for this run (no context).");
}
