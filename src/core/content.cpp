#include "agentrt/content.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "agentrt/events.hpp"
#include "agentrt/json_limits.hpp"
#include "agentrt/json_reader.hpp"
#include "util/json_dom.hpp"
#include "util/json_fast.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

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
  const wire::JsonReader in(j, "source");
  s.type = in.required_string("type");
  if (s.type != "data" && s.type != "url" && s.type != "file")
    in.fail(fmt::format("'type' must be data, url or file, not '{}'", s.type));
  s.value = in.required_string("value");
  s.mime_type = in.optional_string("mimeType");
  s.provider = in.optional_string("provider");
  if (s.type == "data" && s.mime_type.empty()) in.fail("a data source needs 'mimeType'");
  if (s.value.empty()) in.fail("'value' must not be empty");
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
  const wire::JsonReader in(j, "content part");
  p = ContentPart{};
  std::string type = in.required_string("type");
  p.id = in.optional_string("id");
  p.metadata = in.optional_object("metadata");
  if (type == "text") {
    p.type = "text";
    p.text = wire::JsonReader(j, "text part").required_string("text");
    return;
  }
  if (type == "image" || type == "audio" || type == "video" || type == "document") {
    p.type = type;
    p.source = wire::JsonReader(j, type + " part").required("source").get<PartSource>();
    return;
  }
  if (type == "binary") {  // 0.x part, upgraded the way @ag-ui/client's legacy-content middleware does
    const wire::JsonReader binary(j, "binary part");
    std::string mime = binary.required_string("mimeType");
    PartSource src;
    src.mime_type = mime;
    if (auto d = binary.optional_string("data"); !d.empty()) {
      src.type = "data";
      src.value = d;
    } else if (auto u = binary.optional_string("url"); !u.empty()) {
      src.type = "url";
      src.value = u;
    } else if (auto i = binary.optional_string("id"); !i.empty()) {
      src.type = "file";
      src.value = i;
    } else {
      binary.fail("needs one of 'data', 'url' or 'id'");
    }
    p.type = media_type_for(mime);
    p.source = src;
    p.id.clear();
    if (auto fn = binary.optional_string("filename"); !fn.empty()) {
      if (!p.metadata.is_object()) p.metadata = json::object();
      p.metadata["filename"] = fn;
    }
    return;
  }
  in.fail(fmt::format("unknown type '{}' (text, image, audio, video, document, binary)", type));
}

