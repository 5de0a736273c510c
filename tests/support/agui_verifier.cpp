#include "support/agui_verifier.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <map>
#include <set>
#include <string_view>
#include <utility>

namespace agentrt::testing {

namespace {

using Message = std::optional<std::string>;

// ---------------------------------------------------------------------------------------------------------------
// Schema (§1-§2)
// ---------------------------------------------------------------------------------------------------------------

enum class Kind {
  string,
  any,  // any JSON value except null
  object,
  boolean,
  integer,
  text_role,
  tool_role,
  reasoning_role,
  encrypted_subtype,
  usage,
  run_outcome,
  subagent_outcome,
  tool_result_content,
  json_patch,
  messages,
  run_input,
};

// One property of an event type (immutable table data).
struct Field {
  std::string_view name;
  bool required;
  Kind kind;
};

// The properties of one event type (immutable table data).
struct EventSpec {
  std::string_view type;
  std::vector<Field> fields;
};

Field req(std::string_view name, Kind kind = Kind::string) { return {name, true, kind}; }
Field opt(std::string_view name, Kind kind = Kind::string) { return {name, false, kind}; }

// The 31 event types of @ag-ui/core 1.0.0 with their fields (AGUI.md §2); base fields are added by the checker.
const std::vector<EventSpec>& event_specs() {
  static const std::vector<EventSpec> specs = [] {
    const Field sub = opt("subagentRunId");
    return std::vector<EventSpec>{
        {"RUN_STARTED",
         {req("threadId"), req("runId"), opt("protocolVersion"), opt("parentRunId"), opt("input", Kind::run_input)}},
        {"RUN_FINISHED",
         {req("threadId"), req("runId"), opt("result", Kind::any), opt("outcome", Kind::run_outcome),
          opt("usage", Kind::usage)}},
        {"RUN_ERROR", {req("message"), opt("code"), opt("usage", Kind::usage)}},
        {"STEP_STARTED", {req("stepName"), sub}},
        {"STEP_FINISHED", {req("stepName"), sub}},
        {"TEXT_MESSAGE_START", {req("messageId"), sub, opt("role", Kind::text_role), opt("name")}},
        {"TEXT_MESSAGE_CONTENT", {req("messageId"), req("delta"), sub}},
        {"TEXT_MESSAGE_END", {req("messageId"), sub}},
        {"TEXT_MESSAGE_CHUNK", {sub, opt("messageId"), opt("role", Kind::text_role), opt("delta"), opt("name")}},
        {"TOOL_CALL_START", {req("toolCallId"), req("toolCallName"), sub, opt("parentMessageId")}},
        {"TOOL_CALL_ARGS", {req("toolCallId"), req("delta"), sub}},
        {"TOOL_CALL_END", {req("toolCallId"), sub}},
        {"TOOL_CALL_CHUNK", {sub, opt("toolCallId"), opt("toolCallName"), opt("parentMessageId"), opt("delta")}},
        {"TOOL_CALL_RESULT",
         {req("messageId"), req("toolCallId"), req("content", Kind::tool_result_content), sub,
          opt("role", Kind::tool_role)}},
        {"STATE_SNAPSHOT", {req("snapshot", Kind::any), sub}},
        {"STATE_DELTA", {req("delta", Kind::json_patch), sub}},
        {"MESSAGES_SNAPSHOT", {req("messages", Kind::messages)}},
        {"ACTIVITY_SNAPSHOT",
         {req("messageId"), req("activityType"), req("content", Kind::object), sub, opt("replace", Kind::boolean)}},
        {"ACTIVITY_DELTA", {req("messageId"), req("activityType"), req("patch", Kind::json_patch), sub}},
        {"RAW", {req("event", Kind::any), sub, opt("source")}},
        {"CUSTOM", {req("name"), req("value", Kind::any), sub}},
        {"REASONING_START", {req("messageId"), sub}},
        {"REASONING_MESSAGE_START", {req("messageId"), req("role", Kind::reasoning_role), sub}},
        {"REASONING_MESSAGE_CONTENT", {req("messageId"), req("delta"), sub}},
        {"REASONING_MESSAGE_END", {req("messageId"), sub}},
        {"REASONING_MESSAGE_CHUNK", {sub, opt("messageId"), opt("delta")}},
        {"REASONING_END", {req("messageId"), sub}},
        {"REASONING_ENCRYPTED_VALUE",
         {req("subtype", Kind::encrypted_subtype), req("entityId"), req("encryptedValue"), sub}},
        {"SUBAGENT_STARTED",
         {req("subagentRunId"), req("name"), opt("description"), opt("parentSubagentRunId"), opt("parentToolCallId"),
          opt("parentMessageId")}},
        {"SUBAGENT_FINISHED", {req("subagentRunId"), opt("result", Kind::any), opt("outcome", Kind::subagent_outcome)}},
        {"SUBAGENT_ERROR", {req("subagentRunId"), req("message"), opt("code")}},
    };
  }();
  return specs;
}

const EventSpec* find_spec(std::string_view type) {
  for (const auto& spec : event_specs()) {
    if (spec.type == type) return &spec;
  }
  return nullptr;
}

// "number 1.5", "string \"x\"", "object"
std::string describe(const json& v) {
  switch (v.type()) {
    case json::value_t::object: return "object";
    case json::value_t::array: return "array";
    case json::value_t::null: return "null";
    case json::value_t::boolean: return fmt::format("boolean {}", v.dump());
    case json::value_t::string: return fmt::format("string {}", v.dump());
    default: return fmt::format("number {}", v.dump());
  }
}

bool is_integer(const json& v) { return v.is_number_integer(); }  // strict: 1.0 is a float on the wire

bool is_json_pointer(const std::string& s) {
  if (!s.empty() && s[0] != '/') return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '~' && (i + 1 == s.size() || (s[i + 1] != '0' && s[i + 1] != '1'))) return false;
  }
  return true;
}

std::string join_path(std::string_view base, std::string_view key) {
  return base.empty() ? std::string(key) : fmt::format("{}.{}", base, key);
}

std::string index_path(std::string_view base, std::size_t i) { return fmt::format("{}[{}]", base, i); }

