// Product payloads: UiSchema v1 cards, ToolAgentOutput (one tool call's outcome), WorkerAgentOutput (the answer).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentrt/json.hpp"

namespace agentrt {
inline namespace v1 {

// A UI card a tool returns for the front end: {type, version:"v1", data, actions}.
struct UiSchema {
  std::string type;
  std::string version = "v1";
  json data = json::object();
  json actions = json::array();
};
// Validates a card on the way in: `type` a non-empty string, `version` exactly "v1", `data` an object
// (absent = {}), `actions` an array of objects each with a string `type` (absent = []), no other keys.
// Throws Error(invalid_argument) naming the offending field.
UiSchema parse_ui_schema(const json& j);
void to_json(json& j, const UiSchema& ui);

enum class ToolStatus { succeeded, failed, rejected, expired, interrupted };
std::string_view to_string(ToolStatus s) noexcept;
ToolStatus tool_status_from_string(std::string_view s);

struct ToolError {
  std::string code;  // e.g. "invalid_arguments", "unknown_tool", "timeout", "tool_error", "rejected"
  std::string message;
};

struct ToolTimings {
  int64_t started_at_ms = 0;
  int64_t finished_at_ms = 0;
  int64_t duration_ms = 0;
};

// What one tool call produced. Serialised with snake_case keys (the product's storage format).
struct ToolAgentOutput {
  std::string tool_call_id;
  std::string tool_name;
  json args = json::object();
  ToolStatus status = ToolStatus::succeeded;
  json result;  // null when there is none
  std::optional<ToolError> error;
  std::string result_summary;
  int summary_version = 0;
  std::optional<UiSchema> ui;
  ToolTimings timings;
};
void to_json(json& j, const ToolAgentOutput& o);
std::string to_json_string(const ToolAgentOutput& o);  // the same JSON, written straight to text
void from_json(const json& j, ToolAgentOutput& o);

// The turn's final answer and what led to it.
struct WorkerAgentOutput {
  std::string answer;
  std::string intent;  // the intent stage's output, if it ran
  std::string turn_id;
  std::string run_id;
  struct ToolRef {
    std::string tool_call_id;
    std::string tool_name;
    ToolStatus status = ToolStatus::succeeded;
    std::string result_summary;
  };
  std::vector<ToolRef> tools;
  json usage = json::array();  // TokenUsage[] accumulated over the turn
};
void to_json(json& j, const WorkerAgentOutput& o);
void from_json(const json& j, WorkerAgentOutput& o);

}  // namespace v1
}  // namespace agentrt
