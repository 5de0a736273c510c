// McpTools: the runtime's MCP servers and the tools they give the model. Each listed tool becomes a ToolSpec named
// SERVER__TOOL in the runtime's ToolRegistry; its definition is pinned (hashed when first seen, the pins kept in a
// file), and a definition that changes later is taken out of the registry until a person approves it again.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agentrt/log.hpp"
#include "agentrt/mcp.hpp"
#include "agentrt/tools.hpp"
#include "mcp/mcp_connection.hpp"

namespace agentrt {
inline namespace v1 {
namespace mcp {

// Thread-safe: the connections' threads report listings; the facade reads and approves from any thread.
class McpTools {
 public:
  using Log = std::function<void(LogLevel, std::string_view component, std::string_view message)>;
  // `pins_path`: where pinned definition hashes are kept ("" = in memory only).
  McpTools(std::vector<McpServerConfig> servers, ToolRegistry& registry, std::string pins_path, size_t max_json_depth,
           Log log);
  ~McpTools();
  McpTools(const McpTools&) = delete;
  McpTools& operator=(const McpTools&) = delete;

  // Starts every server (at once) and returns when each is ready or has failed its first start.
  void start();
  void stop();

  std::vector<McpServerInfo> servers() const;
  std::vector<McpToolInfo> tools() const;
  // Takes a changed definition as the pinned one and offers the tool again. Error(not_found) for a name that is
  // not an MCP tool, Error(invalid_state) for one whose definition has not changed.
  McpToolInfo approve(std::string_view name);
  // Tools of `stage` whose definitions changed and wait for approval (what a run reports to its client).
  std::vector<McpToolInfo> changed(std::string_view stage) const;

 private:
  struct Server;
  void listed(Server& server, const std::vector<json>& tools);
  void offer(Server& server, McpToolInfo& tool);
  ToolSpec spec_for(Server& server, const McpToolInfo& tool);
  void load_pins();
  void save_pins();  // under mutex_

  ToolRegistry& registry_;
  std::string pins_path_;
  size_t max_depth_;
  Log log_;
  mutable std::mutex mutex_;
  std::map<std::string, std::string> pins_;  // SERVER__TOOL -> definition hash
  std::vector<std::unique_ptr<Server>> servers_;
};

// The call of one MCP tool as a ToolResult or a failure (what tools/call answered, mapped to the storage contracts:
// text content -> the summary's source, the whole result -> the payload, structuredContent checked against the
// output schema, a UiSchema v1 `ui` in structuredContent -> the card, isError -> a failed call).
void finish_call(const json& result, const JsonSchema* output_schema, ToolCompletion& completion);

}  // namespace mcp
}  // namespace v1
}  // namespace agentrt
