#include "mcp/mcp_tools.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "agentrt/json_limits.hpp"
#include "util/crypto.hpp"

namespace agentrt {
inline namespace v1 {
namespace mcp {
namespace {

constexpr size_t kMaxErrorText = 4000;
constexpr size_t kMaxPinsBytes = 4u << 20;

// The part of a tool's listing a pin covers: what the model is told and what the call may carry.
json definition_of(const json& tool) {
  return json{{"description", tool.value("description", json(""))},
              {"inputSchema", tool.value("inputSchema", json())},
              {"outputSchema", tool.value("outputSchema", json())}};
}

std::string text_of_content(const json& result) {
  std::string text;
  if (result.contains("content") && result["content"].is_array())
    for (const auto& part : result["content"])
      if (part.is_object() && part.value("type", "") == "text" && part.contains("text") && part["text"].is_string()) {
        if (!text.empty()) text += "\n";
        text += part["text"].get<std::string>();
      }
  if (text.size() > kMaxErrorText) text = text.substr(0, kMaxErrorText) + "…";
  return text;
}

bool valid_tool_name(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}

}  // namespace

struct McpTools::Server {
  McpServerConfig cfg;
  std::unique_ptr<McpConnection> conn;
  std::map<std::string, McpToolInfo> tools;  // by SERVER__TOOL
};

McpTools::McpTools(std::vector<McpServerConfig> servers, ToolRegistry& registry, std::string pins_path,
                   size_t max_json_depth, Log log)
    : registry_(registry), pins_path_(std::move(pins_path)), max_depth_(max_json_depth), log_(std::move(log)) {
  load_pins();
  for (auto& cfg : servers) {
    auto s = std::make_unique<Server>();
    s->cfg = std::move(cfg);
    Server* raw = s.get();
    s->conn = std::make_unique<McpConnection>(
        s->cfg, max_depth_, [this](LogLevel level, std::string_view m) { log_(level, "mcp", m); },
        [this, raw](const std::vector<json>& tools) { listed(*raw, tools); });
    servers_.push_back(std::move(s));
  }
}

McpTools::~McpTools() { stop(); }

void McpTools::start() {
  std::vector<std::thread> starting;
  for (auto& s : servers_) starting.emplace_back([&s] { s->conn->start(); });
  for (auto& t : starting) t.join();
}

void McpTools::stop() {
  for (auto& s : servers_) s->conn->stop();
}

std::vector<McpServerInfo> McpTools::servers() const {
  std::vector<McpServerInfo> out;
  for (const auto& s : servers_) {
    McpServerInfo info = s->conn->info();
    std::lock_guard<std::mutex> lock(mutex_);
    info.tools = 0;
    for (const auto& [name, t] : s->tools) info.tools += t.offered ? 1 : 0;
    out.push_back(std::move(info));
  }
  return out;
}

std::vector<McpToolInfo> McpTools::tools() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<McpToolInfo> out;
  for (const auto& s : servers_)
    for (const auto& [name, t] : s->tools) out.push_back(t);
  return out;
}

std::vector<McpToolInfo> McpTools::changed(std::string_view stage) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<McpToolInfo> out;
  for (const auto& s : servers_) {
    if (std::find(s->cfg.stages.begin(), s->cfg.stages.end(), stage) == s->cfg.stages.end()) continue;
    for (const auto& [name, t] : s->tools)
      if (!t.changed_hash.empty()) out.push_back(t);
  }
  return out;
}

McpToolInfo McpTools::approve(std::string_view name) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& s : servers_) {
    auto it = s->tools.find(std::string(name));
    if (it == s->tools.end()) continue;
    McpToolInfo& t = it->second;
    if (t.changed_hash.empty())
      throw Error(ErrorCode::invalid_state,
                  fmt::format("the definition of {} has not changed since it was approved", name));
    t.hash = t.changed_hash;
    t.description = t.changed_definition.value("description", "");
    t.input_schema = t.changed_definition.value("inputSchema", json());
    t.output_schema = t.changed_definition.value("outputSchema", json());
    t.changed_hash.clear();
    t.changed_definition = nullptr;
    pins_[t.name] = t.hash;
    save_pins();
    log_(LogLevel::info, "mcp", fmt::format("the changed definition of {} was approved ({})", t.name, t.hash));
    offer(*s, t);
    return t;
  }
  throw Error(ErrorCode::not_found, fmt::format("no MCP tool is named {}", name));
}

