// ModelProvider: the interface every model backend implements (scripted, OpenAI-compatible, host-provided).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentrt/cancel.hpp"
#include "agentrt/content.hpp"
#include "agentrt/json.hpp"

namespace agentrt {
inline namespace v1 {

// AG-UI 1.0 TokenUsage. Counts are parts of each other as AG-UI says (reasoning within output, cached
// within input). Zero means "not reported" and is omitted from JSON.
struct TokenUsage {
  std::string provider;
  std::string model;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  int64_t total_tokens = 0;
  int64_t reasoning_tokens = 0;
  int64_t cached_input_tokens = 0;
  int64_t cache_write_input_tokens = 0;

  TokenUsage& operator+=(const TokenUsage& o);
  bool empty() const { return input_tokens == 0 && output_tokens == 0 && total_tokens == 0; }
};
void to_json(json& j, const TokenUsage& u);
void from_json(const json& j, TokenUsage& u);

// A tool as offered to the model.
struct ToolDefinition {
  std::string name;
  std::string description;
  json parameters;  // JSON Schema object
};

// The first line of the section of a request's system message that carries the run's context (what the
// application told the model for this run: AG-UI's Context); one "- <description>: <value>" line per entry
// follows.
inline constexpr std::string_view kRunContextHeading = "Context from the application, for this run:";

struct ModelRequest {
  std::string stage;              // "intent" | "execution" | "organization"
  std::string model;              // per-stage model name ("" = the provider's default)
  json params = json::object();   // per-stage parameters (temperature, max_tokens, ...), passed through
  std::vector<Message> messages;  // system prompt first, then the context, ending with the newest input
  std::vector<ToolDefinition> tools;
  std::string tool_choice;  // "" (provider default) | "auto" | "none" | "required"
  bool parallel_tool_calls = true;
  // Ids for providers that log or route by them; never sent to a model as text.
  std::string thread_id, turn_id, run_id;
  // W3C trace context of the model call's span ("" = not traced): providers send it as the `traceparent`
  // header so the model server's trace joins the turn's.
  std::string traceparent;
};

struct ModelToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // complete JSON text
};

// The whole answer of one model call, available when complete() returns.
struct ModelResult {
  std::string text;
  std::string reasoning;
  std::vector<ModelToolCall> tool_calls;
  std::optional<TokenUsage> usage;
  std::string finish_reason;  // "stop", "tool_calls", "length", ...
  // What the provider needs sent back with this answer on the turn's next request (Anthropic's thinking
  // blocks with their signatures), opaque to the runtime: stored as the assistant message's encrypted_value
  // (AG-UI REASONING_ENCRYPTED_VALUE), handed back in ModelRequest::messages. "" = nothing.
  std::string encrypted_value;
};

// One switch of a fallback chain: the model that failed (after its own retries), why, and the one tried next.
struct ModelFallback {
  std::string from_provider, from_model;
  std::string to_provider, to_model;
  std::string error_code;  // the failure's ErrorCode name ("model", "timeout", ...)
  std::string error;       // its message
};

// Receives the stream while complete() runs, on the thread that called complete(). A tool call is
// announced once its id and name are known (index = the provider's tool-call index); its argument
// fragments follow. Providers that don't stream may call nothing: the result is authoritative.
class ModelStreamSink {
 public:
  virtual ~ModelStreamSink() = default;
  virtual void on_text(std::string_view delta) = 0;
  virtual void on_reasoning(std::string_view delta) = 0;
  virtual void on_tool_call_start(int index, std::string_view id, std::string_view name) = 0;
  virtual void on_tool_call_args(int index, std::string_view delta) = 0;
  // A provider of a fallback chain failed for good and the next one is tried (make_fallback_provider).
  virtual void on_fallback(const ModelFallback& fallback) { (void)fallback; }
};

// Implementations are thread-safe: the runtime calls complete() from several worker threads at once.
class ModelProvider {
 public:
  virtual ~ModelProvider() = default;
  // Runs one model call, streaming into `sink`. Throws Error(model) on a provider failure,
  // Error(cancelled) promptly once `cancel` is cancelled, Error(timeout) on a deadline.
  virtual ModelResult complete(const ModelRequest& request, ModelStreamSink& sink, const CancelToken& cancel) = 0;
  virtual std::string name() const = 0;
};

}  // namespace v1
}  // namespace agentrt
