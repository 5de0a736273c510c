// The SQLite store's packed event rows (src/util/lz_dict.*, src/store/sqlite/event_body.*). Byte 0 even: the rest is
// a stored encoding, decoded with the event dictionary — refused, or a text that encodes and decodes back to
// itself; odd: the rest is a text, which packs and unpacks back to itself, byte for byte.
#include <cstdint>
#include <string>

#include "fuzz_support.hpp"
#include "store/sqlite/event_body.hpp"
#include "util/lz_dict.hpp"

using namespace agentrt;

namespace {

[[noreturn]] void broken(const std::string& what) { agentrt_fuzz::broken("lz_dict", what); }

constexpr size_t kMaxDecoded = size_t{1} << 22;

void round_trip(std::string_view text) {
  std::string enc, back;
  lz::encode(text, sqlite::event_dictionary(), enc);
  if (!lz::decode(enc, sqlite::event_dictionary(), text.size(), back)) broken("an encoding does not decode");
  if (back != text) broken("an encoding decodes to another text");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest = agentrt_fuzz::text_of(data + 1, size - 1);
  if (data[0] % 2) {
    round_trip(rest);
    return 0;
  }
  std::string text;
  if (!lz::decode(rest, sqlite::event_dictionary(), kMaxDecoded, text)) return 0;
  round_trip(text);
  return 0;
}