// Checks the fields of one event; `type_` is the event's type for messages, paths are "outcome.interrupts[0].id".
// Stateless apart from the type; one per event.
class EventSchemaChecker {
 public:
  explicit EventSchemaChecker(std::string type) : type_(std::move(type)) {}

  Message check_top_level(const json& event, const EventSpec& spec) {
    std::vector<Field> fields = spec.fields;
    fields.push_back(opt("timestamp", Kind::integer));
    fields.push_back(opt("rawEvent", Kind::any));
    fields.push_back(opt("metadata", Kind::object));
    for (const auto& [key, value] : event.items()) {
      if (key == "type") continue;
      const auto f = std::find_if(fields.begin(), fields.end(), [&](const Field& x) { return x.name == key; });
      if (f == fields.end()) return unknown(key);
      if (value.is_null()) return f->required ? missing(key) : null_optional(key);
    }
    for (const Field& f : fields) {
      if (f.required && !event.contains(f.name)) return missing(f.name);
    }
    const bool lifecycle = type_.rfind("SUBAGENT_", 0) == 0;
    for (const Field& f : fields) {
      auto it = event.find(f.name);
      if (it == event.end()) continue;
      // §6 rule 15: the client reports any non-string lifecycle identity as missing.
      if (lifecycle && f.required && !it->is_string()) return missing(f.name);
      if (auto m = check_kind(f.kind, *it, std::string(f.name))) return m;
    }
    if (type_ == "RUN_STARTED" && event.contains("input")) {
      const json& input = event["input"];
      for (const char* id : {"threadId", "runId"}) {
        if (input.at(id) != event.at(id)) {
          return fmt::format("Cannot send 'RUN_STARTED': '{}' {} does not match 'input.{}' {}", id, event.at(id).dump(),
                             id, input.at(id).dump());
        }
      }
    }
    return std::nullopt;
  }

 private:
  Message unknown(std::string_view path) const {
    return fmt::format("Cannot send '{}' with unknown property '{}'", type_, path);
  }
  Message missing(std::string_view path) const { return fmt::format("Cannot send '{}' without a '{}'.", type_, path); }
  Message null_optional(std::string_view path) const {
    return fmt::format("Cannot send '{}' with '{}: null'. The field is optional \u2014 omit it entirely.", type_, path);
  }
  Message wrong(std::string_view path, std::string_view expected, const json& v) const {
    return fmt::format("Cannot send '{}': '{}' must be {}, found {}", type_, path, expected, describe(v));
  }

  // A closed nested object: no unknown keys, no nulls, the required keys present.
  Message closed(const json& v, const std::string& path, std::initializer_list<std::string_view> required,
                 std::initializer_list<std::string_view> optional) const {
    if (!v.is_object()) return wrong(path, "an object", v);
    for (const auto& [key, value] : v.items()) {
      const bool is_required = std::find(required.begin(), required.end(), key) != required.end();
      const bool is_optional = std::find(optional.begin(), optional.end(), key) != optional.end();
      if (!is_required && !is_optional) return unknown(join_path(path, key));
      if (value.is_null()) return is_required ? missing(join_path(path, key)) : null_optional(join_path(path, key));
    }
    for (const auto key : required) {
      if (!v.contains(key)) return missing(join_path(path, key));
    }
    return std::nullopt;
  }

  Message string_at(const json& obj, std::string_view key, const std::string& path) const {
    auto it = obj.find(key);
    if (it != obj.end() && !it->is_string()) return wrong(join_path(path, key), "a string", *it);
    return std::nullopt;
  }

  Message object_at(const json& obj, std::string_view key, const std::string& path) const {
    auto it = obj.find(key);
    if (it != obj.end() && !it->is_object()) return wrong(join_path(path, key), "an object", *it);
    return std::nullopt;
  }

  Message strings_at(const json& obj, std::initializer_list<std::string_view> keys, const std::string& path) const {
    for (const auto key : keys) {
      if (auto m = string_at(obj, key, path)) return m;
    }
    return std::nullopt;
  }

  Message one_of(const json& v, const std::string& path, std::initializer_list<std::string_view> allowed) const {
    std::string list;
    for (const auto a : allowed) {
      if (!list.empty()) list += ", ";
      list += fmt::format("\"{}\"", a);
    }
    const std::string expected = allowed.size() == 1 ? list : fmt::format("one of {}", list);
    if (!v.is_string()) return wrong(path, expected, v);
    const auto& s = v.get_ref<const std::string&>();
    if (std::find(allowed.begin(), allowed.end(), s) == allowed.end()) return wrong(path, expected, v);
    return std::nullopt;
  }

  Message check_kind(Kind kind, const json& v, const std::string& path) const {
    switch (kind) {
      case Kind::string: return v.is_string() ? std::nullopt : wrong(path, "a string", v);
      case Kind::any: return std::nullopt;
      case Kind::object: return v.is_object() ? std::nullopt : wrong(path, "an object", v);
      case Kind::boolean: return v.is_boolean() ? std::nullopt : wrong(path, "a boolean", v);
      case Kind::integer: return is_integer(v) ? std::nullopt : wrong(path, "an integer", v);
      case Kind::text_role: return one_of(v, path, {"developer", "system", "assistant", "user"});
      case Kind::tool_role: return one_of(v, path, {"tool"});
      case Kind::reasoning_role: return one_of(v, path, {"reasoning"});
      case Kind::encrypted_subtype: return one_of(v, path, {"tool-call", "message"});
      case Kind::usage: return check_usage(v, path);
      case Kind::run_outcome: return check_run_outcome(v, path);
      case Kind::subagent_outcome: return check_subagent_outcome(v, path);
      case Kind::tool_result_content: return check_content(v, path, /*allow_string=*/true);
      case Kind::json_patch: return check_patch(v, path);
      case Kind::messages: return check_messages(v, path);
      case Kind::run_input: return check_run_input(v, path);
    }
    return std::nullopt;
  }

