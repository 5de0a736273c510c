// The one clock: wall-clock milliseconds since the Unix epoch, as every stored time (event timestamps,
// deadlines, leases, signed-URL expiry) is written and compared. Thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace agentrt {
inline namespace v1 {

// Milliseconds since 1970-01-01T00:00:00Z (system clock).
int64_t now_ms() noexcept;

// "2026-12-01T16:03:58.123Z" for a now_ms() value.
std::string iso8601_ms(int64_t ms);

}  // namespace v1
}  // namespace agentrt
