// ServerConfig: what agentrt-server reads from its config file and command line (no HTTP code here).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "agentrt/json.hpp"
#include "agentrt/log.hpp"

namespace agentrt::server {

// Request, connection and stream limits. Plain data.
struct ServerLimits {
  size_t max_body_bytes = 2u << 20;         // JSON bodies (runs, resume, cancel), any framing
  uint64_t max_upload_bytes = 20ull << 20;  // POST /agent/uploads (also the attachment size limit)
  uint64_t max_audio_bytes = 25ull << 20;   // POST /asr/transcriptions
  int max_streams = 10000;                  // open SSE streams in all; one more is refused with 429
  int max_streams_per_user = 100;           // open SSE streams of one user; one more is refused with 429
  size_t max_connections = 20000;           // open connections; one more is answered 503 and closed
  size_t max_connections_per_client = 512;  // per client address; one more is answered 429 and closed
  size_t reserve_connections = 64;          // connection slots that connections waiting for a request never hold
  size_t max_header_bytes = 16u << 10;      // request line and header fields; more: 431
  size_t max_header_fields = 64;            // header fields; more: 431
  std::chrono::milliseconds header_timeout{10000};        // the whole request header, from its first byte
  std::chrono::milliseconds idle_timeout{30000};          // a connection waiting for its next request
  std::chrono::milliseconds body_timeout{60000};          // the whole request body
  std::chrono::milliseconds write_timeout{30000};         // one write to a client
  size_t stream_buffer_bytes = 1u << 20;                  // a stream's unwritten bytes; more: the client is dropped
  int io_threads = 2;                                     // threads serving the connections
  int work_threads = 4;                                   // threads calling the runtime for requests and streams
  int listen_backlog = 1024;                              // the kernel's queue of connections not yet accepted
  double runs_per_minute = 0;                             // per token, run starts and resumes; 0 = unlimited
  int run_burst = 10;                                     // runs a token may start at once before the rate applies
  std::chrono::milliseconds keepalive{15000};             // ": keep-alive" after this much silence on a stream
  std::chrono::milliseconds signed_url_ttl{3600 * 1000};  // lifetime of the object URLs the server hands out
  std::chrono::milliseconds shutdown_grace{10000};        // SIGTERM: how long requests in progress may finish
};

// The whole server configuration. Plain data.
struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;                            // 0: any free port (printed at start)
  std::string public_url;                     // how clients reach the server; default http://host:port
  std::map<std::string, std::string> tokens;  // bearer token -> user id
  ServerLimits limits;
  json runtime = json::object();           // runtime_config_from_json() input (data_dir, store, objects, model, ...)
  json asr;                                // null: no transcription; {type:"openai", ...openai_config_from_json keys}
  int demo_chunk_delay_ms = 0;             // the demo model pauses this long before each streamed chunk (demos, tests)
  int demo_jobs_ms = 0;                    // > 0: the render_preview demo job tool; its jobs finish after this long
  std::vector<std::string> cors_origins;   // origins allowed to call the API from a browser ("*" for any)
  std::vector<std::string> mcp_approvers;  // users who may approve a changed MCP tool definition (none by default)
  bool access_log = false;                 // one line per request on stderr
  // A folder of static files (a built web page) served at / to GET requests outside /api/, without a token; empty:
  // none (those paths are 404).
  std::string web_root;
  // A client that closes the stream of its POST /agent/runs before the run's end stops the run (the turn is
  // cancelled), as CopilotKit and other AG-UI front ends mean "stop" by aborting the request. Off: the run goes on
  // (and can be followed again on /events). A request may ask for it with forwardedProps.cancelOnDisconnect.
  bool cancel_on_disconnect = false;
  LogLevel log_level = LogLevel::info;  // the least severe runtime log record printed on stderr
};

// Keys: listen ("host:port"), public_url, tokens ({token: user}), limits ({max_body_bytes, max_upload_bytes,
// max_audio_bytes, max_streams, max_streams_per_user, max_connections, max_connections_per_client,
// reserve_connections, max_header_bytes, max_header_fields, header_timeout_ms, idle_timeout_ms, body_timeout_ms,
// write_timeout_ms, stream_buffer_bytes, io_threads, work_threads, listen_backlog, runs_per_minute, run_burst,
// keepalive_ms, signed_url_ttl_ms, shutdown_grace_ms}), runtime, asr, demo_chunk_delay_ms, demo_jobs_ms,
// cors_origins, mcp_approvers, access_log, cancel_on_disconnect, log_level, web_root. Unknown keys are refused with
// Error(invalid_argument), as are user ids that are not 1-128 of [A-Za-z0-9._-].
ServerConfig server_config_from_json(const json& j);

// Applies command-line flags over `config` (a --config file is read first, wherever it appears). Throws
// Error(invalid_argument) with a usage hint for an unknown flag or a bad value. Returns false for --help.
bool apply_server_flags(int argc, char** argv, ServerConfig& config);

// "--listen" syntax: "host:port", "[v6]:port" or ":port".
void parse_listen(const std::string& value, std::string& host, int& port);

std::string server_usage();

// Checks what must hold before starting: at least one token, valid user ids, sane limits.
void validate_server_config(const ServerConfig& config);

}  // namespace agentrt::server