  Message check_usage(const json& v, const std::string& path) const {
    if (!v.is_array()) return wrong(path, "an array of TokenUsage", v);
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::string p = index_path(path, i);
      static constexpr std::string_view kCounts[] = {"inputTokens",     "outputTokens",      "totalTokens",
                                                     "reasoningTokens", "cachedInputTokens", "cacheWriteInputTokens"};
      if (auto m = closed(v[i], p, {},
                          {"provider", "model", "inputTokens", "outputTokens", "totalTokens", "reasoningTokens",
                           "cachedInputTokens", "cacheWriteInputTokens"})) {
        return m;
      }
      if (auto m = strings_at(v[i], {"provider", "model"}, p)) return m;
      for (const auto key : kCounts) {
        auto it = v[i].find(key);
        if (it == v[i].end()) continue;
        if (!is_integer(*it) || (!it->is_number_unsigned() && it->get<std::int64_t>() < 0)) {
          return wrong(join_path(p, key), "a non-negative integer", *it);
        }
      }
    }
    return std::nullopt;
  }

  Message check_run_outcome(const json& v, const std::string& path) const {
    if (!v.is_object()) return wrong(path, "an object", v);
    const auto type = v.find("type");
    const std::string t = type == v.end() ? "undefined" : type->is_string() ? type->get<std::string>() : type->dump();
    if (t == "success") {
      if (auto m = closed(v, path, {"type"}, {"pendingToolCallIds"})) return m;
      if (auto it = v.find("pendingToolCallIds"); it != v.end()) {
        if (!it->is_array() || std::any_of(it->begin(), it->end(), [](const json& x) { return !x.is_string(); })) {
          return wrong(join_path(path, "pendingToolCallIds"), "an array of strings", *it);
        }
      }
      return std::nullopt;
    }
    if (t == "cancelled") return closed(v, path, {"type"}, {});
    if (t != "interrupt") {
      return fmt::format(
          "Cannot send '{}' with outcome type '{}'. The outcome is {{ type: \"success\" }}, {{ type: \"interrupt\" }} "
          "or {{ type: \"cancelled\" }}.",
          type_, t);
    }
    // Null interrupt attribution has its own verbatim message (§6 rule 20), so it is checked before shapes.
    if (auto it = v.find("interrupts"); it != v.end() && it->is_array()) {
      for (const auto& interrupt : *it) {
        if (interrupt.is_object() && interrupt.contains("subagentRunId") && interrupt["subagentRunId"].is_null()) {
          const auto id = interrupt.find("id");
          return fmt::format(
              "Cannot send '{}' with an interrupt (id '{}') carrying 'subagentRunId: null'. The field is optional "
              "\u2014 omit it entirely.",
              type_, id != interrupt.end() && id->is_string() ? id->get<std::string>() : "undefined");
        }
      }
    }
    if (auto m = closed(v, path, {"type", "interrupts"}, {})) return m;
    const json& interrupts = v["interrupts"];
    const std::string ip = join_path(path, "interrupts");
    if (!interrupts.is_array()) return wrong(ip, "an array of interrupts", interrupts);
    if (interrupts.empty()) {
      return fmt::format("Cannot send '{}' with an empty '{}': an interrupt outcome has at least one interrupt", type_,
                         ip);
    }
    std::set<std::string> ids;
    for (std::size_t i = 0; i < interrupts.size(); ++i) {
      const json& in = interrupts[i];
      const std::string p = index_path(ip, i);
      if (auto m = closed(in, p, {"id", "reason"},
                          {"subagentRunId", "message", "toolCallId", "responseSchema", "expiresAt", "metadata"})) {
        return m;
      }
      if (auto m = strings_at(in, {"id", "reason", "subagentRunId", "message", "toolCallId", "expiresAt"}, p)) {
        return m;
      }
      if (auto m = object_at(in, "responseSchema", p)) return m;
      if (auto m = object_at(in, "metadata", p)) return m;
      const auto& id = in["id"].get_ref<const std::string&>();
      const auto& reason = in["reason"].get_ref<const std::string&>();
      if (!ids.insert(id).second) {
        return fmt::format("Cannot send '{}' with two interrupts of id '{}': interrupt ids are unique within a run",
                           type_, id);
      }
      if (reason == "tool_call" && !in.contains("toolCallId")) {
        return fmt::format("Cannot send '{}' with an interrupt (id '{}') of reason 'tool_call' without a 'toolCallId'",
                           type_, id);
      }
      const bool core = reason == "tool_call" || reason == "input_required" || reason == "confirmation";
      const auto colon = reason.find(':');
      const bool namespaced =
          colon != std::string::npos && colon > 0 && colon + 1 < reason.size() && reason.compare(0, colon, "core") != 0;
      if (!core && !namespaced) {
        return fmt::format(
            "Cannot send '{}' with an interrupt (id '{}') of reason '{}': a reason is 'tool_call', 'input_required', "
            "'confirmation' or a namespaced '<framework>:<name>' ('core:' is reserved)",
            type_, id, reason);
      }
    }
    return std::nullopt;
  }

  Message check_subagent_outcome(const json& v, const std::string& path) const {
    const json::const_iterator type = v.is_object() ? v.find("type") : v.end();
    const bool has_type = v.is_object() && type != v.end();
    const std::string t = !has_type ? "undefined" : type->is_string() ? type->get<std::string>() : type->dump();
    if (t != "success" && t != "suspended") {
      return fmt::format(
          "Cannot send '{}' with outcome type '{}'. The outcome is either {{ type: \"success\" }} or {{ type: "
          "\"suspended\" }}.",
          type_, t);
    }
    if (auto it = v.find("interruptIds"); it != v.end()) {
      if (it->is_null()) {
        return fmt::format(
            "Cannot send '{}' with 'outcome.interruptIds: null'. The field is optional \u2014 omit it entirely.",
            type_);
      }
      if (it->is_array() && std::any_of(it->begin(), it->end(), [](const json& x) { return !x.is_string(); })) {
        return fmt::format(
            "Cannot send '{}' with a non-string entry in 'outcome.interruptIds'. Interrupt ids are strings.", type_);
      }
    }
    if (t == "success") return closed(v, path, {"type"}, {});
    if (auto m = closed(v, path, {"type"}, {"interruptIds"})) return m;
    if (auto it = v.find("interruptIds"); it != v.end() && !it->is_array()) {
      return wrong(join_path(path, "interruptIds"), "an array of strings", *it);
    }
    return std::nullopt;
  }

  // string | ContentPart[] (or ContentPart[] only when !allow_string)
  Message check_content(const json& v, const std::string& path, bool allow_string) const {
    if (allow_string && v.is_string()) return std::nullopt;
    if (!v.is_array()) return wrong(path, allow_string ? "a string or an array of content parts" : "an array", v);
    for (std::size_t i = 0; i < v.size(); ++i) {
      const json& part = v[i];
      const std::string p = index_path(path, i);
      if (!part.is_object()) return wrong(p, "a content part object", part);
      const auto type = part.find("type");
      if (type == part.end()) return missing(join_path(p, "type"));
      if (auto m = one_of(*type, join_path(p, "type"), {"text", "image", "audio", "video", "document"})) return m;
      if (*type == "text") {
        if (auto m = closed(part, p, {"type", "text"}, {"id", "metadata"})) return m;
        if (auto m = strings_at(part, {"text", "id"}, p)) return m;
        if (auto m = object_at(part, "metadata", p)) return m;
        continue;
      }
      if (auto m = closed(part, p, {"type", "source"}, {"id", "metadata"})) return m;
      if (auto m = string_at(part, "id", p)) return m;
      if (auto m = object_at(part, "metadata", p)) return m;
      const json& source = part["source"];
      const std::string sp = join_path(p, "source");
      if (!source.is_object()) return wrong(sp, "an object", source);
      const auto st = source.find("type");
      if (st == source.end()) return missing(join_path(sp, "type"));
      if (auto m = one_of(*st, join_path(sp, "type"), {"data", "url", "file"})) return m;
      if (*st == "data") {
        if (auto m = closed(source, sp, {"type", "value", "mimeType"}, {})) return m;
      } else if (*st == "url") {
        if (auto m = closed(source, sp, {"type", "value"}, {"mimeType"})) return m;
      } else {
        if (auto m = closed(source, sp, {"type", "value"}, {"provider", "mimeType"})) return m;
      }
      if (auto m = strings_at(source, {"value", "mimeType", "provider"}, sp)) return m;
    }
    return std::nullopt;
  }

  Message check_patch(const json& v, const std::string& path) const {
    if (!v.is_array()) return wrong(path, "a JSON Patch array", v);
    for (std::size_t i = 0; i < v.size(); ++i) {
      const json& op = v[i];
      const std::string p = index_path(path, i);
      if (!op.is_object()) return wrong(p, "a JSON Patch operation object", op);
      const auto name = op.find("op");
      if (name == op.end()) return missing(join_path(p, "op"));
      if (auto m = one_of(*name, join_path(p, "op"), {"add", "remove", "replace", "move", "copy", "test"})) return m;
      const auto& o = name->get_ref<const std::string&>();
      for (const auto& [key, value] : op.items()) {
        if (key != "op" && key != "path" && key != "from" && key != "value") return unknown(join_path(p, key));
        // `value` may legitimately be null: it is the JSON value written into the document.
        if (key != "value" && value.is_null()) return missing(join_path(p, key));
      }
      if (!op.contains("path")) return missing(join_path(p, "path"));
      if ((o == "move" || o == "copy") && !op.contains("from")) return missing(join_path(p, "from"));
      if ((o == "add" || o == "replace" || o == "test") && !op.contains("value")) return missing(join_path(p, "value"));
      for (const char* key : {"path", "from"}) {
        auto it = op.find(key);
        if (it != op.end() && (!it->is_string() || !is_json_pointer(it->get<std::string>()))) {
          return wrong(join_path(p, key), "a JSON Pointer string", *it);
        }
      }
    }
    return std::nullopt;
  }

  Message check_messages(const json& v, const std::string& path) const {
    if (!v.is_array()) return wrong(path, "an array of messages", v);
    for (std::size_t i = 0; i < v.size(); ++i) {
      const json& msg = v[i];
      const std::string p = index_path(path, i);
      if (!msg.is_object()) return wrong(p, "a message object", msg);
      if (auto it = msg.find("subagentRunId"); it != msg.end() && it->is_null()) {
        const auto id = msg.find("id");
        return fmt::format(
            "Cannot send a message (id '{}') with 'subagentRunId: null'. The field is optional \u2014 omit it "
            "entirely.",
            id != msg.end() && id->is_string() ? id->get<std::string>() : "undefined");
      }
      const auto role = msg.find("role");
      if (role == msg.end()) return missing(join_path(p, "role"));
      if (auto m = one_of(*role, join_path(p, "role"),
                          {"developer", "system", "assistant", "user", "tool", "activity", "reasoning"})) {
        return m;
      }
      const auto& r = role->get_ref<const std::string&>();
      Message m;
      if (r == "developer" || r == "system") {
        m = closed(msg, p, {"id", "role", "content"}, {"name", "encryptedValue", "metadata", "subagentRunId"});
        if (!m) m = strings_at(msg, {"content", "name"}, p);
      } else if (r == "assistant") {
        m = closed(msg, p, {"id", "role"},
                   {"content", "toolCalls", "name", "encryptedValue", "metadata", "subagentRunId"});
        if (!m) m = strings_at(msg, {"content", "name"}, p);
        if (!m && msg.contains("toolCalls")) m = check_tool_calls(msg["toolCalls"], join_path(p, "toolCalls"));
      } else if (r == "user") {
        m = closed(msg, p, {"id", "role", "content"}, {"name", "encryptedValue", "metadata", "subagentRunId"});
        if (!m) m = check_content(msg["content"], join_path(p, "content"), true);
        if (!m) m = string_at(msg, "name", p);
      } else if (r == "tool") {
        m = closed(msg, p, {"id", "role", "content", "toolCallId"},
                   {"error", "encryptedValue", "metadata", "subagentRunId"});
        if (!m) m = check_content(msg["content"], join_path(p, "content"), true);
        if (!m) m = strings_at(msg, {"toolCallId", "error"}, p);
      } else if (r == "activity") {
        m = closed(msg, p, {"id", "role", "activityType", "content"}, {"metadata", "subagentRunId"});
        if (!m) m = string_at(msg, "activityType", p);
        if (!m) m = object_at(msg, "content", p);
      } else {  // reasoning
        m = closed(msg, p, {"id", "role", "content"}, {"encryptedValue", "metadata", "subagentRunId"});
        if (!m) m = string_at(msg, "content", p);
      }
      if (!m) m = strings_at(msg, {"id", "encryptedValue", "subagentRunId"}, p);
      if (!m) m = object_at(msg, "metadata", p);
      if (m) return m;
    }
    return std::nullopt;
  }

  Message check_tool_calls(const json& v, const std::string& path) const {
    if (!v.is_array()) return wrong(path, "an array of tool calls", v);
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::string p = index_path(path, i);
      if (auto m = closed(v[i], p, {"id", "type", "function"}, {"encryptedValue", "metadata"})) return m;
      if (auto m = strings_at(v[i], {"id", "encryptedValue"}, p)) return m;
      if (auto m = one_of(v[i]["type"], join_path(p, "type"), {"function"})) return m;
      if (auto m = object_at(v[i], "metadata", p)) return m;
      const std::string fp = join_path(p, "function");
      if (auto m = closed(v[i]["function"], fp, {"name", "arguments"}, {})) return m;
      if (auto m = strings_at(v[i]["function"], {"name", "arguments"}, fp)) return m;
    }
    return std::nullopt;
  }

  Message check_run_input(const json& v, const std::string& path) const {
    if (auto m = closed(v, path, {"threadId", "runId", "messages"},
                        {"protocolVersion", "parentRunId", "state", "tools", "context", "forwardedProps", "resume"})) {
      return m;
    }
    if (auto m = strings_at(v, {"threadId", "runId", "protocolVersion", "parentRunId"}, path)) return m;
    if (auto m = check_messages(v["messages"], join_path(path, "messages"))) return m;
    if (auto it = v.find("tools"); it != v.end()) {
      const std::string tp = join_path(path, "tools");
      if (!it->is_array()) return wrong(tp, "an array of tools", *it);
      for (std::size_t i = 0; i < it->size(); ++i) {
        const std::string p = index_path(tp, i);
        if (auto m = closed((*it)[i], p, {"name", "description"}, {"parameters", "metadata"})) return m;
        if (auto m = strings_at((*it)[i], {"name", "description"}, p)) return m;
        if (auto m = object_at((*it)[i], "parameters", p)) return m;
        if (auto m = object_at((*it)[i], "metadata", p)) return m;
      }
    }
    if (auto it = v.find("context"); it != v.end()) {
      const std::string cp = join_path(path, "context");
      if (!it->is_array()) return wrong(cp, "an array of context entries", *it);
      for (std::size_t i = 0; i < it->size(); ++i) {
        const std::string p = index_path(cp, i);
        if (auto m = closed((*it)[i], p, {"description", "value"}, {})) return m;
        if (auto m = strings_at((*it)[i], {"description", "value"}, p)) return m;
      }
    }
    if (auto it = v.find("resume"); it != v.end()) {
      const std::string rp = join_path(path, "resume");
      if (!it->is_array()) return wrong(rp, "an array of resume entries", *it);
      for (std::size_t i = 0; i < it->size(); ++i) {
        const std::string p = index_path(rp, i);
        if (auto m = closed((*it)[i], p, {"interruptId", "status"}, {"payload", "metadata"})) return m;
        if (auto m = string_at((*it)[i], "interruptId", p)) return m;
        if (auto m = one_of((*it)[i]["status"], join_path(p, "status"), {"resolved", "cancelled"})) return m;
        if (auto m = object_at((*it)[i], "metadata", p)) return m;
      }
    }
    return std::nullopt;
  }

  std::string type_;
};

