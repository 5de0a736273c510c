// The one mechanism behind every enum's wire names (agentrt/*.hpp `to_string` and `*_from_string`): a
// constexpr table of (value, name) pairs looked up both ways, with one rule for a name that is not in it.
// Thread-safe (immutable).
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

namespace agentrt {
inline namespace v1 {
namespace wire {

// Throws Error(invalid_argument) "unknown <kind> '<value>' (expected one of: a, b, c)", the value quoted
// printable-escaped and bounded, since it comes from a caller or a stored row.
[[noreturn]] void throw_unknown_name(std::string_view kind, std::string_view value,
                                     std::span<const std::string_view> names);

template <class E>
struct EnumName {
  E value;
  std::string_view name;
};

template <class E, size_t N>
class EnumNames {
 public:
  // Consteval, so a table that repeats a value or a name does not compile.
  consteval EnumNames(std::string_view kind, const EnumName<E> (&entries)[N]) : kind_(kind) {
    for (size_t i = 0; i < N; ++i) {
      for (size_t k = 0; k < i; ++k)
        if (entries[k].value == entries[i].value || entries[k].name == entries[i].name)
          throw "an enum name table lists a value or a name twice";
      values_[i] = entries[i].value;
      names_[i] = entries[i].name;
    }
  }

  // A value outside the table (only a cast makes one) has the empty name.
  constexpr std::string_view name(E v) const noexcept {
    // The tables list an enum from 0 up in declaration order, so the index is usually the value.
    const auto at = static_cast<size_t>(v);
    if (at < N && values_[at] == v) return names_[at];
    for (size_t i = 0; i < N; ++i)
      if (values_[i] == v) return names_[i];
    return {};
  }

  constexpr std::optional<E> find(std::string_view name) const noexcept {
    for (size_t i = 0; i < N; ++i)
      if (names_[i] == name) return values_[i];
    return std::nullopt;
  }

  E parse(std::string_view name) const {
    if (auto v = find(name)) return *v;
    throw_unknown_name(kind_, name, names_);
  }

 private:
  std::string_view kind_;
  std::array<E, N> values_{};
  std::array<std::string_view, N> names_{};
};

// enum_names<JobStatus>("job status", {{JobStatus::queued, "queued"}, ...}): the enum given, the size counted.
template <class E, size_t N>
consteval EnumNames<E, N> enum_names(std::string_view kind, const EnumName<E> (&entries)[N]) {
  return EnumNames<E, N>(kind, entries);
}

}  // namespace wire
}  // namespace v1
}  // namespace agentrt
