// The streamable HTTP transport: each message is a POST; the server answers a request with one JSON body or an SSE
// stream (its answer, and requests or notifications before it), and sends other messages on a GET stream. The
// session id it gives at initialize goes with every later request; a stream cut before its answer is resumed with
// Last-Event-ID where the server gave event ids.
#include <atomic>
#include <list>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "mcp/mcp_transport.hpp"
#include "net/http_client.hpp"
#include "net/sse_parser.hpp"

namespace agentrt {
inline namespace v1 {
namespace mcp {
namespace {

constexpr int kResumeAttempts = 3;

// A request's _meta.traceparent (a traced tools/call), sent as the HTTP traceparent header too.
std::string traceparent_of(const json& message) {
  const auto params = message.find("params");
  if (params == message.end() || !params->is_object()) return {};
  const auto meta = params->find("_meta");
  if (meta == params->end() || !meta->is_object()) return {};
  const auto tp = meta->find("traceparent");
  return tp != meta->end() && tp->is_string() ? tp->get<std::string>() : std::string();
}

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && net::header_name_equals(s.substr(0, prefix.size()), prefix);
}

// Thread-safe as McpTransport says: each message is an exchange on a thread of its own (joined at close); the
// session id and version are read and written under one mutex.
class HttpTransport final : public McpTransport {
 public:
  HttpTransport(McpServerConfig config, size_t max_depth) : cfg_(std::move(config)), max_depth_(max_depth) {}
  ~HttpTransport() override { close(); }

  std::string kind() const override { return "http"; }

  void open(TransportEvents events) override { events_ = std::move(events); }

  void send(const json& message) override {
    if (closing_) throw Error(ErrorCode::io, fmt::format("MCP server {}: the transport is closed", cfg_.name));
    std::lock_guard<std::mutex> lock(threads_mutex_);
    reap();
    auto& ex = exchanges_.emplace_back();
    ex.thread = std::thread([this, message, done = &ex.done] {
      exchange(message);
      done->store(true);
    });
  }

  void set_protocol_version(const std::string& version) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      version_ = version;
    }
    // Messages the server sends outside an answer (tools/list_changed) come on a GET stream (none in 2026-07-28).
    if (version.empty() || version == kMcpProtocolStateless) return;
    std::lock_guard<std::mutex> lock(threads_mutex_);
    if (!listener_.joinable()) listener_ = std::thread([this] { listen(); });
  }

  void close() override {
    if (closing_.exchange(true)) return;
    cancel_.cancel();
    {
      std::lock_guard<std::mutex> lock(threads_mutex_);
      for (auto& ex : exchanges_)
        if (ex.thread.joinable()) ex.thread.join();
      exchanges_.clear();
      if (listener_.joinable()) listener_.join();
    }
    // Ends the session on the server (best effort: it may be gone).
    std::string session = session_id();
    if (!session.empty()) {
      try {
        net::HttpRequest req = request("DELETE");
        req.request_timeout = std::chrono::milliseconds(2000);
        client_.send(req);
      } catch (const std::exception&) {
      }
    }
  }

 private:
  struct Exchange {
    std::thread thread;
    std::atomic<bool> done{false};
  };

  void reap() {
    for (auto it = exchanges_.begin(); it != exchanges_.end();) {
      if (it->done) {
        it->thread.join();
        it = exchanges_.erase(it);
      } else {
        ++it;
      }
    }
  }

  bool stateless() {
    std::lock_guard<std::mutex> lock(mutex_);
    return version_ == kMcpProtocolStateless;
  }

  std::string session_id() {
    std::lock_guard<std::mutex> lock(mutex_);
    return session_;
  }

  net::HttpRequest request(const std::string& method) {
    net::HttpRequest req;
    req.method = method;
    req.url = cfg_.url;
    for (const auto& [k, v] : cfg_.headers) req.headers.emplace_back(k, v);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!session_.empty()) req.headers.emplace_back("Mcp-Session-Id", session_);
    if (!version_.empty()) req.headers.emplace_back("MCP-Protocol-Version", version_);
    req.max_body_bytes = cfg_.max_message_bytes;
    req.request_timeout = std::chrono::milliseconds(0);  // the connection's per-call timeout governs
    req.idle_timeout = std::chrono::milliseconds(0);
    return req;
  }

