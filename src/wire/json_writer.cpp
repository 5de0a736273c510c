// The compact JSON writer behind every text the library stores or streams (agentrt/events.hpp declares it):
// valid UTF-8 out whatever comes in, and several times faster than json::dump().
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "agentrt/events.hpp"
#include "util/utf8.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

// Whether a JSON string holds each byte as it is: printable ASCII but '"' and '\\'.
constexpr std::array<bool, 256> kPlain = [] {
  std::array<bool, 256> plain{};
  for (int c = 0x20; c < 0x80; ++c) plain[c] = c != '"' && c != '\\';
  return plain;
}();

// The bytes of the word at p that a JSON string cannot hold as they are, each as its high bit: one below 0x20
// (below 0x20 when 0x20 is taken from every byte that has no high bit: its high bit then comes on), one of 0x80
// or above, a quote or a backslash. A borrow only marks bytes above the first marked one, so the lowest mark is
// exact.
uint64_t special8(const unsigned char* p) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL, kHighs = 0x8080808080808080ULL;
  auto has_zero = [](uint64_t v) { return (v - kOnes) & ~v & kHighs; };
  uint64_t w;
  std::memcpy(&w, p, 8);
  if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);  // byte 0 lowest
  return (((w - kOnes * 0x20) & ~w) | w | has_zero(w ^ (kOnes * '"')) | has_zero(w ^ (kOnes * '\\'))) & kHighs;
}

// Where the run of bytes at `p` (n of them) that a JSON string holds as they are ends: printable ASCII but '"'
// and '\\'. Sixteen bytes a step where SSE2 is there, else eight, the last step over the text's last bytes
// (those it shares with the step before are plain: they mark nothing); a text under eight bytes byte by byte.
size_t plain_run(const unsigned char* p, size_t n) {
#if defined(__SSE2__)
  if (n >= 16) {
    // A signed compare: a byte of 0x80 or above is negative, below 0x20 like a control character.
    auto special16 = [](const unsigned char* q) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
      return _mm_movemask_epi8(
          _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                       _mm_cmplt_epi8(v, _mm_set1_epi8(0x20))));
    };
    size_t j = 0;
    for (; j + 16 <= n; j += 16)
      if (const int mask = special16(p + j)) return j + static_cast<size_t>(__builtin_ctz(mask));
    if (j == n) return n;
    const int mask = special16(p + n - 16);
    return mask ? n - 16 + static_cast<size_t>(__builtin_ctz(mask)) : n;
  }
#endif
  if (n >= 8) {
    size_t j = 0;
    for (; j + 8 <= n; j += 8)
      if (const uint64_t mask = special8(p + j)) return j + static_cast<size_t>(__builtin_ctzll(mask)) / 8;
    if (j == n) return n;
    const uint64_t mask = special8(p + n - 8);
    return mask ? n - 8 + static_cast<size_t>(__builtin_ctzll(mask)) / 8 : n;
  }
  size_t j = 0;
  while (j < n && kPlain[p[j]]) ++j;
  return j;
}

// The escape of each byte below 0x80 that a JSON string cannot hold as it is, after its backslash: 'u' for
// \u00XX; 0 for a byte held as it is.
constexpr std::array<char, 128> kEscapes = [] {
  std::array<char, 128> e{};
  for (int c = 0; c < 0x20; ++c) e[c] = 'u';
  e['"'] = '"';
  e['\\'] = '\\';
  e['\n'] = 'n';
  e['\r'] = 'r';
  e['\t'] = 't';
  e['\b'] = 'b';
  e['\f'] = 'f';
  return e;
}();

template <class Int>
void append_integer(std::string& out, Int v) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, v).ptr;
  out.append(digits, static_cast<size_t>(end - digits));
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = plain_run(p, n);
  if (i == n) {
    // Most strings (keys, ids) need no escape: the quotes and the text in one append and one copy.
    const size_t at = out.size();
    out.append(n + 2, '"');
    if (n > 0) std::memcpy(out.data() + at + 1, p, n);
    return;
  }
  out.reserve(out.size() + n + 8);
  out += '"';
  out.append(s.data(), i);
  for (;;) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      const char e = kEscapes[c];
      if (e == 'u') {
        const char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
        out.append(esc, 6);
      } else {
        const char esc[2] = {'\\', e};
        out.append(esc, 2);
      }
      ++i;
    } else if (const size_t len = utf8_sequence_length(s.substr(i))) {
      out.append(s.data() + i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";  // anything else: U+FFFD
      ++i;
    }
    // The longest run that needs no escaping, in one append.
    const size_t j = i + plain_run(p + i, n - i);
    out.append(s.data() + i, j - i);
    if (j == n) break;
    i = j;
  }
  out += '"';
}

namespace {

// `lead` ('{' before the first member, ',' before the others), the key as a JSON string and its ':', in one
// append when the key needs no escape.
void append_member_key(std::string& out, char lead, std::string_view key) {
  const auto* p = reinterpret_cast<const unsigned char*>(key.data());
  const size_t n = key.size();
  if (plain_run(p, n) != n) {
    out += lead;
    append_json_string(out, key);
    out += ':';
    return;
  }
  const size_t at = out.size();
  out.append(n + 4, '"');
  char* d = out.data() + at;
  d[0] = lead;
  if (n > 0) std::memcpy(d + 2, p, n);
  d[n + 3] = ':';
}

}  // namespace

void append_json(std::string& out, const json& j) {
  switch (j.type()) {
    case json::value_t::null:
    case json::value_t::discarded: out += "null"; return;
    case json::value_t::boolean: out += j.get<bool>() ? "true" : "false"; return;
    case json::value_t::number_integer: append_integer(out, j.get<int64_t>()); return;
    case json::value_t::number_unsigned: append_integer(out, j.get<uint64_t>()); return;
    case json::value_t::number_float: {
      double d = j.get<double>();
      if (!std::isfinite(d)) {
        out += "null";
        return;
      }
      out += j.dump();
      return;
    }
    case json::value_t::string: append_json_string(out, j.get_ref<const std::string&>()); return;
    case json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& v : j) {
        if (!first) out += ',';
        first = false;
        append_json(out, v);
      }
      out += ']';
      return;
    }
    case json::value_t::object: {
      char lead = '{';
      for (const auto& [key, value] : j.get_ref<const json::object_t&>()) {
        append_member_key(out, lead, key);
        lead = ',';
        append_json(out, value);
      }
      out += lead == '{' ? "{}" : "}";
      return;
    }
    case json::value_t::binary: out += j.dump(); return;
  }
}

}  // namespace v1
}  // namespace agentrt
