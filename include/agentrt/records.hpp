// The JSON forms of the records the Runtime facade returns — turns, jobs, threads, uploads, approval answers,
// stored events — one function each, so the C ABI, the server and the CLI write every record the same way
// (camelCase keys, times in ms since the epoch). Defined in src/wire/records_codec.cpp.
#pragma once

#include <string>
#include <string_view>

#include "agentrt/jobs.hpp"
#include "agentrt/json.hpp"
#include "agentrt/mcp.hpp"
#include "agentrt/runtime.hpp"
#include "agentrt/storage.hpp"

namespace agentrt {
inline namespace v1 {

// {id, threadId, userId, status, version, clientMessageId, runId, parentRunId, stage, approvalRequestId,
//  interrupts, expiresAt, intent, error, usage, steps, createdAt, updatedAt}
json turn_to_json(const TurnRecord& t);

// The answer to a start: {threadId, turnId, runId, existing}, plus firstSeq for a new turn; a repeated start
// (existing) has instead deltaMessages (AG-UI messages) and, when `status` is not empty, the turn's status.
json turn_handle_to_json(const TurnHandle& h, std::string_view status = {});

// A turn's open interrupts: {turnId, threadId, status, approvalRequestId, expiresAt, interrupts}; the last
// three are empty unless the turn is WAITING_APPROVAL.
json turn_interrupts_to_json(const TurnRecord& t);

// {id, threadId, turnId, runId, toolCallId, toolName, userId, status, progress, assets, metadata, delivered,
//  version, createdAt, updatedAt, message?, result?, error?: {code, message}, confirmation?, confirmMessage?,
//  timeoutMs?, expiresAt?, finishedAt?}
json job_to_json(const JobRecord& j);
// Its inverse: job_from_json(job_to_json(j)) == j. Throws Error(invalid_argument) for anything job_to_json
// does not write (the projector reads the records of `CUSTOM agentrt.job` events with it).
JobRecord job_from_json(const json& j);

// {id, title, createdAt, updatedAt, lastSeq}: a thread as its owner lists it.
json thread_to_json(const ThreadRecord& t);

// {id, url, mimeType, size, expiresAt, ref, part}; `part` is the content part that sends the upload in a
// message: {type: "image"|"audio"|"video"|"document", source: {type: "url", value: url, mimeType}}.
json upload_to_json(const Upload& u);

// {name, transport, state, protocolVersion, server, version, tools, restarts, error}: an MCP server as the runtime
// sees it (mcp.hpp).
json mcp_server_to_json(const McpServerInfo& s);
// {name, server, tool, description, inputSchema, outputSchema, hash, offered, problem?, changed?: {hash,
// definition}}: an MCP tool (changed: the definition the server lists now, held back until approved).
json mcp_tool_to_json(const McpToolInfo& t);

// The content part type of a MIME type: "image", "audio", "video", else "document".
std::string_view media_kind(std::string_view mime_type);

// The answer to a resume (and to the same approval request again):
// {status: "accepted", turnId, threadId, runId, approvalRequestId}.
json resume_answer_to_json(std::string_view turn_id, std::string_view thread_id, std::string_view run_id,
                           std::string_view approval_request_id);

// A committed event with its sequence number: {seq, event} (event: the AG-UI event object).
json stored_event_to_json(const StoredEvent& e);

}  // namespace v1
}  // namespace agentrt