// ---------------------------------------------------------------------------------------------------------------
// Ordering (§6)
// ---------------------------------------------------------------------------------------------------------------

// nullopt is the parent agent.
using Owner = std::optional<std::string>;

std::string owner_name(const Owner& owner) { return owner ? *owner : "(the parent agent)"; }

// The ids of open entities. The client reports them in insertion order (JS Map/Set), so these keep it.
// Not thread-safe.
class OrderedIds {
 public:
  bool contains(const std::string& id) const { return std::find(ids_.begin(), ids_.end(), id) != ids_.end(); }
  void add(const std::string& id) {
    if (!contains(id)) ids_.push_back(id);
  }
  void remove(const std::string& id) { ids_.erase(std::remove(ids_.begin(), ids_.end(), id), ids_.end()); }
  bool empty() const { return ids_.empty(); }
  std::string joined() const {
    std::string out;
    for (const auto& id : ids_) {
      if (!out.empty()) out += ", ";
      out += id;
    }
    return out;
  }
  void clear() { ids_.clear(); }
  const std::vector<std::string>& ids() const { return ids_; }

 private:
  std::vector<std::string> ids_;
};

const std::string* string_field(const json& event, std::string_view key) {
  auto it = event.find(key);
  return it != event.end() && it->is_string() ? &it->get_ref<const std::string&>() : nullptr;
}

}  // namespace

