// The OpenAI chat-completions wire format: request bodies, the streamed-chunk accumulator, error bodies,
// and the SDKs' retry rules. Pure logic (no I/O), shared by the provider and the transcriber.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "agentrt/error.hpp"
#include "agentrt/json.hpp"
#include "agentrt/model.hpp"
#include "agentrt/openai.hpp"
#include "net/http_client.hpp"
#include "net/sse_parser.hpp"

namespace agentrt {
inline namespace v1 {
namespace openai {

// ---- requests ----------------------------------------------------------------------------------------

// The resolved server settings the provider and the transcriber share: URL, key, headers, timeouts.
// Immutable after construction, so thread-safe.
class OpenAIEndpoint {
 public:
  // Reads the key from config.api_key, else from the environment variable config.api_key_env.
  // Throws Error(invalid_argument) for an empty base URL.
  explicit OpenAIEndpoint(const OpenAIConfig& config);

  // A POST to base_url + path with the timeouts, `Authorization` (when there is a key), `headers`, and
  // the configured extra headers (which replace same-named ones).
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
  net::HttpHeaders extra_headers_;
  std::chrono::milliseconds connect_timeout_, request_timeout_, idle_timeout_;
};

// The JSON body of POST /chat/completions for `request`: streaming with usage, the configured model and
// parameters for the request's stage (request.model and request.params win), messages, tools.
// Throws Error(invalid_argument) / Error(unsupported) for content the API cannot carry.
json build_chat_body(const ModelRequest& request, const OpenAIConfig& config);

// One history message as a chat-completions message; nullopt for roles that are never sent (activity,
// reasoning). User parts become text / image_url / input_audio / file parts; other roles carry text only
// (the API allows nothing else there), so their media parts are left out.
std::optional<json> to_openai_message(const Message& message);

// A fresh tool-call id for servers that send none ("call_" + 24 random alphanumerics).
std::string make_tool_call_id();

// The string at obj[key], or nullptr when there is none (absent, or not a string).
const std::string* string_field(const json& obj, const char* key);

// ---- errors ------------------------------------------------------------------------------------------

// An error as a server described it, from any of the shapes in use: {"error":{...}} (OpenAI, vLLM,
// llama.cpp, Ollama), {"error":"text"}, flat {"object":"error",...} (older vLLM), {"detail":...}
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

// ---- retries -----------------------------------------------------------------------------------------

// Whether a failed HTTP response may succeed when sent again (the official SDKs' rule): x-should-retry
// first, then 408, 409, 429 (except insufficient_quota) and 5xx.
bool should_retry(long status, const net::HttpHeaders& headers, const ApiError& error);

// The delay a server asked for: retry-after-ms (milliseconds, may be fractional), then Retry-After
// (seconds or an HTTP date, relative to `now`). nullopt when absent, unparsable, negative or over `max`.
std::optional<std::chrono::milliseconds> server_retry_delay(const net::HttpHeaders& headers,
                                                            std::chrono::system_clock::time_point now,
                                                            std::chrono::milliseconds max);

// base * 2^retry, capped at max, times `jitter` (the SDKs draw it from [0.75, 1]).
std::chrono::milliseconds backoff_delay(int retry, std::chrono::milliseconds base, std::chrono::milliseconds max,
                                        double jitter);

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
// server's delay or the backoff (a cancellable wait), any other exception propagates. When retries run
// out, the last failure is thrown as a plain Error.
template <class Attempt>
auto with_retries(const OpenAIConfig& config, const CancelToken& cancel, Attempt&& attempt) -> decltype(attempt());

// "Bearer sk-..." never appears in a message we make, but a server may quote the key back to us.
std::string redact_secret(std::string text, const std::string& secret);

// ---- responses ---------------------------------------------------------------------------------------

// OpenAI usage ({prompt_tokens, completion_tokens, total_tokens, *_details}) as AG-UI TokenUsage.
TokenUsage token_usage_from_openai(const json& usage, std::string model);

// One tool call as it is being accumulated from fragments.
struct StreamToolCall {
  int index = 0;
  std::string id;
  std::string type;
  std::string name;
  std::string arguments;
  bool announced = false;  // on_tool_call_start has been called
};

// Turns chat.completion.chunk events into the final message, forwarding deltas to a sink as they come.
// Tolerant of every server in OPENAI.md §4: tool calls keyed by `index` (position when missing), id /
// type / name from the first non-empty value, arguments concatenated and never parsed here, reasoning
// from `reasoning_content` or `reasoning`, the last non-null usage. Only choice 0 is read.
// Not thread-safe: one per stream.
class ChatStreamAccumulator {
 public:
  explicit ChatStreamAccumulator(ModelStreamSink* sink = nullptr) : sink_(sink) {}

  // One SSE event. Returns true once `[DONE]` was seen (later events are ignored). Throws Error(model) for
  // an error event or a chunk that is not a JSON object.
  bool on_event(const net::SseEvent& event);
  // The event the stream's end cut short (net::SseParser::finish()): taken when it is whole ([DONE], an
  // error, a JSON chunk), ignored when it is a fragment, so that finish() reports the cut stream.
  void on_last_event(const net::SseEvent& event);
  // One chunk object (also a whole non-streamed chat.completion, converted by on_completion()).
  void on_chunk(const json& chunk);
  // A non-streamed answer ({"choices":[{"message":...}]}) from a server that ignored stream:true.
  void on_completion(const json& completion);

  // End of stream: announces the tool calls held back (making up ids the server never sent) and returns
  // the result. Throws Error(model) when `require_done` and no [DONE] came (a cut stream), or when a tool
  // call never got a name.
  ModelResult finish(bool require_done = true);

  bool done() const { return done_; }
  bool emitted() const { return emitted_; }  // whether any sink callback fired
  size_t events() const { return events_; }
  const std::string& id() const { return id_; }
  const std::string& model() const { return model_; }
  const std::string& role() const { return role_; }
  const std::optional<std::string>& content() const { return content_; }
  const std::optional<std::string>& reasoning() const { return reasoning_; }
  const std::string& finish_reason() const { return finish_reason_; }
  const json& usage() const { return usage_; }  // null when none was sent
  const std::map<int, StreamToolCall>& tool_calls() const { return calls_; }
  const std::optional<ApiError>& stream_error() const { return stream_error_; }

 private:
  void on_tool_call_fragment(size_t position, const json& fragment);
  void announce(StreamToolCall& call);
  [[noreturn]] void fail_with(const json& error_json);

  ModelStreamSink* sink_;
  bool done_ = false;
  bool emitted_ = false;
  size_t events_ = 0;
  std::string id_, model_, role_, finish_reason_;
  std::optional<std::string> content_, reasoning_;
  json usage_;
  std::map<int, StreamToolCall> calls_;
  std::map<size_t, int> position_index_;  // index-less fragments: array position -> call index
  std::optional<ApiError> stream_error_;
};

// ---- implementation of the template --------------------------------------------------------------

double retry_jitter();  // uniform in [0.75, 1]

template <class Attempt>
auto with_retries(const OpenAIConfig& config, const CancelToken& cancel, Attempt&& attempt) -> decltype(attempt()) {
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

}  // namespace openai
}  // namespace v1
}  // namespace agentrt
