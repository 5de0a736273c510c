#include "agentrt/json_reader.hpp"

#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "util/printable.hpp"

namespace agentrt {
inline namespace v1 {
namespace wire {

void refuse(std::string_view where, std::string_view what) {
  if (where.empty()) throw Error(ErrorCode::invalid_argument, std::string(what));
  throw Error(ErrorCode::invalid_argument, fmt::format("{}: {}", where, what));
}

JsonReader::JsonReader(const json& value, std::string_view where) : value_(value), where_(where) {
  if (!value_.is_object()) throw Error(ErrorCode::invalid_argument, fmt::format("{} must be a JSON object", where_));
}

void JsonReader::only_keys(std::initializer_list<std::string_view> keys, std::string_view also) const {
  for (auto it = value_.begin(); it != value_.end(); ++it) {
    bool known = false;
    for (std::string_view k : keys) known = known || it.key() == k;
    if (!known) unknown_key(it.key(), fmt::format("{}{}{}", fmt::join(keys, ", "), also.empty() ? "" : "; ", also));
  }
}

const json* JsonReader::find(std::string_view key) const {
  auto it = value_.find(key);
  return it == value_.end() ? nullptr : &*it;
}

const json& JsonReader::required(std::string_view key) const {
  const json* v = find(key);
  if (!v) fail(fmt::format("'{}' is required", key));
  return *v;
}

const std::string& JsonReader::required_string(std::string_view key) const {
  const json& v = required(key);
  if (!v.is_string()) wrong_type(key, "a string");
  return v.get_ref<const std::string&>();
}

std::string JsonReader::optional_string(std::string_view key) const {
  const json* v = find(key);
  if (!v) return {};
  if (!v->is_string()) wrong_type(key, "a string");
  return v->get<std::string>();
}

json JsonReader::optional_object(std::string_view key) const {
  const json* v = find(key);
  if (!v) return nullptr;
  if (!v->is_object()) wrong_type(key, "a JSON object");
  return *v;
}

std::optional<bool> JsonReader::optional_bool(std::string_view key) const {
  const json* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) wrong_type(key, "a boolean");
  return v->get<bool>();
}

std::optional<int64_t> JsonReader::optional_integer(std::string_view key, int64_t lo, int64_t hi) const {
  const json* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_number_integer() || v->get<int64_t>() < lo || v->get<int64_t>() > hi)
    wrong_value(key, fmt::format("an integer from {} to {}", lo, hi), *v);
  return v->get<int64_t>();
}

void JsonReader::wrong_type(std::string_view key, std::string_view kind) const {
  fail(fmt::format("'{}' must be {}", key, kind));
}

void JsonReader::wrong_value(std::string_view key, std::string_view want, const json& value) const {
  fail(fmt::format("'{}' must be {}, not {}", key, want,
                   printable(value.dump(-1, ' ', false, json::error_handler_t::replace), 60)));
}

void JsonReader::unknown_key(std::string_view key, std::string_view known) const {
  fail(fmt::format("unknown key '{}' ({})", key, known));
}

}  // namespace wire
}  // namespace v1
}  // namespace agentrt
