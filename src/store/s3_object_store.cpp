#include "store/s3_object_store.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <random>
#include <thread>

#include "agentrt/clock.hpp"
#include "agentrt/error.hpp"
#include "store/object_keys.hpp"
#include "store/s3_xml.hpp"
#include "util/crypto.hpp"
#include "util/printable.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

constexpr std::string_view kDefaultContentType = "application/octet-stream";
constexpr std::string_view kShaHeader = "x-amz-meta-sha256";
constexpr std::string_view kWriteIdHeader = "x-amz-meta-write-id";
constexpr std::string_view kProbePrefix = ".agentrt-probe/";

std::optional<uint64_t> parse_u64(const std::optional<std::string>& s) {
  if (!s || s->empty() || s->size() > 19 || s->find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoull(*s);
}

bool is_hex64(std::string_view s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// Stops a streamed body once the bytes asked for are in (a server that ignored Range).
struct Enough {};

}  // namespace

// One S3 request: what perform() signs and sends on every attempt.
struct S3ObjectStore::Call {
  Call(std::string_view m, std::string_view k, std::string p) : method(m), key(k), path(std::move(p)) {}
  std::string method;
  std::string key;   // the object's key; "" for the bucket (list)
  std::string path;  // as sent and signed
  sigv4::Params query;
  sigv4::Params headers;  // sent and signed besides host, x-amz-content-sha256 and x-amz-date
  std::string_view body;  // borrowed from the caller, sent without a copy
  std::string payload_hash = std::string(sigv4::kEmptyPayloadHash);
  // A 2xx body streams to on_body (after on_head); other bodies are collected in the response.
  std::function<void(const net::HttpResponse&)> on_head;
  std::function<void(std::string_view)> on_body;
  std::function<void()> reset;  // before each attempt: forget a partial body
  bool retried = false;         // an earlier attempt was sent and its outcome is unknown
};

S3ObjectStore::S3ObjectStore(S3ObjectStoreOptions options)
    : options_(std::move(options)),
      endpoint_(options_.endpoint, options_.bucket, options_.prefix, options_.path_style),
      signer_(options_.access_key, options_.secret_key, options_.region, "s3", options_.session_token),
      mode_(options_.conditional_writes) {
  const std::string& region = options_.region;
  if (region.empty() || region.size() > 64 ||
      region.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos) {
    throw Error(ErrorCode::invalid_argument,
                fmt::format("invalid S3 region '{}': it must be 1 to 64 of a-z 0-9 -", printable(region, 80)));
  }
  if (options_.access_key.empty() || options_.secret_key.empty())
    throw Error(ErrorCode::invalid_argument, "the S3 access key and secret key must not be empty");
  if (options_.max_attempts < 1 || options_.max_attempts > 20)
    throw Error(ErrorCode::invalid_argument, "S3 max_attempts must be between 1 and 20");
  if (options_.list_page_size < 1 || options_.list_page_size > 1000)
    throw Error(ErrorCode::invalid_argument, "S3 list_page_size must be between 1 and 1000");
  if (options_.url_signing == UrlSigning::server)
    server_urls_.emplace(options_.bucket, options_.signing_secret, options_.public_base_url);
}

S3ObjectStore::~S3ObjectStore() = default;

std::string S3ObjectStore::bucket() const { return options_.bucket; }

ConditionalWrites S3ObjectStore::conditional_writes() const {
  std::lock_guard<std::mutex> lock(mode_mutex_);
  return mode_;
}

net::HttpResponse S3ObjectStore::perform(Call& call) const {
  const auto start = std::chrono::steady_clock::now();
  std::chrono::milliseconds delay = options_.retry_base;
  thread_local std::minstd_rand jitter(std::random_device{}());
  for (int attempt = 1;; ++attempt) {
    if (options_.on_attempt) options_.on_attempt(call.method, call.key, attempt);
    if (call.reset) call.reset();
    sigv4::Request signed_request{call.method, call.path, call.query, {}, call.payload_hash};
    // Host is set, not left to libcurl: what is signed is what is sent.
    signed_request.headers.emplace_back("host", endpoint_.host());
    signed_request.headers.emplace_back("x-amz-content-sha256", call.payload_hash);
    for (const auto& h : call.headers) signed_request.headers.push_back(h);
    const std::string authorization = signer_.authorize(signed_request, now_ms() / 1000);

    net::HttpRequest request;
    request.method = call.method;
    request.url = endpoint_.url(call.path, sigv4::canonical_query(call.query));
    request.headers.assign(signed_request.headers.begin(), signed_request.headers.end());
    request.headers.emplace_back("authorization", authorization);
    request.body_view = call.body;
    request.connect_timeout = options_.connect_timeout;
    request.request_timeout = std::chrono::milliseconds(0);  // large objects: the idle timeout bounds a stall
    request.idle_timeout = options_.idle_timeout;
    if (call.on_body) {
      request.on_headers = [&call](const net::HttpResponse& head) {
        const bool ok = head.status / 100 == 2;
        if (ok && call.on_head) call.on_head(head);
        return ok;
      };
      request.on_body = call.on_body;
    }

    std::optional<net::HttpResponse> response;
    std::optional<Error> transport;
    try {
      response = http_.send(request);
      const long s = response->status;
      bool transient = s == 429 || s == 500 || s == 502 || s == 503 || s == 504;
      if (!transient && (s == 400 || s == 409)) {
        const std::string code = parse_s3_error(response->body).code;
        transient = code == "RequestTimeout" || code == "ConditionalRequestConflict";
      }
      if (!transient) return std::move(*response);
    } catch (const Error& e) {
      // Network failures and timeouts are retried; what the callbacks threw is not.
      if (e.code() != ErrorCode::io && e.code() != ErrorCode::timeout) throw;
      transport = e;
    }
    call.retried = true;
    const auto elapsed =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    if (attempt >= options_.max_attempts || elapsed + delay > options_.retry_budget) {
      const std::string note = fmt::format(" (gave up after {} attempts in {} ms)", attempt, elapsed.count());
      if (response) fail(call, *response, note);
      const std::string where = call.key.empty() ? endpoint_.describe("") : endpoint_.describe(call.key);
      throw Error(transport->code(), fmt::format("S3 {} {}: {}{}", call.method, where, transport->message(), note));
    }
    // Half the delay for sure, half at random: retries of many clients spread out.
    const auto half = delay.count() / 2;
    std::this_thread::sleep_for(std::chrono::milliseconds(
        half + std::uniform_int_distribution<int64_t>(0, std::max<int64_t>(half, 0))(jitter)));
    delay = std::min(delay * 2, options_.retry_cap);
  }
}

void S3ObjectStore::fail(const Call& call, const net::HttpResponse& response, std::string_view note) const {
  const S3ErrorBody error = parse_s3_error(response.body);
  ErrorCode code = ErrorCode::io;
  if (response.status == 401 || response.status == 403) code = ErrorCode::unauthorized;
  if (error.code == "NoSuchBucket") code = ErrorCode::not_found;
  if (error.code == "EntityTooLarge") code = ErrorCode::too_large;
  const std::string where = call.key.empty() ? endpoint_.describe("") : endpoint_.describe(call.key);
  std::string detail = error.code.empty() ? std::string() : " " + printable(error.code, 60);
  if (!error.message.empty()) detail += ": " + printable(error.message, 200);
  throw Error(code, fmt::format("S3 {} {}: HTTP {}{}{}", call.method, where, response.status, detail, note));
}

S3ObjectStore::PutResult S3ObjectStore::put_object(std::string_view key, std::string_view bytes,
                                                   std::string_view content_type, bool if_none_match) {
  Call call("PUT", key, endpoint_.object_path(key));
  call.payload_hash = crypto::sha256_hex(bytes);
  call.headers = {{"content-type", std::string(content_type.empty() ? kDefaultContentType : content_type)},
                  {std::string(kShaHeader), call.payload_hash}};
  std::string write_id;
  if (if_none_match) {
    write_id = crypto::random_hex(16);
    call.headers.emplace_back("if-none-match", "*");
    call.headers.emplace_back(std::string(kWriteIdHeader), write_id);
  }
  call.body = bytes;
  const net::HttpResponse response = perform(call);
  if (response.status / 100 == 2) return PutResult::written;
  if (if_none_match && response.status == 412) {
    // An earlier attempt may have written it before its answer was lost: then the object is ours.
    if (call.retried) {
      Call check("HEAD", key, endpoint_.object_path(key));
      const net::HttpResponse head = perform(check);
      if (head.status == 200 && head.header(kWriteIdHeader) == write_id) return PutResult::written;
    }
    return PutResult::exists;
  }
  if (if_none_match && response.status == 501) return PutResult::unsupported;
  fail(call, response, "");
}

void S3ObjectStore::put(std::string_view key, std::string_view bytes, std::string_view content_type) {
  validate_object_key(key);
  validate_content_type(content_type);
  put_object(key, bytes, content_type, false);
}

ConditionalWrites S3ObjectStore::probe_conditional_writes() {
  const std::string key = std::string(kProbePrefix) + crypto::random_hex(8);
  PutResult second = PutResult::unsupported;
  if (put_object(key, "probe", "text/plain", true) == PutResult::written)
    second = put_object(key, "probe again", "text/plain", true);
  Call cleanup("DELETE", key, endpoint_.object_path(key));
  perform(cleanup);
  return second == PutResult::exists ? ConditionalWrites::native : ConditionalWrites::emulated;
}

bool S3ObjectStore::put_if_absent(std::string_view key, std::string_view bytes, std::string_view content_type) {
  validate_object_key(key);
  validate_content_type(content_type);
  ConditionalWrites mode;
  {
    std::lock_guard<std::mutex> lock(mode_mutex_);
    if (mode_ == ConditionalWrites::probe) mode_ = probe_conditional_writes();
    mode = mode_;
  }
  if (mode == ConditionalWrites::native) {
    const PutResult result = put_object(key, bytes, content_type, true);
    if (result == PutResult::unsupported)
      throw Error(ErrorCode::unsupported,
                  fmt::format("S3 PUT {}: the server does not implement If-None-Match (set conditional_writes to "
                              "\"emulated\" or \"probe\")",
                              endpoint_.describe(key)));
    return result == PutResult::written;
  }
  if (head(key)) return false;
  put_object(key, bytes, content_type, false);
  return true;
}

std::optional<std::string> S3ObjectStore::get(std::string_view key) {
  validate_object_key(key);
  std::string body;
  Call call("GET", key, endpoint_.object_path(key));
  call.reset = [&] { body.clear(); };
  call.on_head = [&](const net::HttpResponse& head) {
    // Sized once by Content-Length: a large object is not copied as the string grows.
    if (const auto length = parse_u64(head.header("content-length")))
      body.reserve(static_cast<size_t>(std::min<uint64_t>(*length, uint64_t{1} << 32)));
  };
  call.on_body = [&](std::string_view piece) { body.append(piece); };
  const net::HttpResponse response = perform(call);
  if (response.status == 200) return body;
  if (response.status == 404 && parse_s3_error(response.body).code != "NoSuchBucket") return std::nullopt;
  fail(call, response, "");
}

std::optional<std::string> S3ObjectStore::read(std::string_view key, uint64_t offset, size_t max_bytes) {
  validate_object_key(key);
  if (max_bytes == 0) return head(key) ? std::optional<std::string>(std::string()) : std::nullopt;
  std::string out;
  long status = 0;
  uint64_t seen = 0;  // bytes of a whole-object answer passed so far
  Call call("GET", key, endpoint_.object_path(key));
  call.headers = {{"range", fmt::format("bytes={}-{}", offset, offset + max_bytes - 1)}};
  call.reset = [&] {
    out.clear();
    seen = 0;
  };
  call.on_head = [&](const net::HttpResponse& head) {
    status = head.status;
    // "bytes 0-0/0": the object is empty (s3rver then announces one byte it never sends).
    const std::string range = head.header("content-range").value_or("");
    if (status == 206 && range.size() > 2 && range.compare(range.size() - 2, 2, "/0") == 0) throw Enough{};
    out.reserve(max_bytes);
  };
  call.on_body = [&](std::string_view piece) {
    if (status == 200) {  // Range ignored: keep the window, stop once it is full
      const uint64_t start = seen;
      seen += piece.size();
      if (seen <= offset) return;
      piece.remove_prefix(static_cast<size_t>(offset > start ? offset - start : 0));
    }
    piece = piece.substr(0, max_bytes - out.size());
    out.append(piece);
    if (status == 200 && out.size() == max_bytes) throw Enough{};
  };
  net::HttpResponse response;
  try {
    response = perform(call);
  } catch (const Enough&) {
    return out;
  }
  if (response.status == 206 || response.status == 200) return out;
  if (response.status == 416) return std::string();  // the object exists; the offset is at or past its end
  if (response.status == 404 && parse_s3_error(response.body).code != "NoSuchBucket") return std::nullopt;
  fail(call, response, "");
}

std::optional<ObjectInfo> S3ObjectStore::head(std::string_view key) {
  validate_object_key(key);
  Call call("HEAD", key, endpoint_.object_path(key));
  const net::HttpResponse response = perform(call);
  if (response.status == 404) return std::nullopt;
  if (response.status != 200) fail(call, response, "");
  ObjectInfo info;
  info.key = std::string(key);
  info.size = parse_u64(response.header("content-length")).value_or(0);
  info.content_type = response.header("content-type").value_or(std::string(kDefaultContentType));
  const std::string sha = response.header(kShaHeader).value_or("");
  info.sha256 = is_hex64(sha) ? sha : std::string();
  info.modified_at = parse_http_date_ms(response.header("last-modified").value_or("")).value_or(0);
  return info;
}

bool S3ObjectStore::remove(std::string_view key) {
  validate_object_key(key);
  // DELETE answers 204 whether or not the key existed: the HEAD says whether something is deleted.
  if (!head(key)) return false;
  Call call("DELETE", key, endpoint_.object_path(key));
  const net::HttpResponse response = perform(call);
  if (response.status == 204 || response.status == 200) return true;
  if (response.status == 404 && parse_s3_error(response.body).code != "NoSuchBucket") return false;
  fail(call, response, "");
}

std::vector<ObjectInfo> S3ObjectStore::list(std::string_view prefix) {
  validate_key_prefix(prefix);
  std::vector<ObjectInfo> out;
  std::string token;
  while (true) {
    Call call("GET", "", endpoint_.bucket_path());
    call.query = {{"list-type", "2"},
                  {"max-keys", std::to_string(options_.list_page_size)},
                  {"prefix", endpoint_.prefix() + std::string(prefix)}};
    if (!token.empty()) call.query.emplace_back("continuation-token", token);
    const net::HttpResponse response = perform(call);
    if (response.status != 200) fail(call, response, "");
    const S3ListPage page = parse_list_objects_v2(response.body);
    for (const S3ListEntry& entry : page.entries) {
      if (!entry.key.starts_with(endpoint_.prefix())) continue;
      const std::string key = entry.key.substr(endpoint_.prefix().size());
      // Objects no key can name (the probe's, other writers') are not this store's.
      if (object_key_problem(key) != nullptr) continue;
      if (auto info = head(key)) out.push_back(std::move(*info));  // gone meanwhile: not listed
    }
    if (!page.truncated) break;
    token = page.next_token;
  }
  std::sort(out.begin(), out.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  return out;
}

std::string S3ObjectStore::sign_url(std::string_view key, int64_t expires_at_ms) const {
  if (server_urls_) return server_urls_->sign(key, expires_at_ms);
  validate_object_key(key);
  if (expires_at_ms < 0)
    throw Error(ErrorCode::invalid_argument, fmt::format("expiry {} ms must not be negative", expires_at_ms));
  const int64_t signed_at = now_ms() / 1000;
  const int64_t expires = (expires_at_ms - signed_at * 1000 + 999) / 1000;
  return endpoint_.presign_get(signer_, key, signed_at, expires);
}

std::string S3ObjectStore::verify_url(std::string_view url, int64_t now) const {
  if (server_urls_) return server_urls_->verify(url, now);
  return endpoint_.verify_presigned_get(signer_, url, now);
}

}  // namespace v1
}  // namespace agentrt
