// AG-UI 1.0 events: one flat value type covering the 31 event types of @ag-ui/core 1.0.0.
// JSON is camelCase; optional fields are omitted when unset (never null); timestamps are integer ms.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "agentrt/json.hpp"

namespace agentrt {
inline namespace v1 {

enum class EventType {
  RUN_STARTED,
  RUN_FINISHED,
  RUN_ERROR,
  STEP_STARTED,
  STEP_FINISHED,
  TEXT_MESSAGE_START,
  TEXT_MESSAGE_CONTENT,
  TEXT_MESSAGE_END,
  TEXT_MESSAGE_CHUNK,
  TOOL_CALL_START,
  TOOL_CALL_ARGS,
  TOOL_CALL_END,
  TOOL_CALL_CHUNK,
  TOOL_CALL_RESULT,
  STATE_SNAPSHOT,
  STATE_DELTA,
  MESSAGES_SNAPSHOT,
  ACTIVITY_SNAPSHOT,
  ACTIVITY_DELTA,
  RAW,
  CUSTOM,
  REASONING_START,
  REASONING_MESSAGE_START,
  REASONING_MESSAGE_CONTENT,
  REASONING_MESSAGE_END,
  REASONING_MESSAGE_CHUNK,
  REASONING_END,
  REASONING_ENCRYPTED_VALUE,
  SUBAGENT_STARTED,
  SUBAGENT_FINISHED,
  SUBAGENT_ERROR,
};

std::string_view to_string(EventType t) noexcept;
std::optional<EventType> event_type_from_string(std::string_view s) noexcept;

// One event. Only the fields its type defines are serialised; string fields are "set" when non-empty,
// JSON fields when not null. `seq` is the per-thread sequence number given by the event log (0 = not yet
// committed); it is not part of the AG-UI JSON (the SSE `id:` line carries it).
struct Event {
  EventType type = EventType::CUSTOM;
  int64_t timestamp = 0;  // ms since the Unix epoch; 0 = omit
  int64_t seq = 0;

  std::string thread_id, run_id, parent_run_id;                 // RUN_*
  std::string message_id, role, name, delta;                    // TEXT_*, REASONING_*, CUSTOM name
  std::string tool_call_id, tool_call_name, parent_message_id;  // TOOL_CALL_*
  std::string step_name;                                        // STEP_*
  std::string message, code;                                    // RUN_ERROR, SUBAGENT_ERROR
  std::string subagent_run_id, protocol_version, activity_type, subtype, entity_id, encrypted_value, description,
      parent_subagent_run_id, parent_tool_call_id, source;
  std::optional<bool> replace;
  json content;   // TOOL_CALL_RESULT (string or parts), ACTIVITY_SNAPSHOT (object)
  json outcome;   // RUN_FINISHED, SUBAGENT_FINISHED
  json result;    // RUN_FINISHED, SUBAGENT_FINISHED
  json usage;     // RUN_FINISHED, RUN_ERROR (TokenUsage[])
  json value;     // CUSTOM
  json snapshot;  // STATE_SNAPSHOT
  json patch;     // STATE_DELTA delta / ACTIVITY_DELTA patch
  json messages;  // MESSAGES_SNAPSHOT
  json input;     // RUN_STARTED
  json event;     // RAW
  json raw_event;
  json metadata;  // object; the product's payloads travel here
};

// Serialises to AG-UI JSON. Never emits null or unknown keys.
json to_json(const Event& e);
void to_json(json& j, const Event& e);
// Parses AG-UI JSON; throws Error(invalid_argument) on an unknown type, a missing required field, a null
// optional field, a wrong field type, or a non-integer timestamp.
Event event_from_json(const json& j);
void from_json(const json& j, Event& e);

// Convenience constructors for the events the runtime emits.
namespace events {
Event run_started(std::string thread_id, std::string run_id, std::string parent_run_id = {});
Event run_finished(std::string thread_id, std::string run_id, json outcome = nullptr, json usage = nullptr);
Event run_error(std::string message, std::string code = {});
Event step_started(std::string step);
Event step_finished(std::string step);
Event text_start(std::string message_id);
Event text_content(std::string message_id, std::string delta);
Event text_end(std::string message_id, json metadata = nullptr);
Event reasoning_start(std::string message_id);
Event reasoning_message_start(std::string message_id);
Event reasoning_content(std::string message_id, std::string delta);
Event reasoning_message_end(std::string message_id);
Event reasoning_end(std::string message_id);
// subtype "message" (entity = a message id) or "tool-call" (entity = a tool call id).
Event reasoning_encrypted_value(std::string subtype, std::string entity_id, std::string encrypted_value);
Event tool_call_start(std::string tool_call_id, std::string name, std::string parent_message_id = {});
Event tool_call_args(std::string tool_call_id, std::string delta);
Event tool_call_end(std::string tool_call_id);
Event tool_call_result(std::string message_id, std::string tool_call_id, json content, json metadata = nullptr);
Event custom(std::string name, json value);
Event state_snapshot(json snapshot);
Event state_delta(json patch);  // an RFC 6902 JSON Patch
}  // namespace events

}  // namespace v1
}  // namespace agentrt

namespace agentrt {
inline namespace v1 {
// The same JSON as to_json(), written straight to text (the event log's hot path). Invalid UTF-8 in
// string fields is replaced with U+FFFD so the output is always valid JSON.
std::string to_json_string(const Event& e);
// Appends `s` as a JSON string literal (quoted, escaped, invalid UTF-8 replaced).
void append_json_string(std::string& out, std::string_view s);
// Appends `j` as compact JSON (like dump(), several times faster; non-finite numbers become null).
void append_json(std::string& out, const json& j);
}  // namespace v1
}  // namespace agentrt
