#include "util/utf8.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace agentrt {
inline namespace v1 {

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

}  // namespace v1
}  // namespace agentrt
