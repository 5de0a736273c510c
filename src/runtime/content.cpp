#include "agentrt/content.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "agentrt/events.hpp"
#include "agentrt/json_limits.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

[[noreturn]] void bad(const std::string& what) { throw Error(ErrorCode::invalid_argument, what); }

const std::string& req_string(const json& j, const char* key, const char* where) {
  auto it = j.find(key);
  if (it == j.end()) bad(fmt::format("{}: missing required field '{}'", where, key));
  if (!it->is_string()) bad(fmt::format("{}: field '{}' must be a string", where, key));
  return it->get_ref<const std::string&>();
}

std::string opt_string(const json& j, const char* key, const char* where) {
  auto it = j.find(key);
  if (it == j.end()) return {};
  if (!it->is_string()) bad(fmt::format("{}: field '{}' must be a string", where, key));
  return it->get<std::string>();
}

json opt_object(const json& j, const char* key, const char* where) {
  auto it = j.find(key);
  if (it == j.end()) return nullptr;
  if (!it->is_object()) bad(fmt::format("{}: field '{}' must be an object", where, key));
  return *it;
}

std::string media_type_for(const std::string& mime) {
  if (mime.rfind("image/", 0) == 0) return "image";
  if (mime.rfind("audio/", 0) == 0) return "audio";
  if (mime.rfind("video/", 0) == 0) return "video";
  return "document";
}

}  // namespace

ContentPart ContentPart::make_text(std::string t) {
  ContentPart p;
  p.type = "text";
  p.text = std::move(t);
  return p;
}

std::string Message::text() const {
  if (parts.empty()) return content;
  std::string out;
  for (const auto& p : parts) {
    if (p.type != "text") continue;
    if (!out.empty()) out += '\n';
    out += p.text;
  }
  return out;
}

void to_json(json& j, const PartSource& s) {
  j = json{{"type", s.type}, {"value", s.value}};
  if (!s.mime_type.empty()) j["mimeType"] = s.mime_type;
  if (!s.provider.empty()) j["provider"] = s.provider;
}

void from_json(const json& j, PartSource& s) {
  if (!j.is_object()) bad("content part source must be an object");
  s.type = req_string(j, "type", "source");
  if (s.type != "data" && s.type != "url" && s.type != "file")
    bad(fmt::format("source: type must be data, url or file, not '{}'", s.type));
  s.value = req_string(j, "value", "source");
  s.mime_type = opt_string(j, "mimeType", "source");
  s.provider = opt_string(j, "provider", "source");
  if (s.type == "data" && s.mime_type.empty()) bad("source: a data source needs mimeType");
  if (s.value.empty()) bad("source: value must not be empty");
}

void to_json(json& j, const ContentPart& p) {
  j = json{{"type", p.type}};
  if (p.type == "text") {
    j["text"] = p.text;
  } else if (p.source) {
    j["source"] = *p.source;
  }
  if (!p.id.empty()) j["id"] = p.id;
  if (p.metadata.is_object()) j["metadata"] = p.metadata;
}

namespace {

// The part, its depth checked by the caller.
void part_from_json(const json& j, ContentPart& p) {
  if (!j.is_object()) bad("content part must be an object");
  p = ContentPart{};
  std::string type = req_string(j, "type", "content part");
  p.id = opt_string(j, "id", "content part");
  p.metadata = opt_object(j, "metadata", "content part");
  if (type == "text") {
    p.type = "text";
    p.text = req_string(j, "text", "text part");
    return;
  }
  if (type == "image" || type == "audio" || type == "video" || type == "document") {
    p.type = type;
    auto it = j.find("source");
    if (it == j.end()) bad(fmt::format("{} part: missing required field 'source'", type));
    p.source = it->get<PartSource>();
    return;
  }
  if (type == "binary") {  // 0.x part, upgraded the way @ag-ui/client's legacy-content middleware does
    std::string mime = req_string(j, "mimeType", "binary part");
    PartSource src;
    src.mime_type = mime;
    if (auto d = opt_string(j, "data", "binary part"); !d.empty()) {
      src.type = "data";
      src.value = d;
    } else if (auto u = opt_string(j, "url", "binary part"); !u.empty()) {
      src.type = "url";
      src.value = u;
    } else if (auto i = opt_string(j, "id", "binary part"); !i.empty()) {
      src.type = "file";
      src.value = i;
    } else {
      bad("binary part: needs one of data, url or id");
    }
    p.type = media_type_for(mime);
    p.source = src;
    p.id.clear();
    if (auto fn = opt_string(j, "filename", "binary part"); !fn.empty()) {
      if (!p.metadata.is_object()) p.metadata = json::object();
      p.metadata["filename"] = fn;
    }
    return;
  }
  bad(fmt::format("unknown content part type '{}'", type));
}

// parse_content, its depth checked by the caller.
void parse_content_checked(const json& content, Message& out) {
  out.parts.clear();
  out.content.clear();
  out.has_content = true;
  if (content.is_string()) {
    out.content = content.get<std::string>();
  } else if (content.is_array()) {
    if (content.empty()) bad("message content: a part list must not be empty");
    for (const auto& p : content) part_from_json(p, out.parts.emplace_back());
  } else {
    bad("message content must be a string or an array of content parts");
  }
}

}  // namespace

void from_json(const json& j, ContentPart& p) {
  check_json_depth(j, kDefaultMaxJsonDepth, "content part");
  part_from_json(j, p);
}

