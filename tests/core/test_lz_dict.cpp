// lz::encode / lz::decode (src/util/lz_dict.*): the format byte for byte, round trips of every shape of input, and
// a refusal (never a crash, never more output than declared) for every damaged encoding.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>

#include "util/lz_dict.hpp"

using namespace agentrt;

namespace {

std::string encoded(std::string_view in, const lz::Dictionary& dict) {
  std::string out;
  lz::encode(in, dict, out);
  return out;
}

// Encodes and decodes `in`; returns the encoding's size.
size_t round_trip(std::string_view in, const lz::Dictionary& dict) {
  const std::string enc = encoded(in, dict);
  std::string back;
  REQUIRE(lz::decode(enc, dict, in.size(), back));
  CHECK(back == in);
  if (!in.empty()) CHECK_FALSE(lz::decode(enc, dict, in.size() - 1, back));  // declares more than allowed
  return enc.size();
}

std::string random_bytes(std::mt19937& rng, size_t n, int alphabet) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() % static_cast<unsigned>(alphabet));
  return s;
}

const lz::Dictionary& none() {
  static const lz::Dictionary d{""};
  return d;
}

}  // namespace

TEST_CASE("lz: the encoding is the decoded size, then LZ4-shaped sequences, byte for byte") {
  // 12 bytes: 3 literals, then 9 bytes from 3 back (overlapping), then an empty last sequence.
  CHECK(encoded("abcabcabcabc", none()) == std::string("\x0c\x35"
                                                       "abc\x03\x00\x00",
                                                       8));
  // A reference into the dictionary: the whole input, 11 back from the window's end (the dictionary's start).
  const lz::Dictionary hello{"hello world"};
  CHECK(encoded("hello world", hello) == std::string("\x0b\x07\x0b\x00\x00", 5));
  // Nothing repeats: one sequence of literals; 15 or more take a continuation byte.
  CHECK(encoded("abc", none()) == std::string("\x03\x30"
                                              "abc",
                                              5));
  CHECK(encoded("", none()) == std::string("\x00\x00", 2));
  const std::string abc = "abcdefghijklmnopqrstuvwxyz";
  CHECK(encoded(abc, none()) == std::string("\x1a\xf0\x0b", 3) + abc);
  // A size over 127 takes a second LEB128 byte; a match over 18 a continuation byte (300 - 4 - 15 = 281 = 255 + 26).
  CHECK(encoded(std::string(301, 'x'), none()) == std::string("\xad\x02\x1f"
                                                              "x\x01\x00\xff\x1a\x00",
                                                              9));
}

TEST_CASE("lz: every input comes back as it was") {
  std::mt19937 rng(7);
  CHECK(round_trip("", none()) == 2);
  for (size_t n = 1; n < 40; ++n) round_trip(random_bytes(rng, n, 3), none());
  // Literal runs around the continuation bytes' edges, with and without matches between them.
  for (size_t n : {14, 15, 16, 269, 270, 271, 524, 525, 70000}) round_trip(random_bytes(rng, n, 256), none());
  // Long matches (continuation bytes) and overlapping copies (a distance shorter than the match).
  CHECK(round_trip(std::string(100000, 'a'), none()) < 420);
  CHECK(round_trip(std::string(5000, 'a') + "b" + std::string(5000, 'a'), none()) < 60);
  // Past 64 KiB: references reach at most 65,535 back.
  const std::string block = random_bytes(rng, 40000, 256);
  round_trip(block + random_bytes(rng, 30000, 256) + block, none());
  // Past 64 KiB, the dictionary is out of reach: its text is literals again, or references into the input.
  const lz::Dictionary words{"0123456789abcdefghijklmnopqrstuvwxyz"};
  for (size_t gap : {65400, 65499, 65500, 65535, 70000}) {
    CAPTURE(gap);
    const std::string far =
        std::string(gap, '[') + "0123456789abcdef" + random_bytes(rng, 40, 256) + "ghijklmnopqrstuvwxyz";
    round_trip(far, words);
  }
  // JSON-like text with a dictionary, and a match that runs from the dictionary's end into the input's start.
  const lz::Dictionary dict{R"({"type":"TEXT_MESSAGE_CONTENT","messageId":"msg_)"};
  for (int i = 0; i < 50; ++i) {
    std::string text;
    for (int j = 0; j < i; ++j)
      text += R"({"type":"TEXT_MESSAGE_CONTENT","messageId":"msg_)" + random_bytes(rng, 5, 26) + "\"}\n";
    round_trip(text, dict);
  }
  const lz::Dictionary tail{"abcdef123456"};
  CHECK(encoded("123456123456", tail) == std::string("\x0c\x08\x06\x00\x00", 5));
  round_trip("123456123456", tail);
  // The dictionary is worth it: a text made of its pieces is a few references.
  CHECK(round_trip(R"({"type":"TEXT_MESSAGE_CONTENT","messageId":"msg_1"})", dict) < 12);
}

