#include "support/replay.hpp"

#include <fmt/format.h>

#include "agentrt/events.hpp"
#include "pipeline/projector.hpp"

namespace agentrt::testing {

namespace {

std::string bytes_of(const MessageRecord& m) {
  return fmt::format("{{thread_id:{}, index:{}, turn_id:{}, run_id:{}, message:{}}}", m.thread_id, m.index, m.turn_id,
                     m.run_id, to_json_string(m.message));
}

}  // namespace

std::optional<std::string> replay_difference(Store& store, const std::string& thread_id) {
  Projector projector(thread_id);
  std::vector<MessageRecord> replayed;
  int64_t after = 0;
  for (;;) {
    auto page = store.events_after(thread_id, after, 500);
    if (page.empty()) break;
    for (const auto& se : page) {
      after = se.seq;
      Event e = event_from_json(json::parse(se.json));
      if (auto m = projector.apply(se.run_id, e)) {
        m->index = static_cast<int64_t>(replayed.size());
        replayed.push_back(std::move(*m));
      }
    }
  }
  const auto stored = store.messages(thread_id);
  for (size_t i = 0; i < std::max(stored.size(), replayed.size()); ++i) {
    const std::string a = i < stored.size() ? bytes_of(stored[i]) : "(none)";
    const std::string b = i < replayed.size() ? bytes_of(replayed[i]) : "(none)";
    if (a != b)
      return fmt::format("thread {}: message {} of {} stored / {} replayed differs:\n stored:   {}\n replayed: {}",
                         thread_id, i, stored.size(), replayed.size(), a, b);
  }
  return std::nullopt;
}

}  // namespace agentrt::testing