void McpTools::listed(Server& server, const std::vector<json>& tools) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::map<std::string, McpToolInfo> now;
  bool pins_changed = false;
  for (const auto& tool : tools) {
    if (!tool.is_object() || !tool.contains("name") || !tool["name"].is_string()) {
      log_(LogLevel::warn, "mcp", fmt::format("MCP server {} listed a tool without a name", server.cfg.name));
      continue;
    }
    const std::string raw = tool["name"].get<std::string>();
    if (server.cfg.exclude.count(raw) || (server.cfg.include && !server.cfg.include->count(raw))) continue;
    McpToolInfo t;
    t.server = server.cfg.name;
    t.tool = raw;
    t.name = server.cfg.name + "__" + raw;
    const json def = definition_of(tool);
    const std::string hash = crypto::sha256_hex(def.dump());
    auto previous = server.tools.find(t.name);
    auto pin = pins_.find(t.name);
    if (pin == pins_.end()) {
      pins_[t.name] = hash;
      pins_changed = true;
      pin = pins_.find(t.name);
    }
    if (pin->second == hash) {
      t.hash = hash;
      t.description = def["description"].is_string() ? def["description"].get<std::string>() : "";
      t.input_schema = def["inputSchema"];
      t.output_schema = def["outputSchema"];
    } else {
      // The server changed what it told us: the approved definition stays on record, the tool is not offered.
      t.hash = pin->second;
      if (previous != server.tools.end()) {
        t.description = previous->second.description;
        t.input_schema = previous->second.input_schema;
        t.output_schema = previous->second.output_schema;
      }
      t.changed_hash = hash;
      t.changed_definition = def;
      if (previous == server.tools.end() || previous->second.changed_hash != hash)
        log_(LogLevel::warn, "mcp",
             fmt::format("MCP server {} changed the definition of {} (approved {}, now {}): not offered until a person "
                         "approves it",
                         server.cfg.name, raw, t.hash.substr(0, 12), hash.substr(0, 12)));
    }
    if (!valid_tool_name(t.name)) t.problem = "its name is not 1-64 of [A-Za-z0-9_-] once prefixed with the server's";
    now.emplace(t.name, std::move(t));
  }
  if (pins_changed) save_pins();
  for (auto& [name, old] : server.tools)
    if (!now.count(name)) registry_.remove(name);
  server.tools = std::move(now);
  for (auto& [name, t] : server.tools) offer(server, t);
}

void McpTools::offer(Server& server, McpToolInfo& t) {
  registry_.remove(t.name);
  t.offered = false;
  if (!t.changed_hash.empty() || (!t.problem.empty() && t.problem.rfind("its name", 0) == 0)) return;
  try {
    registry_.add(spec_for(server, t));
    t.offered = true;
    t.problem.clear();
  } catch (const Error& e) {
    t.problem = e.message();
    log_(LogLevel::warn, "mcp", fmt::format("{} is not offered: {}", t.name, e.message()));
  }
}

ToolSpec McpTools::spec_for(Server& server, const McpToolInfo& t) {
  ToolSpec spec;
  spec.name = t.name;
  spec.description = t.description;
  spec.parameters = t.input_schema.is_object() ? t.input_schema : json{{"type", "object"}};
  if (spec.parameters.contains("$schema")) spec.parameters.erase("$schema");  // drafts differ only in what we ignore
  const bool needs = server.cfg.approval_always && !server.cfg.approval_exempt.count(t.tool);
  spec.approval = needs ? ApprovalPolicy::always() : ApprovalPolicy::never();
  spec.stages = server.cfg.stages;
  spec.idempotent = server.cfg.idempotent.count(t.tool) > 0;
  spec.timeout = server.cfg.timeout;
  std::shared_ptr<const JsonSchema> output;
  if (t.output_schema.is_object()) {
    json schema = t.output_schema;
    if (schema.contains("$schema")) schema.erase("$schema");
    output = std::make_shared<const JsonSchema>(std::move(schema));
  }
  McpConnection* conn = server.conn.get();
  // The request ids of calls in flight, so that a call the runtime gives up on is cancelled on the server.
  auto in_flight = std::make_shared<std::pair<std::mutex, std::map<std::string, int64_t>>>();
  const std::string tool = t.tool;
  spec.handler = [conn, tool, output, in_flight](const ToolCallContext& call, ToolCompletion completion) {
    json params = {{"name", tool}, {"arguments", call.args.is_object() ? call.args : json::object()}};
    const std::string call_id = call.tool_call_id;
    int64_t id = conn->request(
        "tools/call", std::move(params),
        [completion, output, in_flight, call_id](RpcOutcome o) mutable {
          // Completed under the lock, so that the handler below never records a call that has ended.
          std::lock_guard<std::mutex> lock(in_flight->first);
          in_flight->second.erase(call_id);
          if (!o.ok) {
            completion.fail(o.code, o.message);
            return;
          }
          finish_call(o.result, output.get(), completion);
        },
        [completion](const json& p) mutable {
          json report = json::object();
          for (const char* k : {"progress", "total", "message"})
            if (p.contains(k)) report[k] = p[k];
          completion.progress(std::move(report));
        });
    std::lock_guard<std::mutex> lock(in_flight->first);
    if (!completion.done()) in_flight->second[call_id] = id;
  };
  spec.on_abandon = [conn, in_flight](const ToolCallContext& call, std::string_view reason) {
    int64_t id = 0;
    {
      std::lock_guard<std::mutex> lock(in_flight->first);
      auto it = in_flight->second.find(call.tool_call_id);
      if (it == in_flight->second.end()) return;
      id = it->second;
      in_flight->second.erase(it);
    }
    conn->cancel(id, reason == "timeout" ? "the call timed out" : "the turn was cancelled");
  };
  return spec;
}

