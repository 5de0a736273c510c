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
#include "core/ids.hpp"
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

}  // namespace

class CallTable;

struct McpTools::Server {
  McpServerConfig cfg;
  std::unique_ptr<McpConnection> conn;
  std::map<std::string, McpToolInfo> tools;  // by SERVER__TOOL
  // Each tool's calls, kept when the tool is offered again (a re-listing), so a call waiting for a person's input
  // finds its session after it.
  std::map<std::string, std::shared_ptr<CallTable>> calls;
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
    // Offered already with this very definition: its registry entry stays (a re-listing takes no tool away).
    t.offered = previous != server.tools.end() && previous->second.offered && previous->second.hash == t.hash &&
                t.changed_hash.empty();
    now.emplace(t.name, std::move(t));
  }
  if (pins_changed) save_pins();
  for (auto& [name, old] : server.tools)
    if (!now.count(name)) registry_.remove(name);
  server.tools = std::move(now);
  for (auto& [name, t] : server.tools)
    if (!t.offered) offer(server, t);
}

void McpTools::offer(Server& server, McpToolInfo& t) {
  registry_.remove(t.name);
  t.offered = false;
  if (!t.changed_hash.empty()) return;
  try {
    registry_.add(spec_for(server, t));
    t.offered = true;
    t.problem.clear();
  } catch (const Error& e) {
    t.problem = e.message();
    log_(LogLevel::warn, "mcp", fmt::format("{} is not offered: {}", t.name, e.message()));
  }
}

// The calls of one MCP tool: each a tools/call in flight, which may pause for a person's input -- an elicitation
// the server sends while the call runs (2025-11-25: the call stays open and the answer goes back on it, so it needs
// the same session), or an input_required result (2026-07-28: the call is sent again with the answer and the
// server's requestState). Thread-safe: one mutex for the table and its slots.
class CallTable {
 public:
  CallTable(McpConnection* conn, std::string server, std::string tool)
      : conn_(conn), server_(std::move(server)), tool_(std::move(tool)) {}

  // The tool's output schema (none: null), as its approved definition says.
  void set_output(std::shared_ptr<const JsonSchema> output) {
    std::lock_guard<std::mutex> lock(mutex_);
    output_ = std::move(output);
  }

