#include "store/record_rows.hpp"

#include <fmt/format.h>

#include "agentrt/content.hpp"
#include "agentrt/error.hpp"

namespace agentrt {
inline namespace v1 {
namespace store_rows {

std::vector<EventRow> event_rows(std::vector<StoredEvent>& events, int64_t seq) {
  std::vector<EventRow> rows;
  for (size_t i = 0; i < events.size();) {
    EventRow row;
    row.run_id = events[i].run_id;
    row.first_seq = seq + 1;
    size_t bytes = 0, end = i;  // the row's size first: its text is made in one allocation
    for (; end < events.size() && events[end].run_id == row.run_id; ++end) bytes += events[end].json.size() + 1;
    row.body.reserve(bytes);
    for (; i < end; ++i) {
      auto& e = events[i];
      if (e.json.find('\n') != std::string::npos)
        throw Error(ErrorCode::invalid_argument, "event JSON must be a single line");
      if (!row.body.empty()) row.body += '\n';
      row.body += e.json;
      e.seq = ++seq;
    }
    row.last_seq = seq;
    rows.push_back(std::move(row));
  }
  return rows;
}

void split_event_row(int64_t seq, const std::string& run_id, std::string_view body, int64_t after_seq, size_t limit,
                     std::vector<StoredEvent>& out) {
  while (!body.empty() && out.size() < limit) {
    size_t nl = body.find('\n');
    std::string_view line = body.substr(0, nl);
    if (seq > after_seq) out.push_back(StoredEvent{seq, run_id, std::string(line)});
    ++seq;
    if (nl == std::string_view::npos) break;
    body.remove_prefix(nl + 1);
  }
}

Error unreadable_message(std::string_view thread_id, int64_t index, std::string_view why) {
  return Error(ErrorCode::io, fmt::format("thread {}: stored message {} is unreadable: {}", thread_id, index, why));
}

Message stored_message(std::string_view thread_id, int64_t index, std::string_view body, MessageDecoder decode) {
  try {
    return decode(body, kMaxStoredJsonDepth);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::invalid_argument) throw;
    // Nested deeper than any message this build stores, or not a message at all.
    throw unreadable_message(thread_id, index, e.message());
  } catch (const json::exception& e) {
    throw unreadable_message(thread_id, index, e.what());  // not JSON at all (a text row's bytes damaged)
  }
}

}  // namespace store_rows
}  // namespace v1
}  // namespace agentrt
