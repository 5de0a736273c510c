// W3C trace context (traceparent, version 00) and the ids of spans. Pure functions and values, thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace agentrt {
inline namespace v1 {
namespace trace {

// A span's identity as it travels: trace id, span id and the sampled flag.
struct SpanContext {
  std::array<uint8_t, 16> trace_id{};
  std::array<uint8_t, 8> span_id{};
  bool sampled = false;

  // W3C: an all-zero trace or span id is invalid.
  bool valid() const noexcept;
  std::string trace_id_hex() const;
  std::string span_id_hex() const;
  bool operator==(const SpanContext&) const = default;
};

// A span id as 16 lower-case hex digits, and back (false for anything else).
std::string hex_id(const std::array<uint8_t, 8>& span_id);
bool parse_hex_id(std::string_view text, std::array<uint8_t, 8>& out) noexcept;

// "00-<32 hex trace id>-<16 hex span id>-<2 hex flags>" of a valid context ("" for an invalid one).
std::string format_traceparent(const SpanContext& c);
// A traceparent header's value, or nullopt when it is not one this runtime takes: version 00 exactly as W3C
// writes it (lower-case hex, four fields, no trailing data), a later version's first four fields (W3C's forward
// compatibility), never version ff, all-zero ids or upper-case hex. Leading and trailing spaces are ignored.
std::optional<SpanContext> parse_traceparent(std::string_view text);

// Ids from the CSPRNG (OpenSSL's RAND_bytes, drawn in blocks per thread; a fork discards the blocks), never all zero.
// Throw Error(internal) only when the CSPRNG fails.
std::array<uint8_t, 16> new_trace_id();
std::array<uint8_t, 8> new_span_id();

// The root sampling decision for a trace id: recorded when its last 8 bytes (a big-endian number) fall below
// ratio * 2^64 — so every process with the same ratio decides alike for the same trace.
bool sample_trace(const std::array<uint8_t, 16>& trace_id, double ratio) noexcept;

}  // namespace trace
}  // namespace v1
}  // namespace agentrt
