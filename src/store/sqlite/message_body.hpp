// The body column of the SQLite store's `messages` table. Since schema 12 a message is stored packed: a BLOB of a
// format byte (kPackedMessage), the role, a byte of flags for the fields that follow, then those fields in a fixed
// order — each string as its length (LEB128) and its bytes, the tool calls as a count and three strings each, the
// metadata as a tree of tagged values. A history read then takes no JSON parse (W3 decodes four messages a thread).
// A message whose content is a part list is stored as JSON text (to_json_string), as every row written before
// schema 12 is; a row's first byte tells the two apart (JSON text starts with '{').
//
// Since schema 13 a row holds the consecutive messages of one run in one commit (a W2 run's twelve are one row, one
// insert): one is stored as above; two or more as a group, kPackedMessages, their count (LEB128), then each one's
// length (LEB128) and body as above. The row's rowid is its thread's span plus the index of its last message, its
// `idx` column the index of its first.
//
// A packed message reads back as the message its JSON text would: a string the JSON writer would mend (ill-formed
// UTF-8, each bad byte U+FFFD) is stored mended, an integer of 0 or more comes back unsigned and a negative one
// signed (as a JSON parser gives them), a number that is not finite comes back null. Thread-safe (pure).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agentrt/content.hpp"
#include "agentrt/storage.hpp"

namespace agentrt {
inline namespace v1 {
namespace sqlite {

constexpr char kPackedMessage = 0x02;
constexpr char kPackedMessages = 0x03;

// Appends `m` packed to `out` and returns true; false (nothing appended) for a message stored as JSON text.
bool pack_message(const Message& m, std::string& out);

// Where the row that starts at messages[from] ends: past the messages after it of the same run and turn.
size_t row_end(std::span<const MessageRecord> messages, size_t from);

// Appends the body of a row that holds `messages` (one or more) to `out`, and returns whether it is a BLOB (else
// JSON text: one message stored as JSON text).
bool pack_row(std::span<const MessageRecord> messages, std::string& out);

// The bodies of a row's messages, in order, into `parts` (cleared first): the row's own body, or each one of a
// group. Error(invalid_argument) for a group whose count or lengths run past its end, or that holds fewer than two.
void split_row(std::string_view body, std::vector<std::string_view>& parts);

// The message of a stored body, packed or JSON text. Error(invalid_argument) for a body this build cannot read (a
// damaged one: a length past its end, an unknown role or value tag, ill-formed UTF-8, bytes after its end, or not
// a message at all) or one nested deeper than `max_depth` levels (the message itself is the first).
Message unpack_message(std::string_view body, size_t max_depth);

}  // namespace sqlite
}  // namespace v1
}  // namespace agentrt
