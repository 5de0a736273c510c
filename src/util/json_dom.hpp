// simdjson's DOM for the readers that take a stored row's fields without building nlohmann values for all of it
// (the history read path: a message's id, role and text as strings, only its metadata as nlohmann's value).
// Same texts, same values, same limits as parse_json (json_fast.hpp): a text simdjson cannot give exactly as
// nlohmann would is left to parse_json. Thread-safe (a parser per thread); a parsed DOM is valid until the
// thread's next parse_dom.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include <simdjson.h>

#include "agentrt/json.hpp"

namespace agentrt {
inline namespace v1 {

// The text's root element, or nullopt when parse_json must read it (invalid JSON, an integer beyond 64 bits,
// -0, a text over 1 MiB, a limit above simdjson's own). Throws Error(invalid_argument) "JSON text is nested
// deeper than <max_depth> levels" when simdjson finds it nested deeper than its own limit.
std::optional<simdjson::dom::element> parse_dom(std::string_view text, size_t max_depth);

// `e`, found `depth` levels down, as nlohmann's value; throws Error(invalid_argument) as above when a container
// in it lies deeper than `max_depth`.
json dom_to_json(simdjson::dom::element e, size_t depth, size_t max_depth);

}  // namespace v1
}  // namespace agentrt
