// A parser for the JSON this library stores and reads back on every turn (turn rows, messages, ledger
// decisions): objects, arrays, ASCII strings with the short escapes, integers, literals. It gives exactly
// what nlohmann's parser gives (tested against it on the fixture and JSON-Schema corpora), several times
// faster: strings are copied in one piece instead of character by character. Anything else in the text (a
// float, a \u escape, a non-ASCII byte, an error, nesting over 256 levels) hands the whole text to
// nlohmann's parser, so every text parses as nlohmann would parse it, errors included. A text nested deeper
// than `max_depth` (json_limits.hpp) is refused before anything is built: a stored row written by an older
// build or a hostile host can neither overflow the stack of whoever copies the value nor be taken as valid.
#pragma once

#include <cstddef>
#include <string_view>

#include "agentrt/json.hpp"
#include "agentrt/json_limits.hpp"

namespace agentrt {
inline namespace v1 {

// As json::parse(text): throws what nlohmann's parser throws on invalid JSON (parse_error; out_of_range for a
// number like 1e309), and Error(invalid_argument) "JSON text
// is nested deeper than <max_depth> levels" for a text nested deeper.
json parse_json(std::string_view text, size_t max_depth = kMaxStoredJsonDepth);
// As json::parse(text, nullptr, false): a discarded value on invalid JSON and on a text nested deeper than
// max_depth.
json parse_json_or_discarded(std::string_view text, size_t max_depth = kMaxStoredJsonDepth);

}  // namespace v1
}  // namespace agentrt
