// MCP servers as tool sources: their configuration and what the runtime reports of them.
//
// Each configured server's tools are registered as ordinary tools named SERVER__TOOL: validated against the
// server's inputSchema, approved (unless the configuration says otherwise), recorded `started` before the call
// (never sent twice after a crash unless configured idempotent), stored and streamed like any other tool.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agentrt/json.hpp"

namespace agentrt {
inline namespace v1 {

// The MCP protocol versions the client speaks, newest first.
inline constexpr std::string_view kMcpProtocolStateless = "2026-07-28";
inline constexpr std::string_view kMcpProtocolSessions = "2025-11-25";

struct McpServerConfig {
  std::string name;  // [A-Za-z0-9_-]{1,32} without "__" (SERVER__TOOL must split one way)
  // stdio: the program and its arguments (config: command [...] followed by args [...]), environment variables
  // added to the runtime's, and the working directory ("" = the runtime's).
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::string cwd;
  // streamable HTTP: the endpoint, and headers sent with every request (e.g. Authorization).
  std::string url;
  std::map<std::string, std::string> headers;
  // Whether a call needs a person's approval: every call unless approval is "never"; the tools named in
  // approval_exempt ({never: [tool...]}) need none.
  bool approval_always = true;
  std::set<std::string> approval_exempt;
  std::vector<std::string> stages = {"execution"};  // the stages its tools are offered in
  std::chrono::milliseconds timeout{60000};         // per call (then notifications/cancelled)
  std::optional<std::set<std::string>> include;     // tools offered (the server's names); none = all
  std::set<std::string> exclude;                    // tools never offered
  std::set<std::string> idempotent;                 // tools safe to send again after a crash
  // "" = negotiate (the newest both sides speak); or one of the versions above.
  std::string protocol_version;
  std::chrono::milliseconds startup_timeout{20000};  // to start, initialize and list the tools
  size_t max_message_bytes = 8u << 20;               // one JSON-RPC message from the server
};

// Parses the runtime config's `mcp_servers` object {NAME: {command, args, env, cwd} | {url, headers},
// approval: "always" | "never" | {never: [tool...]}, stages, timeout_ms, tools: {include, exclude}, idempotent,
// protocol_version, startup_timeout_ms, max_message_bytes}. Throws Error(invalid_argument) naming the key.
std::vector<McpServerConfig> mcp_servers_from_json(const json& servers);

// What the runtime knows of a configured server.
struct McpServerInfo {
  std::string name;
  std::string transport;         // "stdio" | "http"
  std::string state;             // "ready" | "starting" | "failed"
  std::string protocol_version;  // negotiated ("" before)
  std::string server_name, server_version;
  std::string error;  // the last failure ("" when none)
  int restarts = 0;   // stdio: times the process was started again after it died
  size_t tools = 0;   // tools offered
};

// A tool a server lists.
struct McpToolInfo {
  std::string name;  // as the model sees it: SERVER__TOOL
  std::string server, tool, description;
  json input_schema, output_schema;
  std::string hash;  // sha256 of the definition (description, inputSchema, outputSchema) as approved
  bool offered = false;
  // The server changed the definition since it was pinned: not offered until Runtime::approve_mcp_tool.
  std::string changed_hash;
  json changed_definition;  // {description, inputSchema, outputSchema} as now listed
  std::string problem;      // why it is not offered otherwise (a schema that does not compile, excluded)
};

}  // namespace v1
}  // namespace agentrt