// Everything the verifier tracks for the current run (§6), plus the first violation. Not thread-safe.
struct AguiVerifier::State {
  std::optional<std::string> violation;
  std::size_t accepted = 0;

  bool first_received = false;
  bool run_started = false;
  bool run_finished = false;
  bool run_error = false;
  json run_started_event;  // of the current run, for the threadId/runId agreement check

  OrderedIds messages;
  OrderedIds tool_calls;
  OrderedIds reasoning_spans;
  OrderedIds reasoning_messages;
  OrderedIds subagents;
  std::set<std::string> closed_subagents;
  // Steps are keyed by (owner, name); owners keep their first-seen order, as the client's nested Map does.
  std::vector<std::pair<Owner, OrderedIds>> steps;
  // Owners are kept for the whole run (not dropped on close) and kept per entity kind: ids are unique only
  // within a kind.
  std::map<std::string, Owner> message_owners;
  std::map<std::string, Owner> tool_call_owners;
  std::map<std::string, Owner> activity_owners;
  std::map<std::string, Owner> reasoning_owners;

  void reset_run() {
    messages.clear();
    tool_calls.clear();
    reasoning_spans.clear();
    reasoning_messages.clear();
    subagents.clear();
    closed_subagents.clear();
    steps.clear();
    message_owners.clear();
    tool_call_owners.clear();
    activity_owners.clear();
    reasoning_owners.clear();
    run_finished = false;
    run_error = false;
    run_started = true;
  }

