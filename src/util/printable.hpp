// Caller-supplied text quoted in an error message: bounded and escaped, since it may be hostile (control
// characters, invalid UTF-8, megabytes). Thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace agentrt {
inline namespace v1 {

// The first `max_bytes` of `text`, printable ASCII as is and every other byte as \xNN, then "..." if cut.
std::string printable(std::string_view text, size_t max_bytes);

// Whether `text` holds a control character: C0 (a line feed too), DEL, or a C1 control (U+0080-U+009F, 0xC2
// 0x80-0x9F in UTF-8).
bool has_controls(std::string_view text) noexcept;
// `text` with each control character of has_controls() as \xNN (a C1 control as its two bytes), everything else
// (UTF-8 text, invalid bytes) as it is: one line a log record, no terminal commands.
std::string escape_controls(std::string_view text);

}  // namespace v1
}  // namespace agentrt
