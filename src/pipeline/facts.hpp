// Reading the runtime's facts (metadata.agentrt) and other event JSON in the projector: a member, or a string
// member, of an object that may be anything (a value of the wrong type reads as absent).
#pragma once

#include <string>
#include <string_view>

#include "agentrt/json.hpp"

namespace agentrt {
inline namespace v1 {
namespace projection {

inline const json* member(const json& j, std::string_view key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

inline std::string text_of(const json& j, std::string_view key) {
  const json* v = member(j, key);
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

}  // namespace projection
}  // namespace v1
}  // namespace agentrt
