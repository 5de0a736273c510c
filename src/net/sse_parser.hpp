// SseParser: an incremental text/event-stream decoder (the WHATWG "server-sent events" parsing rules).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace agentrt {
inline namespace v1 {
namespace net {

struct SseEvent {
  std::string event;             // the `event:` field, "" when absent (the spec's default type "message")
  std::string data;              // `data:` lines joined with "\n"
  std::string id;                // the last event id seen so far (it persists across events, as the spec says)
  std::optional<int64_t> retry;  // a `retry:` field of this event, in milliseconds
};

// Feed it bytes as they arrive, cut anywhere; it calls back once per complete event. Lines may end in
// LF, CR or CRLF (also when the CR and the LF arrive in different reads); `:` lines are comments; one
// space after the colon is dropped; unknown fields are ignored; a leading UTF-8 BOM is skipped.
// Not thread-safe: one parser per stream.
class SseParser {
 public:
  using Callback = std::function<void(const SseEvent&)>;

  // Returns the number of events dispatched. Exceptions from `on_event` propagate; the parser then
  // stays at the event that threw.
  size_t feed(std::string_view bytes, const Callback& on_event);

  // End of stream: returns the last event if the stream ended before its blank line (the end of the
  // stream also ends an unfinished line). The spec drops such an event, but real servers end with
  // "data: [DONE]\n" and nothing after it; the caller decides whether the event is whole. The parser
  // is then ready for a new stream.
  std::optional<SseEvent> finish();

  // Bytes held for an unfinished line or event.
  size_t pending_bytes() const { return line_.size() + data_.size(); }

 private:
  void process_line(std::string_view line, const Callback& on_event, size_t& dispatched);

  std::string line_;  // the unfinished line
  std::string data_;  // data lines of the current event, each followed by "\n"
  std::string event_;
  std::string last_id_;
  std::optional<int64_t> retry_;
  bool has_data_ = false;
  bool skip_lf_ = false;  // the previous read ended in CR: a leading LF belongs to that line end
  bool at_start_ = true;  // the BOM check has not finished yet
  int bom_matched_ = 0;   // BOM bytes seen so far (a BOM can be cut across reads too)
};

}  // namespace net
}  // namespace v1
}  // namespace agentrt
