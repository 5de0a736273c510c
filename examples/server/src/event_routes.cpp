// The events route: a thread's stored events, then its live tail.
#include "routes.hpp"

#include <string>

#include "sse_stream.hpp"

namespace agentrt::server {

// GET /agent/runs/{threadId}/events: replay after Last-Event-ID (or ?after=), then the live tail.
void get_events(ServerContext& s, ApiCall& c) {
  s.own_thread(c, c.match.id);
  std::string cursor(c.req.header("Last-Event-ID"));
  if (cursor.empty() && c.req.has_param("after")) cursor = c.req.param("after");
  int64_t after = 0;
  if (!cursor.empty()) {
    size_t used = 0;
    try {
      after = std::stoll(cursor, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != cursor.size() || after < 0)
      throw ApiError{400, "invalid_cursor", "Last-Event-ID / after must be a non-negative event sequence number"};
  }
  const std::string follow = c.req.param("follow");
  auto slot = s.stream_slots.take(c.user);
  open_sse_stream(s, c, slot, follow == "1" || follow == "true" ? SseStream::Mode::follow : SseStream::Mode::until_idle,
                  {}, after);
}

}  // namespace agentrt::server
