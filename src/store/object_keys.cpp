// The rules for object keys (see fs_object_store.hpp: validate_object_key).
#include "store/object_keys.hpp"

#include "store/fs_object_store.hpp"
#include "util/utf8.hpp"

namespace agentrt {
inline namespace v1 {

bool is_control_byte(unsigned char c) noexcept { return c < 0x20 || c == 0x7f; }

// Why `segment` cannot be one segment of a key, or nullptr when it can.
const char* key_segment_problem(std::string_view segment) {
  if (segment.empty()) return "has an empty segment";
  if (segment == "." || segment == "..") return "has a '.' or '..' segment";
  if (segment.size() > kMaxSegmentBytes) return "has a segment longer than 255 bytes";
  if (segment.substr(0, kReservedPrefix.size()) == kReservedPrefix) return "has a segment starting with '.agentrt-'";
  return nullptr;
}

// Why `key` is not a valid key, or nullptr when it is.
const char* object_key_problem(std::string_view key) noexcept {
  if (key.empty()) return "is empty";
  if (key.size() > kMaxKeyBytes) return "is longer than 1024 bytes";
  if (key.front() == '/') return "is absolute";
  for (unsigned char c : key) {
    if (c == '\\') return "contains a backslash";
    if (c == 0) return "contains a NUL byte";
    if (is_control_byte(c)) return "contains a control character";
  }
  if (!is_valid_utf8(key)) return "is not valid UTF-8";
  size_t start = 0;
  while (true) {
    const size_t slash = key.find('/', start);
    if (const char* problem = key_segment_problem(key.substr(start, slash - start))) return problem;
    if (slash == std::string_view::npos) return nullptr;
    start = slash + 1;
  }
}

std::vector<std::string> split_key(std::string_view key) {
  std::vector<std::string> segments;
  size_t start = 0;
  while (true) {
    const size_t slash = key.find('/', start);
    segments.emplace_back(key.substr(start, slash - start));
    if (slash == std::string_view::npos) return segments;
    start = slash + 1;
  }
}

}  // namespace v1
}  // namespace agentrt
