#include "agentrt/json_limits.hpp"

#include <vector>

#include <fmt/format.h>

#include "agentrt/error.hpp"

namespace agentrt {
inline namespace v1 {

size_t json_depth(const json& value, size_t stop_after) noexcept {
  if (!value.is_structured()) return 0;
  // (container, depth of the container)
  std::vector<std::pair<const json*, size_t>> todo{{&value, 1}};
  size_t deepest = 0;
  while (!todo.empty()) {
    auto [v, depth] = todo.back();
    todo.pop_back();
    if (depth > deepest) deepest = depth;
    if (deepest > stop_after) return stop_after + 1;
    for (const auto& child : *v)
      if (child.is_structured()) todo.emplace_back(&child, depth + 1);
  }
  return deepest;
}

size_t json_text_depth(std::string_view text, size_t stop_after) noexcept {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '[':
      case '{':
        if (++depth > deepest) {
          deepest = depth;
          if (deepest > stop_after) return stop_after + 1;
        }
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default: break;
    }
  }
  return deepest;
}

void check_json_depth(const json& value, size_t max_depth, std::string_view what) {
  if (json_depth(value, max_depth) > max_depth)
    throw Error(ErrorCode::invalid_argument, fmt::format("{} is nested deeper than {} levels", what, max_depth));
}

json parse_json_text(std::string_view text, size_t max_depth, std::string_view what) {
  if (json_text_depth(text, max_depth) > max_depth)
    throw Error(ErrorCode::invalid_argument, fmt::format("{} is nested deeper than {} levels", what, max_depth));
  json out = json::parse(text, nullptr, false);
  if (out.is_discarded()) {
    // nlohmann's message says where; parse again with exceptions only for it (the rare, failing case).
    try {
      json again = json::parse(text);
      (void)again;
    } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e309
      throw Error(ErrorCode::invalid_argument, fmt::format("{} is not valid JSON: {}", what, e.what()));
    }
    throw Error(ErrorCode::invalid_argument, fmt::format("{} is not valid JSON", what));
  }
  return out;
}

}  // namespace v1
}  // namespace agentrt