// parse_content, its depth checked by the caller.
void parse_content_checked(const json& content, Message& out) {
  out.parts.clear();
  out.content.clear();
  out.has_content = true;
  if (content.is_string()) {
    out.content = content.get<std::string>();
  } else if (content.is_array()) {
    if (content.empty()) wire::refuse("message content", "a part list must not be empty");
    for (const auto& p : content) part_from_json(p, out.parts.emplace_back());
  } else {
    wire::refuse("message content", "must be a string or an array of content parts");
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

namespace {

// A message is read from one of two sources, with one set of rules (decode_tool_call, decode_message): nlohmann's
// value (inputs, the document layout) or simdjson's DOM (stored rows, read without building nlohmann values for
// the fields that are strings). Each source says what its values are and how to take them.
struct JsonSource : wire::JsonReader {
  using Value = const json*;
  JsonSource(const json& j, std::string_view where, size_t /*depth*/ = 0, size_t /*max_depth*/ = 0)
      : wire::JsonReader(j, where) {}
  static bool is_null(Value v) { return v->is_null(); }
  static bool is_string(Value v) { return v->is_string(); }
  static bool is_array(Value v) { return v->is_array(); }
  static bool is_object(Value v) { return v->is_object(); }
  static std::string string_of(Value v) { return v->get<std::string>(); }
  template <class F>
  static void for_each(Value v, F&& f) {
    for (const auto& item : *v) f(&item);
  }
  static const json& object_of(Value v) { return *v; }
};

class DomSource {
 public:
  using Value = std::optional<simdjson::dom::element>;
  // `depth`: the containers around `e`'s members (1 for the message itself); `max_depth` bounds what is
  // copied out of them.
  DomSource(simdjson::dom::element e, std::string_view where, size_t depth, size_t max_depth)
      : where_(where), depth_(depth), max_depth_(max_depth) {
    if (e.get_object().get(object_) != simdjson::SUCCESS)
      throw Error(ErrorCode::invalid_argument, fmt::format("{} must be a JSON object", where_));
    // The members walked once, each key a decoder asks for set aside (the last of repeated keys, as nlohmann's
    // parser keeps it): a decoder asks for about ten keys of an object that has four or five.
    for (auto field : object_) {
      const int k = known_key(field.key);
      if (k < 0) continue;
      known_[k] = field.value;
      present_ |= 1u << k;
    }
  }
  // Inlined where a decoder asks for a key by name: the key's place in known_ is then found as it compiles.
  [[gnu::always_inline]] Value find(std::string_view key) const {
    if (const int k = known_key(key); k >= 0) {
      if (present_ & (1u << k)) return known_[k];
      return std::nullopt;
    }
    Value found;
    for (auto field : object_)
      if (field.key == key) found = field.value;
    return found;
  }
  [[gnu::always_inline]] std::string required_string(std::string_view key) const {
    Value v = find(key);
    if (!v) fail(fmt::format("'{}' is required", key));
    if (!v->is_string()) wrong_type(key, "a string");
    return string_of(v);
  }
  [[gnu::always_inline]] std::string optional_string(std::string_view key) const {
    Value v = find(key);
    if (!v) return {};
    if (!v->is_string()) wrong_type(key, "a string");
    return string_of(v);
  }
  json optional_object(std::string_view key) const {
    Value v = find(key);
    if (!v) return nullptr;
    if (!v->is_object()) wrong_type(key, "a JSON object");
    return dom_to_json(*v, depth_, max_depth_);
  }
  [[noreturn]] void fail(std::string_view what) const { wire::refuse(where_, what); }
  [[noreturn]] void wrong_type(std::string_view key, std::string_view kind) const {
    fail(fmt::format("'{}' must be {}", key, kind));
  }
  static bool is_null(const Value& v) { return v->is_null(); }
  static bool is_string(const Value& v) { return v->is_string(); }
  static bool is_array(const Value& v) { return v->is_array(); }
  static bool is_object(const Value& v) { return v->is_object(); }
  static std::string string_of(const Value& v) { return std::string(std::string_view(*v)); }
  template <class F>
  static void for_each(const Value& v, F&& f) {
    for (auto item : simdjson::dom::array(*v)) f(Value(item));
  }
  static simdjson::dom::element object_of(const Value& v) { return *v; }
  json member_json(const Value& v) const { return dom_to_json(*v, depth_, max_depth_); }

 private:
  // The keys of a message, a tool call and its function: their place in known_, or -1. (Each compare is of a size
  // known here, which the compiler makes a compare of integers.)
  template <size_t N>
  [[gnu::always_inline]] static bool is(std::string_view key, const char (&name)[N]) {
    return std::memcmp(key.data(), name, N - 1) == 0;
  }
  [[gnu::always_inline]] static int known_key(std::string_view k) {
    switch (k.size()) {
      case 2: return is(k, "id") ? 0 : -1;
      case 4: return is(k, "role") ? 1 : is(k, "name") ? 2 : is(k, "type") ? 3 : -1;
      case 5: return is(k, "error") ? 4 : -1;
      case 7: return is(k, "content") ? 5 : -1;
      case 8: return is(k, "metadata") ? 6 : is(k, "function") ? 7 : -1;
      case 9: return is(k, "toolCalls") ? 8 : is(k, "arguments") ? 9 : -1;
      case 10: return is(k, "toolCallId") ? 10 : -1;
      case 14: return is(k, "encryptedValue") ? 11 : -1;
      default: return -1;
    }
  }
  static constexpr int kKnownKeys = 12;
  simdjson::dom::object object_;
  std::array<simdjson::dom::element, kKnownKeys> known_;
  uint32_t present_ = 0;
  std::string_view where_;
  size_t depth_, max_depth_;
};

template <class Source>
ToolCall decode_tool_call(const Source& in) {
  ToolCall c;
  c.id = in.required_string("id");
  auto f = in.find("function");
  if (!f) in.fail("'function' is required");
  if (!Source::is_object(f)) in.wrong_type("function", "a JSON object");
  const Source function(Source::object_of(f), "tool call function", 0, 0);
  c.name = function.required_string("name");
  c.arguments = function.required_string("arguments");
  return c;
}

// The message's content, a string or a part list; parts are read from nlohmann's value (they are rare in
// stored rows, and their rules live in part_from_json).
void decode_content(const JsonSource&, const json* c, Message& m) { parse_content_checked(*c, m); }
void decode_content(const DomSource& in, const DomSource::Value& c, Message& m) {
  if (c->is_string()) {
    m.parts.clear();
    m.has_content = true;
    m.content = DomSource::string_of(c);
    return;
  }
  parse_content_checked(in.member_json(c), m);
}

template <class Source>
Message decode_message(const Source& in) {
  Message m;
  m.id = in.required_string("id");
  m.role = role_from_string(in.required_string("role"));
  auto c = in.find("content");
  if (c && !Source::is_null(c)) {
    if (m.role != Role::user && m.role != Role::tool && !Source::is_string(c))
      in.wrong_type("content", fmt::format("a string (role {})", to_string(m.role)));
    decode_content(in, c, m);
  } else if (m.role == Role::assistant) {
    m.has_content = false;
  } else if (m.role != Role::activity) {
    in.fail(fmt::format("'content' is required (role {})", to_string(m.role)));
  }
  if (auto tc = in.find("toolCalls")) {
    if (!Source::is_array(tc)) in.wrong_type("toolCalls", "an array");
    Source::for_each(tc, [&](const typename Source::Value& item) {
      m.tool_calls.push_back(decode_tool_call(Source(Source::object_of(item), "tool call", 0, 0)));
    });
  }
  m.tool_call_id = in.optional_string("toolCallId");
  if (m.role == Role::tool && m.tool_call_id.empty()) in.fail("'toolCallId' is required (role tool)");
  m.name = in.optional_string("name");
  m.error = in.optional_string("error");
  m.encrypted_value = in.optional_string("encryptedValue");
  m.metadata = in.optional_object("metadata");
  return m;
}

}  // namespace

void from_json(const json& j, ToolCall& c) { c = decode_tool_call(JsonSource(j, "tool call")); }

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
  if (!m.encrypted_value.empty()) j["encryptedValue"] = m.encrypted_value;
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
  if (!m.encrypted_value.empty()) {
    append_key(out, "encryptedValue");
    append_json_string(out, m.encrypted_value);
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
  return decode_message(JsonSource(j, "message"));
}

Message message_from_json_text(std::string_view text, size_t max_depth) {
  // A message's tool calls lie 4 levels down: a smaller limit is checked on nlohmann's value.
  if (max_depth >= 4)
    if (auto root = parse_dom(text, max_depth)) return decode_message(DomSource(*root, "message", 1, max_depth));
  return message_from_json(parse_json(text, max_depth), max_depth);
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
