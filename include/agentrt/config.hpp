// Opening a runtime from JSON: the one factory that names concrete backends (store, objects, model).
#pragma once

#include <string>

#include "agentrt/json.hpp"
#include "agentrt/runtime.hpp"
#include "agentrt/tools.hpp"

namespace agentrt {
inline namespace v1 {

// Keys (all optional; unknown keys are refused with Error(invalid_argument)):
//   data_dir              folder for the defaults below (default "./agentrt-data")
//   store                 {type:"sqlite", path (default <data_dir>/agentrt.db), synchronous:"NORMAL"|"FULL"}
//                         or {type:"postgres", url:"postgresql://user:password@host:port/db" (libpq's URL;
//                          another is Error(invalid_argument)), pool_size (1..64, default 4)}; either with
//                          layout:"rows"|"document", document_max_bytes, document_index_path
//   objects               {type:"fs", root (default <data_dir>/objects), bucket ("agentrt"),
//                          signing_secret_env (the secret's environment variable; default: a random key kept
//                          in <data_dir>/signing.key, created 0600), public_base_url
//                          (default "http://127.0.0.1:8080/api/v1/objects"), fsync (false)}
//                         or {type:"s3", bucket (required), endpoint (default "https://s3.<region>.amazonaws.com"),
//                          region ("us-east-1"), prefix ("" or "<key>/"), access_key_env ("AWS_ACCESS_KEY_ID"),
//                          secret_key_env ("AWS_SECRET_ACCESS_KEY"), session_token_env (none), path_style (false),
//                          url_signing ("s3": presigned GET URLs; "server": this deployment's own, with
//                          signing_secret_env and public_base_url as for fs), conditional_writes ("probe" |
//                          "native" | "emulated"), max_attempts (4)}
//                         or null for none
//   model                 {type:"auto"} (default: "openai" when OPENAI_API_KEY or OPENAI_BASE_URL is set,
//                          else "demo"), {type:"demo"}, or {type:"openai", ...openai_config_from_json keys}
//   stages                StagePolicies JSON
//   workers, max_steps, approval_timeout_ms, context_budget_chars, flush_interval_ms, sweep_interval_ms,
//   instance_lease_ms, max_input_bytes, summary_max_chars, job_timeout_ms
//   max_json_depth        nesting limit on JSON that enters (default 64, 1..256)
//   max_input_parts       content parts of an input message (default 64)
//   max_input_messages    messages of an AG-UI RunAgentInput (default 4096)
//   max_context_entries, max_context_bytes
//                         a run's context (AG-UI RunAgentInput.context): entries (default 64) and their bytes
//                         together (default 65536); 0 refuses any
//   max_state_bytes       a thread's shared state as JSON text (default 262144)
//   mcp_servers           MCP servers whose tools the model is offered: {NAME: {...}} (mcp_servers_from_json)
//   mcp_pins_path         where their tools' pinned definitions are kept (default <data_dir>/mcp-pins.json)
//   tracing               OpenTelemetry export: {otlp_endpoint, headers, service_name, agent_name, sample_ratio,
//                          capture_content, max_queue_spans, max_batch_spans, export_interval_ms, export_timeout_ms}
//                          (tracing_config_from_json; off without otlp_endpoint)
// A config value nested deeper than kDefaultMaxJsonDepth is refused with Error(invalid_argument).
RuntimeConfig runtime_config_from_json(const json& config);

// True when the config's model is the offline demo model (the host then registers the demo tools).
bool uses_demo_model(const RuntimeConfig& config);

// The demo tools of the offline demo: book_room(room, day) needs approval and returns a booking card;
// check_availability(room, day) needs none. Each execution goes to the demo tool execution log (below).
void register_demo_tools(ToolRegistry& tools);

// The demo tools' opt-in execution log, so that a crash test can count executions outside the runtime
// (scripts/crashloop): when the environment variable AGENTRT_DEMO_TOOL_LOG names a file, each execution of a
// demo tool (book_room, check_availability, and the example hosts' render_preview) appends one line
// "<turn_id> <tool_call_id> <tool_name>\n" to it (O_APPEND, then fsync) before the tool answers. Unset or
// empty: nothing is written. Error(io) when the line cannot be written (the tool then fails instead of
// running uncounted).
void log_demo_tool_execution(const ToolCallContext& call);

}  // namespace v1
}  // namespace agentrt
