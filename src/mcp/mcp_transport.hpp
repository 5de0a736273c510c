// McpTransport: how JSON-RPC messages travel to and from one MCP server (stdio or streamable HTTP).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "agentrt/json.hpp"
#include "agentrt/log.hpp"
#include "agentrt/mcp.hpp"

namespace agentrt {
inline namespace v1 {
namespace mcp {

// What a transport hands to its connection, on the transport's own threads.
struct TransportEvents {
  // A message from the server: a JSON-RPC response, request or notification, already parsed (its size and
  // nesting within limits). Text that is not a JSON object arrives as a string naming what was wrong.
  std::function<void(json message)> on_message;
  // The transport can no longer carry messages (the process exited, the HTTP session is gone): why.
  std::function<void(std::string why)> on_closed;
  std::function<void(LogLevel level, std::string_view line)> on_log;
};

// Thread-safe: send() from any thread; open() and close() once each, from the connection.
class McpTransport {
 public:
  virtual ~McpTransport() = default;
  // Starts carrying messages (spawns the process; HTTP: nothing to do until the first message). Throws
  // Error(io) when it cannot.
  virtual void open(TransportEvents events) = 0;
  // Sends one message. Throws Error(io) when the transport is closed or the write fails. HTTP: the answers to a
  // request arrive through on_message, from a thread of the transport's.
  virtual void send(const json& message) = 0;
  // Stops: kills the process (TERM, then KILL), ends every HTTP exchange; joins its threads. Idempotent.
  virtual void close() = 0;
  // After initialize: the negotiated version (HTTP sends it as MCP-Protocol-Version).
  virtual void set_protocol_version(const std::string& version) { (void)version; }
  virtual std::string kind() const = 0;
};

// Set by a transport on a server's request that came in the answer to one of ours: that request's id.
inline constexpr std::string_view kRelatedRequestKey = "_agentrt_related";
// In error.data of an error a transport makes up for a request whose answer did not come: the call's failure code.
inline constexpr std::string_view kTransportCodeKey = "agentrtCode";

// The transport a server's configuration names (a command: stdio; a url: streamable HTTP).
std::unique_ptr<McpTransport> make_transport(const McpServerConfig& config, size_t max_json_depth);

// Parses one message of a server: a JSON object within max_bytes and max_depth, or a string saying what is wrong.
json parse_server_message(std::string_view text, size_t max_bytes, size_t max_depth);

}  // namespace mcp
}  // namespace v1
}  // namespace agentrt
