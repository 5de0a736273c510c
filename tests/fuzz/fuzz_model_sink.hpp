// Shared by the model-stream fuzz targets: a sink that checks what an accumulator forwards, and the check that it
// agrees with what the accumulator returns.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "agentrt/model.hpp"
#include "fuzz_support.hpp"

namespace agentrt_fuzz {

// Records the stream; a tool call announced twice, without an id or a name, or given arguments before it was
// announced breaks the property of `target`. Not thread-safe (one per input).
class RecordingSink final : public agentrt::ModelStreamSink {
 public:
  explicit RecordingSink(const char* target) : target_(target) {}
  void on_text(std::string_view d) override { text += d; }
  void on_reasoning(std::string_view d) override { reasoning += d; }
  void on_tool_call_start(int index, std::string_view id, std::string_view name) override {
    if (calls.count(index)) broken(target_, "a tool call was announced twice");
    if (id.empty() || name.empty()) broken(target_, "a tool call was announced without an id or a name");
    calls[index] = std::string();
  }
  void on_tool_call_args(int index, std::string_view d) override {
    auto it = calls.find(index);
    if (it == calls.end()) broken(target_, "arguments of a tool call that was never announced");
    it->second += d;
  }
  std::string text, reasoning;
  std::map<int, std::string> calls;  // index -> streamed arguments

  // What was streamed is what `r` returns: text, reasoning, the calls and their arguments.
  void check(const agentrt::ModelResult& r) const {
    if (text != r.text) broken(target_, "the streamed text is not the returned text");
    if (reasoning != r.reasoning) broken(target_, "the streamed reasoning is not the returned reasoning");
    if (calls.size() != r.tool_calls.size()) broken(target_, "announced and returned tool calls differ in number");
    size_t i = 0;
    for (const auto& [index, args] : calls) {
      const auto& c = r.tool_calls[i++];
      if (c.id.empty() || c.name.empty()) broken(target_, "a returned tool call has no id or name");
      if (args != c.arguments) broken(target_, "the streamed arguments are not the returned ones");
    }
  }

 private:
  const char* target_;
};

}  // namespace agentrt_fuzz
