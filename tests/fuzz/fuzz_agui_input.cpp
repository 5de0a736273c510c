// The AG-UI decoders of host input (src/runtime/runtime.cpp, src/core/content.cpp): any JSON value, nested
// as deep as it comes (the value is built by nlohmann's iterative parser, as a host would), through
// turn_input_from_agui, decisions_from_agui_resume, Decision and Message from_json. They refuse with
// Error only; a decoded message writes (to_json and the store's to_json_string) the same JSON, which decodes
// to the same message again.
#include <cstdint>
#include <string>

#include "agentrt/content.hpp"
#include "agentrt/error.hpp"
#include "agentrt/runtime.hpp"
#include "fuzz_support.hpp"

using namespace agentrt;

namespace {

[[noreturn]] void broken(const std::string& what) { agentrt_fuzz::broken("agui_input", what); }

void round_trip(const Message& m) {
  const json once = m;
  const json text = json::parse(to_json_string(m), nullptr, false);
  if (text.is_discarded() || text != once) broken("to_json_string(message) is not to_json(message): " + once.dump());
  Message again;
  try {
    again = message_from_json(once, kMaxStoredJsonDepth);
  } catch (const Error& e) {
    broken(std::string("a decoded message does not decode again: ") + e.what() + ": " + once.dump());
  }
  if (json(again) != once) broken("a decoded message decodes to another message: " + once.dump());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const json j = json::parse(agentrt_fuzz::text_of(data, size), nullptr, false);
  if (j.is_discarded()) return 0;
  try {
    TurnInput t = turn_input_from_agui(j, "u1");
    if (t.message.role != Role::user) broken("the turn's input is not a user message");
    round_trip(t.message);
  } catch (const Error&) {
  }
  try {
    const json* resume = &j;
    if (j.is_object())
      if (auto it = j.find("resume"); it != j.end()) resume = &*it;
    for (const auto& d : decisions_from_agui_resume(*resume))
      if (d.interrupt_id.empty() && !resume->is_array()) broken("a decision without an array");
  } catch (const Error&) {
  }
  try {
    (void)j.get<Decision>();
  } catch (const Error&) {
  }
  try {
    round_trip(j.get<Message>());
  } catch (const Error&) {
  }
  return 0;
}
