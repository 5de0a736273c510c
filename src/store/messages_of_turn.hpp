// messages_of_turn: the history messages one turn added, read from any Store.
#pragma once

#include <string_view>
#include <vector>

#include "agentrt/storage.hpp"

namespace agentrt {
inline namespace v1 {

// The messages one turn added to a thread (all of its runs, an ERROR system message of a failed run
// included), in order: what a repeated start with the same client message id answers as `deltaMessages`.
std::vector<MessageRecord> messages_of_turn(Store& store, std::string_view thread_id, std::string_view turn_id);

}  // namespace v1
}  // namespace agentrt
