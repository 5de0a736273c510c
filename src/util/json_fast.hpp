// A parser for the JSON this library stores and reads back on every turn (turn rows, messages, ledger
// decisions): objects, arrays, ASCII strings with the short escapes, integers, literals. It gives exactly
// what nlohmann's parser gives (tested against it on the fixture and JSON-Schema corpora), several times
// faster: strings are copied in one piece instead of character by character. Anything else in the text (a
// float, a \u escape, a non-ASCII byte, an error, nesting over 256 levels) hands the whole text to
// nlohmann's parser, so every text parses as nlohmann would parse it, errors included.
#pragma once

#include <string_view>

#include "agentrt/json.hpp"

namespace agentrt {
inline namespace v1 {

// As json::parse(text): throws nlohmann's parse_error on invalid JSON.
json parse_json(std::string_view text);
// As json::parse(text, nullptr, false): a discarded value on invalid JSON.
json parse_json_or_discarded(std::string_view text);

}  // namespace v1
}  // namespace agentrt