  // The answer to `id` that did not come: given to the connection as that request's error, with the call's failure
  // code (kTransportCodeKey): "mcp_protocol" for what the server sent, "mcp_unavailable" for what it did not.
  void fail(const json& id, const std::string& why, std::string_view code = "mcp_unavailable") {
    if (id.is_null()) {
      events_.on_log(LogLevel::warn, why);
      return;
    }
    events_.on_message(json{{"jsonrpc", "2.0"},
                            {"id", id},
                            {"error", {{"code", -32000}, {"message", why}, {"data", {{kTransportCodeKey, code}}}}}});
  }

  // Hands the server's messages on; a malformed one in the answer to `id` is that request's error.
  void deliver(std::string_view text, const json& id, bool& answered) {
    json m = parse_server_message(text, cfg_.max_message_bytes, max_depth_);
    if (m.is_string()) {
      answered = true;
      fail(id, fmt::format("MCP server {} broke the protocol: it sent {}", cfg_.name, m.get<std::string>()),
           "mcp_protocol");
      return;
    }
    if (!id.is_null() && m.contains("id") && m["id"] == id && !m.contains("method")) answered = true;
    // A request of the server's on the answer's stream belongs to that call (how an elicitation finds its call).
    if (!id.is_null() && m.contains("method") && m.contains("id")) m[std::string(kRelatedRequestKey)] = id;
    events_.on_message(std::move(m));
  }

  // Reads an SSE body, delivering each event's data; returns the last event id seen.
  struct SseReader {
    HttpTransport& t;
    const json& id;
    bool& answered;
    net::SseParser parser;
    std::string last_id;
    void feed(std::string_view bytes) {
      parser.feed(bytes, [&](const net::SseEvent& e) {
        last_id = e.id;
        if (!e.data.empty()) t.deliver(e.data, id, answered);
      });
      if (parser.pending_bytes() > t.cfg_.max_message_bytes)
        throw Error(ErrorCode::too_large, fmt::format("an SSE event of more than {} bytes", t.cfg_.max_message_bytes));
    }
  };

