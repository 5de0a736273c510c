#include "mcp/mcp_connection.hpp"

#include <algorithm>
#include <future>

#include <fmt/format.h>

#include "agentrt/error.hpp"

namespace agentrt {
inline namespace v1 {
namespace mcp {
namespace {

constexpr size_t kMaxToolPages = 100;
constexpr size_t kMaxTools = 1000;
constexpr size_t kMaxAbandoned = 1024;
constexpr auto kMaxBackoff = std::chrono::milliseconds(30000);
constexpr auto kStableUptime = std::chrono::seconds(60);

// The versions this client speaks with a session-based server (the newest first), as initialize negotiates them.
const std::vector<std::string> kSessionVersions = {std::string(kMcpProtocolSessions), "2025-06-18", "2025-03-26"};

std::string short_text(const json& j, size_t max = 300) {
  std::string s = j.is_string() ? j.get<std::string>() : j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > max) s = s.substr(0, max) + "…";
  return s;
}

}  // namespace

McpConnection::McpConnection(McpServerConfig config, size_t max_json_depth, Log log, ToolsListed on_tools)
    : cfg_(std::move(config)), max_depth_(max_json_depth), log_(std::move(log)), on_tools_(std::move(on_tools)) {
  info_.name = cfg_.name;
  info_.transport = cfg_.url.empty() ? "stdio" : "http";
  info_.state = "starting";
}

McpConnection::~McpConnection() { stop(); }

void McpConnection::start() {
  thread_ = std::thread([this] { supervise(); });
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait_for(lock, cfg_.startup_timeout + std::chrono::seconds(1), [&] { return started_once_; });
}

void McpConnection::stop() {
  if (stopping_.exchange(true)) {
    if (thread_.joinable()) thread_.join();
    return;
  }
  stop_.cancel();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  fail_all("mcp_unavailable", fmt::format("MCP server {}: the runtime is stopping", cfg_.name));
}

void McpConnection::set_state(const std::string& state, const std::string& error) {
  std::lock_guard<std::mutex> lock(mutex_);
  info_.state = state;
  if (!error.empty() || state == "ready") info_.error = error;
}

McpServerInfo McpConnection::info() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return info_;
}

void McpConnection::supervise() {
  int failures = 0;
  while (!stopping_) {
    const auto began = std::chrono::steady_clock::now();
    try {
      run_once();
    } catch (const std::exception& e) {
      if (stopping_) break;
      set_state("failed", e.what());
      log_(LogLevel::warn, fmt::format("MCP server {}: {}", cfg_.name, e.what()));
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      started_once_ = true;
      cv_.notify_all();
    }
    if (stopping_) break;
    fail_all("mcp_unavailable", fmt::format("MCP server {} stopped while the call ran ({}): its outcome is unknown",
                                            cfg_.name, info().error));
    if (std::chrono::steady_clock::now() - began > kStableUptime) failures = 0;
    auto delay =
        std::min<std::chrono::milliseconds>(std::chrono::milliseconds(250) * (1 << std::min(failures, 7)), kMaxBackoff);
    ++failures;
    if (stop_.wait_for(delay)) break;
    std::lock_guard<std::mutex> lock(mutex_);
    ++info_.restarts;
    info_.state = "starting";
  }
}

void McpConnection::run_once() {
  std::shared_ptr<McpTransport> transport = make_transport(cfg_, max_depth_);
  McpTransport* t = transport.get();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = false;
    closed_why_.clear();
    relist_ = false;
    stateless_ = false;
    transport_ = std::move(transport);
  }
  struct Closer {
    McpConnection& c;
    ~Closer() {
      std::shared_ptr<McpTransport> t;
      {
        std::lock_guard<std::mutex> lock(c.mutex_);
        t = std::move(c.transport_);
        c.closed_ = true;
      }
      if (t) t->close();  // joins the transport's threads, which take mutex_: not under it
    }
  } closer{*this};
  t->open({[this](json m) { on_message(std::move(m)); }, [this](std::string why) { on_closed(why); },
           [this](LogLevel level, std::string_view line) {
             log_(level, fmt::format("MCP server {}: {}", cfg_.name, line));
           }});
  initialize();
  t->set_protocol_version(info().protocol_version);
  auto tools = list_tools();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    info_.tools = tools.size();
  }
  on_tools_(tools);
  set_state("ready");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    started_once_ = true;
    cv_.notify_all();
  }
  for (;;) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return closed_ || relist_ || stopping_; });
    if (stopping_) return;
    if (closed_) throw Error(ErrorCode::io, closed_why_);
    relist_ = false;
    lock.unlock();
    try {
      tools = list_tools();
      {
        std::lock_guard<std::mutex> relock(mutex_);
        info_.tools = tools.size();
      }
      on_tools_(tools);
    } catch (const std::exception& e) {
      log_(LogLevel::warn, fmt::format("MCP server {}: listing its changed tools failed: {}", cfg_.name, e.what()));
    }
  }
}

