// This deployment's own signed object URLs ("server" URL signing, served by the host at its public base URL),
// and a strict parser for URLs handed back (absolute, ASCII, no user information or fragment). Used by every
// object store: FsObjectStore always, S3ObjectStore with url_signing "server".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace agentrt {
inline namespace v1 {

// A URL taken apart.
struct ParsedUrl {
  std::string scheme;  // lower-case
  std::string host;    // lower-case
  int port = 0;        // explicit or default for the scheme; 0 when unknown
  bool has_userinfo = false;
  std::string path;
  std::optional<std::string> query;
  bool has_fragment = false;
};

// ASCII letters lower-cased, other bytes kept (schemes, hosts, header names).
std::string ascii_lower(std::string_view s);

// Throws Error(invalid_argument) "not an acceptable URL: <why>".
[[noreturn]] void bad_url(std::string_view why);

// Throws (bad_url) for anything but an absolute ASCII URL.
ParsedUrl parse_url(std::string_view url);

// Why `bucket` cannot name a store in URLs ([A-Za-z0-9._-]{1,63}, not "." or ".."), or nullptr.
const char* bucket_problem(std::string_view bucket);

// Signs and verifies "{base}/{bucket}/{percent-encoded key}?expires={ms}&sig={hex}" with sig = HMAC-SHA-256
// under the deployment's secret over "GET\n{bucket}\n{key}\n{expires}". Processes that share a store share the
// secret (config: signing_secret_env), so any of them verifies what another signed.
// Thread-safe: immutable after construction.
class ServerUrlSigner {
 public:
  // Throws Error(invalid_argument) for an empty secret, a bad bucket or a bad base URL.
  ServerUrlSigner(std::string bucket, std::string secret, std::string public_base_url);

  // Valid while now < expires_at_ms. Error(invalid_argument) for a bad key or a negative expiry.
  std::string sign(std::string_view key, int64_t expires_at_ms) const;
  // The key a URL grants when it is one of sign()'s, untampered and unexpired: Error(expired) for an expired
  // one, Error(invalid_argument) for anything else.
  std::string verify(std::string_view url, int64_t now_ms) const;

 private:
  struct Origin {
    std::string scheme;  // lower-case
    std::string host;    // lower-case; IPv6 literals keep their brackets
    int port = 0;        // explicit, or the scheme's default
    std::string path;    // without a trailing '/'
  };
  std::string signature(std::string_view key, std::string_view expires) const;

  std::string bucket_;
  std::string secret_;
  Origin origin_;
  std::string base_url_;  // the public base URL without a trailing '/'
};

}  // namespace v1
}  // namespace agentrt
