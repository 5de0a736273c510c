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

bool is_control_byte(unsigned char c) noexcept;
// Why `segment` cannot be one segment of a key, or nullptr when it can.
const char* key_segment_problem(std::string_view segment);
// A valid key's segments.
std::vector<std::string> split_key(std::string_view key);

}  // namespace v1
}  // namespace agentrt
