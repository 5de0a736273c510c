// The route handlers of agentrt-server's API, one file per route group. Each runs on a work thread, answers
// through the call (at once, or a stream that goes on) and throws ApiError or agentrt::Error for a failure
// answered before any event.
#pragma once

#include "api_call.hpp"
#include "server_context.hpp"

namespace agentrt::server {

// run_routes.cpp: POST /agent/runs (start or resume; a stream, or JSON with Accept: application/json),
// POST /agent/runs/{threadId}/resume, POST /agent/runs/{threadId}/cancel.
void post_run(ServerContext& s, ApiCall& c);
void post_resume(ServerContext& s, ApiCall& c);
void post_cancel(ServerContext& s, ApiCall& c);

// event_routes.cpp: GET /agent/runs/{threadId}/events.
void get_events(ServerContext& s, ApiCall& c);
// The event sequence number a client gives (Last-Event-ID, or ?after=): a non-negative integer, or ApiError 400.
int64_t event_cursor(const std::string& text);

// thread_routes.cpp: GET /agent/runs/{threadId}/history, GET /agent/threads, DELETE /agent/threads/{id}.
void get_history(ServerContext& s, ApiCall& c);
void get_threads(ServerContext& s, ApiCall& c);
// GET /agent/threads/{id}/spend, GET /agent/spend: what the caller's thread, or all of the caller's turns, spent.
void get_thread_spend(ServerContext& s, ApiCall& c);
void get_spend(ServerContext& s, ApiCall& c);
void delete_thread(ServerContext& s, ApiCall& c);

// job_routes.cpp: GET /agent/jobs/{jobId}, POST /agent/jobs/{jobId}/cancel, GET /agent/threads/{threadId}/jobs.
void get_job(ServerContext& s, ApiCall& c);
void post_cancel_job(ServerContext& s, ApiCall& c);
void get_thread_jobs(ServerContext& s, ApiCall& c);

// object_routes.cpp: POST /agent/uploads, GET /objects/{bucket}/{key}.
void post_upload(ServerContext& s, ApiCall& c);
void get_object(ServerContext& s, ApiCall& c);

// capability_routes.cpp: GET /agent/capabilities (AG-UI AgentCapabilities, true to the configuration).
json agent_capabilities(ServerContext& s);
void get_capabilities(ServerContext& s, ApiCall& c);

// A RunAgentInput body with its string threadId and runId (422 otherwise), the call's thread named after it (the
// caller's, or none yet: 404 for another user's or a deleted one, read unless !check_thread); returns the body with
// threadId as the runtime names it.
json run_agent_input_body(ServerContext& s, ApiCall& c, bool check_thread = true);

// web_routes.cpp: the web page's static files (GET outside /api/, when web_root is set).
bool is_web_request(const ServerConfig& cfg, const HttpRequest& req);
void get_web(ServerContext& s, ApiCall& c);

// connect_routes.cpp: POST /agent/connect (re-attach: MESSAGES_SNAPSHOT, STATE_SNAPSHOT, then the run in progress).
void post_connect(ServerContext& s, ApiCall& c);

// mcp_routes.cpp: GET /mcp/tools (the MCP servers and their tools), POST /mcp/tools/{name}/approve (a changed
// definition approved; only users named in mcp_approvers).
void get_mcp_tools(ServerContext& s, ApiCall& c);
void post_approve_mcp_tool(ServerContext& s, ApiCall& c);
// asr_routes.cpp: POST /asr/transcriptions.
void post_transcription(ServerContext& s, ApiCall& c);

}  // namespace agentrt::server
