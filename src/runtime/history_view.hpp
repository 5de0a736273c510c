// The history view: a thread's stored messages as hosts read them — user attachments with fresh signed URLs,
// tool messages with the `ui` card of their payload (read back by the index, its sha256 checked; the summary
// alone when the payload is missing or wrong). Thread-safe: no state of its own.
#pragma once

#include <string_view>
#include <vector>

#include "agentrt/content.hpp"
#include "agentrt/runtime.hpp"

namespace agentrt {
inline namespace v1 {

class HistoryView {
 public:
  explicit HistoryView(Runtime::Impl& rt);
  std::vector<Message> history(std::string_view thread_id);
  // Makes one stored message what history() shows (in place: a message is moved once, into the caller's list).
  void view(Message& m);

 private:
  Runtime::Impl& rt_;
};

}  // namespace v1
}  // namespace agentrt
