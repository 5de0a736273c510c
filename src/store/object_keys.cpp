// The rules for object keys (see fs_object_store.hpp: validate_object_key).
#include "store/object_keys.hpp"

#include "store/fs_object_store.hpp"

namespace agentrt {
inline namespace v1 {

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    unsigned char lo = 0x80;
    unsigned char hi = 0xBF;
    if (c < 0x80) {
      len = 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (s.size() - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if (b < lo || b > hi) return false;
      lo = 0x80;
      hi = 0xBF;
    }
    i += len;
  }
  return true;
}

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
