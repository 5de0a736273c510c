// The C ABI's JSON input: parsing host input (turn input, decisions, job values, options). Records are
// written by the records codec (agentrt/records.hpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "agentrt/asr.hpp"
#include "agentrt/jobs.hpp"
#include "agentrt/runtime.hpp"

namespace agentrt::capi {

// Parses a JSON argument; Error(invalid_argument) naming `name` when it is NULL, malformed or nested deeper
// than max_depth (checked before anything is built). NULL or "" yields `empty` when `optional`.
json parse_json_arg(const char* text, const char* name, size_t max_depth, bool optional = false,
                    json empty = json::object());

// A malloc'ed copy for the caller (freed with agentrt_free).
char* dup_string(std::string_view s);
char* dup_json(const json& j);

// The native form {threadId, userId, message, runId?, clientMessageId?} or an AG-UI RunAgentInput with userId.
TurnInput turn_input_from_json(const json& input, const InputLimits& limits);

struct ResumeRequest {
  std::vector<Decision> decisions;
  std::vector<ToolAnswer> answers;
  std::string run_id;
  std::vector<ContextEntry> context;
  std::vector<ToolDefinition> client_tools;
  std::optional<json> state;
  std::string traceparent;
};
// An array of decisions or AG-UI resume entries, or {decisions|resume?: [...], answers?: [{toolCallId, content,
// error?, id?}], runId?, context?, tools?, state?} (decisions or answers, or both).
ResumeRequest resume_request_from_json(const json& j, const InputLimits& limits);

// Jobs. Each throws Error(invalid_argument) naming the argument and the bad key.
// {status?: "queued"|"running", message?, metadata?: object, confirm?, confirmMessage?, timeoutMs?}
JobStart job_start_from_json(const json& j);
// {status?: "queued"|"running", progress?: number, message?}
JobProgress job_progress_from_json(const json& j);
// {result, assets?: array, message?}
JobResult job_result_from_json(const json& j);

// {model?, language?, prompt?, responseFormat?, filename?}
TranscribeOptions transcribe_options_from_json(const json& j);

}  // namespace agentrt::capi
