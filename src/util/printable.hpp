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

}  // namespace v1
}  // namespace agentrt
