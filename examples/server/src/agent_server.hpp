// AgentServer: the agentrt Runtime over HTTP — AG-UI 1.0 over SSE, uploads, signed objects, history, ASR.
#pragma once

#include <memory>
#include <string>

#include "server_config.hpp"

namespace agentrt::server {

// Binds on construction, opens the runtime (its object store's public URL is this server's), and serves in
// run(). Thread-safe: stop() may be called from any thread, once run() has been entered or before.
class AgentServer {
 public:
  // Throws agentrt::Error: invalid_argument for a bad config, io when the address cannot be bound.
  explicit AgentServer(ServerConfig config);
  ~AgentServer();
  AgentServer(const AgentServer&) = delete;
  AgentServer& operator=(const AgentServer&) = delete;

  int port() const;  // the bound port (useful with port 0)
  const std::string& public_url() const;
  void run();   // serves until stop()
  void stop();  // ends open streams (the turns go on) and stops listening

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace agentrt::server
