// Ids the runtime makes: "<prefix>_" + 22 digits of a 64-letter alphabet in ASCII order — 8 of the creation time
// in milliseconds, then 14 random ones (84 bits) — distinct across threads and forked processes. Ids made later
// sort after earlier ones (to the millisecond), so a B-tree keyed by them grows at its right edge: no page splits
// in the middle, full pages, one page written per insert.
#pragma once

#include <string>
#include <string_view>

#include "agentrt/ids.hpp"

namespace agentrt {
inline namespace v1 {

std::string new_id(std::string_view prefix);

// The digits new_id ends with that are random (its last kNewIdRandomDigits characters).
inline constexpr size_t kNewIdRandomDigits = 14;

}  // namespace v1
}  // namespace agentrt
