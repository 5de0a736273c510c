// HttpClient: the one libcurl wrapper every HTTP request of agentrt goes through.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentrt/cancel.hpp"

namespace agentrt {
inline namespace v1 {
namespace net {

// Header names as received (libcurl keeps their case); look them up with header().
using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// Header names compare ASCII case-insensitively.
bool header_name_equals(std::string_view a, std::string_view b);

// The value of the first header named `name`, or nullopt.
std::optional<std::string> find_header(const HttpHeaders& headers, std::string_view name);

// One part of a multipart/form-data body. A part with a filename is sent as a file.
struct MultipartPart {
  std::string name;
  std::string data;
  std::string filename;      // "" = a plain field
  std::string content_type;  // "" = none (libcurl's default for the part)
};

struct HttpResponse {
  long status = 0;
  HttpHeaders headers;  // of the final response (not of 1xx or proxy CONNECT responses)
  std::string body;     // empty when the body was streamed to HttpRequest::on_body

  std::optional<std::string> header(std::string_view name) const { return find_header(headers, name); }
};

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  HttpHeaders headers;
  std::string body;  // sent as is (set Content-Type yourself)
  // Instead of `body`: bytes the caller keeps alive until send() returns, sent from its buffer without a
  // copy (how a large upload goes out once, however often it is retried).
  std::optional<std::string_view> body_view;
  std::vector<MultipartPart> multipart;  // when non-empty: a multipart/form-data body instead of `body`

  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds request_timeout{600'000};  // the whole transfer; 0 = none
  std::chrono::milliseconds idle_timeout{120'000};     // longest time without a received byte; 0 = none
  size_t max_body_bytes = 64u << 20;  // for a body collected in HttpResponse::body; more is Error(too_large)

  // Called once, on the calling thread, when the status and headers are known and before the first body
  // byte. Return true to get the body in on_body as it arrives, false to collect it in HttpResponse::body.
  std::function<bool(const HttpResponse& head)> on_headers;
  // Streamed body bytes, on the calling thread. An exception thrown here aborts the transfer (the
  // connection is closed) and is rethrown by send().
  std::function<void(std::string_view bytes)> on_body;
};

// Performs requests over pooled handles, so sequential requests to the same host reuse a connection.
// Thread-safe: any number of threads may call send() at once; each call uses its own handle.
class HttpClient {
 public:
  struct Options {
    size_t max_idle_handles = 8;  // pooled handles (and their open connections) kept between requests
    std::string user_agent = "agentrt/0.1";
  };

  HttpClient();
  explicit HttpClient(Options options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Performs the request. Any HTTP status is a response, not an error. Throws Error(cancelled) when
  // `cancel` fires (the transfer is aborted within a few milliseconds and its connection closed),
  // Error(timeout) for the connect/request/idle timeouts, Error(io) for other transport failures
  // (connection refused, reset, TLS). Exceptions thrown by the callbacks propagate unchanged.
  HttpResponse send(const HttpRequest& request, const CancelToken& cancel = {});

 private:
  struct Handle;
  std::unique_ptr<Handle> acquire();
  void release(std::unique_ptr<Handle> handle);

  Options options_;
  std::string ca_file_, ca_path_;  // from CURL_CA_BUNDLE / SSL_CERT_FILE / SSL_CERT_DIR
  std::mutex mutex_;
  std::vector<std::unique_ptr<Handle>> idle_;
};

}  // namespace net
}  // namespace v1
}  // namespace agentrt
