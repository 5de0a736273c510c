// The runtime writes its most frequent events straight from their fields (runtime/event_wire.hpp); the
// text must be exactly what the Event serializer gives, for any strings.
#include <doctest/doctest.h>

#include "agentrt/events.hpp"
#include "runtime/event_wire.hpp"

using namespace agentrt;

namespace {

constexpr int64_t kTs = 1796034781027;

std::string via_event(Event e, int64_t ts = kTs) {
  e.timestamp = ts;
  return to_json_string(e);
}

}  // namespace

TEST_CASE("the runtime's direct event texts equal the Event serializer's, byte for byte") {
  const std::vector<std::string> samples = {"",
                                            "execution",
                                            "call_1",
                                            "msg_8f3ff75882a9b54a10b02de92a51d327",
                                            "quote \" and \\ backslash",
                                            "new\nline\ttab\r\b\f",
                                            std::string("nul\0byte", 8),
                                            "\x01\x1f control",
                                            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
                                            "bad \xff\xfe utf-8 \xc3",
                                            R"({"room":"A1","day":"mon","step":1})"};
  for (const auto& a : samples) {
    for (const auto& b : samples) {
      CAPTURE(a);
      CAPTURE(b);
      CHECK(wire::step_started(a, kTs) == via_event(events::step_started(a)));
      CHECK(wire::step_finished(a, kTs) == via_event(events::step_finished(a)));
      CHECK(wire::text_start(a, kTs) == via_event(events::text_start(a)));
      CHECK(wire::text_content(a, b, kTs) == via_event(events::text_content(a, b)));
      CHECK(wire::tool_call_start(a, b, a, kTs) == via_event(events::tool_call_start(a, b, a)));
      CHECK(wire::tool_call_start(a, b, "", kTs) == via_event(events::tool_call_start(a, b, "")));
      CHECK(wire::tool_call_args(a, b, kTs) == via_event(events::tool_call_args(a, b)));
      CHECK(wire::tool_call_end(a, kTs) == via_event(events::tool_call_end(a)));
    }
  }
  // No timestamp: left out, as the serializer leaves out a zero one.
  CHECK(wire::tool_call_end("c", 0) == via_event(events::tool_call_end("c"), 0));
  CHECK(wire::text_content("m", "d", 0) == via_event(events::text_content("m", "d"), 0));
  CHECK(wire::tool_call_args("c", "{", 0) == via_event(events::tool_call_args("c", "{"), 0));
  CHECK(wire::text_content("m", "d", -5) == via_event(events::text_content("m", "d"), -5));
  // And the texts are AG-UI events that parse back to what went in.
  auto e = event_from_json(json::parse(wire::tool_call_start("call_9", "book_room", "msg_1", kTs)));
  CHECK(e.type == EventType::TOOL_CALL_START);
  CHECK(e.tool_call_id == "call_9");
  CHECK(e.tool_call_name == "book_room");
  CHECK(e.parent_message_id == "msg_1");
  CHECK(e.timestamp == kTs);
}
