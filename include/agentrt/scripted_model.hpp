// ScriptedModel: a deterministic, offline ModelProvider for tests, benchmarks and the offline demo.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "agentrt/model.hpp"

namespace agentrt {
inline namespace v1 {

// Decides the answer to one request. May throw Error(model) to simulate a provider failure.
using ModelScript = std::function<ModelResult(const ModelRequest&)>;

struct ScriptedModelOptions {
  size_t chunk_chars = 0;                    // stream text in chunks of this many bytes (UTF-8 safe); 0 = one delta
  std::chrono::milliseconds chunk_delay{0};  // pause before each chunk (cancellable)
  bool stream_tool_calls = true;             // announce tool calls and stream their arguments in two pieces
};

// Thread-safe (the script must be too).
class ScriptedModel final : public ModelProvider {
 public:
  explicit ScriptedModel(ModelScript script, ScriptedModelOptions options = {});
  ModelResult complete(const ModelRequest& request, ModelStreamSink& sink, const CancelToken& cancel) override;
  std::string name() const override { return "scripted"; }
  int64_t calls() const { return calls_.load(); }

 private:
  ModelScript script_;
  ScriptedModelOptions options_;
  std::atomic<int64_t> calls_{0};
};

// Helpers for scripts: the messages after the last user message, how many tool results they hold and the
// latest of them (nullptr when there is none).
size_t tool_results_since_last_user(const ModelRequest& request);
const Message* last_tool_result_since_last_user(const ModelRequest& request);
const Message* last_user_message(const ModelRequest& request);
ModelResult text_result(std::string text);
ModelResult tool_call_result(std::string id, std::string name, std::string arguments);

// The offline demo model of the CLI and the server: a message containing "book" leads to a book_room call
// with {"room":"A1","day":"mon"} and, once the tool has answered, a confirmation; anything else gets a
// direct streamed answer. Its intent stage names the request in one line.
std::shared_ptr<ScriptedModel> make_demo_model(ScriptedModelOptions options = {8, std::chrono::milliseconds(0), true});

}  // namespace v1
}  // namespace agentrt