json McpConnection::client_capabilities() { return json{{"elicitation", {{"form", json::object()}}}}; }

bool McpConnection::discover() {
  // 2026-07-28 has no handshake: server/discover says what the server is, and every request carries the version.
  json params = {{"_meta",
                  {{"io.modelcontextprotocol/protocolVersion", kMcpProtocolStateless},
                   {"io.modelcontextprotocol/clientCapabilities", client_capabilities()},
                   {"io.modelcontextprotocol/clientInfo", {{"name", "agentrt"}, {"version", "0.1.0"}}}}}};
  McpTransport* t = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    t = transport_.get();
  }
  if (t) t->set_protocol_version(std::string(kMcpProtocolStateless));  // its headers go with the discovery
  // Probing (no version configured): a server of the older protocol answers with an error at once; one that stays
  // silent is not waited for long.
  const auto wait = cfg_.protocol_version.empty()
                        ? std::min<std::chrono::milliseconds>(cfg_.startup_timeout, std::chrono::seconds(3))
                        : cfg_.startup_timeout;
  RpcOutcome r = call("server/discover", std::move(params), wait);
  if (r.ok && !(r.result.is_object() && r.result.value("supportedVersions", json()).is_array())) r.ok = false;
  if (!r.ok && t) t->set_protocol_version("");
  if (!r.ok) {
    if (cfg_.protocol_version == kMcpProtocolStateless)
      throw Error(ErrorCode::io, fmt::format("server/discover failed: {}", r.message));
    return false;  // a server of the session-based protocol: initialize it
  }
  const json& res = r.result;
  const json versions = res.is_object() ? res.value("supportedVersions", json()) : json();
  bool speaks =
      versions.is_array() && std::find(versions.begin(), versions.end(), json(kMcpProtocolStateless)) != versions.end();
  if (!speaks) {
    if (cfg_.protocol_version == kMcpProtocolStateless)
      throw Error(ErrorCode::unsupported, fmt::format("the server does not list {} among its supportedVersions: {}",
                                                      kMcpProtocolStateless, short_text(versions)));
    return false;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  stateless_ = true;
  info_.protocol_version = std::string(kMcpProtocolStateless);
  const json si = res.contains("serverInfo") && res["serverInfo"].is_object() ? res["serverInfo"] : json::object();
  info_.server_name = si.value("name", "");
  info_.server_version = si.value("version", "");
  return true;
}

void McpConnection::initialize() {
  if (cfg_.protocol_version.empty() || cfg_.protocol_version == kMcpProtocolStateless) {
    if (discover()) return;
  }
  const std::string wanted = cfg_.protocol_version.empty() ? kSessionVersions.front() : cfg_.protocol_version;
  json params = {{"protocolVersion", wanted},
                 {"capabilities", client_capabilities()},
                 {"clientInfo", {{"name", "agentrt"}, {"version", "0.1.0"}}}};
  RpcOutcome r = call("initialize", std::move(params), cfg_.startup_timeout);
  if (!r.ok) throw Error(ErrorCode::io, fmt::format("initialize failed: {}", r.message));
  if (!r.result.is_object() || !r.result.contains("protocolVersion") || !r.result["protocolVersion"].is_string())
    throw Error(ErrorCode::io, fmt::format("initialize answered without a protocolVersion: {}", short_text(r.result)));
  const std::string version = r.result["protocolVersion"].get<std::string>();
  const bool known = std::find(kSessionVersions.begin(), kSessionVersions.end(), version) != kSessionVersions.end();
  // (a 2026-07-28 server that does not answer server/discover is not one: it is refused below)
  if (!known || (!cfg_.protocol_version.empty() && version != cfg_.protocol_version))
    throw Error(
        ErrorCode::unsupported,
        fmt::format("the server speaks MCP {}, which this client does not{}", version,
                    cfg_.protocol_version.empty() ? "" : fmt::format(" (configured: {})", cfg_.protocol_version)));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    info_.protocol_version = version;
    const json& si =
        r.result.contains("serverInfo") && r.result["serverInfo"].is_object() ? r.result["serverInfo"] : json::object();
    info_.server_name = si.value("name", "");
    info_.server_version = si.value("version", "");
  }
  send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
}