  OrderedIds& steps_of(const Owner& owner) {
    for (auto& [o, names] : steps) {
      if (o == owner) return names;
    }
    return steps.emplace_back(owner, OrderedIds{}).second;
  }

  // §6 rule 21: a continuation must not name a different subagent than its entity's opener.
  static Message tag_error(const std::string& type, const std::string* tag, const Owner* owner, std::string_view kind,
                           const std::string& id) {
    if (tag == nullptr || owner == nullptr || *owner == *tag) return std::nullopt;
    return fmt::format("Cannot send '{}': subagentRunId '{}' does not match the {} '{}' opener's subagent '{}'.", type,
                       *tag, kind, id, owner_name(*owner));
  }

  static const Owner* find_owner(const std::map<std::string, Owner>& owners, const std::string& id) {
    auto it = owners.find(id);
    return it == owners.end() ? nullptr : &it->second;
  }

  // MESSAGES_SNAPSHOT (authoritative) and RUN_STARTED.input (history) put ids on record with their owners.
  void seed_owners(const json& messages_json, bool authoritative) {
    if (!messages_json.is_array()) return;
    for (const auto& msg : messages_json) {
      const std::string* id = string_field(msg, "id");
      if (id == nullptr) continue;
      const std::string* tag = string_field(msg, "subagentRunId");
      const Owner owner = tag ? Owner(*tag) : std::nullopt;
      const std::string* role = string_field(msg, "role");
      auto& bucket = role && *role == "reasoning"  ? reasoning_owners
                     : role && *role == "activity" ? activity_owners
                                                   : message_owners;
      if (authoritative || !bucket.count(*id)) bucket[*id] = owner;
      if (auto calls = msg.find("toolCalls"); calls != msg.end() && calls->is_array()) {
        for (const auto& call : *calls) {
          const std::string* call_id = string_field(call, "id");
          if (call_id && (authoritative || !tool_call_owners.count(*call_id))) tool_call_owners[*call_id] = owner;
        }
      }
    }
  }

  Message order(const json& e, const std::string& type);
};

