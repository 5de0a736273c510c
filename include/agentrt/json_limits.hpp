// Limits on JSON that enters agentrt from outside (HTTP bodies, C ABI arguments, config files, tool results,
// model output, rows read back): nesting depth and size, checked without recursion so that a hostile text can
// neither exhaust the stack nor the memory of whoever copies or prints the value afterwards.
#pragma once

#include <cstddef>
#include <string_view>

#include "agentrt/json.hpp"

namespace agentrt {
inline namespace v1 {

// The nesting limit used wherever JSON enters (RuntimeConfig::max_json_depth; the server's and the C ABI's).
inline constexpr size_t kDefaultMaxJsonDepth = 64;
// The largest nesting limit a configuration may set (config key max_json_depth: 1 to this).
inline constexpr size_t kMaxConfigurableJsonDepth = 256;
// The limit on JSON read back from the library's own storage (rows, conversation documents, payloads): an
// input within kMaxConfigurableJsonDepth stays within it once wrapped in the stored envelopes. Deeper stored
// text (an older build's, or a hostile writer's) is refused, never built.
inline constexpr size_t kMaxStoredJsonDepth = 2 * kMaxConfigurableJsonDepth;

// The nesting depth of a value: 0 for a scalar, 1 for [] or {} of scalars, and so on. Iterative; stops
// counting once the depth passes `stop_after` (and returns stop_after + 1).
size_t json_depth(const json& value, size_t stop_after = static_cast<size_t>(-1)) noexcept;

// The nesting depth of a JSON text, by a scan of its brackets outside strings (the text need not be valid).
size_t json_text_depth(std::string_view text, size_t stop_after = static_cast<size_t>(-1)) noexcept;

// Throws Error(invalid_argument) "<what> is nested deeper than <max_depth> levels" when it is.
void check_json_depth(const json& value, size_t max_depth, std::string_view what);

// Parses `text` as JSON after checking its nesting (before anything is built). Throws Error(invalid_argument)
// naming `what` for a text that is not JSON or is nested deeper than max_depth.
json parse_json_text(std::string_view text, size_t max_depth, std::string_view what);

}  // namespace v1
}  // namespace agentrt
