// Reading the JSON a caller or a host hands the library (events, content parts, UI cards, the C ABI's
// arguments, tool specs, model results, the config): one error type, Error(invalid_argument), and one
// message format for every decoder, the core's and the C ABI's (which is why it is public):
//   "<where> must be a JSON object"
//   "<where>: unknown key '<key>' (<the keys it takes>)"
//   "<where>: '<key>' is required"
//   "<where>: '<key>' must be <a string, a JSON object, ...>"
//   "<where>: '<key>' must be <what it takes>, not <the value>"  (the value quoted printable, cut short)
//   "<where>: <anything else>"                                  (fail)
// The reader borrows the value and the name; it is as thread-safe as the value it reads.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "agentrt/json.hpp"

namespace agentrt {
inline namespace v1 {
namespace wire {

// Error(invalid_argument) "<where>: <what>" ("<what>" alone when `where` is empty).
[[noreturn]] void refuse(std::string_view where, std::string_view what);

class JsonReader {
 public:
  // Throws "<where> must be a JSON object" unless `value` is one.
  JsonReader(const json& value, std::string_view where);

  // Throws "unknown key" for the first key not in `keys`; `also` (if any) follows the list: "(a, b; <also>)".
  void only_keys(std::initializer_list<std::string_view> keys, std::string_view also = {}) const;

  const json* find(std::string_view key) const;  // nullptr when absent
  const json& required(std::string_view key) const;
  const std::string& required_string(std::string_view key) const;
  std::string optional_string(std::string_view key) const;  // "" when absent
  json optional_object(std::string_view key) const;         // null when absent
  std::optional<bool> optional_bool(std::string_view key) const;
  // Throws "'<key>' must be an integer from <lo> to <hi>, not <value>" for anything else.
  std::optional<int64_t> optional_integer(std::string_view key, int64_t lo, int64_t hi) const;

  [[noreturn]] void fail(std::string_view what) const { refuse(where_, what); }
  [[noreturn]] void wrong_type(std::string_view key, std::string_view kind) const;
  [[noreturn]] void wrong_value(std::string_view key, std::string_view want, const json& value) const;
  // `known` lists the keys it takes, comma-separated.
  [[noreturn]] void unknown_key(std::string_view key, std::string_view known) const;

 private:
  const json& value_;
  std::string_view where_;
};

}  // namespace wire
}  // namespace v1
}  // namespace agentrt
