#include "store/messages_of_turn.hpp"

#include <algorithm>
#include <iterator>

namespace agentrt {
inline namespace v1 {

std::vector<MessageRecord> messages_of_turn(Store& store, std::string_view thread_id, std::string_view turn_id) {
  auto all = store.messages(thread_id);
  std::vector<MessageRecord> out;
  std::copy_if(std::make_move_iterator(all.begin()), std::make_move_iterator(all.end()), std::back_inserter(out),
               [&](const MessageRecord& m) { return m.turn_id == turn_id; });
  return out;
}

}  // namespace v1
}  // namespace agentrt
