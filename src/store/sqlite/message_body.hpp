// The body column of the SQLite store's `messages` table. Since schema 12 a message is stored packed: a BLOB of a
// format byte (kPackedMessage), the role, a byte of flags for the fields that follow, then those fields in a fixed
// order — each string as its length (LEB128) and its bytes, the tool calls as a count and three strings each, the
// metadata as a tree of tagged values. A history read then takes no JSON parse (W3 decodes four messages a thread).
// A message whose content is a part list is stored as JSON text (to_json_string), as every row written before
// schema 12 is; a row's first byte tells the two apart (JSON text starts with '{').
//
// A packed message reads back as the message its JSON text would: a string the JSON writer would mend (ill-formed
// UTF-8, each bad byte U+FFFD) is stored mended, an integer of 0 or more comes back unsigned and a negative one
// signed (as a JSON parser gives them), a number that is not finite comes back null. Thread-safe (pure).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "agentrt/content.hpp"

namespace agentrt {
inline namespace v1 {
namespace sqlite {

constexpr char kPackedMessage = 0x02;

// Appends `m` packed to `out` and returns true; false (nothing appended) for a message stored as JSON text.
bool pack_message(const Message& m, std::string& out);

// The message of a stored body, packed or JSON text. Error(invalid_argument) for a body this build cannot read (a
// damaged one: a length past its end, an unknown role or value tag, ill-formed UTF-8, bytes after its end, or not
// a message at all) or one nested deeper than `max_depth` levels (the message itself is the first).
Message unpack_message(std::string_view body, size_t max_depth);

}  // namespace sqlite
}  // namespace v1
}  // namespace agentrt
