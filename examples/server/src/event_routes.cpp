// The events route: a thread's stored events, then its live tail.
#include "routes.hpp"

#include <string>

#include "sse_stream.hpp"

namespace agentrt::server {

int64_t event_cursor(const std::string& text) {
  size_t used = 0;
  int64_t n = -1;
  try {
    n = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || n < 0)
    throw ApiError{400, "invalid_cursor", "Last-Event-ID / after must be a non-negative event sequence number"};
  return n;
}

// GET /agent/runs/{threadId}/events: replay after Last-Event-ID (or ?after=), then the live tail.
void get_events(ServerContext& s, ApiCall& c) {
  s.own_thread(c, c.match.id);
  std::string cursor(c.req.header("Last-Event-ID"));
  if (cursor.empty() && c.req.has_param("after")) cursor = c.req.param("after");
  const int64_t after = cursor.empty() ? 0 : event_cursor(cursor);
  const std::string follow = c.req.param("follow");
  auto slot = s.stream_slots.take(c.user);
  open_sse_stream(s, c, slot, follow == "1" || follow == "true" ? SseStream::Mode::follow : SseStream::Mode::until_idle,
                  {}, after);
}

}  // namespace agentrt::server
