// The one id rule, for every id a caller names: threads, users, turns, jobs, uploads. An id is 1 to 128
// bytes of A-Z a-z 0-9 _ - . : @ and does not start with '.', so it is one path segment and one object-key
// segment everywhere (no "." or "..", no hidden names, nothing to escape). Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <string_view>

namespace agentrt {
inline namespace v1 {

inline constexpr size_t kMaxIdBytes = 128;

// Why `id` breaks the rule ("is empty", "is longer than 128 bytes", ...), or nullptr when it keeps it.
const char* id_problem(std::string_view id) noexcept;

inline bool is_valid_id(std::string_view id) noexcept { return id_problem(id) == nullptr; }

// Throws Error(invalid_argument) "<what> '<id>' <problem> (ids are 1-128 of A-Z a-z 0-9 _ - . : @, not
// starting with '.')" when `id` breaks the rule; the id is quoted printable and cut to 140 bytes.
void require_id(std::string_view id, std::string_view what);
// The same rule with ids kept to `max_bytes` (at most kMaxIdBytes): for a host that prefixes the ids it is
// given (the server's per-user thread namespaces). The message names that bound: "(ids are 1-<max_bytes> of
// ...)".
void require_id(std::string_view id, std::string_view what, size_t max_bytes);

}  // namespace v1
}  // namespace agentrt
