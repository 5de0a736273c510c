// The SQLite store's packed message rows (src/store/sqlite/message_body.*). Byte 0 even: the rest is a stored body
// — refused, or a message that packs and reads back the same; odd: the rest is a message's JSON text, which, when it
// is a message, packs and reads back as that text reads.
#include <cstdint>
#include <string>

#include "agentrt/error.hpp"
#include "agentrt/events.hpp"
#include "fuzz_support.hpp"
#include "store/sqlite/message_body.hpp"

using namespace agentrt;

namespace {

[[noreturn]] void broken(const std::string& what) { agentrt_fuzz::broken("message_body", what); }

constexpr size_t kDepth = 64;

void round_trip(const Message& m) {
  std::string body;
  if (!sqlite::pack_message(m, body)) return;  // a part list: stored as JSON text
  Message back;
  try {
    back = sqlite::unpack_message(body, kDepth);
  } catch (const Error& e) {
    broken(std::string("a packed message is refused: ") + e.what());
  }
  if (to_json_string(back) != to_json_string(m) || back.has_content != m.has_content)
    broken("a packed message reads back as another");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest = agentrt_fuzz::text_of(data + 1, size - 1);
  Message m;
  try {
    m = data[0] % 2 ? message_from_json_text(rest, kDepth) : sqlite::unpack_message(rest, kDepth);
  } catch (const Error&) {
    return 0;
  } catch (const json::exception&) {
    if (data[0] % 2 == 0) broken("a stored body is refused with a JSON exception, not an Error");
    return 0;
  }
  round_trip(m);
  return 0;
}
