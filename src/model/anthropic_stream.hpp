// The Anthropic Messages wire format: the request body built from a ModelRequest, and the accumulator of the
// streamed events. Pure logic (no I/O).
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>

#include "agentrt/anthropic.hpp"
#include "agentrt/json.hpp"
#include "agentrt/model.hpp"
#include "model/provider_http.hpp"
#include "net/sse_parser.hpp"

namespace agentrt {
inline namespace v1 {
namespace anthropic {

// ---- requests ----------------------------------------------------------------------------------------

// The JSON body of POST /v1/messages for `request`: streaming, the configured model, max_tokens and
// parameters for the request's stage (request.model and request.params win); system and developer messages
// as the top-level `system`; the other messages as alternating user/assistant messages of content blocks
// (tool results as tool_result blocks of a user message, consecutive messages of one role merged); tools,
// tool_choice. Throws Error(invalid_argument) / Error(unsupported) for content the API cannot carry.
json build_messages_body(const ModelRequest& request, const AnthropicConfig& config);

// The thinking blocks an assistant message's encrypted_value holds for Anthropic (an array, maybe empty):
// empty for a value from another provider or one that cannot be read.
json thinking_blocks_from(const std::string& encrypted_value);

// ---- responses ---------------------------------------------------------------------------------------

// Anthropic usage ({input_tokens, output_tokens, cache_read_input_tokens, cache_creation_input_tokens}) as
// AG-UI TokenUsage: the cached counts are parts of input_tokens there.
TokenUsage token_usage_from_anthropic(const json& usage, std::string model);

// "end_turn" -> "stop", "tool_use" -> "tool_calls", "max_tokens" -> "length"; any other passes through.
std::string finish_reason_from_stop_reason(const std::string& stop_reason);

// Turns the Messages stream's events into the final answer, forwarding deltas to a sink as they come: text
// (on_text), thinking (on_reasoning), tool_use blocks (on_tool_call_start with the block's index, then their
// input_json_delta fragments). Server tools' blocks (server_tool_use, web_search_tool_result, ...), pings and
// unknown events or blocks are passed over. Not thread-safe: one per stream.
class MessageStreamAccumulator {
 public:
  explicit MessageStreamAccumulator(ModelStreamSink* sink = nullptr) : sink_(sink) {}

  // One SSE event. Throws Error(model) for an error event or an event that is not a JSON object.
  void on_event(const net::SseEvent& event);
  // The event the stream's end cut short (net::SseParser::finish()): taken when its data is whole JSON,
  // ignored when it is a fragment, so that finish() reports the cut stream.
  void on_last_event(const net::SseEvent& event);
  // A whole non-streamed Message ({"type":"message","content":[...],...}), as if it had been streamed.
  void on_message(const json& message);

  // End of stream: the result. Throws Error(model) when `require_stop` and no message_stop came (a cut
  // stream).
  ModelResult finish(bool require_stop = true);

  bool done() const { return done_; }
  bool emitted() const { return emitted_; }  // whether any sink callback fired
  size_t events() const { return events_; }
  const std::string& model() const { return model_; }
  const std::optional<provider_http::ApiError>& stream_error() const { return stream_error_; }

 private:
  // One content block as it is being accumulated.
  struct Block {
    std::string type;
    std::string text;       // text, thinking
    std::string signature;  // thinking
    std::string data;       // redacted_thinking
    std::string id, name;   // tool_use
    std::string arguments;  // tool_use: the input's JSON text, from input_json_delta fragments
    json input;             // tool_use: the input content_block_start gave (used when no fragment came)
    bool stopped = false;
  };

  void on_data(const json& event);
  void on_block_start(const json& event);
  void on_block_delta(const json& event);
  void on_block_stop(Block& block, int index);
  void on_message_fields(const json& message);
  void merge_usage(const json& usage);
  void text(std::string_view delta);
  void reasoning(std::string_view delta);
  [[noreturn]] void fail_with(const json& error_json);

  ModelStreamSink* sink_;
  bool done_ = false;
  bool emitted_ = false;
  size_t events_ = 0;
  std::string id_, model_, stop_reason_;
  std::string text_, reasoning_;
  json usage_;  // the last value of each usage count; null while none came
  std::map<int, Block> blocks_;
  std::optional<provider_http::ApiError> stream_error_;
};

}  // namespace anthropic
}  // namespace v1
}  // namespace agentrt