void finish_call(const json& result, const JsonSchema* output_schema, ToolCompletion& completion) {
  if (!result.is_object()) {
    completion.fail("mcp_protocol", "tools/call answered with a result that is not an object");
    return;
  }
  if (result.value("isError", false) == true) {
    std::string text = text_of_content(result);
    completion.fail("tool_error", text.empty() ? "the MCP tool reported an error" : text);
    return;
  }
  if (result.contains("content") && !result["content"].is_array()) {
    completion.fail("mcp_protocol", "tools/call answered with a content that is not an array");
    return;
  }
  ToolResult r;
  if (output_schema) {
    if (!result.contains("structuredContent")) {
      completion.fail("invalid_result", "the tool declares an outputSchema but answered without structuredContent");
      return;
    }
    if (auto v = output_schema->validate(result["structuredContent"])) {
      completion.fail("invalid_result", fmt::format("structuredContent does not match the tool's outputSchema at "
                                                    "'{}': {}",
                                                    v->path, v->message));
      return;
    }
  }
  if (result.contains("structuredContent") && result["structuredContent"].is_object() &&
      result["structuredContent"].contains("ui")) {
    try {
      r.ui = parse_ui_schema(result["structuredContent"]["ui"]);
    } catch (const Error&) {
      // not a UiSchema v1 card: it stays part of the result
    }
  }
  r.result = result;
  completion.complete(std::move(r));
}

void McpTools::load_pins() {
  if (pins_path_.empty()) return;
  std::ifstream in(pins_path_, std::ios::binary);
  if (!in) return;  // none yet
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (text.size() > kMaxPinsBytes)
    throw Error(ErrorCode::too_large, fmt::format("{} is larger than {} bytes", pins_path_, kMaxPinsBytes));
  json j = parse_json_text(text, 4, pins_path_);
  if (!j.is_object() || !j.contains("pins") || !j["pins"].is_object())
    throw Error(ErrorCode::invalid_argument, fmt::format("{} holds no \"pins\" object", pins_path_));
  for (auto& [k, v] : j["pins"].items())
    if (v.is_string()) pins_[k] = v.get<std::string>();
}

void McpTools::save_pins() {
  if (pins_path_.empty()) return;
  const std::string tmp = pins_path_ + ".tmp";
  const std::string text = json{{"version", 1}, {"pins", pins_}}.dump(2) + "\n";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  bool ok = fd >= 0;
  size_t off = 0;
  while (ok && off < text.size()) {
    ssize_t w = ::write(fd, text.data() + off, text.size() - off);
    if (w < 0 && errno == EINTR) continue;
    ok = w > 0;
    off += ok ? static_cast<size_t>(w) : 0;
  }
  ok = ok && ::fsync(fd) == 0;
  if (fd >= 0) ::close(fd);
  ok = ok && std::rename(tmp.c_str(), pins_path_.c_str()) == 0;
  if (!ok) log_(LogLevel::error, "mcp", fmt::format("could not write the MCP tool pins to {}", pins_path_));
}

}  // namespace mcp
}  // namespace v1
}  // namespace agentrt
