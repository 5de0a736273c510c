// The rules for object keys (object_keys.hpp).
#include "store/object_keys.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "agentrt/error.hpp"
#include "util/printable.hpp"
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

void validate_object_key(std::string_view key) {
  if (const char* problem = object_key_problem(key)) {
    throw Error(ErrorCode::invalid_argument,
                fmt::format("invalid object key '{}': it {}", printable(key, 120), problem));
  }
}

void validate_content_type(std::string_view content_type) {
  if (content_type.size() > 255) {
    throw Error(ErrorCode::invalid_argument,
                fmt::format("content type of {} bytes is longer than 255 bytes", content_type.size()));
  }
  for (unsigned char c : content_type) {
    if (c < 0x20 || c > 0x7e) {
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("content type '{}' must be printable ASCII", printable(content_type, 120)));
    }
  }
}

void validate_key_prefix(std::string_view prefix) {
  if (prefix.size() > kMaxKeyBytes || (!prefix.empty() && prefix.front() == '/') ||
      std::any_of(prefix.begin(), prefix.end(),
                  [](char c) { return c == '\\' || is_control_byte(static_cast<unsigned char>(c)); })) {
    throw Error(ErrorCode::invalid_argument, fmt::format("invalid object key prefix '{}'", printable(prefix, 120)));
  }
  const size_t last_slash = prefix.rfind('/');
  if (last_slash == std::string_view::npos) return;
  for (const std::string& segment : split_key(prefix.substr(0, last_slash))) {
    if (const char* problem = key_segment_problem(segment)) {
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("invalid object key prefix '{}': it {}", printable(prefix, 120), problem));
    }
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
