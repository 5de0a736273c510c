// A provider's opaque state for an answer (ModelResult::encrypted_value: Anthropic's thinking blocks with their
// signatures) travels as AG-UI REASONING_ENCRYPTED_VALUE, is stored in the assistant message's encryptedValue,
// and comes back to the provider on the turn's next request, also after a pause for approval.
#include <doctest/doctest.h>

#include <mutex>

#include "support/runtime_fixture.hpp"

using namespace agentrt;
using namespace agentrt::testing;

TEST_CASE("an answer's encrypted value is stored with its message and sent back on the next request") {
  std::mutex mu;
  std::vector<std::string> seen;  // the encrypted values of the assistant messages each execution request held
  auto script = [&](const ModelRequest& req) {
    if (req.stage != "execution") return text_result("x");
    {
      std::lock_guard<std::mutex> lock(mu);
      std::string s;
      for (const auto& m : req.messages)
        if (m.role == Role::assistant && !m.encrypted_value.empty()) s += m.encrypted_value + ";";
      seen.push_back(s);
    }
    if (!last_tool_result_since_last_user(req)) {
      ModelResult r = tool_call_result("call_1", "book_room", R"({"room":"A1","day":"mon"})");
      r.reasoning = "the user wants a room";
      r.encrypted_value = R"({"provider":"anthropic","blocks":[{"type":"thinking","signature":"c2ln"}]})";
      return r;
    }
    return text_result("booked");
  };
  Harness h(script);
  h.add_book_room();
  auto handle = h.start("t-enc", "book a room");
  auto paused = h.wait(handle.turn_id);
  REQUIRE(paused.status == TurnStatus::waiting_approval);
  Decision d{paused.interrupts.at(0).at("id").get<std::string>(), Decision::Action::approve, std::nullopt, ""};
  h.rt->resume(paused.id, paused.approval_request_id, {d});
  CHECK(h.wait(paused.id).status == TurnStatus::completed);

  const std::string value = R"({"provider":"anthropic","blocks":[{"type":"thinking","signature":"c2ln"}]})";
  REQUIRE(seen.size() == 2);
  CHECK(seen[0] == "");
  CHECK(seen[1] == value + ";");

  auto evs = h.events("t-enc", 2);
  check_agui(evs);
  const json* enc = find_event(evs, "REASONING_ENCRYPTED_VALUE");
  REQUIRE(enc);
  CHECK((*enc)["subtype"] == "message");
  CHECK((*enc)["encryptedValue"] == value);
  // It comes after the reasoning ends and before the message's tool call ends (the message's completion).
  auto types = types_of(evs);
  const auto at = [&](const std::string& t) { return std::find(types.begin(), types.end(), t) - types.begin(); };
  CHECK(at("REASONING_END") < at("REASONING_ENCRYPTED_VALUE"));
  CHECK(at("REASONING_ENCRYPTED_VALUE") < at("TOOL_CALL_END"));

  auto hist = h.rt->history("t-enc");
  REQUIRE(hist.size() == 4);
  CHECK(hist[1].role == Role::assistant);
  CHECK((*enc)["entityId"] == hist[1].id);
  CHECK(hist[1].encrypted_value == value);
  CHECK(json(hist[1])["encryptedValue"] == value);
  CHECK(hist[3].encrypted_value.empty());
  CHECK_FALSE(json(hist[3]).contains("encryptedValue"));
}

TEST_CASE("a message's encryptedValue survives its JSON text form and is refused when not a string") {
  Message m;
  m.id = "m1";
  m.role = Role::assistant;
  m.content = "hi";
  m.encrypted_value = "opaque \"state\"";
  const std::string text = to_json_string(m);
  CHECK(json::parse(text) == json(m));
  CHECK(message_from_json_text(text, 64).encrypted_value == m.encrypted_value);
  auto bad = json::parse(R"({"id":"m2","role":"assistant","content":"x","encryptedValue":5})");
  CHECK_THROWS_AS(message_from_json(bad, 64), Error);
}
