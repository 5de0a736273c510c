// The MCP routes: what the runtime's MCP servers offer, and the approval of a tool whose definition changed.
#include <algorithm>

#include "agentrt/records.hpp"
#include "routes.hpp"

namespace agentrt::server {

// GET /mcp/tools: {servers: [...], tools: [...]} (records as the C ABI gives them).
void get_mcp_tools(ServerContext& s, ApiCall& c) {
  json servers = json::array(), tools = json::array();
  for (const auto& m : s.rt->mcp_servers()) servers.push_back(mcp_server_to_json(m));
  for (const auto& t : s.rt->mcp_tools()) tools.push_back(mcp_tool_to_json(t));
  c.send_json(200, json{{"servers", std::move(servers)}, {"tools", std::move(tools)}});
}

// POST /mcp/tools/{name}/approve: the changed definition offered again. An MCP server is foreign code and its tools
// are everyone's: only the users the configuration names may approve (403 for the others).
void post_approve_mcp_tool(ServerContext& s, ApiCall& c) {
  const auto& approvers = s.cfg.mcp_approvers;
  if (std::find(approvers.begin(), approvers.end(), c.user) == approvers.end())
    throw ApiError{403, "forbidden", "approving MCP tool definitions is for the users named in mcp_approvers"};
  c.send_json(200, mcp_tool_to_json(s.rt->approve_mcp_tool(c.match.id)));
}

}  // namespace agentrt::server
