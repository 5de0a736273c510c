#include "store/sqlite/event_body.hpp"

#include <fmt/format.h>

#include "agentrt/error.hpp"

namespace agentrt {
inline namespace v1 {
namespace sqlite {

const lz::Dictionary& event_dictionary() {
  static const lz::Dictionary dict([] {
    static constexpr unsigned char kBytes[] = {
#include "event_dictionary.inc"
    };
    return std::string(reinterpret_cast<const char*>(kBytes), sizeof kBytes);
  }());
  return dict;
}

std::optional<std::string_view> EventPacker::pack(std::string_view text) {
  // The buffer keeps its size from one row to the next (encode_at writes over it, no zeros filled in first).
  if (blob_.empty()) blob_.resize(1);
  blob_[0] = kPackedEvents;
  const size_t end = lz::encode_at(text, event_dictionary(), blob_, 1);
  if (end >= text.size()) return std::nullopt;
  const std::string_view packed(blob_.data(), end);
  // The events are the log every other row derives from: a row is stored packed only once it has been read back
  // as the same text (a fault in the encoder then costs bytes, never events).
  if (!lz::decode(packed.substr(1), event_dictionary(), text.size(), check_) || check_ != text) return std::nullopt;
  return packed;
}

void EventPacker::trim() {
  if (blob_.capacity() > kKeepBytes) std::string().swap(blob_);
  if (check_.capacity() > kKeepBytes) std::string().swap(check_);
}

std::string unpack_events(std::string_view blob, std::string_view thread_id, int64_t first_seq, size_t max_bytes) {
  std::string text;
  if (blob.empty() || blob.front() != kPackedEvents)
    throw Error(ErrorCode::io, fmt::format("thread {}: the stored events from seq {} are in a format this build "
                                           "does not know (first byte 0x{:02x})",
                                           thread_id, first_seq, blob.empty() ? 0 : static_cast<uint8_t>(blob[0])));
  if (!lz::decode(blob.substr(1), event_dictionary(), max_bytes, text))
    throw Error(ErrorCode::io,
                fmt::format("thread {}: the stored events from seq {} are damaged ({} bytes do not decode)", thread_id,
                            first_seq, blob.size()));
  return text;
}

}  // namespace sqlite
}  // namespace v1
}  // namespace agentrt
