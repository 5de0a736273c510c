// S3ObjectStore: an ObjectStore on an S3-compatible bucket over libcurl, signed with AWS Signature V4
// (internal; config: objects {type:"s3"}).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentrt/storage.hpp"
#include "net/http_client.hpp"
#include "store/s3_endpoint.hpp"
#include "store/signed_url.hpp"
#include "store/sigv4.hpp"

namespace agentrt {
inline namespace v1 {

// Who signs the URLs of attachments: S3 itself (presigned GET URLs, fetched from the bucket directly) or
// this deployment (ServerUrlSigner URLs, served by the host at public_base_url from the store).
enum class UrlSigning { s3, server };

// How put_if_absent is done. native: PUT with If-None-Match: * (S3 since 2024, MinIO, Ceph); emulated: HEAD,
// then PUT when absent, for servers that ignore the header (s3rver does: it overwrites and answers 200);
// probe: the first put_if_absent finds out which by writing a probe object twice (under
// "<prefix>.agentrt-probe/", a name no key can have), then removes it.
enum class ConditionalWrites { probe, native, emulated };

struct S3ObjectStoreOptions {
  std::string endpoint;  // "https://s3.us-east-1.amazonaws.com", "http://127.0.0.1:4568"
  std::string region = "us-east-1";
  std::string bucket;
  std::string prefix;  // "" or "<key>/": the part of the bucket this deployment owns
  std::string access_key;
  std::string secret_key;
  std::string session_token;  // temporary credentials; "" = none
  bool path_style = false;    // http://host/bucket/key instead of http://bucket.host/key
  UrlSigning url_signing = UrlSigning::s3;
  std::string signing_secret;   // url_signing server: the HMAC key shared by the deployment's processes
  std::string public_base_url;  // url_signing server: where the host serves objects
  ConditionalWrites conditional_writes = ConditionalWrites::probe;
  // Retries of 5xx, 429, SlowDown/RequestTimeout answers and network errors: at most this many attempts in
  // all, with exponential backoff (base, doubled per retry, capped; a random half of each delay), and no new
  // attempt once retry_budget has passed since the first.
  int max_attempts = 4;
  std::chrono::milliseconds retry_base{100};
  std::chrono::milliseconds retry_cap{2000};
  std::chrono::milliseconds retry_budget{20000};
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds idle_timeout{30000};  // longest wait for a byte within one request
  int list_page_size = 1000;                      // ListObjectsV2 max-keys (1 to 1000)
  // Tests only: called before each HTTP attempt with the method, the key ("" for a list) and the attempt
  // number (1 for the first).
  std::function<void(std::string_view method, std::string_view key, int attempt)> on_attempt;
};

// Keys map to "<prefix><key>" in the bucket. Objects carry their sha256 as x-amz-meta-sha256 (set by put,
// read by head and list; "" for objects other writers put there), their content type as Content-Type. A put
// sends the caller's bytes from the caller's buffer (no copy), signed with their sha256; get collects the
// body into one string sized by Content-Length; read() is one Range GET, so a large object is read in
// pieces of the caller's size. list() is ListObjectsV2 page by page (continuation tokens) plus one HEAD per
// object for its content type and sha256. remove() is a HEAD (to answer whether something was deleted) and a
// DELETE.
//
// Errors: Error(io) naming the method, s3://bucket/key, the HTTP status and S3's error code and message
// (never a credential); Error(unauthorized) for 401/403 answers (AccessDenied, SignatureDoesNotMatch,
// InvalidAccessKeyId, RequestTimeTooSkewed); Error(not_found) for NoSuchBucket; Error(timeout) when the
// network timed out on every attempt. A missing key is nullopt/false, not an error.
//
// Thread-safe: requests share a pooled HttpClient; the only mutable state is the probed conditional-write
// mode, behind a mutex.
class S3ObjectStore final : public ObjectStore {
 public:
  // Throws Error(invalid_argument) for a bad endpoint, bucket, prefix, region or empty credentials (and,
  // with url_signing server, an empty secret or bad base URL). Makes no request.
  explicit S3ObjectStore(S3ObjectStoreOptions options);
  ~S3ObjectStore() override;
  S3ObjectStore(const S3ObjectStore&) = delete;
  S3ObjectStore& operator=(const S3ObjectStore&) = delete;

  std::string bucket() const override;
  void put(std::string_view key, std::string_view bytes, std::string_view content_type) override;
  // native: If-None-Match: * (412 = exists; a 412 after a retried attempt whose answer was lost is checked
  // against the object's write id, so a write that did land answers true). emulated: HEAD, then PUT. The
  // emulation never overwrites an object that existed when the call began, but two calls racing on the same
  // absent key may both answer true (the later PUT's bytes stay): it is exact only when the caller
  // serialises writers of a key, as the conversation-document layout does under its pointer database lock.
  bool put_if_absent(std::string_view key, std::string_view bytes, std::string_view content_type) override;
  std::optional<std::string> get(std::string_view key) override;
  std::optional<std::string> read(std::string_view key, uint64_t offset, size_t max_bytes) override;
  std::optional<ObjectInfo> head(std::string_view key) override;
  bool remove(std::string_view key) override;
  std::vector<ObjectInfo> list(std::string_view prefix) override;
  // url_signing s3: a presigned GET URL (query-string SigV4) of the object, valid until expires_at_ms
  // rounded up to a whole second, at most 7 days from now (S3's limit). url_signing server: ServerUrlSigner's.
  std::string sign_url(std::string_view key, int64_t expires_at_ms) const override;
  // Only this deployment's own URLs of the configured kind for this bucket and prefix: signed with its key,
  // untampered and unexpired. Never fetches anything.
  std::string verify_url(std::string_view url, int64_t now_ms) const override;

  // The conditional-write mode in force (after the probe, once a put_if_absent ran).
  ConditionalWrites conditional_writes() const;
  const S3Endpoint& endpoint() const { return endpoint_; }

 private:
  struct Call;
  enum class PutResult { written, exists, unsupported };
  // Signs and sends the call, retrying as the options say; any final HTTP answer is returned.
  net::HttpResponse perform(Call& call) const;
  // The one error of a failed call: Error(io | unauthorized | not_found | too_large) naming the method, the
  // object, the status and S3's code and message, then `note`.
  [[noreturn]] void fail(const Call& call, const net::HttpResponse& response, std::string_view note) const;
  PutResult put_object(std::string_view key, std::string_view bytes, std::string_view content_type, bool if_none_match);
  ConditionalWrites probe_conditional_writes();

  S3ObjectStoreOptions options_;
  S3Endpoint endpoint_;
  sigv4::Signer signer_;
  std::optional<ServerUrlSigner> server_urls_;
  mutable net::HttpClient http_;
  mutable std::mutex mode_mutex_;
  ConditionalWrites mode_;
};

}  // namespace v1
}  // namespace agentrt
