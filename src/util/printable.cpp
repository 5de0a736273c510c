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

}  // namespace v1
}  // namespace agentrt
