// The runtime config's `mcp_servers` object.
#include <fmt/format.h>

#include "agentrt/json_reader.hpp"
#include "agentrt/mcp.hpp"

namespace agentrt {
inline namespace v1 {
namespace {

std::vector<std::string> strings(const wire::JsonReader& r, const json& value, std::string_view key) {
  if (!value.is_array()) r.wrong_type(key, "an array of strings");
  std::vector<std::string> out;
  for (const auto& v : value) {
    if (!v.is_string()) r.wrong_value(key, "an array of strings", value);
    out.push_back(v.get<std::string>());
  }
  return out;
}

std::map<std::string, std::string> string_map(const wire::JsonReader& r, const json& value, std::string_view key) {
  if (!value.is_object()) r.wrong_type(key, "an object of strings");
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : value.items()) {
    if (!v.is_string()) r.wrong_value(key, "an object of strings", value);
    out[k] = v.get<std::string>();
  }
  return out;
}

bool valid_server_name(std::string_view s) {
  if (s.empty() || s.size() > 32 || s.find("__") != std::string_view::npos || s.back() == '_') return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}

McpServerConfig server_from_json(const std::string& name, const json& j) {
  const std::string where = fmt::format("mcp_servers.{}", name);
  wire::JsonReader r(j, where);
  r.only_keys({"command", "args", "env", "cwd", "url", "headers", "approval", "stages", "timeout_ms", "tools",
               "idempotent", "protocol_version", "startup_timeout_ms", "max_message_bytes"});
  McpServerConfig c;
  c.name = name;
  if (const json* v = r.find("command")) {
    if (v->is_string())
      c.command = {v->get<std::string>()};
    else
      c.command = strings(r, *v, "command");
  }
  if (const json* v = r.find("args")) {
    auto args = strings(r, *v, "args");
    c.command.insert(c.command.end(), args.begin(), args.end());
  }
  if (const json* v = r.find("env")) c.env = string_map(r, *v, "env");
  c.cwd = r.optional_string("cwd");
  c.url = r.optional_string("url");
  if (const json* v = r.find("headers")) c.headers = string_map(r, *v, "headers");
  if (c.url.empty() == c.command.empty()) r.fail("give either a command (stdio) or a url (streamable HTTP)");
  if (!c.url.empty() && c.url.rfind("http://", 0) != 0 && c.url.rfind("https://", 0) != 0)
    r.wrong_value("url", "an http:// or https:// URL", json(c.url));
  if (c.command.empty() != true && c.command[0].empty()) r.wrong_value("command", "a program to run", json(""));
  if (!c.url.empty() && (r.find("env") || r.find("cwd") || r.find("args")))
    r.fail("env, cwd and args go with a command, not a url");
  if (!c.command.empty() && r.find("headers")) r.fail("headers go with a url, not a command");
  if (const json* v = r.find("approval")) {
    if (*v == "always") {
      c.approval_always = true;
    } else if (*v == "never") {
      c.approval_always = false;
    } else if (v->is_object()) {
      wire::JsonReader a(*v, where + ".approval");
      a.only_keys({"never"});
      const json& never = a.required("never");
      for (auto& t : strings(a, never, "never")) c.approval_exempt.insert(t);
    } else {
      r.wrong_value("approval", "\"always\", \"never\" or {\"never\": [tool...]}", *v);
    }
  }
  if (const json* v = r.find("stages")) {
    c.stages = strings(r, *v, "stages");
    for (const auto& s : c.stages)
      if (s != "intent" && s != "execution" && s != "organization")
        r.wrong_value("stages", "stages among intent, execution, organization", *v);
  }
  if (auto v = r.optional_integer("timeout_ms", 1, 24LL * 3600 * 1000)) c.timeout = std::chrono::milliseconds(*v);
  if (auto v = r.optional_integer("startup_timeout_ms", 1, 600000)) c.startup_timeout = std::chrono::milliseconds(*v);
  if (auto v = r.optional_integer("max_message_bytes", 1024, 256LL << 20))
    c.max_message_bytes = static_cast<size_t>(*v);
  if (const json* v = r.find("tools")) {
    wire::JsonReader t(*v, where + ".tools");
    t.only_keys({"include", "exclude"});
    if (const json* inc = t.find("include")) {
      auto list = strings(t, *inc, "include");
      c.include = std::set<std::string>(list.begin(), list.end());
    }
    if (const json* exc = t.find("exclude"))
      for (auto& s : strings(t, *exc, "exclude")) c.exclude.insert(s);
  }
  if (const json* v = r.find("idempotent"))
    for (auto& s : strings(r, *v, "idempotent")) c.idempotent.insert(s);
  c.protocol_version = r.optional_string("protocol_version");
  if (!c.protocol_version.empty() && c.protocol_version != kMcpProtocolStateless &&
      c.protocol_version != kMcpProtocolSessions && c.protocol_version != "2025-06-18" &&
      c.protocol_version != "2025-03-26")
    r.wrong_value("protocol_version",
                  fmt::format("{}, {}, 2025-06-18 or 2025-03-26", kMcpProtocolStateless, kMcpProtocolSessions),
                  json(c.protocol_version));
  return c;
}

}  // namespace

std::vector<McpServerConfig> mcp_servers_from_json(const json& servers) {
  if (!servers.is_object()) wire::refuse("mcp_servers", "must be an object {NAME: {...}}");
  std::vector<McpServerConfig> out;
  for (const auto& [name, cfg] : servers.items()) {
    if (!valid_server_name(name))
      wire::refuse("mcp_servers", fmt::format("'{}' is not a server name (1-32 of [A-Za-z0-9_-], no \"__\", not "
                                              "ending in \"_\")",
                                              name));
    out.push_back(server_from_json(name, cfg));
  }
  return out;
}

}  // namespace v1
}  // namespace agentrt
