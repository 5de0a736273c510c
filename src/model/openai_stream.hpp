// The OpenAI chat-completions wire format: request bodies and the streamed-chunk accumulator, and the
// endpoint the provider and the transcriber share. Pure logic (no I/O).
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
#include "model/provider_http.hpp"
#include "net/http_client.hpp"
#include "net/sse_parser.hpp"

namespace agentrt {
inline namespace v1 {
namespace openai {

// ---- requests ----------------------------------------------------------------------------------------

// The endpoint of an OpenAI-compatible server (the shared ModelEndpoint with `Authorization: Bearer`), which
// the provider and the transcriber share. Immutable after construction, so thread-safe.
class OpenAIEndpoint : public provider_http::ModelEndpoint {
 public:
  // Reads the key from config.api_key, else from the environment variable config.api_key_env.
  // Throws Error(invalid_argument) for an empty base URL.
  explicit OpenAIEndpoint(const OpenAIConfig& config);
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

// ---- errors and retries (provider_http's, under their old names) -------------------------------------

using provider_http::api_error_from_json;
using provider_http::ApiError;
using provider_http::backoff_delay;
using provider_http::describe_api_error;
using provider_http::parse_api_error;
using provider_http::redact_secret;
using provider_http::retry_jitter;
using provider_http::RetryableError;
using provider_http::server_retry_delay;
using provider_http::should_retry;
using provider_http::string_field;
using provider_http::with_retries;

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

}  // namespace openai
}  // namespace v1
}  // namespace agentrt
