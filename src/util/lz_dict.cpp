#include "util/lz_dict.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <stdexcept>

namespace agentrt {
inline namespace v1 {
namespace lz {

namespace {

constexpr size_t kMinMatch = 4;
constexpr int kDictHashBits = 12;
// The input's table: 2^12 places (16 KiB, so that a commit's encode keeps little of the cache).
constexpr int kInputHashBits = 12;
// What decode writes past the decoded size at most (a short copy moves 16 bytes; an overlapping one, 8 at a time).
constexpr size_t kSlack = 32;
// A match this long ends the search.
constexpr size_t kGoodMatch = 64;

uint32_t load32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

uint32_t hash_of(uint32_t v, int bits) { return (v * 2654435761u) >> (32 - bits); }

// The dictionary is searched by its first 6 bytes (a 4- or 5-byte match saves little, and 4-byte keys such as
// `":"` have hundreds of places in it).
constexpr size_t kDictKey = 6;

uint32_t dict_hash(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return static_cast<uint32_t>(((v << 16) * 0x9E3779B97F4A7C15ull) >> (64 - kDictHashBits));
}

// How far the bytes at `a` and `b` agree, up to `max`.
size_t common_prefix(const char* a, const char* b, size_t max) {
  size_t len = 0;
  while (len + 8 <= max) {
    uint64_t x, y;
    std::memcpy(&x, a + len, 8);
    std::memcpy(&y, b + len, 8);
    if (x != y) return len + static_cast<size_t>(__builtin_ctzll(x ^ y)) / 8;  // little-endian: the first that differs
    len += 8;
  }
  while (len < max && a[len] == b[len]) ++len;
  return len;
}

// The rest of a length whose nibble is 15.
char* put_length(char* o, size_t n) {
  for (; n >= 255; n -= 255) *o++ = static_cast<char>(255);
  *o++ = static_cast<char>(n);
  return o;
}

// One sequence at `o`: `literals`, then (match_len > 0) a reference `distance` back. Returns its end.
char* put_sequence(char* o, std::string_view literals, size_t match_len, size_t distance) {
  const size_t extra = match_len ? match_len - kMinMatch : 0;
  *o++ = static_cast<char>((std::min<size_t>(literals.size(), 15) << 4) | std::min<size_t>(extra, 15));
  if (literals.size() >= 15) o = put_length(o, literals.size() - 15);
  std::memcpy(o, literals.data(), literals.size());
  o += literals.size();
  if (!match_len) return o;
  *o++ = static_cast<char>(distance & 0xff);
  *o++ = static_cast<char>(distance >> 8);
  if (extra >= 15) o = put_length(o, extra - 15);
  return o;
}

// The input's hash table, kept per thread. An entry is a place plus the `base` of the encode that wrote it, so a
// new encode finds the last one's entries stale without clearing the table.
struct Table {
  std::vector<uint32_t> slots = std::vector<uint32_t>(size_t{1} << kInputHashBits, 0);
  uint32_t base = 1;
};

}  // namespace

Dictionary::Dictionary(std::string bytes) : bytes_(std::move(bytes)), head_(size_t{1} << kDictHashBits, kNone) {
  if (bytes_.size() > kMaxDistance) throw std::invalid_argument("lz::Dictionary: more than 65535 bytes");
  // dict_hash reads 8 bytes: the last key's are read from a padded copy.
  const std::string padded = bytes_ + std::string(8, '\0');
  for (size_t i = 0; i + kDictKey <= bytes_.size(); ++i) {
    head_[dict_hash(padded.data() + i)] = static_cast<uint16_t>(i);  // the last place of a key wins
  }
}

void encode(std::string_view in, const Dictionary& dict, std::string& out) {
  out.resize(encode_at(in, dict, out, out.size()));
}

size_t encode_at(std::string_view in, const Dictionary& dict, std::string& out, size_t start) {
  if (in.size() > static_cast<size_t>(INT32_MAX)) throw std::invalid_argument("lz::encode: an input of 2 GiB or more");
  // The most it takes: the size (5 bytes at most), every byte a literal, a length byte per 255 of them, the last
  // token.
  const size_t most = start + 5 + in.size() + in.size() / 255 + 16;
  if (out.size() < most) out.resize(std::max(most, std::min(out.capacity(), out.max_size())));
  char* o = out.data() + start;
  for (size_t n = in.size();;) {  // the decoded size, LEB128
    const auto low = static_cast<uint8_t>(n & 0x7f);
    n >>= 7;
    *o++ = static_cast<char>(low | (n ? 0x80 : 0));
    if (!n) break;
  }
  const std::string& d = dict.bytes_;
  const size_t dsize = d.size(), n = in.size();
  const char* const src = in.data();
  // One candidate per hash, as LZ4's fast mode: the input's last place with those 4 bytes, and the dictionary's
  // (its last) with those 6.
  thread_local Table t;
  if (t.base > UINT32_MAX - n - 1) {
    std::fill(t.slots.begin(), t.slots.end(), 0);
    t.base = 1;
  }
  const uint32_t base = t.base;
  t.base += static_cast<uint32_t>(n) + 1;
  uint32_t* const slots = t.slots.data();
  auto slot_of = [&](size_t p) -> uint32_t& { return slots[hash_of(load32(src + p), kInputHashBits)]; };
  size_t anchor = 0, i = 0;
  while (i + kMinMatch <= n) {
    uint32_t& slot = slot_of(i);
    const uint32_t seen = slot;
    slot = base + static_cast<uint32_t>(i);
    size_t best = 0, best_distance = 0;
    if (seen >= base) {
      const size_t at = seen - base;
      if (i - at <= kMaxDistance && load32(src + at) == load32(src + i)) {
        best = kMinMatch + common_prefix(src + at + kMinMatch, src + i + kMinMatch, n - i - kMinMatch);
        best_distance = i - at;
      }
    }
    // The dictionary, while a reference reaches it (in the first 64 KiB of the input).
    if (best < kGoodMatch && i + 8 <= n && i < kMaxDistance) {
      if (const uint16_t dc = dict.head_[dict_hash(src + i)];
          dc != Dictionary::kNone && load32(d.data() + dc) == load32(src + i)) {
        const size_t at = static_cast<size_t>(dc);
        // Within the dictionary, then (a match of all its rest) on into the input's start, as the decoder's
        // window runs.
        size_t len = common_prefix(d.data() + at, src + i, std::min(dsize - at, n - i));
        if (at + len == dsize) len += common_prefix(src, src + i + len, n - i - len);
        if (len >= kDictKey && len > best && dsize - at + i <= kMaxDistance) best = len, best_distance = dsize - at + i;
      }
    }
    if (best < kMinMatch) {
      // Text that does not repeat is passed over faster the longer it runs (LZ4's acceleration).
      i += 1 + ((i - anchor) >> 6);
      continue;
    }
    o = put_sequence(o, in.substr(anchor, i - anchor), best, best_distance);
    // Two places inside the match go into the table: its second and its last but one.
    if (i + 1 + kMinMatch <= n) slot_of(i + 1) = base + static_cast<uint32_t>(i + 1);
    if (i + best + 2 <= n) slot_of(i + best - 2) = base + static_cast<uint32_t>(i + best - 2);
    i += best;
    anchor = i;
  }
  o = put_sequence(o, in.substr(anchor), 0, 0);
  return static_cast<size_t>(o - out.data());
}

bool decode(std::string_view in, const Dictionary& dict, size_t max_size, std::string& out) {
  const auto* p = reinterpret_cast<const uint8_t*>(in.data());
  const auto* const end = p + in.size();
  uint64_t size = 0;
  for (int shift = 0;; shift += 7) {
    if (p == end || shift > 56) return false;
    const uint8_t b = *p++;
    size |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) break;
  }
  // A byte of the encoding stands for at most 255 decoded bytes: a larger size cannot be true.
  if (size > max_size || size / 255 > in.size()) return false;
  // Room past the end lets short copies move 16 bytes at a time; it is cut off at the end.
  out.resize(static_cast<size_t>(size) + kSlack);
  char* const o = out.data();
  size_t w = 0;
  const std::string& d = dict.bytes();
  const size_t dsize = d.size();
  auto more = [&](size_t& n) {
    for (;;) {
      if (p == end) return false;
      const uint8_t b = *p++;
      n += b;
      if (b != 255) return true;
    }
  };
  for (;;) {
    if (p == end) return false;
    const uint8_t token = *p++;
    size_t literals = token >> 4;
    if (literals == 15 && !more(literals)) return false;
    if (literals > static_cast<size_t>(end - p) || literals > size - w) return false;
    if (literals <= 16 && end - p >= 16) {
      std::memcpy(o + w, p, 16);
    } else {
      std::memcpy(o + w, p, literals);
    }
    p += literals;
    w += literals;
    if (p == end) {
      out.resize(w);
      return w == size;
    }
    if (end - p < 2) return false;
    const size_t distance = p[0] | (static_cast<size_t>(p[1]) << 8);
    p += 2;
    size_t len = token & 15;
    if (len == 15 && !more(len)) return false;
    len += kMinMatch;
    if (distance == 0 || distance > dsize + w || len > size - w) return false;
    size_t from = dsize + w - distance;  // in the window: the dictionary, then what is decoded
    if (from < dsize) {
      const size_t k = std::min(len, dsize - from);
      std::memcpy(o + w, d.data() + from, k);
      w += k;
      len -= k;
      from = dsize;
    }
    const size_t at = from - dsize, back = w - at;
    if (back >= 16 && len <= 16) {
      std::memcpy(o + w, o + at, 16);
    } else if (back >= len) {
      std::memcpy(o + w, o + at, len);
    } else if (back >= 8) {  // overlapping: a repeat of the last `back` bytes, 8 at a time
      for (size_t k = 0; k < len; k += 8) std::memcpy(o + w + k, o + at + k, 8);
    } else {
      for (size_t k = 0; k < len; ++k) o[w + k] = o[at + k];
    }
    w += len;
  }
}

}  // namespace lz
}  // namespace v1
}  // namespace agentrt
