// AWS Signature Version 4 (internal): canonical requests, the signing key, Authorization headers and
// query-string (presigned) signatures, with S3's rules (no path normalisation, the path encoded once, the
// payload hash signed). Used by S3ObjectStore; the official test suite's vectors pin it
// (tests/store/test_sigv4.cpp). Pure functions and an immutable signer, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace agentrt {
inline namespace v1 {
namespace sigv4 {

using Params = std::vector<std::pair<std::string, std::string>>;

inline constexpr std::string_view kAlgorithm = "AWS4-HMAC-SHA256";
inline constexpr std::string_view kUnsignedPayload = "UNSIGNED-PAYLOAD";
// Hex SHA-256 of no bytes: the payload hash of GET, HEAD and DELETE.
inline constexpr std::string_view kEmptyPayloadHash =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

// A request as it is signed.
struct Request {
  std::string method;
  // The path exactly as sent: every byte outside A-Za-z0-9-._~ and '/' percent-encoded once (uri_path()).
  std::string canonical_uri;
  Params query;              // decoded names and values, in any order
  Params headers;            // the headers to sign, as sent (any case; a name may repeat)
  std::string payload_hash;  // hex SHA-256 of the body, or UNSIGNED-PAYLOAD
};

// The path S3 is sent and signs: `path` ("/bucket/key" or "/key", raw bytes) with each byte outside the
// unreserved set and '/' percent-encoded (upper-case hex), never normalised ("//" and "." stay).
std::string uri_path(std::string_view path);
// name=value pairs, each URI-encoded ("%20", never "+"), sorted by encoded name then value, joined by '&'.
std::string canonical_query(const Params& query);
// Lower-case names, values trimmed with inner runs of spaces made one, repeats joined with ','; sorted.
// `signed_headers` receives "name1;name2;...".
std::string canonical_headers(const Params& headers, std::string* signed_headers);
std::string canonical_request(const Request& request);

// "yyyymmddThhmmssZ" of a Unix time, and back (nullopt for anything else).
std::string amz_date(int64_t unix_seconds);
std::optional<int64_t> parse_amz_date(std::string_view text);

// Signs requests for one access key, region and service.
// Thread-safe: immutable after construction.
class Signer {
 public:
  Signer(std::string access_key, std::string secret_key, std::string region, std::string service,
         std::string session_token = {});

  // "yyyymmdd/region/service/aws4_request" for a day "yyyymmdd".
  std::string scope(std::string_view day) const;
  std::string string_to_sign(std::string_view amz_date, std::string_view canonical_request) const;
  // Hex HMAC of the string to sign under the key derived for the day of `amz_date`.
  std::string signature(std::string_view amz_date, std::string_view canonical_request) const;

  // Header signing: adds x-amz-date (and x-amz-security-token when there is a session token) to
  // request.headers, which must already hold host and x-amz-content-sha256 for S3, and returns the
  // Authorization header's value.
  std::string authorize(Request& request, int64_t unix_seconds) const;

  // Query-string signing (a presigned URL): the request's query gains X-Amz-Algorithm, -Credential, -Date,
  // -Expires, -SignedHeaders (and -Security-Token); returns the canonical query with X-Amz-Signature last,
  // ready to follow '?'. The request's headers (at least host) are signed, its payload hash is
  // UNSIGNED-PAYLOAD.
  std::string presign(Request& request, int64_t unix_seconds, int64_t expires_seconds) const;

  const std::string& access_key() const { return access_key_; }
  const std::string& region() const { return region_; }
  const std::string& service() const { return service_; }
  const std::string& session_token() const { return session_token_; }

 private:
  std::string access_key_;
  std::string secret_key_;
  std::string region_;
  std::string service_;
  std::string session_token_;
};

}  // namespace sigv4
}  // namespace v1
}  // namespace agentrt