void to_json(json& j, const ToolCall& c) {
  j = json{{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}

void from_json(const json& j, ToolCall& c) {
  if (!j.is_object()) bad("tool call must be an object");
  c.id = req_string(j, "id", "tool call");
  auto f = j.find("function");
  if (f == j.end() || !f->is_object()) bad("tool call: missing object 'function'");
  c.name = req_string(*f, "name", "tool call function");
  c.arguments = req_string(*f, "arguments", "tool call function");
}

void parse_content(const json& content, Message& out) {
  check_json_depth(content, kDefaultMaxJsonDepth, "message content");
  parse_content_checked(content, out);
}

void to_json(json& j, const Message& m) {
  j = json{{"id", m.id}, {"role", to_string(m.role)}};
  if (!m.parts.empty()) {
    j["content"] = m.parts;
  } else if (m.has_content || m.role != Role::assistant) {
    j["content"] = m.content;
  }
  if (!m.tool_calls.empty()) j["toolCalls"] = m.tool_calls;
  if (!m.tool_call_id.empty()) j["toolCallId"] = m.tool_call_id;
  if (!m.name.empty()) j["name"] = m.name;
  if (!m.error.empty()) j["error"] = m.error;
  if (m.metadata.is_object()) j["metadata"] = m.metadata;
}

namespace {
void append_key(std::string& out, const char* key) {
  out += ",\"";
  out += key;
  out += "\":";
}
void append_value(std::string& out, const json& j) { append_json(out, j); }
}  // namespace

std::string to_json_string(const Message& m) {
  std::string out;
  out.reserve(96 + m.content.size());
  out += "{\"id\":";
  append_json_string(out, m.id);
  append_key(out, "role");
  append_json_string(out, to_string(m.role));
  if (!m.parts.empty()) {
    append_key(out, "content");
    append_value(out, json(m.parts));
  } else if (m.has_content || m.role != Role::assistant) {
    append_key(out, "content");
    append_json_string(out, m.content);
  }
  if (!m.tool_calls.empty()) {
    out += ",\"toolCalls\":[";
    for (size_t i = 0; i < m.tool_calls.size(); ++i) {
      const auto& c = m.tool_calls[i];
      if (i) out += ',';
      out += "{\"id\":";
      append_json_string(out, c.id);
      out += ",\"type\":\"function\",\"function\":{\"name\":";
      append_json_string(out, c.name);
      out += ",\"arguments\":";
      append_json_string(out, c.arguments);
      out += "}}";
    }
    out += ']';
  }
  if (!m.tool_call_id.empty()) {
    append_key(out, "toolCallId");
    append_json_string(out, m.tool_call_id);
  }
  if (!m.name.empty()) {
    append_key(out, "name");
    append_json_string(out, m.name);
  }
  if (!m.error.empty()) {
    append_key(out, "error");
    append_json_string(out, m.error);
  }
  if (m.metadata.is_object()) {
    append_key(out, "metadata");
    append_value(out, m.metadata);
  }
  out += '}';
  return out;
}

Message message_from_json(const json& j, size_t max_depth) {
  check_json_depth(j, max_depth, "message");
  if (!j.is_object()) bad("message must be an object");
  Message m;
  m.id = req_string(j, "id", "message");
  m.role = role_from_string(req_string(j, "role", "message"));
  auto c = j.find("content");
  if (c != j.end() && !c->is_null()) {
    if (m.role != Role::user && m.role != Role::tool && !c->is_string())
      bad(fmt::format("{} message: content must be a string", to_string(m.role)));
    parse_content_checked(*c, m);
  } else if (m.role == Role::assistant) {
    m.has_content = false;
  } else if (m.role != Role::activity) {
    bad(fmt::format("{} message: missing required field 'content'", to_string(m.role)));
  }
  if (auto tc = j.find("toolCalls"); tc != j.end()) {
    if (!tc->is_array()) bad("message: toolCalls must be an array");
    for (const auto& c2 : *tc) m.tool_calls.push_back(c2.get<ToolCall>());
  }
  m.tool_call_id = opt_string(j, "toolCallId", "message");
  if (m.role == Role::tool && m.tool_call_id.empty()) bad("tool message: missing required field 'toolCallId'");
  m.name = opt_string(j, "name", "message");
  m.error = opt_string(j, "error", "message");
  m.metadata = opt_object(j, "metadata", "message");
  return m;
}

void from_json(const json& j, Message& m) { m = message_from_json(j, kDefaultMaxJsonDepth); }

size_t message_depth(const Message& m, size_t stop_after) {
  // {"metadata": X} adds one level to X; {"content": [{"metadata": X}]} three; tool calls are strings.
  size_t deepest = 1;
  const size_t inner = stop_after > 0 ? stop_after - 1 : 0;
  if (m.metadata.is_structured()) deepest = std::max(deepest, 1 + json_depth(m.metadata, inner));
  if (!m.parts.empty()) deepest = std::max<size_t>(deepest, 3);
  if (!m.tool_calls.empty()) deepest = std::max<size_t>(deepest, 4);
  const size_t part_inner = stop_after > 2 ? stop_after - 3 : 0;
  for (const auto& p : m.parts) {
    if (p.source) deepest = std::max<size_t>(deepest, 4);
    if (p.metadata.is_structured()) deepest = std::max(deepest, 3 + json_depth(p.metadata, part_inner));
    if (deepest > stop_after) break;
  }
  return deepest > stop_after ? stop_after + 1 : deepest;
}

}  // namespace v1
}  // namespace agentrt
