// The body column of the SQLite store's `events` table. A row's events (JSON lines) are stored as text, or, when
// that is shorter, as a BLOB: a format byte (kPackedEvents), then their text encoded by lz::encode with the event
// dictionary (event_dictionary.txt, its lines joined; it is part of the format and never changes: another
// dictionary would take another format byte). Rows written before schema 9 are text and read as they are.
// W1's event rows are two thirds smaller this way (4,710 → 1,555 bytes a run). The functions
// are thread-safe; an EventPacker is not (see below).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "util/lz_dict.hpp"

namespace agentrt {
inline namespace v1 {
namespace sqlite {

constexpr char kPackedEvents = 0x01;

// The event dictionary, built once.
const lz::Dictionary& event_dictionary();

// Packs rows into buffers it keeps from one row to the next, so that a commit allocates nothing once they have
// grown. Not thread-safe: the store keeps one, used under its lock.
class EventPacker {
 public:
  // The packed form of `text` (valid until the next call) when it is shorter and decodes back to it; otherwise
  // nothing (the row is stored as text).
  std::optional<std::string_view> pack(std::string_view text);
  // Lets go of the buffers when a large row has grown them past kKeepBytes.
  void trim();
  static constexpr size_t kKeepBytes = size_t{1} << 20;
  size_t held() const { return blob_.capacity() + check_.capacity(); }

 private:
  std::string blob_, check_;
};

// The text of a packed row; Error(io) naming the thread and the row's first seq when `blob` is not a packed row
// this build can read (another format byte, a damaged encoding) or would hold more than `max_bytes`.
std::string unpack_events(std::string_view blob, std::string_view thread_id, int64_t first_seq, size_t max_bytes);

}  // namespace sqlite
}  // namespace v1
}  // namespace agentrt
