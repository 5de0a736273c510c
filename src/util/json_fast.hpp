// Parsing the JSON this library stores and reads back on every turn (turn rows, messages, ledger decisions,
// events): simdjson reads the text and its DOM is copied into nlohmann's value, about three times as fast as
// nlohmann's own parser. It gives exactly what nlohmann's parser gives (tested against it on the fixture and
// JSON-Schema corpora); what simdjson cannot give so (an error, an integer beyond 64 bits, -0) is handed to
// nlohmann's parser, errors included. A text nested deeper than `max_depth` (json_limits.hpp) is refused
// before anything is built: a stored row written by an older build or a hostile host can neither overflow the
// stack of whoever copies the value nor be taken as valid. Thread-safe (a parser per thread).
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
// Throws the Error parse_json throws for a text nested deeper than max_depth (for readers of other encodings of
// the same values, which refuse as it does).
[[noreturn]] void throw_too_deep(size_t max_depth);

}  // namespace v1
}  // namespace agentrt