  void run(const ToolCallContext& call, ToolCompletion completion) {
    json params = {{"name", tool_}, {"arguments", call.args.is_object() ? call.args : json::object()}};
    // The call's span, as MCP carries trace context: the server's trace joins the turn's.
    if (!call.traceparent.empty()) params["_meta"]["traceparent"] = call.traceparent;
    if (call.input.is_object()) {
      const json state = call.input.value("state", json());
      json answer = {{"action", call.input.value("action", "cancel")}};
      if (call.input.contains("content")) answer["content"] = call.input["content"];
      if (state.is_object() && state.contains("requestState")) {
        // 2026-07-28: the same call again, with the answer and the server's state.
        params["inputResponses"] = {{state.value("inputKey", ""), answer}};
        params["requestState"] = state["requestState"];
      } else {
        resume(call, completion, state.is_object() ? state.value("elicitation", "") : "", answer);
        return;
      }
    }
    auto slot = std::make_shared<Slot>();
    slot->call_id = call.tool_call_id;
    slot->current = completion;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      by_call_[call.tool_call_id] = slot;
    }
    int64_t id = conn_->request(
        "tools/call", std::move(params), [this, slot](RpcOutcome o) { answered(slot, std::move(o)); },
        [this, slot](const json& p) {
          json report = json::object();
          for (const char* k : {"progress", "total", "message"})
            if (p.contains(k)) report[k] = p[k];
          current(slot).progress(std::move(report));
        },
        [this, slot](const json& server_request_id, const json& p) { elicited(slot, server_request_id, p); });
    std::lock_guard<std::mutex> lock(mutex_);
    slot->rpc_id = id;
  }

  void abandon(const ToolCallContext& call, std::string_view reason) {
    int64_t id = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = by_call_.find(call.tool_call_id);
      if (it == by_call_.end() || it->second->rpc_id == 0) return;
      id = it->second->rpc_id;
      by_call_.erase(it);
    }
    conn_->cancel(id, reason == "timeout" ? "the call timed out" : "the turn was cancelled");
  }

 private:
  struct Slot {
    std::string call_id;
    ToolCompletion current;  // the run waiting for the call now
    int64_t rpc_id = 0;
    json elicitation;                 // the server's request waiting for the person's answer (null: none)
    std::optional<RpcOutcome> early;  // the answer, when it came while the person was asked
  };

  ToolCompletion current(const std::shared_ptr<Slot>& slot) {
    std::lock_guard<std::mutex> lock(mutex_);
    return slot->current;
  }

  void answered(const std::shared_ptr<Slot>& slot, RpcOutcome o) {
    // Completed under the lock, so that run() never records a call that has ended.
    std::lock_guard<std::mutex> lock(mutex_);
    if (!slot->elicitation.is_null()) {
      slot->early = std::move(o);  // given to the run that brings the person's answer
      return;
    }
    by_call_.erase(slot->call_id);
    finish(o, slot->current);
  }

  void finish(const RpcOutcome& o, ToolCompletion& completion) {
    if (!o.ok) {
      completion.fail(o.code, o.message);
      return;
    }
    const json& r = o.result;
    if (r.is_object() && r.value("resultType", "") == "input_required") return ask_again(r, completion);
    finish_call(r, output_.get(), completion);
  }

  // 2026-07-28: the server needs input before it can finish; the call ends here and is sent again with it.
  void ask_again(const json& r, ToolCompletion& completion) {
    const json requests = r.value("inputRequests", json());
    const json state = r.value("requestState", json());
    if (!requests.is_object() || requests.size() != 1 || !state.is_string()) {
      completion.fail("mcp_protocol", fmt::format("MCP server {} asked for input agentrt cannot give (one "
                                                  "elicitation/create with a requestState is what it answers)",
                                                  server_));
      return;
    }
    // Through the object's own iterator: a structured binding to items()' proxy is a dangling temporary to gcc -O1.
    const auto first = requests.begin();
    const std::string key = first.key();
    const json& req = first.value();
    const json params = req.is_object() ? req.value("params", json::object()) : json::object();
    if (!req.is_object() || req.value("method", "") != "elicitation/create" || params.value("mode", "form") != "form") {
      completion.fail("mcp_protocol", fmt::format("MCP server {} asked for input agentrt cannot give: {}", server_,
                                                  req.is_object() ? req.value("method", "?") : std::string("?")));
      return;
    }
    completion.need_input(InputRequest{params.value("message", ""), schema_of(params),
                                       json{{"server", server_}, {"inputKey", key}, {"requestState", state}}});
  }

  // 2025-11-25: the server asks while the call runs; the run pauses, the call stays open.
  void elicited(const std::shared_ptr<Slot>& slot, const json& server_request_id, const json& params) {
    ToolCompletion c;
    const std::string key = new_id("elic");
    {
      std::lock_guard<std::mutex> lock(mutex_);
      slot->elicitation = server_request_id;
      by_key_[key] = slot;
      c = slot->current;
    }
    if (c.need_input(InputRequest{params.value("message", ""), schema_of(params),
                                  json{{"server", server_}, {"elicitation", key}}}))
      return;
    // The run stopped waiting (a timeout, a cancel): nobody can answer.
    {
      std::lock_guard<std::mutex> lock(mutex_);
      by_key_.erase(key);
      slot->elicitation = nullptr;
    }
    try {
      conn_->respond(server_request_id, json{{"action", "cancel"}});
    } catch (const std::exception&) {
    }
  }

  // The person answered an elicitation: the answer goes back on the open call, which this run now waits for.
  void resume(const ToolCallContext& call, ToolCompletion completion, const std::string& key, const json& answer) {
    std::shared_ptr<Slot> slot;
    json server_request;
    std::optional<RpcOutcome> early;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = by_key_.find(key);
      if (it != by_key_.end()) {
        slot = it->second;
        by_key_.erase(it);
        server_request = slot->elicitation;
        slot->elicitation = nullptr;
        slot->current = completion;
        slot->call_id = call.tool_call_id;
        by_call_[call.tool_call_id] = slot;
        early.swap(slot->early);
      }
    }
    if (!slot) {
      completion.fail("mcp_session_gone",
                      fmt::format("the session with MCP server {} that asked for this input has ended (a restart); the "
                                  "call cannot go on and its outcome is unknown",
                                  server_));
      return;
    }
    if (early) {  // it ended while the person was asked (the server died, or answered anyway)
      std::lock_guard<std::mutex> lock(mutex_);
      by_call_.erase(call.tool_call_id);
      finish(*early, completion);
      return;
    }
    try {
      conn_->respond(server_request, answer);
    } catch (const Error& e) {
      std::lock_guard<std::mutex> lock(mutex_);
      by_call_.erase(call.tool_call_id);
      completion.fail("mcp_unavailable", e.message());
    }
  }

  static json schema_of(const json& params) {
    json schema = params.value("requestedSchema", json{{"type", "object"}});
    if (!schema.is_object()) schema = json{{"type", "object"}};
    schema.erase("$schema");
    return schema;
  }

  McpConnection* conn_;
  std::string server_, tool_;
  std::shared_ptr<const JsonSchema> output_;
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Slot>> by_call_;  // calls in flight, by tool call id
  std::map<std::string, std::shared_ptr<Slot>> by_key_;   // calls waiting for a person, by their state's key
};

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
  auto& calls = server.calls[t.tool];
  if (!calls) calls = std::make_shared<CallTable>(server.conn.get(), server.cfg.name, t.tool);
  calls->set_output(std::move(output));
  spec.handler = [calls](const ToolCallContext& call, ToolCompletion completion) { calls->run(call, completion); };
  spec.on_abandon = [calls](const ToolCallContext& call, std::string_view reason) { calls->abandon(call, reason); };
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
  // Images (and audio) the tool returned are files of the thread: stored as attachments, shown to the model, listed
  // in the tool message's metadata.media. Once stored, the result's part names the file instead of its bytes.
  if (r.result.contains("content") && r.result["content"].is_array())
    for (size_t i = 0; i < r.result["content"].size(); ++i) {
      const json& part = r.result["content"][i];
      if (!part.is_object() || !part.contains("data") || !part["data"].is_string()) continue;
      const std::string type = part.value("type", "");
      if (type != "image" && type != "audio") continue;
      try {
        r.media.push_back(ToolMedia{part.value("mimeType", ""), crypto::base64_decode(part["data"].get<std::string>()),
                                    fmt::format("/content/{}/data", i)});
      } catch (const Error&) {
        // not base64: it stays in the result as the server sent it
      }
    }
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
