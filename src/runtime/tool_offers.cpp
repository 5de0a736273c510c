#include "runtime/tool_offers.hpp"

#include <utility>

namespace agentrt {
inline namespace v1 {

std::vector<ToolDefinition> ToolOffers::take(Stage stage, const std::optional<std::vector<std::string>>& allowed,
                                             uint64_t generation) {
  std::vector<ToolDefinition> out;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Slot& s = slots_[static_cast<size_t>(stage)];
    if (s.allowed == &allowed && s.generation == generation && !s.sets.empty()) {
      out = std::move(s.sets.back());
      s.sets.pop_back();
      return out;
    }
  }
  // Copied outside the lock. A registry that has changed since `generation` was read may give newer definitions
  // than the generation says: such a set is only given back under the older number, which the next take (reading
  // the newer one) does not use.
  return registry_.definitions(to_string(stage), allowed);
}

void ToolOffers::give_back(Stage stage, const std::optional<std::vector<std::string>>& allowed, uint64_t generation,
                           std::vector<ToolDefinition> defs) {
  std::vector<std::vector<ToolDefinition>> stale;  // freed after the lock
  std::lock_guard<std::mutex> lock(mutex_);
  Slot& s = slots_[static_cast<size_t>(stage)];
  if (s.allowed != &allowed || s.generation != generation) {
    if (generation < s.generation && s.allowed == &allowed) return;  // an older set than those kept
    stale.swap(s.sets);
    s.allowed = &allowed;
    s.generation = generation;
  }
  if (s.sets.size() < kMaxKept) s.sets.push_back(std::move(defs));
}

size_t ToolOffers::kept(Stage stage) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return slots_[static_cast<size_t>(stage)].sets.size();
}

}  // namespace v1
}  // namespace agentrt
