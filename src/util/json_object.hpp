// A JSON object made member by member. nlohmann's json{{"key", value}, ...} first makes every member a
// two-element array (a vector, the key as a JSON string) and then moves it into the map: twice the allocations
// of making each member where it stays, which is what json_object does. For the objects made on every turn.
#pragma once

#include <cstddef>
#include <utility>

#include "agentrt/json.hpp"

namespace agentrt {
inline namespace v1 {

namespace json_object_detail {

inline void add(json::object_t&) {}

template <class Key, class Value, class... Rest>
void add(json::object_t& members, Key&& key, Value&& value, Rest&&... rest) {
  members.emplace(std::forward<Key>(key), std::forward<Value>(value));
  add(members, std::forward<Rest>(rest)...);
}

}  // namespace json_object_detail

// json_object("a", 1, "b", text): the keys and values in turn (a repeated key keeps its first value).
template <class... KeysAndValues>
json json_object(KeysAndValues&&... members) {
  static_assert(sizeof...(KeysAndValues) % 2 == 0, "json_object takes a value for every key");
  json out = json::object();
  json_object_detail::add(out.get_ref<json::object_t&>(), std::forward<KeysAndValues>(members)...);
  return out;
}

}  // namespace v1
}  // namespace agentrt
