// The tool definitions a stage offers its model, kept between turns. Each model request carries them by value
// (ModelRequest::tools), and copying them out of the registry for every turn was a deep copy of every tool's JSON
// Schema, and its destruction after the call: ~75 allocations and ~4% of a turn's instructions on the demo's
// tools. A stage takes a set here and gives it back as it ends; the next turn's stage takes the same set again.
// A set is only reused at the registry's generation it was copied at. Thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agentrt/model.hpp"
#include "agentrt/stages.hpp"
#include "agentrt/tools.hpp"

namespace agentrt {
inline namespace v1 {

class ToolOffers {
 public:
  explicit ToolOffers(const ToolRegistry& registry) : registry_(registry) {}

  // The definitions `registry` offers `stage` under `allowed` (its policy's list, which lives as long as the
  // runtime) as of `generation` (read from the registry before): a set given back at that generation, else a copy.
  std::vector<ToolDefinition> take(Stage stage, const std::optional<std::vector<std::string>>& allowed,
                                   uint64_t generation);
  // Keeps `defs`, as take() gave them for the same stage, list and generation, for a later take. Dropped when the
  // registry has moved on since, or when kMaxKept are kept already.
  void give_back(Stage stage, const std::optional<std::vector<std::string>>& allowed, uint64_t generation,
                 std::vector<ToolDefinition> defs);

  // The sets kept for `stage` (for tests).
  size_t kept(Stage stage) const;

  // Sets kept per stage: as many as turns are in that stage at once, up to this.
  static constexpr size_t kMaxKept = 64;

 private:
  struct Slot {
    const std::optional<std::vector<std::string>>* allowed = nullptr;  // the list the sets were made under
    uint64_t generation = 0;
    std::vector<std::vector<ToolDefinition>> sets;
  };
  const ToolRegistry& registry_;
  mutable std::mutex mutex_;
  std::array<Slot, 3> slots_;  // by Stage
};

}  // namespace v1
}  // namespace agentrt
