// The OpenAI stream accumulator (src/model/openai_stream.*): a streamed answer (SSE bytes) or a whole one (a
// JSON body), from a server that may send anything. It fails with Error only, and what it forwards to the sink
// is what it returns: the same text and reasoning, tool-call arguments only for announced calls, each call
// announced once, the streamed arguments adding up to the returned ones.
#include <cstdint>
#include <map>
#include <string>

#include "agentrt/error.hpp"
#include "agentrt/json_limits.hpp"
#include "fuzz_support.hpp"
#include "model/openai_stream.hpp"
#include "net/sse_parser.hpp"

using namespace agentrt;

namespace {

[[noreturn]] void broken(const std::string& what) { agentrt_fuzz::broken("openai_stream", what); }

class RecordingSink final : public ModelStreamSink {
 public:
  void on_text(std::string_view d) override { text += d; }
  void on_reasoning(std::string_view d) override { reasoning += d; }
  void on_tool_call_start(int index, std::string_view id, std::string_view name) override {
    if (calls.count(index)) broken("a tool call was announced twice");
    if (id.empty() || name.empty()) broken("a tool call was announced without an id or a name");
    calls[index] = std::string();
  }
  void on_tool_call_args(int index, std::string_view d) override {
    auto it = calls.find(index);
    if (it == calls.end()) broken("arguments of a tool call that was never announced");
    it->second += d;
  }
  std::string text, reasoning;
  std::map<int, std::string> calls;  // index -> streamed arguments
};

void check(const RecordingSink& sink, const ModelResult& r) {
  if (sink.text != r.text) broken("the streamed text is not the returned text");
  if (sink.reasoning != r.reasoning) broken("the streamed reasoning is not the returned reasoning");
  if (sink.calls.size() != r.tool_calls.size()) broken("announced and returned tool calls differ in number");
  size_t i = 0;
  for (const auto& [index, args] : sink.calls) {
    const auto& c = r.tool_calls[i++];
    if (c.id.empty() || c.name.empty()) broken("a returned tool call has no id or name");
    if (args != c.arguments) broken("the streamed arguments are not the returned ones");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool streamed = (data[0] & 1) == 0;
  const std::string_view body = agentrt_fuzz::text_of(data + 1, size - 1);
  RecordingSink sink;
  openai::ChatStreamAccumulator acc(&sink);
  try {
    if (streamed) {
      net::SseParser parser;
      bool done = false;
      parser.feed(body, [&](const net::SseEvent& e) {
        if (!done) done = acc.on_event(e);
      });
      if (auto last = parser.finish()) acc.on_last_event(*last);
    } else {
      // As the provider reads a body that is not an event stream.
      if (json_text_depth(body, kDefaultMaxJsonDepth) > kDefaultMaxJsonDepth) return 0;
      json completion = json::parse(body, nullptr, false);
      if (completion.is_discarded()) return 0;
      acc.on_completion(completion);
    }
    check(sink, acc.finish(/*require_done=*/(data[0] & 2) != 0));
  } catch (const Error&) {
    // A model error, a cut stream: what a bad server gets.
  }
  // Error bodies are read from anything a server sends.
  const auto e = openai::parse_api_error(body);
  (void)openai::describe_api_error(400, e);
  return 0;
}
