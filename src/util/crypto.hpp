// Hashing, MACs, randomness, base64 and URL percent-encoding on top of OpenSSL's libcrypto (internal).
// Every function is stateless and thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace agentrt {
inline namespace v1 {
namespace crypto {

// SHA-256 of `data`: 32 raw bytes, or 64 lower-case hex digits.
std::string sha256(std::string_view data);
std::string sha256_hex(std::string_view data);

// HMAC-SHA-256 of `data` under `key` (any bytes, may be empty): 32 raw bytes, or 64 lower-case hex digits.
std::string hmac_sha256(std::string_view key, std::string_view data);
std::string hmac_sha256_hex(std::string_view key, std::string_view data);

// Lower-case hex of raw bytes.
std::string to_hex(std::string_view bytes);

// Compares in time that depends only on the lengths, so comparing a secret (a MAC) leaks nothing but its
// length, which is public anyway. Different lengths are simply unequal.
bool constant_time_equal(std::string_view a, std::string_view b) noexcept;

// `bytes` bytes from the CSPRNG as 2*bytes lower-case hex digits. Throws Error(internal) if the CSPRNG
// fails (it only does when the OS has no entropy source).
std::string random_hex(size_t bytes);

// Standard base64 (RFC 4648 section 4, "+/" alphabet, "=" padding).
std::string base64_encode(std::string_view bytes);
// Strict decoder: the length must be a multiple of 4, only alphabet characters, and "=" only as one or two
// final padding characters. Whitespace, line breaks, missing padding and the URL-safe alphabet are refused
// with Error(invalid_argument); so is padding with non-zero pad bits ("QR==") because such text has no
// canonical encoder and only appears when something was altered.
std::string base64_decode(std::string_view text);

// Percent-encodes every byte except the RFC 3986 unreserved set (A-Z a-z 0-9 - . _ ~), and except '/' when
// `keep_slash` (for paths). Hex digits are upper-case. UTF-8 is encoded byte by byte ("é" -> "%C3%A9").
std::string percent_encode(std::string_view text, bool keep_slash = false);
// Decodes %XX escapes (either hex case). '+' stays '+': this is URI decoding, not form decoding. Throws
// Error(invalid_argument) on a '%' not followed by two hex digits.
std::string percent_decode(std::string_view text);

}  // namespace crypto
}  // namespace v1
}  // namespace agentrt
