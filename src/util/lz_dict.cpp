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
// Candidates tried per position in each of the two chains (the input's, the dictionary's): more finds a few
// longer matches at a cost per byte.
constexpr int kChain = 16;
// A match this long ends the search.
constexpr size_t kGoodMatch = 64;

uint32_t load32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

uint32_t hash_of(uint32_t v, int bits) { return (v * 2654435761u) >> (32 - bits); }

// The rest of a length whose nibble is 15.
void put_length(std::string& out, size_t n) {
  for (; n >= 255; n -= 255) out.push_back(static_cast<char>(255));
  out.push_back(static_cast<char>(n));
}

// One sequence: `literals`, then (match_len > 0) a reference `distance` back.
void put_sequence(std::string& out, std::string_view literals, size_t match_len, size_t distance) {
  const size_t extra = match_len ? match_len - kMinMatch : 0;
  out.push_back(static_cast<char>((std::min<size_t>(literals.size(), 15) << 4) | std::min<size_t>(extra, 15)));
  if (literals.size() >= 15) put_length(out, literals.size() - 15);
  out.append(literals);
  if (!match_len) return;
  out.push_back(static_cast<char>(distance & 0xff));
  out.push_back(static_cast<char>(distance >> 8));
  if (extra >= 15) put_length(out, extra - 15);
}

// The input's hash chains, kept per thread so an encode allocates nothing once warm.
struct Chains {
  std::vector<int32_t> head, prev;
};

}  // namespace

Dictionary::Dictionary(std::string bytes)
    : bytes_(std::move(bytes)), head_(size_t{1} << kDictHashBits, -1), prev_(bytes_.size(), -1) {
  if (bytes_.size() > kMaxDistance) throw std::invalid_argument("lz::Dictionary: more than 65535 bytes");
  for (size_t i = 0; i + kMinMatch <= bytes_.size(); ++i) {
    const uint32_t h = hash_of(load32(bytes_.data() + i), kDictHashBits);
    prev_[i] = head_[h];
    head_[h] = static_cast<int32_t>(i);
  }
}

void encode(std::string_view in, const Dictionary& dict, std::string& out) {
  if (in.size() > static_cast<size_t>(INT32_MAX)) throw std::invalid_argument("lz::encode: an input of 2 GiB or more");
  for (size_t n = in.size();;) {  // the decoded size, LEB128
    const auto low = static_cast<uint8_t>(n & 0x7f);
    n >>= 7;
    out.push_back(static_cast<char>(low | (n ? 0x80 : 0)));
    if (!n) break;
  }
  const std::string& d = dict.bytes_;
  const size_t dsize = d.size(), n = in.size();
  int bits = 8;
  while (bits < 16 && (size_t{1} << bits) < n) ++bits;
  thread_local Chains chains;
  chains.head.assign(size_t{1} << bits, -1);
  chains.prev.resize(n);
  auto& head = chains.head;
  auto& prev = chains.prev;
  auto insert = [&](size_t p) {
    if (p + kMinMatch > n) return;
    const uint32_t h = hash_of(load32(in.data() + p), bits);
    prev[p] = head[h];
    head[h] = static_cast<int32_t>(p);
  };
  size_t anchor = 0, i = 0;
  while (i + kMinMatch <= n) {
    const uint32_t v = load32(in.data() + i);
    size_t best = 0, best_distance = 0;
    int tries = 0;
    for (int32_t c = head[hash_of(v, bits)]; c >= 0 && tries < kChain; c = prev[static_cast<size_t>(c)], ++tries) {
      const size_t at = static_cast<size_t>(c), distance = i - at;
      if (distance > kMaxDistance) break;
      // Only a longer match matters: its byte at `best` must match first.
      if ((best && in[at + best] != in[i + best]) || load32(in.data() + at) != v) continue;
      size_t len = kMinMatch;
      while (i + len + 8 <= n) {
        uint64_t a, b;
        std::memcpy(&a, in.data() + at + len, 8);
        std::memcpy(&b, in.data() + i + len, 8);
        if (a != b) {
          len += static_cast<size_t>(__builtin_ctzll(a ^ b)) / 8;  // little-endian: the first differing byte
          break;
        }
        len += 8;
      }
      if (i + len + 8 > n)
        while (i + len < n && in[at + len] == in[i + len]) ++len;
      if (len > best) best = len, best_distance = distance;
      if (i + best == n || best >= kGoodMatch) break;
    }
    tries = 0;
    for (int32_t c = dict.head_[hash_of(v, kDictHashBits)];
         c >= 0 && tries < kChain && i + best < n && best < kGoodMatch;
         c = dict.prev_[static_cast<size_t>(c)], ++tries) {
      const size_t at = static_cast<size_t>(c), distance = dsize - at + i;
      if (distance > kMaxDistance) break;
      if (load32(d.data() + at) != v) continue;
      if (best && (at + best < dsize ? d[at + best] : in[at + best - dsize]) != in[i + best]) continue;
      // A match may run past the dictionary's end into the input's start, as the decoder's window does.
      size_t len = kMinMatch;
      while (i + len < n) {
        const size_t from = at + len;
        if ((from < dsize ? d[from] : in[from - dsize]) != in[i + len]) break;
        ++len;
      }
      if (len > best) best = len, best_distance = distance;
    }
    if (best < kMinMatch) {
      insert(i++);
      continue;
    }
    put_sequence(out, in.substr(anchor, i - anchor), best, best_distance);
    for (size_t p = i; p < i + best; ++p) insert(p);
    i += best;
    anchor = i;
  }
  put_sequence(out, in.substr(anchor), 0, 0);
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
  out.resize(static_cast<size_t>(size));
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
    std::memcpy(o + w, p, literals);
    p += literals;
    w += literals;
    if (p == end) return w == size;
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
    const size_t at = from - dsize;
    if (w - at >= len) {
      std::memcpy(o + w, o + at, len);
    } else {
      for (size_t k = 0; k < len; ++k) o[w + k] = o[at + k];  // overlapping: a repeat of the last w - at bytes
    }
    w += len;
  }
}

}  // namespace lz
}  // namespace v1
}  // namespace agentrt
