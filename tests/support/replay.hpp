// Replays a thread's stored event log through the projector and compares what it derives with what is stored:
// the history byte for byte, the thread's jobs (every field), and every ledger entry, turn row and approval record
// of each turn the log names (all their fields but the store's own timestamps; see replay.cpp). The design's promise:
// they are projections of the log.
#pragma once

#include <optional>
#include <string>

#include "agentrt/storage.hpp"

namespace agentrt::testing {

// nullopt when the replayed rows equal the stored ones; else the first difference, described.
std::optional<std::string> replay_difference(Store& store, const std::string& thread_id);

}  // namespace agentrt::testing