TEST_CASE("lz: a damaged encoding is refused, never read or written past its bounds") {
  std::mt19937 rng(11);
  const lz::Dictionary dict{"the quick brown fox jumps over the lazy dog"};
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the lazy dog " + random_bytes(rng, 7, 4) + std::string(i % 20, 'z');
  const std::string enc = encoded(text, dict);
  std::string out;
  REQUIRE(lz::decode(enc, dict, text.size(), out));
  // Cut short anywhere, or one byte more.
  for (size_t k = 0; k < enc.size(); ++k) CHECK_FALSE(lz::decode(enc.substr(0, k), dict, 1 << 20, out));
  CHECK_FALSE(lz::decode(enc + '\0', dict, 1 << 20, out));
  CHECK_FALSE(lz::decode(enc + std::string("\x00\x00", 2), dict, 1 << 20, out));
  // A reference 0 back, or before the dictionary's start.
  CHECK_FALSE(lz::decode(std::string("\x05\x10x\x00\x00\x00", 6), none(), 100, out));
  CHECK_FALSE(lz::decode(std::string("\x05\x10x\x02\x00\x00", 6), none(), 100, out));
  CHECK(lz::decode(std::string("\x05\x10x\x01\x00\x00", 6), none(), 100, out));
  CHECK(out == "xxxxx");
  // More or fewer bytes than declared.
  CHECK_FALSE(lz::decode(std::string("\x06\x10x\x01\x00\x00", 6), none(), 100, out));
  CHECK_FALSE(lz::decode(std::string("\x04\x10x\x01\x00\x00", 6), none(), 100, out));
  CHECK_FALSE(lz::decode(std::string("\x02\x30xyz", 5), none(), 100, out));
  // A size no encoding of this length can reach, and a size that never ends.
  CHECK_FALSE(lz::decode(std::string("\xff\xff\x03\x0f\x01\x00\xff\x00", 8), none(), SIZE_MAX, out));
  CHECK_FALSE(lz::decode(std::string(12, '\x80') + '\x01', none(), SIZE_MAX, out));
  // Random changes (under the sanitizers, scripts/sanitize, a read or write out of bounds fails the test): what
  // still decodes is a text of its own that round-trips.
  int refused = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string bad = enc;
    for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k) bad[rng() % bad.size()] = static_cast<char>(rng());
    if (!lz::decode(bad, dict, 1 << 16, out)) {
      ++refused;
      continue;
    }
    std::string again;
    REQUIRE(lz::decode(encoded(out, dict), dict, out.size(), again));
    CHECK(again == out);
  }
  CHECK(refused > 1000);
}

TEST_CASE("lz: a dictionary holds at most 65,535 bytes, the farthest a reference reaches") {
  CHECK_NOTHROW(lz::Dictionary(std::string(65535, 'd')));
  CHECK_THROWS_AS(lz::Dictionary(std::string(65536, 'd')), std::invalid_argument);
}

TEST_CASE("lz: encode_at writes over a kept buffer the bytes encode appends, growing it only when too small") {
  std::mt19937 rng(11);
  const lz::Dictionary dict(R"({"type":"TEXT_MESSAGE_CONTENT","messageId":"msg_","delta":")");
  std::string buf = "#";
  for (int round = 0; round < 300; ++round) {
    const size_t n = rng() % (round % 10 == 0 ? 5000 : 300);
    const std::string in = random_bytes(rng, n, round % 3 == 0 ? 256 : 4) +
                           R"({"type":"TEXT_MESSAGE_CONTENT","messageId":"msg_1","delta":"x"})";
    CAPTURE(round);
    // The buffer holds whatever the last round left past its first byte.
    const size_t kept = buf.size();
    const size_t end = lz::encode_at(in, dict, buf, 1);
    CHECK(buf[0] == '#');
    CHECK(buf.size() >= kept);
    REQUIRE(end <= buf.size());
    CHECK(buf.substr(1, end - 1) == encoded(in, dict));
    std::string back;
    REQUIRE(lz::decode(std::string_view(buf).substr(1, end - 1), dict, in.size(), back));
    CHECK(back == in);
  }
  // At the end of a buffer: the same as appending.
  std::string tail = "abc";
  tail.resize(lz::encode_at("hello hello hello", dict, tail, tail.size()));
  CHECK(tail == "abc" + encoded("hello hello hello", dict));
}
