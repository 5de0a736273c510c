// The shared pieces of the HTTP model providers: the endpoint, error bodies, retry rules.
#include "model/provider_http.hpp"

#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <random>

#include "agentrt/json_limits.hpp"

namespace agentrt {
inline namespace v1 {
namespace provider_http {
namespace {

std::mt19937_64& rng() {
  thread_local std::mt19937_64 gen{std::random_device{}()};
  return gen;
}

std::optional<double> parse_number(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

json parse_server_json(std::string_view text) {
  if (json_text_depth(text, kDefaultMaxJsonDepth) > kDefaultMaxJsonDepth) return json::value_t::discarded;
  return json::parse(text, nullptr, /*allow_exceptions=*/false);
}

// nlohmann takes invalid UTF-8 on the way in and throws on the way out unless told to replace it.
std::string dump_for_message(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string text_field(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number()) return it->dump();
  return {};
}

int64_t count_field(const json& obj, const char* key) {
  if (!obj.is_object()) return 0;
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return 0;
  return it->is_number_float() ? static_cast<int64_t>(it->get<double>()) : it->get<int64_t>();
}

std::string one_line(std::string_view text, size_t max) {
  std::string out;
  for (char c : text.substr(0, max)) {
    const auto u = static_cast<unsigned char>(c);
    out.push_back(u < 0x20 || u == 0x7f ? ' ' : c);
  }
  if (text.size() > max) out += "...";
  return out;
}

const std::string* string_field(const json& obj, const char* key) {
  auto it = obj.find(key);
  return (it != obj.end() && it->is_string()) ? it->get_ptr<const std::string*>() : nullptr;
}

// ---- errors ------------------------------------------------------------------------------------------

std::optional<ApiError> api_error_from_json(const json& j) {
  if (!j.is_object()) return std::nullopt;
  ApiError e;
  if (auto it = j.find("error"); it != j.end() && !it->is_null()) {
    if (it->is_object()) {
      e.message = text_field(*it, "message");
      e.type = text_field(*it, "type");
      e.code = text_field(*it, "code");
      e.param = text_field(*it, "param");
      if (e.message.empty()) e.message = dump_for_message(*it);
    } else if (it->is_string()) {
      e.message = it->get<std::string>();
    } else {
      e.message = dump_for_message(*it);
    }
    return e;
  }
  if (text_field(j, "object") == "error") {  // older vLLM: the error fields at the top level
    e.message = text_field(j, "message");
    e.type = text_field(j, "type");
    e.code = text_field(j, "code");
    e.param = text_field(j, "param");
    return e;
  }
  if (auto it = j.find("detail"); it != j.end()) {  // FastAPI-based servers
    e.message = it->is_string() ? it->get<std::string>() : dump_for_message(*it);
    return e;
  }
  return std::nullopt;
}

ApiError parse_api_error(std::string_view body) {
  json j = parse_server_json(body);
  if (!j.is_discarded()) {
    if (auto e = api_error_from_json(j)) return *e;
    if (j.is_object() && j.contains("message")) {
      return ApiError{text_field(j, "message"), text_field(j, "type"), text_field(j, "code"), {}};
    }
  }
  ApiError e;
  e.message = body.empty() ? std::string("(empty response body)") : one_line(body, 300);
  return e;
}

std::string describe_api_error(long status, const ApiError& e) {
  std::string out = status > 0 ? fmt::format("HTTP {}", status) : std::string("error in the stream");
  if (!e.type.empty() && !e.code.empty() && e.type != e.code) {
    out += fmt::format(" (type {}, code {})", e.type, e.code);
  } else if (!e.type.empty() || !e.code.empty()) {
    out += fmt::format(" ({})", e.type.empty() ? e.code : e.type);
  }
  out += ": ";
  out += e.message.empty() ? std::string("no error message") : one_line(e.message, 2000);
  return out;
}

std::string redact_secret(std::string text, const std::string& secret) {
  if (secret.size() < 4) return text;
  for (size_t pos = text.find(secret); pos != std::string::npos; pos = text.find(secret, pos)) {
    text.replace(pos, secret.size(), "[redacted]");
  }
  return text;
}

// ---- retries -----------------------------------------------------------------------------------------

bool should_retry(long status, const net::HttpHeaders& headers, const ApiError& error) {
  if (auto h = net::find_header(headers, "x-should-retry")) {
    if (*h == "true") return true;
    if (*h == "false") return false;
  }
  if (status == 429 && (error.code == "insufficient_quota" || error.type == "insufficient_quota")) return false;
  return status == 408 || status == 409 || status == 429 || status >= 500;
}

std::optional<std::chrono::milliseconds> server_retry_delay(const net::HttpHeaders& headers,
                                                            std::chrono::system_clock::time_point now,
                                                            std::chrono::milliseconds max) {
  std::optional<double> ms;
  if (auto h = net::find_header(headers, "retry-after-ms")) ms = parse_number(*h);
  if (!ms) {
    if (auto h = net::find_header(headers, "retry-after")) {
      if (auto secs = parse_number(*h)) {
        ms = *secs * 1000.0;
      } else {
        const time_t when = curl_getdate(h->c_str(), nullptr);  // RFC 7231 HTTP-date and its older forms
        if (when != -1) {
          const auto at = std::chrono::system_clock::from_time_t(when);
          ms = static_cast<double>(std::chrono::duration_cast<std::chrono::milliseconds>(at - now).count());
        }
      }
    }
  }
  if (!ms || *ms < 0 || *ms > static_cast<double>(max.count())) return std::nullopt;
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(*ms)));
}

std::chrono::milliseconds backoff_delay(int retry, std::chrono::milliseconds base, std::chrono::milliseconds max,
                                        double jitter) {
  const double raw = static_cast<double>(base.count()) * std::pow(2.0, std::min(retry, 30));
  const double capped = std::min(raw, static_cast<double>(max.count()));
  return std::chrono::milliseconds(static_cast<int64_t>(capped * jitter));
}

double retry_jitter() {
  std::uniform_real_distribution<double> d(0.75, 1.0);
  return d(rng());
}

// ---- the endpoint ------------------------------------------------------------------------------------

ModelEndpoint::ModelEndpoint(EndpointSettings settings)
    : base_url_(std::move(settings.base_url)),
      api_key_(std::move(settings.api_key)),
      api_key_env_(std::move(settings.api_key_env)),
      key_header_(std::move(settings.key_header)),
      key_prefix_(std::move(settings.key_prefix)),
      extra_headers_(std::move(settings.extra_headers)),
      connect_timeout_(settings.connect_timeout),
      request_timeout_(settings.request_timeout),
      idle_timeout_(settings.idle_timeout) {
  if (api_key_.empty() && !api_key_env_.empty()) {
    if (const char* v = std::getenv(api_key_env_.c_str())) api_key_ = v;
  }
  while (!base_url_.empty() && base_url_.back() == '/') base_url_.pop_back();
  if (base_url_.empty())
    throw Error(ErrorCode::invalid_argument, fmt::format("the {} base URL is empty", settings.service));
}

net::HttpRequest ModelEndpoint::request(std::string_view path, const net::HttpHeaders& headers) const {
  net::HttpRequest r;
  r.method = "POST";
  r.url = base_url_;
  r.url.append(path);
  r.connect_timeout = connect_timeout_;
  r.request_timeout = request_timeout_;
  r.idle_timeout = idle_timeout_;
  if (!api_key_.empty()) r.headers.emplace_back(key_header_, key_prefix_ + api_key_);
  r.headers.insert(r.headers.end(), headers.begin(), headers.end());
  for (const auto& extra : extra_headers_) {
    // Not a structured binding: clang before 16 cannot capture one in a lambda (the fuzz build is clang's).
    const std::string& name = extra.first;
    std::erase_if(r.headers, [&](const auto& h) { return net::header_name_equals(h.first, name); });
    r.headers.emplace_back(name, extra.second);
  }
  return r;
}

std::string ModelEndpoint::redact(std::string text) const { return redact_secret(std::move(text), api_key_); }

void ModelEndpoint::throw_failure(const net::HttpResponse& response, std::string_view what,
                                  std::chrono::milliseconds max_retry_after) const {
  const ApiError api = parse_api_error(response.body);
  std::string message = redact(fmt::format("{}: {}", what, describe_api_error(response.status, api)));
  if (response.status == 401 && !has_key()) message += fmt::format(" (no API key was sent: {})", key_source());
  Error failure(response.status == 401 ? ErrorCode::unauthorized : ErrorCode::model, std::move(message));
  if (should_retry(response.status, response.headers, api))
    throw RetryableError(std::move(failure),
                         server_retry_delay(response.headers, std::chrono::system_clock::now(), max_retry_after));
  throw failure;
}

std::string ModelEndpoint::key_source() const {
  return api_key_env_.empty() ? std::string("no api_key was given") : api_key_env_ + " is not set";
}

// ---- streamed calls ----------------------------------------------------------------------------------

StreamedAnswer send_streamed(net::HttpClient& client, const ModelEndpoint& endpoint, net::HttpRequest request,
                             const CancelToken& cancel, const StreamHandlers& handlers) {
  net::SseParser parser;
  bool streaming = false;
  request.on_headers = [&](const net::HttpResponse& head) {
    if (head.status / 100 != 2) return false;  // an error body: read it whole
    const std::string type = head.header("content-type").value_or("");
    streaming = type.find("application/json") == std::string::npos;
    return streaming;
  };
  request.on_body = [&](std::string_view bytes) {
    parser.feed(bytes, handlers.on_event);
    if (parser.pending_bytes() > kMaxEventBytes) {
      throw Error(ErrorCode::model, fmt::format("the model stream sent an event over {} bytes", kMaxEventBytes));
    }
  };

  net::HttpResponse response;
  try {
    response = client.send(request, cancel);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::cancelled) throw;
    Error failure(e.code(), endpoint.redact(fmt::format("{}: {}", handlers.what, e.message())));
    // Once a subscriber saw part of this answer, another attempt would show it a second, different one.
    if (handlers.emitted()) throw failure;
    if (const std::optional<bool> retryable = handlers.stream_error_retryable()) {
      if (*retryable) throw RetryableError(std::move(failure), std::nullopt);
      throw failure;
    }
    if (e.code() == ErrorCode::timeout || e.code() == ErrorCode::io)
      throw RetryableError(std::move(failure), std::nullopt);
    throw failure;
  }
  if (response.status / 100 != 2) endpoint.throw_failure(response, handlers.what, handlers.max_retry_after);
  StreamedAnswer answer;
  answer.streamed = streaming;
  if (streaming) {
    answer.last_event = parser.finish();
  } else {
    answer.body = std::move(response.body);
  }
  return answer;
}

}  // namespace provider_http
}  // namespace v1
}  // namespace agentrt