Message AguiVerifier::State::order(const json& e, const std::string& type) {
  // Rules 1-4: run lifecycle.
  if (run_error && type != "RUN_STARTED") {
    return fmt::format(
        "Cannot send event type '{}': The run has already errored with 'RUN_ERROR'. No further events can be sent.",
        type);
  }
  if (run_finished && type != "RUN_ERROR" && type != "RUN_STARTED") {
    return fmt::format(
        "Cannot send event type '{}': The run has already finished with 'RUN_FINISHED'. Start a new run with "
        "'RUN_STARTED'.",
        type);
  }
  if (!first_received) {
    first_received = true;
    if (type != "RUN_STARTED" && type != "RUN_ERROR") return "First event must be 'RUN_STARTED'";
  } else if (type == "RUN_STARTED") {
    if (run_started && !run_finished && !run_error) {
      return "Cannot send 'RUN_STARTED' while a run is still active. The previous run must be finished with "
             "'RUN_FINISHED' before starting a new run.";
    }
    if (run_finished || run_error) reset_run();
  }

  const std::string* tag = string_field(e, "subagentRunId");
  const Owner tag_owner = tag ? Owner(*tag) : std::nullopt;

  if (type == "TEXT_MESSAGE_START") {  // rule 7
    const auto& id = e["messageId"].get_ref<const std::string&>();
    if (messages.contains(id)) {
      return fmt::format(
          "Cannot send 'TEXT_MESSAGE_START' event: A text message with ID '{}' is already in progress. Complete it "
          "with 'TEXT_MESSAGE_END' first.",
          id);
    }
    const Owner* existing = find_owner(message_owners, id);
    if (auto m = tag_error(type, tag, existing, "message", id)) return m;
    messages.add(id);
    if (!existing) message_owners[id] = tag_owner;
  } else if (type == "TEXT_MESSAGE_CONTENT" || type == "TEXT_MESSAGE_END") {  // rule 8
    const auto& id = e["messageId"].get_ref<const std::string&>();
    if (!messages.contains(id)) {
      return type == "TEXT_MESSAGE_CONTENT"
                 ? fmt::format(
                       "Cannot send 'TEXT_MESSAGE_CONTENT' event: No active text message found with ID '{}'. Start a "
                       "text message with 'TEXT_MESSAGE_START' first.",
                       id)
                 : fmt::format(
                       "Cannot send 'TEXT_MESSAGE_END' event: No active text message found with ID '{}'. A "
                       "'TEXT_MESSAGE_START' event must be sent first.",
                       id);
    }
    if (auto m = tag_error(type, tag, find_owner(message_owners, id), "message", id)) return m;
    if (type == "TEXT_MESSAGE_END") messages.remove(id);
  } else if (type == "TOOL_CALL_START") {  // rule 9
    const auto& id = e["toolCallId"].get_ref<const std::string&>();
    if (tool_calls.contains(id)) {
      return fmt::format(
          "Cannot send 'TOOL_CALL_START' event: A tool call with ID '{}' is already in progress. Complete it with "
          "'TOOL_CALL_END' first.",
          id);
    }
    // A tool call lives inside the assistant message parentMessageId names; an untagged call inherits its owner.
    const std::string* parent = string_field(e, "parentMessageId");
    const Owner* inherited = nullptr;
    if (parent) {
      if (const Owner* parent_owner = find_owner(message_owners, *parent)) {
        if (tag && *parent_owner != *tag) {
          return fmt::format(
              "Cannot send 'TOOL_CALL_START': subagentRunId '{}' does not match its parent message '{}' owner '{}'. A "
              "tool call belongs to the message that carries it.",
              *tag, *parent, owner_name(*parent_owner));
        }
        inherited = parent_owner;
      }
    }
    const Owner* existing = find_owner(tool_call_owners, id);
    if (existing) {
      if (auto m = tag_error(type, tag, existing, "tool call", id)) return m;
      if (!tag && inherited && *inherited != *existing) {
        return fmt::format(
            "Cannot send 'TOOL_CALL_START': tool call '{}' is owned by '{}' but its parent message '{}' is owned by "
            "'{}'. A tool call belongs to the message that carries it.",
            id, owner_name(*existing), *parent, owner_name(*inherited));
      }
    }
    tool_calls.add(id);
    if (!existing) tool_call_owners[id] = tag ? tag_owner : inherited ? *inherited : std::nullopt;
  } else if (type == "TOOL_CALL_ARGS" || type == "TOOL_CALL_END") {  // rule 10
    const auto& id = e["toolCallId"].get_ref<const std::string&>();
    if (!tool_calls.contains(id)) {
      return type == "TOOL_CALL_ARGS"
                 ? fmt::format(
                       "Cannot send 'TOOL_CALL_ARGS' event: No active tool call found with ID '{}'. Start a tool call "
                       "with 'TOOL_CALL_START' first.",
                       id)
                 : fmt::format(
                       "Cannot send 'TOOL_CALL_END' event: No active tool call found with ID '{}'. A "
                       "'TOOL_CALL_START' event must be sent first.",
                       id);
    }
    if (auto m = tag_error(type, tag, find_owner(tool_call_owners, id), "tool call", id)) return m;
    if (type == "TOOL_CALL_END") tool_calls.remove(id);
  } else if (type == "TOOL_CALL_RESULT") {
    // Not ordered (any toolCallId is fine), but it mints a tool message: the newest mint owns the id.
    message_owners[e["messageId"].get<std::string>()] = tag_owner;
  } else if (type == "STEP_STARTED") {  // rule 11
    const auto& name = e["stepName"].get_ref<const std::string&>();
    if (steps_of(tag_owner).contains(name)) {
      return fmt::format("Step \"{}\" is already active for 'STEP_STARTED'{}", name,
                         tag ? fmt::format(" in subagent '{}'", *tag) : std::string());
    }
    steps_of(tag_owner).add(name);
  } else if (type == "STEP_FINISHED") {  // rule 12
    const auto& name = e["stepName"].get_ref<const std::string&>();
    if (!steps_of(tag_owner).contains(name)) {
      for (const auto& [owner, names] : steps) {
        if (owner != tag_owner && names.contains(name)) {
          return fmt::format(
              "Cannot send 'STEP_FINISHED' for step \"{}\" attributed to {}: that step is open under {}. A step must "
              "be finished by whoever started it.",
              name, tag ? fmt::format("subagent '{}'", *tag) : std::string("the parent agent"),
              owner ? fmt::format("subagent '{}'", *owner) : std::string("the parent agent"));
        }
      }
      return fmt::format("Cannot send 'STEP_FINISHED' for step \"{}\" that was not started", name);
    }
    steps_of(tag_owner).remove(name);
  } else if (type == "ACTIVITY_SNAPSHOT") {
    // Only a replacing snapshot (replace absent or true) re-mints, and so re-owns, a known activity.
    const auto& id = e["messageId"].get_ref<const std::string&>();
    const bool is_new = !activity_owners.count(id);
    if (is_new || e.value("replace", true)) activity_owners[id] = tag_owner;
  } else if (type == "ACTIVITY_DELTA") {
    const auto& id = e["messageId"].get_ref<const std::string&>();
    if (auto m = tag_error(type, tag, find_owner(activity_owners, id), "activity", id)) return m;
  } else if (type == "REASONING_START" || type == "REASONING_MESSAGE_START") {  // rule 13
    const auto& id = e["messageId"].get_ref<const std::string&>();
    const bool span = type == "REASONING_START";
    OrderedIds& open = span ? reasoning_spans : reasoning_messages;
    if (open.contains(id)) {
      return span ? fmt::format(
                        "Cannot send 'REASONING_START' event: A reasoning span with ID '{}' is already in progress. "
                        "Complete it with 'REASONING_END' first.",
                        id)
                  : fmt::format(
                        "Cannot send 'REASONING_MESSAGE_START' event: A reasoning message with ID '{}' is already in "
                        "progress. Complete it with 'REASONING_MESSAGE_END' first.",
                        id);
    }
    const Owner* existing = find_owner(reasoning_owners, id);
    if (auto m = tag_error(type, tag, existing, "reasoning message", id)) return m;
    open.add(id);
    if (!existing) reasoning_owners[id] = tag_owner;
  } else if (type == "REASONING_MESSAGE_CONTENT" || type == "REASONING_MESSAGE_END" ||
             type == "REASONING_END") {  // rule 14
    const auto& id = e["messageId"].get_ref<const std::string&>();
    const bool span = type == "REASONING_END";
    OrderedIds& open = span ? reasoning_spans : reasoning_messages;
    if (!open.contains(id)) {
      return span ? fmt::format(
                        "Cannot send 'REASONING_END' event: No active reasoning span found with ID '{}'. A "
                        "'REASONING_START' event must be sent first.",
                        id)
                  : fmt::format(
                        "Cannot send '{}' event: No active reasoning message found with ID '{}'. Start a reasoning "
                        "message with 'REASONING_MESSAGE_START' first.",
                        type, id);
    }
    if (auto m = tag_error(type, tag, find_owner(reasoning_owners, id), "reasoning message", id)) return m;
    if (type != "REASONING_MESSAGE_CONTENT") open.remove(id);
  } else if (type == "REASONING_ENCRYPTED_VALUE") {
    const auto& id = e["entityId"].get_ref<const std::string&>();
    const auto& subtype = e["subtype"].get_ref<const std::string&>();
    const Owner* owner = nullptr;
    if (subtype == "tool-call") {
      owner = find_owner(tool_call_owners, id);
    } else {
      owner = find_owner(message_owners, id);
      if (!owner) owner = find_owner(reasoning_owners, id);
    }
    if (auto m = tag_error(type, tag, owner, subtype == "tool-call" ? "tool call" : "message", id)) return m;
  } else if (type == "SUBAGENT_STARTED") {  // rules 16-18 (15 is a schema check)
    const auto& id = e["subagentRunId"].get_ref<const std::string&>();
    if (subagents.contains(id)) {
      return fmt::format(
          "Cannot send 'SUBAGENT_STARTED': subagent '{}' is already active. Finish it with 'SUBAGENT_FINISHED' first.",
          id);
    }
    if (closed_subagents.count(id)) {
      return fmt::format(
          "Cannot send 'SUBAGENT_STARTED': subagent '{}' has already finished in this run. Subagent IDs are "
          "per-invocation and cannot be reused.",
          id);
    }
    const std::string* parent = string_field(e, "parentSubagentRunId");
    if (parent && !subagents.contains(*parent) && !closed_subagents.count(*parent)) {
      return fmt::format("Cannot send 'SUBAGENT_STARTED': parentSubagentRunId '{}' has not been started in this run.",
                         *parent);
    }
    subagents.add(id);
  } else if (type == "SUBAGENT_FINISHED" || type == "SUBAGENT_ERROR") {  // rule 19
    const auto& id = e["subagentRunId"].get_ref<const std::string&>();
    if (!subagents.contains(id)) {
      return fmt::format(
          "Cannot send '{}': no active subagent found with ID '{}'. A 'SUBAGENT_STARTED' event must be sent first.",
          type, id);
    }
    subagents.remove(id);
    closed_subagents.insert(id);
  } else if (type == "MESSAGES_SNAPSHOT") {
    seed_owners(e["messages"], /*authoritative=*/true);
  } else if (type == "RUN_STARTED") {
    run_started = true;
    run_started_event = e;
    if (auto input = e.find("input"); input != e.end()) seed_owners(input->value("messages", json()), false);
  } else if (type == "RUN_FINISHED") {  // rule 5
    std::string open_steps;
    for (const auto& [owner, names] : steps) {
      for (const auto& name : names.ids()) {
        if (!open_steps.empty()) open_steps += ", ";
        open_steps += owner ? fmt::format("{} (subagent '{}')", name, *owner) : name;
      }
    }
    if (!open_steps.empty()) {
      return fmt::format("Cannot send 'RUN_FINISHED' while steps are still active: {}", open_steps);
    }
    if (!messages.empty()) {
      return fmt::format("Cannot send 'RUN_FINISHED' while text messages are still active: {}", messages.joined());
    }
    if (!reasoning_messages.empty()) {
      return fmt::format("Cannot send 'RUN_FINISHED' while reasoning messages are still active: {}",
                         reasoning_messages.joined());
    }
    if (!reasoning_spans.empty()) {
      return fmt::format("Cannot send 'RUN_FINISHED' while reasoning spans are still active: {}",
                         reasoning_spans.joined());
    }
    if (!tool_calls.empty()) {
      return fmt::format("Cannot send 'RUN_FINISHED' while tool calls are still active: {}", tool_calls.joined());
    }
    if (!subagents.empty()) {
      return fmt::format("Cannot send 'RUN_FINISHED' while subagents are still active: {}", subagents.joined());
    }
    if (run_started) {
      if (auto m = check_run_ids_agree(run_started_event, e)) return m;
    }
    run_finished = true;
  } else if (type == "RUN_ERROR") {  // rule 6: allowed at any time
    run_error = true;
  }
  return std::nullopt;
}

