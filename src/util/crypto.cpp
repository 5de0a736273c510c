#include "util/crypto.hpp"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "agentrt/error.hpp"

namespace agentrt {
inline namespace v1 {
namespace crypto {

namespace {

const unsigned char* bytes_of(std::string_view s) {
  // OpenSSL treats a NULL key specially (HMAC: "reuse the previous key"); an empty view may have a null
  // data(), so hand it a real, empty buffer instead.
  static const unsigned char empty[1] = {0};
  return s.empty() ? empty : reinterpret_cast<const unsigned char*>(s.data());
}

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int base64_value(char c) noexcept {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

std::string to_hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) {
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 0x0f]);
  }
  return out;
}

std::string sha256(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(bytes_of(data), data.size(), md, &len, EVP_sha256(), nullptr) != 1) {
    throw Error(ErrorCode::internal, "SHA-256 failed in libcrypto");
  }
  return std::string(reinterpret_cast<const char*>(md), len);
}

std::string sha256_hex(std::string_view data) { return to_hex(sha256(data)); }

std::string hmac_sha256(std::string_view key, std::string_view data) {
  if (key.size() > static_cast<size_t>(INT_MAX)) {
    throw Error(ErrorCode::invalid_argument, fmt::format("HMAC key of {} bytes is too long", key.size()));
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), bytes_of(key), static_cast<int>(key.size()), bytes_of(data), data.size(), md, &len) ==
      nullptr) {
    throw Error(ErrorCode::internal, "HMAC-SHA-256 failed in libcrypto");
  }
  return std::string(reinterpret_cast<const char*>(md), len);
}

std::string hmac_sha256_hex(std::string_view key, std::string_view data) { return to_hex(hmac_sha256(key, data)); }

bool constant_time_equal(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string random_hex(size_t bytes) {
  std::string raw(bytes, '\0');
  size_t done = 0;
  while (done < bytes) {
    const int chunk = static_cast<int>(std::min<size_t>(bytes - done, 1 << 20));
    if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data() + done), chunk) != 1) {
      throw Error(ErrorCode::internal, "RAND_bytes failed: the CSPRNG has no entropy");
    }
    done += static_cast<size_t>(chunk);
  }
  return to_hex(raw);
}

std::string base64_encode(std::string_view bytes) {
  // EVP_EncodeBlock takes an int length; feed it whole 3-byte groups so chunks concatenate cleanly.
  constexpr size_t kChunk = 3 * (1 << 20);
  std::string out;
  out.resize((bytes.size() + 2) / 3 * 4);
  size_t in_pos = 0;
  size_t out_pos = 0;
  while (in_pos < bytes.size()) {
    const size_t n = std::min(kChunk, bytes.size() - in_pos);
    // EVP_EncodeBlock writes a trailing NUL, so give it a scratch buffer with room for it.
    std::string block((n + 2) / 3 * 4 + 1, '\0');
    const int written =
        EVP_EncodeBlock(reinterpret_cast<unsigned char*>(block.data()),
                        reinterpret_cast<const unsigned char*>(bytes.data() + in_pos), static_cast<int>(n));
    out.replace(out_pos, static_cast<size_t>(written), block.data(), static_cast<size_t>(written));
    in_pos += n;
    out_pos += static_cast<size_t>(written);
  }
  return out;
}

std::string base64_decode(std::string_view text) {
  if (text.empty()) return {};
  if (text.size() % 4 != 0) {
    throw Error(ErrorCode::invalid_argument,
                fmt::format("invalid base64: length {} is not a multiple of 4", text.size()));
  }
  // EVP_DecodeBlock skips surrounding whitespace, accepts '=' anywhere in the last group and counts padding
  // as zero bytes, so validate first and strip the padding ourselves.
  size_t padding = 0;
  if (text.back() == '=') padding = text[text.size() - 2] == '=' ? 2 : 1;
  const size_t body = text.size() - padding;
  for (size_t i = 0; i < body; ++i) {
    if (base64_value(text[i]) < 0) {
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("invalid base64: byte 0x{:02x} at offset {}", static_cast<unsigned char>(text[i]), i));
    }
  }
  if (padding > 0) {
    // The bits the padding stands for must be zero, else two texts would decode to the same bytes.
    const int last = base64_value(text[body - 1]);
    if ((padding == 1 && (last & 0x03) != 0) || (padding == 2 && (last & 0x0f) != 0)) {
      throw Error(ErrorCode::invalid_argument, "invalid base64: non-zero bits before the padding");
    }
  }

  constexpr size_t kChunk = 4 * (1 << 20);
  std::string out;
  out.reserve(text.size() / 4 * 3);
  std::vector<unsigned char> block(std::min(kChunk, text.size()) / 4 * 3 + 3);
  for (size_t pos = 0; pos < text.size(); pos += kChunk) {
    const size_t n = std::min(kChunk, text.size() - pos);
    const int written =
        EVP_DecodeBlock(block.data(), reinterpret_cast<const unsigned char*>(text.data() + pos), static_cast<int>(n));
    if (written < 0) throw Error(ErrorCode::invalid_argument, "invalid base64 (rejected by libcrypto)");
    out.append(reinterpret_cast<const char*>(block.data()), static_cast<size_t>(written));
  }
  // The padding decoded to zero bytes at the end: drop them (erase, not resize, so nothing is filled).
  out.erase(out.size() - std::min(padding, out.size()));
  return out;
}

std::string percent_encode(std::string_view text, bool keep_slash) {
  static constexpr char digits[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                            c == '.' || c == '_' || c == '~' || (keep_slash && c == '/');
    if (unreserved) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(digits[c >> 4]);
      out.push_back(digits[c & 0x0f]);
    }
  }
  return out;
}

std::string percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    const int hi = i + 1 < text.size() ? hex_value(text[i + 1]) : -1;
    const int lo = i + 2 < text.size() ? hex_value(text[i + 2]) : -1;
    if (hi < 0 || lo < 0) {
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("invalid percent-encoding at offset {}: '%' must be followed by two hex digits", i));
    }
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

}  // namespace crypto
}  // namespace v1
}  // namespace agentrt
