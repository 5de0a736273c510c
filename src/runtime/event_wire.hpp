// AG-UI JSON of the events a run emits most often, written straight from their fields. The text is exactly
// to_json_string(events::x(...)) with the same timestamp (tested field by field), without building and
// destroying an Event, a struct of some forty strings and JSON values, for each of the ~20 events of a run.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace agentrt {
inline namespace v1 {
namespace wire {

std::string step_started(std::string_view step, int64_t timestamp);
std::string step_finished(std::string_view step, int64_t timestamp);
std::string text_start(std::string_view message_id, int64_t timestamp);  // role "assistant"
std::string text_content(std::string_view message_id, std::string_view delta, int64_t timestamp);
std::string tool_call_start(std::string_view tool_call_id, std::string_view name, std::string_view parent_message_id,
                            int64_t timestamp);
std::string tool_call_args(std::string_view tool_call_id, std::string_view delta, int64_t timestamp);
std::string tool_call_end(std::string_view tool_call_id, int64_t timestamp);

}  // namespace wire
}  // namespace v1
}  // namespace agentrt
