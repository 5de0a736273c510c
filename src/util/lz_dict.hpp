// LZ77 with a preset dictionary: how the SQLite store keeps its event rows small. Repeated text (ids, keys,
// timestamps, an answer sent as deltas and again in its message's metadata) becomes a 3-byte reference, and
// the dictionary holds the text every row repeats (the runtime's own keys and event shapes), so even a row's
// first occurrence is a reference. Thread-safe: a Dictionary is immutable once built; encode keeps a hash table
// per thread (no output depends on what it held), decode nothing.
//
// An encoding is: the decoded size (LEB128), then sequences. A sequence is a token byte (high nibble: the
// literal count, low nibble: the match length minus 4; 15 in either is continued by bytes added to it until a
// byte under 255), the literals, then, unless the input ends there, the match's distance back (2 bytes,
// little-endian, 1..65535) into the dictionary followed by the text decoded so far. The last sequence has
// literals only. The format is that of LZ4 blocks, with the size in front; the code is this project's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace agentrt {
inline namespace v1 {
namespace lz {

constexpr size_t kMaxDistance = 65535;

class Dictionary {
 public:
  // At most kMaxDistance bytes (a reference reaches no further back).
  explicit Dictionary(std::string bytes);
  const std::string& bytes() const { return bytes_; }

 private:
  friend size_t encode_at(std::string_view in, const Dictionary& dict, std::string& out, size_t start);
  std::string bytes_;
  static constexpr uint16_t kNone = 0xffff;  // no place (a key of 6 bytes never starts at 65,535)
  std::vector<uint16_t> head_;               // by the hash of 6 bytes: the dictionary's last place with them
};

// Appends the encoding of `in` (under 2 GiB, std::invalid_argument otherwise) to `out`.
void encode(std::string_view in, const Dictionary& dict, std::string& out);
// Writes the encoding of `in` at out[start..) and returns where it ends. `out` grows when it is too small and is
// never shrunk: a buffer kept from one call to the next is not cleared (nor filled with zeros) each time.
size_t encode_at(std::string_view in, const Dictionary& dict, std::string& out, size_t start);

// Replaces `out` with what `in` decodes to. False, with `out` unspecified, when `in` is not a whole encoding made
// with this dictionary (cut short, a reference before the start, a size other than the one it declares, bytes
// after its end) or declares more than `max_size` bytes. Never reads outside `in` nor writes more than it
// declares.
bool decode(std::string_view in, const Dictionary& dict, size_t max_size, std::string& out);

}  // namespace lz
}  // namespace v1
}  // namespace agentrt
