// What the HTTP model providers (OpenAI-compatible, Anthropic) share: the endpoint (URL, key, headers,
// timeouts), servers' error bodies, and the official SDKs' retry rules. Pure logic apart from the endpoint's
// reading of the key from the environment.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "agentrt/cancel.hpp"
#include "agentrt/error.hpp"
#include "agentrt/json.hpp"
#include "agentrt/model.hpp"
#include "net/http_client.hpp"
#include "net/sse_parser.hpp"

namespace agentrt {
inline namespace v1 {
namespace provider_http {

// ---- the endpoint ------------------------------------------------------------------------------------

// What a ModelEndpoint is made from; endpoint_settings() fills it from a provider's configuration.
struct EndpointSettings {
  std::string service;  // "OpenAI", "Anthropic": names the base URL in errors
  std::string base_url;
  std::string api_key;      // wins over api_key_env when set
  std::string api_key_env;  // the environment variable the key is read from
  net::HttpHeaders extra_headers;
  std::chrono::milliseconds connect_timeout{10'000}, request_timeout{600'000}, idle_timeout{120'000};
  // The key goes out as `<key_header>: <key_prefix><key>`.
  std::string key_header = "Authorization";
  std::string key_prefix = "Bearer ";
};

// The settings every provider configuration has under the same names (OpenAIConfig, AnthropicConfig).
template <class Config>
EndpointSettings endpoint_settings(const Config& c, std::string service) {
  EndpointSettings s;
  s.service = std::move(service);
  s.base_url = c.base_url;
  s.api_key = c.api_key;
  s.api_key_env = c.api_key_env;
  s.extra_headers.assign(c.extra_headers.begin(), c.extra_headers.end());
  s.connect_timeout = c.connect_timeout;
  s.request_timeout = c.request_timeout;
  s.idle_timeout = c.idle_timeout;
  return s;
}

// The resolved server settings of a provider: URL, key, headers, timeouts. Immutable after construction, so
// thread-safe.
class ModelEndpoint {
 public:
  // Reads the key from settings.api_key, else from the environment variable settings.api_key_env.
  // Throws Error(invalid_argument) for an empty base URL.
  explicit ModelEndpoint(EndpointSettings settings);

  // A POST to base_url + path with the timeouts, the key header (when there is a key), `headers`, and the
  // configured extra headers (which replace same-named ones).
  net::HttpRequest request(std::string_view path, const net::HttpHeaders& headers) const;

  // The text with the key (if a server quoted it back) replaced by "[redacted]".
  std::string redact(std::string text) const;
  bool has_key() const { return !api_key_.empty(); }
  // For error messages: where the key should have come from.
  std::string key_source() const;
  // Throws what a non-2xx answer means: Error(unauthorized) for 401, else Error(model), "<what>: <the server's
  // words>" (redacted, and saying where the key should have come from when none was sent), as a
  // RetryableError when the status and body say a retry may help (429, 5xx; honouring Retry-After up to
  // `max_retry_after`).
  [[noreturn]] void throw_failure(const net::HttpResponse& response, std::string_view what,
                                  std::chrono::milliseconds max_retry_after) const;

 private:
  std::string base_url_;
  std::string api_key_;
  std::string api_key_env_;
  std::string key_header_, key_prefix_;
  net::HttpHeaders extra_headers_;
  std::chrono::milliseconds connect_timeout_, request_timeout_, idle_timeout_;
};

// ---- errors ------------------------------------------------------------------------------------------

// An error as a server described it, from any of the shapes in use: {"error":{...}} (OpenAI, Anthropic,
// vLLM, llama.cpp, Ollama), {"error":"text"}, flat {"object":"error",...} (older vLLM), {"detail":...}
// (FastAPI), or a body that is not JSON at all.
struct ApiError {
  std::string message;
  std::string type;
  std::string code;  // a string, or an integer as text (vLLM, llama.cpp)
  std::string param;
};
ApiError parse_api_error(std::string_view body);
std::optional<ApiError> api_error_from_json(const json& j);  // nullopt when `j` is not an error object

// "HTTP 429 (type insufficient_quota, code insufficient_quota): You exceeded ..." — one line.
std::string describe_api_error(long status, const ApiError& e);

// One line of printable text from a server's bytes, cut after `max` bytes.
std::string one_line(std::string_view text, size_t max);

// A server's JSON text, parsed; discarded when it is not JSON or is nested deeper than the nesting limit
// (its copies and dumps would overflow the stack).
json parse_server_json(std::string_view text);

// A server's JSON as text for a message: its strings may hold any bytes.
std::string dump_for_message(const json& j);

// A field as text: strings as they are, numbers (vLLM's and llama.cpp's integer codes) printed; "" otherwise.
std::string text_field(const json& obj, const char* key);

// The number at obj[key] as an integer (a fraction cut off), 0 when there is none or obj is no object.
int64_t count_field(const json& obj, const char* key);

// The string at obj[key], or nullptr when there is none (absent, or not a string).
const std::string* string_field(const json& obj, const char* key);

// "Bearer sk-..." never appears in a message we make, but a server may quote the key back to us.
std::string redact_secret(std::string text, const std::string& secret);

// ---- retries -----------------------------------------------------------------------------------------

// Whether a failed HTTP response may succeed when sent again (the official SDKs' rule): x-should-retry
// first, then 408, 409, 429 (except insufficient_quota) and 5xx (Anthropic's 529 "overloaded" included).
bool should_retry(long status, const net::HttpHeaders& headers, const ApiError& error);

// The delay a server asked for: retry-after-ms (milliseconds, may be fractional), then Retry-After
// (seconds or an HTTP date, relative to `now`). nullopt when absent, unparsable, negative or over `max`.
std::optional<std::chrono::milliseconds> server_retry_delay(const net::HttpHeaders& headers,
                                                            std::chrono::system_clock::time_point now,
                                                            std::chrono::milliseconds max);

// base * 2^retry, capped at max, times `jitter` (the SDKs draw it from [0.75, 1]).
std::chrono::milliseconds backoff_delay(int retry, std::chrono::milliseconds base, std::chrono::milliseconds max,
                                        double jitter);

double retry_jitter();  // uniform in [0.75, 1]

// A failure that another attempt may fix; `delay` is what the server asked for, if anything.
// Immutable, like Error.
class RetryableError : public Error {
 public:
  RetryableError(Error error, std::optional<std::chrono::milliseconds> delay)
      : Error(std::move(error)), delay_(delay) {}
  std::optional<std::chrono::milliseconds> delay() const { return delay_; }

 private:
  std::optional<std::chrono::milliseconds> delay_;
};

// Calls `attempt` until it returns; a RetryableError is retried up to config.max_retries times after the
// server's delay or the backoff (config.retry_base_backoff, config.retry_max_backoff; a cancellable wait), any
// other exception propagates. When retries run out, the last failure is thrown as a plain Error.
template <class Config, class Attempt>
auto with_retries(const Config& config, const CancelToken& cancel, Attempt&& attempt) -> decltype(attempt()) {
  for (int retry = 0;; ++retry) {
    try {
      return attempt();
    } catch (const RetryableError& e) {
      if (retry >= config.max_retries) {
        if (retry == 0) throw Error(e.code(), e.message());
        throw Error(e.code(), e.message() + " (gave up after " + std::to_string(retry + 1) + " attempts)");
      }
      auto delay =
          e.delay().value_or(backoff_delay(retry, config.retry_base_backoff, config.retry_max_backoff, retry_jitter()));
      if (cancel.wait_for(delay)) throw Error(ErrorCode::cancelled, "cancelled while waiting to retry");
    }
  }
}

// ---- streamed calls ----------------------------------------------------------------------------------

// What send_streamed() hands a streamed answer to, and asks about it when the transfer fails.
struct StreamHandlers {
  std::string what;  // the start of every error message: "anthropic model 'claude-x'"
  std::chrono::milliseconds max_retry_after{60'000};
  std::function<void(const net::SseEvent&)> on_event;  // each whole event
  std::function<bool()> emitted;                       // whether the sink has seen anything
  // Whether the error event the stream carried is the server's trouble (worth another attempt); nullopt when
  // no error event came.
  std::function<std::optional<bool>()> stream_error_retryable;
};

// The handlers of a stream that `acc` reads (an accumulator with on_event(), emitted() and stream_error());
// `retryable(error)` says whether an error event is the server's trouble. They refer to `acc`: keep it alive.
template <class Accumulator, class Retryable>
StreamHandlers stream_handlers(Accumulator& acc, std::string what, std::chrono::milliseconds max_retry_after,
                               Retryable retryable) {
  StreamHandlers h;
  h.what = std::move(what);
  h.max_retry_after = max_retry_after;
  h.on_event = [&acc](const net::SseEvent& ev) { acc.on_event(ev); };
  h.emitted = [&acc] { return acc.emitted(); };
  h.stream_error_retryable = [&acc, retryable]() -> std::optional<bool> {
    if (const auto& se = acc.stream_error()) return retryable(*se);
    return std::nullopt;
  };
  return h;
}

// The longest unfinished event a stream may hold us to (a server that never ends its event must not grow our
// memory without bound).
inline constexpr size_t kMaxEventBytes = 16u << 20;

// A 2xx answer of a streamed call, once send_streamed() has returned.
struct StreamedAnswer {
  bool streamed = false;
  std::string body;                         // the whole answer when it was not an event stream
  std::optional<net::SseEvent> last_event;  // streamed: the event the stream's end cut short (SseParser::finish)
};

// Sends one attempt of a streamed model call. A 2xx event stream goes event by event to handlers.on_event;
// a 2xx answer that is not an event stream (a server that ignored stream:true) is returned whole; any other
// status is thrown as endpoint.throw_failure() says. A failed transfer is thrown as
// Error "<what>: <why>" (redacted), a RetryableError when nothing reached the sink yet and either the stream's
// error event says so or, without one, the connection failed or timed out. Error(cancelled) passes unchanged.
StreamedAnswer send_streamed(net::HttpClient& client, const ModelEndpoint& endpoint, net::HttpRequest request,
                             const CancelToken& cancel, const StreamHandlers& handlers);

// The result of an attempt whose transfer send_streamed() completed: `acc` (as stream_handlers' accumulator, with
// on_last_event() and finish(require_end)) reads the event the stream's end cut short and finishes; an answer that
// was not a stream is parsed (depth-checked) and given to `on_whole`. A failure is thrown as Error "<what>: <why>"
// (redacted) under send_streamed()'s rule: a RetryableError when nothing reached the sink yet and either the
// stream's error event says so or, without one, the stream was cut short.
template <class Accumulator, class OnWhole>
ModelResult finish_streamed(Accumulator& acc, const StreamedAnswer& answer, const StreamHandlers& handlers,
                            const ModelEndpoint& endpoint, OnWhole&& on_whole) {
  try {
    if (!answer.streamed) {
      const json whole = parse_server_json(answer.body);
      if (whole.is_discarded()) throw Error(ErrorCode::model, "the answer is neither an event stream nor JSON");
      on_whole(whole);
    } else if (answer.last_event) {
      acc.on_last_event(*answer.last_event);
    }
    return acc.finish(/*require_end=*/true);
  } catch (const Error& e) {
    Error failure(e.code(), endpoint.redact(handlers.what + ": " + e.message()));
    if (acc.emitted()) throw failure;
    if (const std::optional<bool> retryable = handlers.stream_error_retryable()) {
      if (*retryable) throw RetryableError(std::move(failure), std::nullopt);
      throw failure;
    }
    // A cut stream that showed nothing yet is a connection failure like any other.
    if (!acc.done() && answer.streamed) throw RetryableError(std::move(failure), std::nullopt);
    throw failure;
  }
}

}  // namespace provider_http
}  // namespace v1
}  // namespace agentrt
