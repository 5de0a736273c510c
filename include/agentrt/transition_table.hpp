// A state machine's transition table, written as "from -> allowed to" rows (the turn table in turn_state.hpp
// and the tool-ledger table in ledger_state.hpp). Built at compile time; thread-safe (immutable).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "agentrt/error.hpp"

namespace agentrt {
inline namespace v1 {

// E is an enum whose values are 0 .. N-1 (N at most 64); a status no row names goes nowhere.
template <class E, size_t N>
class TransitionTable {
  static_assert(N <= 64, "one 64-bit row per status");

 public:
  struct Row {
    E from;
    std::initializer_list<E> to;
  };

  consteval TransitionTable(std::initializer_list<Row> rows) {
    for (const Row& row : rows)
      for (E to : row.to) allowed_[index(row.from)] |= uint64_t{1} << index(to);
  }

  constexpr bool allows(E from, E to) const noexcept {
    return index(from) < N && index(to) < N && ((allowed_[index(from)] >> index(to)) & 1) != 0;
  }

  // Throws Error(invalid_state) "<subject> <id>: cannot go from X to Y" (X, Y as to_string(E) names them)
  // when the table refuses the transition.
  void check(std::string_view subject, std::string_view id, E from, E to) const {
    if (allows(from, to)) return;
    throw Error(ErrorCode::invalid_state, std::string(subject) + " " + std::string(id) + ": cannot go from " +
                                              std::string(to_string(from)) + " to " + std::string(to_string(to)));
  }

 private:
  static constexpr size_t index(E e) noexcept { return static_cast<size_t>(e); }

  std::array<uint64_t, N> allowed_{};
};

}  // namespace v1
}  // namespace agentrt
