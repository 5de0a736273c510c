// The SSE parser (src/net/sse_parser.*): any bytes, cut anywhere, give the same events as the bytes fed at once
// (CR, LF and CRLF line ends and a BOM split across reads included), and finish() leaves nothing pending.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "net/sse_parser.hpp"

using agentrt::net::SseEvent;
using agentrt::net::SseParser;

namespace {

struct Run {
  std::vector<SseEvent> events;
  std::optional<SseEvent> last;
};

bool same(const SseEvent& a, const SseEvent& b) {
  return a.event == b.event && a.data == b.data && a.id == b.id && a.retry == b.retry;
}

bool same(const Run& a, const Run& b) {
  if (a.events.size() != b.events.size() || a.last.has_value() != b.last.has_value()) return false;
  for (size_t i = 0; i < a.events.size(); ++i)
    if (!same(a.events[i], b.events[i])) return false;
  return !a.last || same(*a.last, *b.last);
}

// Feeds `bytes` in pieces of the lengths `cuts` draws (1..16, from a seed), then finishes.
Run parse(std::string_view bytes, uint32_t seed) {
  SseParser parser;
  Run run;
  size_t counted = 0;
  auto on_event = [&](const SseEvent& e) { run.events.push_back(e); };
  while (!bytes.empty()) {
    size_t n = bytes.size();
    if (seed) {
      seed = seed * 1103515245u + 12345u;
      n = std::min<size_t>(n, 1 + (seed >> 16) % 16);
    }
    counted += parser.feed(bytes.substr(0, n), on_event);
    bytes.remove_prefix(n);
  }
  if (counted != run.events.size()) agentrt_fuzz::broken("sse_parser", "feed() miscounted its events");
  run.last = parser.finish();
  if (parser.pending_bytes() != 0) agentrt_fuzz::broken("sse_parser", "finish() left bytes pending");
  return run;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint32_t seed = data[0] | 1u;  // never 0: 0 means "all at once"
  const std::string_view bytes = agentrt_fuzz::text_of(data + 1, size - 1);
  const Run whole = parse(bytes, 0);
  const Run cut = parse(bytes, seed);
  if (!same(whole, cut)) agentrt_fuzz::broken("sse_parser", "the events depend on where the stream was cut");
  return 0;
}
