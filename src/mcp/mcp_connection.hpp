// McpConnection: one configured MCP server — started, initialized (the protocol version negotiated), its tools
// listed, kept alive (a stdio server that dies is started again with backoff), and spoken to with JSON-RPC.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agentrt/cancel.hpp"
#include "agentrt/json.hpp"
#include "agentrt/log.hpp"
#include "agentrt/mcp.hpp"
#include "mcp/mcp_transport.hpp"

namespace agentrt {
inline namespace v1 {
namespace mcp {

// The outcome of a request: its result, or why there is none.
struct RpcOutcome {
  bool ok = false;
  json result;          // ok
  std::string code;     // !ok: "mcp_error" (the server's error), "mcp_unavailable", "mcp_protocol", "timeout"
  std::string message;  // !ok
};

// Thread-safe: requests from any thread; the connection's own thread starts, restarts and lists.
class McpConnection {
 public:
  using Log = std::function<void(LogLevel, std::string_view)>;
  // Called on the connection's thread with the tools the server lists (after each start and each
  // notifications/tools/list_changed).
  using ToolsListed = std::function<void(const std::vector<json>& tools)>;

  McpConnection(McpServerConfig config, size_t max_json_depth, Log log, ToolsListed on_tools);
  ~McpConnection();
  McpConnection(const McpConnection&) = delete;
  McpConnection& operator=(const McpConnection&) = delete;

  // Starts the connection's thread; returns once the server is ready or its first start failed (or the startup
  // timeout passed).
  void start();
  void stop();

  // An asynchronous request: `done` is called once (from a connection thread, or at once when it cannot be sent).
  // `on_progress` gets the server's notifications/progress for it. Returns the request's id (for cancel()).
  using Done = std::function<void(RpcOutcome)>;
  using Progress = std::function<void(const json& params)>;
  // The server asks for input while the request runs (elicitation/create): its request id and params; answer it
  // with respond().
  using Input = std::function<void(const json& server_request_id, const json& params)>;
  int64_t request(const std::string& method, json params, Done done, Progress on_progress = {}, Input on_input = {});
  // Answers a request of the server's (an elicitation) with `result`. Throws Error(io) when the server is gone.
  void respond(const json& server_request_id, json result);
  // A request waited for (up to `timeout`).
  RpcOutcome call(const std::string& method, json params, std::chrono::milliseconds timeout);
  // Stops waiting for `id` and tells the server (notifications/cancelled with `reason`); `done` is not called.
  void cancel(int64_t id, const std::string& reason);

  McpServerInfo info() const;
  const McpServerConfig& config() const { return cfg_; }

 private:
  struct Pending {
    Done done;
    Progress progress;
    std::string progress_token;
    Input input;
  };

  void supervise();
  // One life of the transport: open, initialize, list, serve until it closes. Throws on a failed start.
  void run_once();
  void initialize();
  // Tries the stateless protocol (server/discover); false when the server speaks the session-based one.
  bool discover();
  static json client_capabilities();
  std::vector<json> list_tools();
  void on_message(json message);
  void on_closed(const std::string& why);
  void answer(const json& request);
  // An elicitation/create of the server's, to the call it belongs to (the one its transport says, or the only call
  // that can take one).
  void elicit(const json& request);
  void fail_all(const std::string& code, const std::string& message);
  void set_state(const std::string& state, const std::string& error = "");
  void send(const json& message);

  McpServerConfig cfg_;
  size_t max_depth_;
  Log log_;
  ToolsListed on_tools_;

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::shared_ptr<McpTransport> transport_;  // shared: a send in flight keeps it alive while it is closed
  std::map<int64_t, Pending> pending_;
  std::set<int64_t> abandoned_;  // cancelled ids whose late answers are dropped
  int64_t next_id_ = 1;
  bool closed_ = false;  // the current transport has closed
  std::string closed_why_;
  bool relist_ = false;        // notifications/tools/list_changed arrived
  bool stateless_ = false;     // 2026-07-28: every request carries the version and capabilities in _meta
  bool started_once_ = false;  // the first start has succeeded or failed
  McpServerInfo info_;
  std::atomic<bool> stopping_{false};
  CancelToken stop_;
  std::thread thread_;
};

}  // namespace mcp
}  // namespace v1
}  // namespace agentrt
