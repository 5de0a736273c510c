// The compact JSON writer behind every text the library stores or streams (agentrt/events.hpp declares it):
// valid UTF-8 out whatever comes in, and several times faster than json::dump().
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "agentrt/events.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

// The length of the run at `p` (at most n bytes) that a JSON string holds as it is: printable ASCII but '"' and
// '\\'. Eight bytes a step while all eight are (a word's bytes tested at once), then byte by byte.
size_t plain_run(const unsigned char* p, size_t n) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL, kHighs = 0x8080808080808080ULL;
  auto has_zero = [](uint64_t v) { return (v - kOnes) & ~v & kHighs; };
  size_t j = 0;
  for (; j + 8 <= n; j += 8) {
    uint64_t w;
    std::memcpy(&w, p + j, 8);
    // A byte below 0x20 (below 0x20 when 0x20 is taken from every byte that has no high bit: its high bit
    // then comes on), one of 0x80 or above, a quote or a backslash.
    const uint64_t special = ((w - kOnes * 0x20) & ~w) | w | has_zero(w ^ (kOnes * '"')) | has_zero(w ^ (kOnes * '\\'));
    if (special & kHighs) break;
  }
  while (j < n && p[j] >= 0x20 && p[j] < 0x80 && p[j] != '"' && p[j] != '\\') ++j;
  return j;
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  out += '"';
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    // Copy the longest run that needs no escaping in one append.
    const size_t j = i + plain_run(p + i, n - i);
    if (j > i) {
      out.append(s.data() + i, j - i);
      i = j;
      if (i == n) break;
    }
    unsigned char c = p[i];
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20) {
            out += "\\u00";
            out += hex[c >> 4];
            out += hex[c & 15];
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    // Multi-byte UTF-8: copy a well-formed sequence, replace anything else with U+FFFD.
    size_t len = 0;
    uint32_t cp = 0;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    }
    bool ok = len != 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80)
        ok = false;
      else
        cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (ok) {
      if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
          (cp >= 0xD800 && cp <= 0xDFFF))
        ok = false;
    }
    if (ok) {
      out.append(s.data() + i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  out += '"';
}

void append_json(std::string& out, const json& j) {
  switch (j.type()) {
    case json::value_t::null:
    case json::value_t::discarded: out += "null"; return;
    case json::value_t::boolean: out += j.get<bool>() ? "true" : "false"; return;
    case json::value_t::number_integer: fmt::format_to(std::back_inserter(out), "{}", j.get<int64_t>()); return;
    case json::value_t::number_unsigned: fmt::format_to(std::back_inserter(out), "{}", j.get<uint64_t>()); return;
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
      out += '{';
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (!first) out += ',';
        first = false;
        append_json_string(out, it.key());
        out += ':';
        append_json(out, it.value());
      }
      out += '}';
      return;
    }
    case json::value_t::binary: out += j.dump(); return;
  }
}

}  // namespace v1
}  // namespace agentrt
