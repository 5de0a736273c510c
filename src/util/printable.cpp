#include "util/printable.hpp"

#include <fmt/format.h>

namespace agentrt {
inline namespace v1 {

std::string printable(std::string_view text, size_t max_bytes) {
  std::string shown;
  for (unsigned char c : text.substr(0, max_bytes)) {
    if (c >= 0x20 && c < 0x7f) {
      shown.push_back(static_cast<char>(c));
    } else {
      shown += fmt::format("\\x{:02x}", c);
    }
  }
  if (text.size() > max_bytes) shown += "...";
  return shown;
}

namespace {

// The length of the control character at text[i] (1, or 2 for a C1 control), or 0 for none.
size_t control_at(std::string_view text, size_t i) noexcept {
  const auto c = static_cast<unsigned char>(text[i]);
  if (c < 0x20 || c == 0x7f) return 1;
  if (c == 0xc2 && i + 1 < text.size()) {
    const auto next = static_cast<unsigned char>(text[i + 1]);
    if (next >= 0x80 && next <= 0x9f) return 2;
  }
  return 0;
}

}  // namespace

bool has_controls(std::string_view text) noexcept {
  for (size_t i = 0; i < text.size(); ++i)
    if (control_at(text, i)) return true;
  return false;
}

std::string escape_controls(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  for (size_t i = 0; i < text.size(); ++i) {
    const size_t n = control_at(text, i);
    if (n == 0) {
      out.push_back(text[i]);
      continue;
    }
    for (size_t k = 0; k < n; ++k) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(text[i + k]));
    i += n - 1;
  }
  return out;
}

}  // namespace v1
}  // namespace agentrt
