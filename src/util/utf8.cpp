#include "util/utf8.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace agentrt {
inline namespace v1 {

size_t utf8_sequence_length(std::string_view at) {
  const auto* p = reinterpret_cast<const unsigned char*>(at.data());
  const size_t n = at.size();
  if (n == 0) return 0;
  const unsigned char c = p[0];
  if (c < 0x80) return 1;
  size_t len = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;  // not overlong
    if (c == 0xED) hi = 0x9F;  // not a surrogate
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;  // not overlong
    if (c == 0xF4) hi = 0x8F;  // not beyond U+10FFFF
  } else {
    return 0;
  }
  if (n < len) return 0;
  for (size_t k = 1; k < len; ++k) {
    if (p[k] < lo || p[k] > hi) return 0;
    lo = 0x80;
    hi = 0xBF;
  }
  return len;
}

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // ASCII eight bytes a step (no byte with its high bit), and an ASCII rest under eight at once.
    for (uint64_t w; i + 8 <= s.size(); i += 8) {
      std::memcpy(&w, s.data() + i, 8);
      if (w & 0x8080808080808080ULL) break;
    }
    if (s.size() - i < 8) {
      unsigned char any = 0;
      for (size_t k = i; k < s.size(); ++k) any |= static_cast<unsigned char>(s[k]);
      if (any < 0x80) return true;
    }
    const size_t len = utf8_sequence_length(s.substr(i));
    if (len == 0) return false;
    i += len;
  }
  return true;
}

}  // namespace v1
}  // namespace agentrt
