// The SQLite store's packed message rows (src/store/sqlite/message_body.*). Byte 0 even: the rest is a stored row's
// body — refused, or messages that pack (alone and as one row) and read back the same; odd: the rest is a message's
// JSON text, which, when it is a message, packs and reads back as that text reads.
#include <cstdint>
#include <string>
#include <vector>

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

// The messages, packed as one row, split and read back the same.
void row_round_trip(const std::vector<MessageRecord>& messages) {
  std::string body;
  sqlite::pack_row(messages, body);
  std::vector<std::string_view> parts;
  try {
    sqlite::split_row(body, parts);
    if (parts.size() != messages.size()) broken("a row splits into another count of messages");
    for (size_t i = 0; i < parts.size(); ++i)
      if (to_json_string(sqlite::unpack_message(parts[i], kDepth)) != to_json_string(messages[i].message))
        broken("a row's message reads back as another");
  } catch (const Error& e) {
    broken(std::string("a packed row is refused: ") + e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest = agentrt_fuzz::text_of(data + 1, size - 1);
  std::vector<MessageRecord> messages;
  try {
    if (data[0] % 2) {
      messages.push_back(MessageRecord{"t", 0, "turn", "run", message_from_json_text(rest, kDepth)});
    } else {
      std::vector<std::string_view> parts;
      sqlite::split_row(rest, parts);
      for (const auto part : parts)
        messages.push_back(MessageRecord{"t", 0, "turn", "run", sqlite::unpack_message(part, kDepth)});
    }
  } catch (const Error&) {
    return 0;
  } catch (const json::exception&) {
    if (data[0] % 2 == 0) broken("a stored body is refused with a JSON exception, not an Error");
    return 0;
  }
  for (const auto& m : messages) round_trip(m.message);
  row_round_trip(messages);
  return 0;
}
