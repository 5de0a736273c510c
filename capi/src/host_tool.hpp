// Host tools: a ToolSpec built from the C ABI's spec JSON whose handler calls an agentrt_tool_cb.
#pragma once

#include <string>

#include "agentrt.h"
#include "agentrt/tools.hpp"
#include "host_data.hpp"

namespace agentrt::capi {

// Parses {name, description, parameters, approval, stages, idempotent, timeoutMs} and wires the handler to
// `cb`. `data` is shared by every copy of the handler: its destroy runs once the last copy is gone. Throws
// Error(invalid_argument) naming the bad field. `max_json_depth`: the runtime's limit on the call's answers.
ToolSpec host_tool_spec(const json& spec, agentrt_tool_cb cb, HostData data, size_t max_json_depth);

// The call as the host sees it: {toolCallId, toolName, args, threadId, turnId, runId, userId, stage, jobId,
// jobConfirmed}.
json tool_call_to_json(const ToolCallContext& call);

}  // namespace agentrt::capi

// The handle the host holds for one call. The completion is shared with the worker waiting for it.
struct agentrt_tool_call {
  agentrt::ToolCompletion completion;
  size_t max_json_depth;      // the runtime's: result_json, ui_json and job_json nested deeper are refused
  agentrt::json state_delta;  // agentrt_tool_call_state_delta's, for the completion (null: none)
};
