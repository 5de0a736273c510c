#include "tracing/trace_context.hpp"

#include <openssl/rand.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "agentrt/error.hpp"

namespace agentrt {
inline namespace v1 {
namespace trace {
namespace {

constexpr char kHex[] = "0123456789abcdef";

template <size_t N>
std::string hex(const std::array<uint8_t, N>& bytes) {
  std::string out(2 * N, '0');
  for (size_t i = 0; i < N; ++i) {
    out[2 * i] = kHex[bytes[i] >> 4];
    out[2 * i + 1] = kHex[bytes[i] & 15];
  }
  return out;
}

int nibble(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper-case hex is invalid in a traceparent
}

template <size_t N>
bool unhex(std::string_view s, std::array<uint8_t, N>& out) noexcept {
  if (s.size() != 2 * N) return false;
  for (size_t i = 0; i < N; ++i) {
    const int hi = nibble(s[2 * i]), lo = nibble(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

template <size_t N>
bool all_zero(const std::array<uint8_t, N>& a) noexcept {
  return std::all_of(a.begin(), a.end(), [](uint8_t b) { return b == 0; });
}

// A forked child would repeat its parent's buffered bytes: a fork empties every thread's buffer (as ids.cpp does).
std::atomic<uint64_t> g_fork_generation{0};
const bool g_atfork_installed = [] {
  pthread_atfork(nullptr, nullptr, [] { g_fork_generation.fetch_add(1, std::memory_order_relaxed); });
  return true;
}();

// CSPRNG bytes drawn 4 KiB at a time per thread: one RAND_bytes call (and its lock) serves ~170 spans (at 512 bytes
// a call, drawing them was half of what making a span cost).
void random_bytes(uint8_t* out, size_t n) {
  (void)g_atfork_installed;
  thread_local uint8_t buffer[4096];
  thread_local size_t left = 0;
  thread_local uint64_t generation = ~uint64_t{0};
  const uint64_t now = g_fork_generation.load(std::memory_order_relaxed);
  if (generation != now) {
    generation = now;
    left = 0;
  }
  if (left < n) {
    if (RAND_bytes(buffer, sizeof buffer) != 1)
      throw Error(ErrorCode::internal, "the CSPRNG failed to make a trace id");
    left = sizeof buffer;
  }
  std::memcpy(out, buffer + sizeof buffer - left, n);
  std::memset(buffer + sizeof buffer - left, 0, n);  // used bytes do not stay in memory
  left -= n;
}

template <size_t N>
std::array<uint8_t, N> random_id() {
  std::array<uint8_t, N> id{};
  do random_bytes(id.data(), N);
  while (all_zero(id));
  return id;
}

}  // namespace

bool SpanContext::valid() const noexcept { return !all_zero(trace_id) && !all_zero(span_id); }
std::string SpanContext::trace_id_hex() const { return hex(trace_id); }
std::string SpanContext::span_id_hex() const { return hex(span_id); }
std::string hex_id(const std::array<uint8_t, 8>& span_id) { return hex(span_id); }
bool parse_hex_id(std::string_view text, std::array<uint8_t, 8>& out) noexcept { return unhex(text, out); }

std::string format_traceparent(const SpanContext& c) {
  if (!c.valid()) return {};
  // "00-" trace-id "-" span-id "-" flags: 55 characters, written in place.
  char out[55];
  char* p = out;
  auto put_hex = [&p](const uint8_t* bytes, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      *p++ = kHex[bytes[i] >> 4];
      *p++ = kHex[bytes[i] & 15];
    }
  };
  std::memcpy(p, "00-", 3);
  p += 3;
  put_hex(c.trace_id.data(), c.trace_id.size());
  *p++ = '-';
  put_hex(c.span_id.data(), c.span_id.size());
  std::memcpy(p, c.sampled ? "-01" : "-00", 3);
  return std::string(out, sizeof out);
}

std::optional<SpanContext> parse_traceparent(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  // version "-" trace-id "-" parent-id "-" flags: 2+1+32+1+16+1+2 = 55 characters.
  if (s.size() < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-') return std::nullopt;
  std::array<uint8_t, 1> version{}, flags{};
  if (!unhex(s.substr(0, 2), version) || version[0] == 0xff) return std::nullopt;
  // Version 00 has exactly these fields; a later one may add fields after a '-'.
  if (s.size() > 55 && (version[0] == 0 || s[55] != '-')) return std::nullopt;
  SpanContext c;
  if (!unhex(s.substr(3, 32), c.trace_id) || !unhex(s.substr(36, 16), c.span_id) || !unhex(s.substr(53, 2), flags))
    return std::nullopt;
  if (!c.valid()) return std::nullopt;
  c.sampled = (flags[0] & 1) != 0;
  return c;
}

std::array<uint8_t, 16> new_trace_id() { return random_id<16>(); }
std::array<uint8_t, 8> new_span_id() { return random_id<8>(); }

bool sample_trace(const std::array<uint8_t, 16>& trace_id, double ratio) noexcept {
  if (!(ratio > 0)) return false;
  if (ratio >= 1) return true;
  uint64_t low = 0;
  for (size_t i = 8; i < 16; ++i) low = low << 8 | trace_id[i];
  // 2^64 * ratio, computed in long double so that ratios near 1 do not overflow the conversion.
  const long double bound = static_cast<long double>(ratio) * 18446744073709551616.0L;
  return static_cast<long double>(low) < bound;
}

}  // namespace trace
}  // namespace v1
}  // namespace agentrt