  void exchange(const json& message) {
    const json id = message.contains("id") && message.contains("method") ? message["id"] : json();
    const bool initialize = message.value("method", "") == "initialize";
    bool answered = false;
    std::string last_event_id;
    try {
      net::HttpRequest req = request("POST");
      req.headers.emplace_back("Content-Type", "application/json");
      req.headers.emplace_back("Accept", "application/json, text/event-stream");
      if (stateless()) {  // 2026-07-28's routing headers
        req.headers.emplace_back("Mcp-Method", message.value("method", ""));
        const json* params = message.contains("params") ? &message["params"] : nullptr;
        if (params && params->is_object() && params->contains("name") && (*params)["name"].is_string())
          req.headers.emplace_back("Mcp-Name", (*params)["name"].get<std::string>());
      }
      if (const std::string tp = traceparent_of(message); !tp.empty()) req.headers.emplace_back("traceparent", tp);
      req.body = message.dump(-1, ' ', false, json::error_handler_t::replace);
      SseReader sse{*this, id, answered, {}, {}};
      bool streaming = false;
      long status = 0;
      req.on_headers = [&](const net::HttpResponse& head) {
        status = head.status;
        if (initialize) {
          if (auto s = head.header("Mcp-Session-Id")) {
            std::lock_guard<std::mutex> lock(mutex_);
            session_ = *s;
          }
        }
        streaming = head.status == 200 && starts_with_ci(head.header("Content-Type").value_or(""), "text/event-stream");
        return streaming;
      };
      req.on_body = [&](std::string_view bytes) { sse.feed(bytes); };
      net::HttpResponse resp = client_.send(req, cancel_);
      if (status == 404 && !session_id().empty() && !initialize) {
        // The server ended the session: the connection initializes again.
        fail(id, fmt::format("MCP server {}: the session has ended", cfg_.name));
        events_.on_closed("the HTTP session has ended (404)");
        return;
      }
      if (status == 202 || (status >= 200 && status < 300 && id.is_null())) return;
      if (status != 200) {
        std::string body = resp.body.substr(0, 300);
        fail(id, fmt::format("MCP server {} answered HTTP {}{}{}", cfg_.name, status, body.empty() ? "" : ": ", body));
        return;
      }
      if (!streaming) {
        deliver(resp.body, id, answered);
      } else {
        last_event_id = sse.last_id;
        if (auto rest = sse.parser.finish(); rest && !rest->data.empty()) deliver(rest->data, id, answered);
      }
    } catch (const Error& e) {
      if (closing_) return;
      if (e.code() != ErrorCode::io && e.code() != ErrorCode::timeout) {
        answered = true;
        fail(id, fmt::format("MCP server {} broke the protocol: {}", cfg_.name, e.message()),
             e.code() == ErrorCode::too_large ? "mcp_protocol" : "mcp_unavailable");
        return;
      }
    } catch (const std::exception& e) {
      if (closing_) return;
      answered = true;
      fail(id, fmt::format("MCP server {}: {}", cfg_.name, e.what()));
      return;
    }
    if (answered || id.is_null() || closing_) return;
    // The stream ended before the answer: resume it where the server numbered its events.
    for (int attempt = 0; attempt < kResumeAttempts && !last_event_id.empty() && !answered && !closing_; ++attempt) {
      try {
        net::HttpRequest req = request("GET");
        req.headers.emplace_back("Accept", "text/event-stream");
        req.headers.emplace_back("Last-Event-ID", last_event_id);
        SseReader sse{*this, id, answered, {}, {}};
        bool ok = false;
        req.on_headers = [&](const net::HttpResponse& head) {
          ok = head.status == 200;
          return ok;
        };
        req.on_body = [&](std::string_view bytes) { sse.feed(bytes); };
        client_.send(req, cancel_);
        if (!sse.last_id.empty()) last_event_id = sse.last_id;
        if (!ok) break;
      } catch (const std::exception&) {
        if (closing_) return;
      }
    }
    if (!answered && !closing_)
      fail(id, fmt::format("MCP server {}: the answer's stream ended before the answer", cfg_.name));
  }

  // The GET stream for messages outside answers; reopened while the transport lives (a server without one answers
  // 405, and then there is none).
  void listen() {
    json none;
    bool answered = false;
    int failures = 0;
    while (!closing_ && failures < 5) {
      try {
        net::HttpRequest req = request("GET");
        req.headers.emplace_back("Accept", "text/event-stream");
        SseReader sse{*this, none, answered, {}, {}};
        long status = 0;
        req.on_headers = [&](const net::HttpResponse& head) {
          status = head.status;
          return head.status == 200;
        };
        req.on_body = [&](std::string_view bytes) { sse.feed(bytes); };
        client_.send(req, cancel_);
        if (status == 405 || status == 404) return;
        failures = status == 200 ? 0 : failures + 1;
      } catch (const std::exception&) {
        if (closing_) return;
        ++failures;
      }
      if (cancel_.wait_for(std::chrono::milliseconds(200 * (failures + 1)))) return;
    }
  }

  McpServerConfig cfg_;
  size_t max_depth_;
  TransportEvents events_;
  net::HttpClient client_;
  CancelToken cancel_;
  std::atomic<bool> closing_{false};
  std::mutex mutex_;
  std::string session_, version_;
  std::mutex threads_mutex_;
  std::list<Exchange> exchanges_;
  std::thread listener_;
};

}  // namespace

std::unique_ptr<McpTransport> make_stdio_transport(const McpServerConfig& config, size_t max_json_depth);

std::unique_ptr<McpTransport> make_transport(const McpServerConfig& config, size_t max_json_depth) {
  if (!config.url.empty()) return std::make_unique<HttpTransport>(config, max_json_depth);
  return make_stdio_transport(config, max_json_depth);
}

}  // namespace mcp
}  // namespace v1
}  // namespace agentrt
