// Where an S3 bucket's objects are reached (internal): path-style (http://host/bucket/key) or virtual-hosted
// (http://bucket.host/key) addressing, the key prefix a deployment owns in the bucket, and the presigned GET
// URLs of its objects (made and verified here, never fetched).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "store/sigv4.hpp"

namespace agentrt {
inline namespace v1 {

// Why `bucket` is not an S3 bucket name (3-63 characters of a-z 0-9 . -, starting and ending with a letter or
// digit, no "..", not an IPv4 address), or nullptr.
const char* s3_bucket_problem(std::string_view bucket);

// Thread-safe: immutable after construction.
class S3Endpoint {
 public:
  // endpoint: "http(s)://host[:port]" without user info, path, query or fragment; prefix: "" or a key prefix
  // ending in '/' ("agentrt/"). Throws Error(invalid_argument) naming the bad value; virtual-hosted
  // addressing needs a DNS name, not an IP address.
  S3Endpoint(std::string_view endpoint, std::string bucket, std::string prefix, bool path_style);

  const std::string& bucket() const { return bucket_; }
  const std::string& prefix() const { return prefix_; }
  bool path_style() const { return path_style_; }
  // The Host header: "[bucket.]host[:port]" (the port only when it is not the scheme's default).
  const std::string& host() const { return host_; }
  // The path of an object as sent and signed: "/bucket/<prefix+key>" or "/<prefix+key>", percent-encoded.
  std::string object_path(std::string_view key) const;
  // The bucket's own path (ListObjectsV2): "/bucket" or "/".
  std::string bucket_path() const;
  // scheme://host + path (+ "?" + query when there is one).
  std::string url(std::string_view path, std::string_view canonical_query = {}) const;
  // "s3://bucket/<prefix+key>", for messages.
  std::string describe(std::string_view key) const;

  // A presigned GET URL of `key`, signed at `now_seconds`, valid for `expires_seconds` (1 to 604800).
  std::string presign_get(const sigv4::Signer& signer, std::string_view key, int64_t now_seconds,
                          int64_t expires_seconds) const;
  // The key a URL grants when it is presign_get()'s for this bucket and prefix, signed by `signer`'s key,
  // untampered and unexpired at now_ms: Error(expired) for an expired one, Error(invalid_argument) saying why
  // for anything else.
  std::string verify_presigned_get(const sigv4::Signer& signer, std::string_view url, int64_t now_ms) const;

 private:
  std::string scheme_;
  std::string host_;  // as sent in Host
  std::string bucket_;
  std::string prefix_;
  bool path_style_;
};

}  // namespace v1
}  // namespace agentrt