std::vector<json> McpConnection::list_tools() {
  std::vector<json> tools;
  json cursor;
  for (size_t page = 0; page < kMaxToolPages; ++page) {
    json params = json::object();
    if (!cursor.is_null()) params["cursor"] = cursor;
    RpcOutcome r = call("tools/list", std::move(params), cfg_.startup_timeout);
    if (!r.ok) throw Error(ErrorCode::io, fmt::format("tools/list failed: {}", r.message));
    if (!r.result.is_object() || !r.result.contains("tools") || !r.result["tools"].is_array())
      throw Error(ErrorCode::io, fmt::format("tools/list answered without a tools array: {}", short_text(r.result)));
    for (auto& t : r.result["tools"]) {
      if (tools.size() >= kMaxTools)
        throw Error(ErrorCode::too_large, fmt::format("tools/list lists more than {} tools", kMaxTools));
      tools.push_back(std::move(t));
    }
    if (!r.result.contains("nextCursor") || !r.result["nextCursor"].is_string()) return tools;
    cursor = r.result["nextCursor"];
  }
  throw Error(ErrorCode::too_large, fmt::format("tools/list has more than {} pages", kMaxToolPages));
}

void McpConnection::send(const json& message) {
  std::shared_ptr<McpTransport> t;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!closed_) t = transport_;
    if (!t)
      throw Error(ErrorCode::io, fmt::format("MCP server {} is not running{}{}", cfg_.name,
                                             info_.error.empty() ? "" : ": ", info_.error));
  }
  // A send racing with run_once()'s end fails with Error(io) from the closed transport, which it keeps alive.
  t->send(message);
}

int64_t McpConnection::request(const std::string& method, json params, Done done, Progress on_progress,
                               Input on_input) {
  int64_t id;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    id = next_id_++;
    Pending p{std::move(done), std::move(on_progress), {}, std::move(on_input)};
    if (p.progress) {
      p.progress_token = fmt::format("agentrt-{}", id);
      params["_meta"]["progressToken"] = p.progress_token;
    }
    if (stateless_) {
      params["_meta"]["io.modelcontextprotocol/protocolVersion"] = kMcpProtocolStateless;
      params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = client_capabilities();
    }
    pending_.emplace(id, std::move(p));
  }
  try {
    send({{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}});
  } catch (const Error& e) {
    Done d;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = pending_.find(id);
      if (it != pending_.end()) {
        d = std::move(it->second.done);
        pending_.erase(it);
      }
    }
    if (d) d(RpcOutcome{false, {}, "mcp_unavailable", e.message()});
  }
  return id;
}

RpcOutcome McpConnection::call(const std::string& method, json params, std::chrono::milliseconds timeout) {
  auto promise = std::make_shared<std::promise<RpcOutcome>>();
  auto future = promise->get_future();
  int64_t id = request(method, std::move(params), [promise](RpcOutcome o) { promise->set_value(std::move(o)); });
  // In slices, so that stop() does not wait for a server that never answers.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline && !stopping_) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (future.wait_for(std::min<std::chrono::steady_clock::duration>(left, std::chrono::milliseconds(50))) ==
        std::future_status::ready)
      return future.get();
  }
  if (future.wait_for(std::chrono::seconds(0)) == std::future_status::ready) return future.get();
  cancel(id, stopping_ ? "the client is stopping" : "timeout");
  return RpcOutcome{false,
                    {},
                    "timeout",
                    fmt::format("MCP server {} did not answer {} within {} ms", cfg_.name, method, timeout.count())};
}

void McpConnection::cancel(int64_t id, const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pending_.erase(id) == 0) return;
    abandoned_.insert(id);
    while (abandoned_.size() > kMaxAbandoned) abandoned_.erase(abandoned_.begin());
  }
  try {
    send({{"jsonrpc", "2.0"},
          {"method", "notifications/cancelled"},
          {"params", {{"requestId", id}, {"reason", reason}}}});
  } catch (const std::exception&) {
    // a server that is gone has nothing to cancel
  }
}

void McpConnection::fail_all(const std::string& code, const std::string& message) {
  std::map<int64_t, Pending> failed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    failed.swap(pending_);
  }
  for (auto& [id, p] : failed)
    if (p.done) p.done(RpcOutcome{false, {}, code, message});
}

void McpConnection::on_closed(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    closed_why_ = why;
    info_.error = why;
    cv_.notify_all();
  }
  log_(LogLevel::warn, fmt::format("MCP server {}: {}", cfg_.name, why));
  fail_all("mcp_unavailable",
           fmt::format("MCP server {} stopped while the call ran ({}): its outcome is unknown", cfg_.name, why));
}

