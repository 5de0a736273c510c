// SinkLog: a ModelStreamSink that records every call, in order, for tests that pin exactly what a provider streamed.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentrt/model.hpp"

namespace agentrt::testing {

// Not thread-safe: complete() calls it on the calling thread only.
struct SinkLog : agentrt::ModelStreamSink {
  std::vector<std::string>
      calls;  // "text:<delta>", "reasoning:<delta>", "start:<index>:<id>:<name>", "args:<index>:<delta>"
  std::string text, reasoning;
  std::function<void()> on_first_text;  // runs once, at the first text delta

  void on_text(std::string_view d) override {
    calls.push_back("text:" + std::string(d));
    text += d;
    if (on_first_text) std::exchange(on_first_text, nullptr)();
  }
  void on_reasoning(std::string_view d) override {
    calls.push_back("reasoning:" + std::string(d));
    reasoning += d;
  }
  void on_tool_call_start(int index, std::string_view id, std::string_view name) override {
    calls.push_back("start:" + std::to_string(index) + ":" + std::string(id) + ":" + std::string(name));
  }
  void on_tool_call_args(int index, std::string_view d) override {
    calls.push_back("args:" + std::to_string(index) + ":" + std::string(d));
  }
};

}  // namespace agentrt::testing