AguiVerifier::AguiVerifier() : state_(std::make_unique<State>()) {}
AguiVerifier::~AguiVerifier() = default;

std::optional<std::string> AguiVerifier::feed(const json& event) {
  State& s = *state_;
  if (s.violation) return s.violation;
  Message m = check_agui_event_schema(event);
  if (!m) m = s.order(event, event["type"].get<std::string>());
  if (m) {
    s.violation = m;
    return m;
  }
  ++s.accepted;
  return std::nullopt;
}

std::optional<std::string> AguiVerifier::finish() const {
  const State& s = *state_;
  if (s.violation) return s.violation;
  if (!s.first_received) return "The stream has no events: it must start with 'RUN_STARTED'";
  if (s.run_started && !s.run_finished && !s.run_error) {
    return fmt::format(
        "The stream ended while run '{}' is still active: a run ends with 'RUN_FINISHED' or 'RUN_ERROR' (truncated "
        "run)",
        s.run_started_event.value("runId", std::string()));
  }
  return std::nullopt;
}

const std::optional<std::string>& AguiVerifier::violation() const { return state_->violation; }
std::size_t AguiVerifier::events_accepted() const { return state_->accepted; }

std::optional<std::string> verify_agui_stream(const std::vector<json>& events) {
  AguiVerifier verifier;
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (auto m = verifier.feed(events[i])) return fmt::format("event {}: {}", i, *m);
  }
  return verifier.finish();
}

std::optional<std::string> check_agui_event_schema(const json& event) {
  if (!event.is_object() || !event.contains("type") || !event["type"].is_string() ||
      event["type"].get_ref<const std::string&>().empty()) {
    return "An event must be a JSON object with a non-empty string 'type'";
  }
  const std::string type = event["type"].get<std::string>();
  const EventSpec* spec = find_spec(type);
  if (spec == nullptr) return fmt::format("Unknown event type '{}'", type);
  return EventSchemaChecker(type).check_top_level(event, *spec);
}

std::optional<std::string> check_run_ids_agree(const json& run_started, const json& run_finished) {
  for (const char* id : {"threadId", "runId"}) {
    const json a = run_started.value(id, json());
    const json b = run_finished.value(id, json());
    if (a != b) {
      return fmt::format("'RUN_FINISHED' {} {} does not match its 'RUN_STARTED' {} {}", id, b.dump(), id, a.dump());
    }
  }
  return std::nullopt;
}

}  // namespace agentrt::testing
