// Replays a thread's stored event log through the projector and compares the messages it derives with the
// stored history, byte for byte (the design's promise: the history is a projection of the log).
#pragma once

#include <optional>
#include <string>

#include "agentrt/storage.hpp"

namespace agentrt::testing {

// nullopt when the replayed messages equal the stored ones; else the first difference, described.
std::optional<std::string> replay_difference(Store& store, const std::string& thread_id);

}  // namespace agentrt::testing