void McpConnection::on_message(json m) {
  auto violation = [&](const std::string& what) {
    log_(LogLevel::warn, fmt::format("MCP server {} broke the protocol: {}", cfg_.name, what));
    fail_all("mcp_protocol", fmt::format("MCP server {} broke the protocol: {}", cfg_.name, what));
  };
  if (m.is_string()) return violation(fmt::format("it sent {}", m.get<std::string>()));
  if (m.value("jsonrpc", json()) != "2.0") return violation("a message without \"jsonrpc\": \"2.0\"");
  if (m.contains("method")) {
    if (!m["method"].is_string()) return violation("a method that is not a string");
    const std::string method = m["method"].get<std::string>();
    if (m.contains("id")) return method == "elicitation/create" ? elicit(m) : answer(m);
    if (method == "notifications/tools/list_changed") {
      std::lock_guard<std::mutex> lock(mutex_);
      relist_ = true;
      cv_.notify_all();
    } else if (method == "notifications/progress") {
      const json& params = m.contains("params") && m["params"].is_object() ? m["params"] : json::object();
      const json token = params.value("progressToken", json());
      Progress progress;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto& [id, p] : pending_)
          if (token.is_string() && p.progress_token == token.get<std::string>()) progress = p.progress;
      }
      if (progress) progress(params);
    } else if (method == "notifications/message") {
      const json& params = m.contains("params") && m["params"].is_object() ? m["params"] : json::object();
      log_(LogLevel::info,
           fmt::format("MCP server {} [{}]: {}", cfg_.name, short_text(params.value("level", json("")), 20),
                       short_text(params.value("data", json("")), 2000)));
    }
    return;  // other notifications (resources, cancelled, ...) are of no use to a tool client
  }
  if (!m.contains("id") || !(m.contains("result") || m.contains("error")))
    return violation(
        fmt::format("a message that is neither a request, a notification nor an answer: {}", short_text(m)));
  if (!m["id"].is_number_integer())
    return violation(fmt::format("an answer to id {}, not one of its requests", short_text(m["id"], 80)));
  const int64_t id = m["id"].get<int64_t>();
  Pending p;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = pending_.find(id);
    if (it == pending_.end()) {
      if (abandoned_.erase(id)) return;  // the answer to a call given up on
      // fall through to the violation below (outside the lock)
    } else {
      p = std::move(it->second);
      pending_.erase(it);
    }
  }
  if (!p.done) return violation(fmt::format("an answer to id {}, which it was not asked", id));
  if (m.contains("error")) {
    const json& e = m["error"];
    // A transport's own failure for the request (a server could send the same shape: it only picks one of these two).
    const json transport_code = e.is_object() && e.contains("data") && e["data"].is_object()
                                    ? e["data"].value(std::string(kTransportCodeKey), json())
                                    : json();
    if (transport_code == "mcp_protocol" || transport_code == "mcp_unavailable")
      return p.done(
          RpcOutcome{false, {}, transport_code.get<std::string>(), short_text(e.value("message", json("")), 2000)});
    std::string message = e.is_object() ? short_text(e.value("message", json("")), 2000) : short_text(e);
    int64_t code = e.is_object() && e.contains("code") && e["code"].is_number_integer() ? e["code"].get<int64_t>() : 0;
    return p.done(RpcOutcome{false, {}, "mcp_error", fmt::format("{} (error {})", message, code)});
  }
  p.done(RpcOutcome{true, std::move(m["result"]), {}, {}});
}

void McpConnection::respond(const json& server_request_id, json result) {
  send({{"jsonrpc", "2.0"}, {"id", server_request_id}, {"result", std::move(result)}});
}

void McpConnection::elicit(const json& request) {
  Input input;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const json related = request.value(std::string(kRelatedRequestKey), json());
    if (related.is_number_integer()) {
      auto it = pending_.find(related.get<int64_t>());
      if (it != pending_.end()) input = it->second.input;
    } else {
      int takers = 0;
      for (auto& [id, p] : pending_)
        if (p.input) {
          ++takers;
          input = p.input;
        }
      if (takers > 1) input = nullptr;  // which call asks cannot be told
    }
  }
  const json params = request.contains("params") && request["params"].is_object() ? request["params"] : json::object();
  if (!input || params.value("mode", "form") != "form") {
    json reply = {{"jsonrpc", "2.0"},
                  {"id", request["id"]},
                  {"error",
                   {{"code", -32602},
                    {"message", input ? "agentrt answers form elicitations only"
                                      : "agentrt cannot tell which of its calls this elicitation belongs to"}}}};
    try {
      send(reply);
    } catch (const std::exception&) {
    }
    return;
  }
  input(request["id"], params);
}

void McpConnection::answer(const json& request) {
  const std::string method = request["method"].get<std::string>();
  json reply = {{"jsonrpc", "2.0"}, {"id", request["id"]}};
  if (method == "ping") {
    reply["result"] = json::object();
  } else if (method == "roots/list") {
    reply["result"] = {{"roots", json::array()}};
  } else {
    reply["error"] = {{"code", -32601}, {"message", fmt::format("agentrt does not offer {}", method)}};
  }
  try {
    send(reply);
  } catch (const std::exception& e) {
    log_(LogLevel::warn, fmt::format("MCP server {}: could not answer its {}: {}", cfg_.name, method, e.what()));
  }
}

}  // namespace mcp
}  // namespace v1
}  // namespace agentrt
