#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "agentrt/error.hpp"
#include "util/crypto.hpp"

using namespace agentrt;

namespace {

ErrorCode code_of(const auto& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::ok;
}

}  // namespace

TEST_CASE("sha256_hex matches the FIPS 180-2 vectors") {
  CHECK(crypto::sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(crypto::sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(crypto::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const std::string raw = crypto::sha256("abc");
  REQUIRE(raw.size() == 32);
  CHECK(static_cast<unsigned char>(raw[0]) == 0xba);
  CHECK(static_cast<unsigned char>(raw[31]) == 0xad);
}

TEST_CASE("sha256 hashes embedded NUL bytes as data") {
  CHECK(crypto::sha256_hex(std::string_view("a\0b", 3)) != crypto::sha256_hex("a"));
  CHECK(crypto::sha256_hex(std::string_view("\0", 1)) ==
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d");
}

TEST_CASE("hmac_sha256_hex matches RFC 4231 test cases 1 and 2") {
  CHECK(crypto::hmac_sha256_hex(std::string(20, '\x0b'), "Hi There") ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  CHECK(crypto::hmac_sha256_hex("Jefe", "what do ya want for nothing?") ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK(crypto::hmac_sha256("Jefe", "what do ya want for nothing?").size() == 32);
}

TEST_CASE("hmac with an empty key is the well-defined HMAC of an all-zero key") {
  // HMAC pads short keys with zeros, so "" and "\0" are the same key (and not OpenSSL's "reuse" mode).
  CHECK(crypto::hmac_sha256_hex("", "data") == crypto::hmac_sha256_hex(std::string_view("\0", 1), "data"));
  CHECK(crypto::hmac_sha256_hex("", "") == "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
}

TEST_CASE("constant_time_equal compares content and length") {
  CHECK(crypto::constant_time_equal("abc", "abc"));
  CHECK(crypto::constant_time_equal("", ""));
  CHECK_FALSE(crypto::constant_time_equal("abc", "abd"));
  CHECK_FALSE(crypto::constant_time_equal("abc", "abcd"));
  CHECK_FALSE(crypto::constant_time_equal("", "a"));
}

TEST_CASE("random_hex returns 2 hex digits per byte and differs between calls") {
  const std::string a = crypto::random_hex(16);
  const std::string b = crypto::random_hex(16);
  CHECK(a.size() == 32);
  CHECK(a.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(a != b);
  CHECK(crypto::random_hex(0).empty());
}

TEST_CASE("base64 encodes and decodes the RFC 4648 section 10 vectors") {
  const std::vector<std::pair<std::string, std::string>> vectors = {
      {"", ""},
      {"f", "Zg=="},
      {"fo", "Zm8="},
      {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="},
      {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"},
  };
  for (const auto& [plain, encoded] : vectors) {
    CAPTURE(plain);
    CHECK(crypto::base64_encode(plain) == encoded);
    CHECK(crypto::base64_decode(encoded) == plain);
  }
}

TEST_CASE("base64 round-trips every byte value exactly") {
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  const std::string encoded = crypto::base64_encode(all);
  CHECK(encoded.size() == 344);
  CHECK(encoded.substr(0, 8) == "AAECAwQF");
  CHECK(encoded.substr(encoded.size() - 8) == "/P3+/w==");
  CHECK(crypto::base64_decode(encoded) == all);
}

TEST_CASE("base64 round-trips a payload larger than one internal chunk") {
  std::string big(7 * 1024 * 1024 + 1, 'x');
  for (size_t i = 0; i < big.size(); i += 4093) big[i] = static_cast<char>(i & 0xff);
  const std::string encoded = crypto::base64_encode(big);
  CHECK(encoded.size() == (big.size() + 2) / 3 * 4);
  CHECK(crypto::base64_decode(encoded) == big);
}

TEST_CASE("base64_decode refuses malformed text with invalid_argument") {
  const std::vector<std::string> bad = {
      "Zg",        // missing padding
      "Zg=",       // wrong length
      "Z===",      // too much padding
      "====",      // padding only
      "Zg==Zg==",  // padding in the middle
      "Zm9v\n",    // line break
      " Zm9v",     // leading space (EVP_DecodeBlock alone would skip it)
      "Zm9v Zm9",  // inner space
      "Zm-_",      // URL-safe alphabet
      "Zh==",      // non-zero pad bits
      "Zm9=",      // non-zero pad bits
      "Zm*v",      // not in the alphabet
      std::string("Zm\0v", 4),
  };
  for (const auto& text : bad) {
    CAPTURE(text);
    CHECK(code_of([&] { crypto::base64_decode(text); }) == ErrorCode::invalid_argument);
  }
}

TEST_CASE("percent_encode keeps only unreserved characters and optionally slashes") {
  CHECK(crypto::percent_encode("a b/c?d=e&f#g") == "a%20b%2Fc%3Fd%3De%26f%23g");
  CHECK(crypto::percent_encode("a b/c", true) == "a%20b/c");
  CHECK(crypto::percent_encode("AZaz09-._~") == "AZaz09-._~");
  CHECK(crypto::percent_encode("é文") == "%C3%A9%E6%96%87");
  CHECK(crypto::percent_encode(std::string_view("\0+%", 3)) == "%00%2B%25");
}

TEST_CASE("percent_decode reverses percent_encode and rejects broken escapes") {
  CHECK(crypto::percent_decode("a%20b%2fc%2F") == "a b/c/");
  CHECK(crypto::percent_decode("%C3%A9%e6%96%87") == "é文");
  CHECK(crypto::percent_decode("a+b") == "a+b");
  const std::string tricky = std::string("x/ y%\0é", 8);
  CHECK(crypto::percent_decode(crypto::percent_encode(tricky)) == tricky);
  CHECK(code_of([] { crypto::percent_decode("%"); }) == ErrorCode::invalid_argument);
  CHECK(code_of([] { crypto::percent_decode("a%2"); }) == ErrorCode::invalid_argument);
  CHECK(code_of([] { crypto::percent_decode("%zz"); }) == ErrorCode::invalid_argument);
}
