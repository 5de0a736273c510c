// The body column of the SQLite store's `events` table. A row's events (JSON lines) are stored as text, or, when
// that is shorter, as a BLOB: a format byte (kPackedEvents), then their text encoded by lz::encode with the event
// dictionary (event_dictionary.txt, its lines joined; it is part of the format and never changes: another
// dictionary would take another format byte). Rows written before schema 9 are text and read as they are.
// W1's event rows are 69% smaller this way. Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/lz_dict.hpp"

namespace agentrt {
inline namespace v1 {
namespace sqlite {

constexpr char kPackedEvents = 0x01;

// The event dictionary, built once.
const lz::Dictionary& event_dictionary();

// Sets `blob` to the packed form of `text` and returns true when it is shorter than the text and decodes back to it.
bool pack_events(std::string_view text, std::string& blob);

// The text of a packed row; Error(io) naming the thread and the row's first seq when `blob` is not a packed row
// this build can read (another format byte, a damaged encoding) or would hold more than `max_bytes`.
std::string unpack_events(std::string_view blob, std::string_view thread_id, int64_t first_seq, size_t max_bytes);

}  // namespace sqlite
}  // namespace v1
}  // namespace agentrt
