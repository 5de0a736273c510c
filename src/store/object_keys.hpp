// Object keys: "/"-separated UTF-8 segments that map onto a directory tree without escaping it. The rules
// every object store path and signed URL applies. Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace agentrt {
inline namespace v1 {

inline constexpr std::string_view kReservedPrefix = ".agentrt-";  // the store's temporary files
inline constexpr size_t kMaxKeyBytes = 1024;
inline constexpr size_t kMaxSegmentBytes = 255;  // NAME_MAX on common filesystems

// Throws Error(invalid_argument) saying which rule `key` breaks: empty, longer than 1024 bytes, absolute,
// a backslash, NUL or other control character, invalid UTF-8, an empty, ".", ".." or >255-byte segment, or a
// segment starting with ".agentrt-" (reserved for the stores' own files and keys).
void validate_object_key(std::string_view key);
// The rule `key` breaks, in words ("is empty", ...), or nullptr when it is a valid key.
const char* object_key_problem(std::string_view key) noexcept;
// Throws Error(invalid_argument) for a list() prefix that could leave a store's root or namespace: longer than
// a key, absolute, a backslash or control byte, or a bad segment before its last '/' (the part after it is
// matched as a plain string prefix).
void validate_key_prefix(std::string_view prefix);

// Throws Error(invalid_argument) for a content type longer than 255 bytes or not printable ASCII.
void validate_content_type(std::string_view content_type);

bool is_control_byte(unsigned char c) noexcept;
// Why `segment` cannot be one segment of a key, or nullptr when it can.
const char* key_segment_problem(std::string_view segment);
// A valid key's segments.
std::vector<std::string> split_key(std::string_view key);

}  // namespace v1
}  // namespace agentrt
