#include "agentrt/events.hpp"

#include <array>
#include <chrono>
#include <cmath>
#include <initializer_list>

#include <fmt/format.h>

#include "agentrt/clock.hpp"
#include "agentrt/error.hpp"
#include "runtime/event_wire.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

enum class Kind { str, any, object, array, content, boolean };

struct Field {
  const char* key;
  Kind kind;
  bool required;
  std::string Event::*s = nullptr;
  json Event::*j = nullptr;
};

Field S(const char* k, std::string Event::*m, bool req = false) { return Field{k, Kind::str, req, m, nullptr}; }
Field J(const char* k, json Event::*m, Kind kind, bool req = false) { return Field{k, kind, req, nullptr, m}; }
Field B(const char* k) { return Field{k, Kind::boolean, false, nullptr, nullptr}; }

struct TypeSpec {
  EventType type;
  const char* name;
  std::vector<Field> fields;
};

const std::vector<TypeSpec>& specs() {
  using E = Event;
  static const std::vector<TypeSpec> table = [] {
    auto sub = S("subagentRunId", &E::subagent_run_id);
    std::vector<TypeSpec> t = {
        {EventType::RUN_STARTED,
         "RUN_STARTED",
         {S("threadId", &E::thread_id, true), S("runId", &E::run_id, true), S("protocolVersion", &E::protocol_version),
          S("parentRunId", &E::parent_run_id), J("input", &E::input, Kind::object)}},
        {EventType::RUN_FINISHED,
         "RUN_FINISHED",
         {S("threadId", &E::thread_id, true), S("runId", &E::run_id, true), J("result", &E::result, Kind::any),
          J("outcome", &E::outcome, Kind::object), J("usage", &E::usage, Kind::array)}},
        {EventType::RUN_ERROR,
         "RUN_ERROR",
         {S("message", &E::message, true), S("code", &E::code), J("usage", &E::usage, Kind::array)}},
        {EventType::STEP_STARTED, "STEP_STARTED", {S("stepName", &E::step_name, true), sub}},
        {EventType::STEP_FINISHED, "STEP_FINISHED", {S("stepName", &E::step_name, true), sub}},
        {EventType::TEXT_MESSAGE_START,
         "TEXT_MESSAGE_START",
         {S("messageId", &E::message_id, true), sub, S("role", &E::role), S("name", &E::name)}},
        {EventType::TEXT_MESSAGE_CONTENT,
         "TEXT_MESSAGE_CONTENT",
         {S("messageId", &E::message_id, true), S("delta", &E::delta, true), sub}},
        {EventType::TEXT_MESSAGE_END, "TEXT_MESSAGE_END", {S("messageId", &E::message_id, true), sub}},
        {EventType::TEXT_MESSAGE_CHUNK,
         "TEXT_MESSAGE_CHUNK",
         {sub, S("messageId", &E::message_id), S("role", &E::role), S("delta", &E::delta), S("name", &E::name)}},
        {EventType::TOOL_CALL_START,
         "TOOL_CALL_START",
         {S("toolCallId", &E::tool_call_id, true), S("toolCallName", &E::tool_call_name, true), sub,
          S("parentMessageId", &E::parent_message_id)}},
        {EventType::TOOL_CALL_ARGS,
         "TOOL_CALL_ARGS",
         {S("toolCallId", &E::tool_call_id, true), S("delta", &E::delta, true), sub}},
        {EventType::TOOL_CALL_END, "TOOL_CALL_END", {S("toolCallId", &E::tool_call_id, true), sub}},
        {EventType::TOOL_CALL_CHUNK,
         "TOOL_CALL_CHUNK",
         {sub, S("toolCallId", &E::tool_call_id), S("toolCallName", &E::tool_call_name),
          S("parentMessageId", &E::parent_message_id), S("delta", &E::delta)}},
        {EventType::TOOL_CALL_RESULT,
         "TOOL_CALL_RESULT",
         {S("messageId", &E::message_id, true), S("toolCallId", &E::tool_call_id, true),
          J("content", &E::content, Kind::content, true), sub, S("role", &E::role)}},
        {EventType::STATE_SNAPSHOT, "STATE_SNAPSHOT", {J("snapshot", &E::snapshot, Kind::any, true), sub}},
        {EventType::STATE_DELTA, "STATE_DELTA", {J("delta", &E::patch, Kind::array, true), sub}},
        {EventType::MESSAGES_SNAPSHOT, "MESSAGES_SNAPSHOT", {J("messages", &E::messages, Kind::array, true)}},
        {EventType::ACTIVITY_SNAPSHOT,
         "ACTIVITY_SNAPSHOT",
         {S("messageId", &E::message_id, true), S("activityType", &E::activity_type, true),
          J("content", &E::content, Kind::object, true), sub, B("replace")}},
        {EventType::ACTIVITY_DELTA,
         "ACTIVITY_DELTA",
         {S("messageId", &E::message_id, true), S("activityType", &E::activity_type, true),
          J("patch", &E::patch, Kind::array, true), sub}},
        {EventType::RAW, "RAW", {J("event", &E::event, Kind::any, true), sub, S("source", &E::source)}},
        {EventType::CUSTOM, "CUSTOM", {S("name", &E::name, true), J("value", &E::value, Kind::any, true), sub}},
        {EventType::REASONING_START, "REASONING_START", {S("messageId", &E::message_id, true), sub}},
        {EventType::REASONING_MESSAGE_START,
         "REASONING_MESSAGE_START",
         {S("messageId", &E::message_id, true), S("role", &E::role, true), sub}},
        {EventType::REASONING_MESSAGE_CONTENT,
         "REASONING_MESSAGE_CONTENT",
         {S("messageId", &E::message_id, true), S("delta", &E::delta, true), sub}},
        {EventType::REASONING_MESSAGE_END, "REASONING_MESSAGE_END", {S("messageId", &E::message_id, true), sub}},
        {EventType::REASONING_MESSAGE_CHUNK,
         "REASONING_MESSAGE_CHUNK",
         {sub, S("messageId", &E::message_id), S("delta", &E::delta)}},
        {EventType::REASONING_END, "REASONING_END", {S("messageId", &E::message_id, true), sub}},
        {EventType::REASONING_ENCRYPTED_VALUE,
         "REASONING_ENCRYPTED_VALUE",
         {S("subtype", &E::subtype, true), S("entityId", &E::entity_id, true),
          S("encryptedValue", &E::encrypted_value, true), sub}},
        {EventType::SUBAGENT_STARTED,
         "SUBAGENT_STARTED",
         {S("subagentRunId", &E::subagent_run_id, true), S("name", &E::name, true), S("description", &E::description),
          S("parentSubagentRunId", &E::parent_subagent_run_id), S("parentToolCallId", &E::parent_tool_call_id),
          S("parentMessageId", &E::parent_message_id)}},
        {EventType::SUBAGENT_FINISHED,
         "SUBAGENT_FINISHED",
         {S("subagentRunId", &E::subagent_run_id, true), J("result", &E::result, Kind::any),
          J("outcome", &E::outcome, Kind::object)}},
        {EventType::SUBAGENT_ERROR,
         "SUBAGENT_ERROR",
         {S("subagentRunId", &E::subagent_run_id, true), S("message", &E::message, true), S("code", &E::code)}},
    };
    return t;
  }();
  return table;
}

const TypeSpec& spec_of(EventType t) { return specs()[static_cast<size_t>(t)]; }

[[noreturn]] void bad(const std::string& what) { throw Error(ErrorCode::invalid_argument, what); }

}  // namespace

std::string_view to_string(EventType t) noexcept { return spec_of(t).name; }

std::optional<EventType> event_type_from_string(std::string_view s) noexcept {
  for (const auto& sp : specs())
    if (s == sp.name) return sp.type;
  return std::nullopt;
}

void append_json_string(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  out += '"';
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    // Copy the longest run that needs no escaping in one append.
    size_t j = i;
    while (j < n && p[j] >= 0x20 && p[j] < 0x80 && p[j] != '"' && p[j] != '\\') ++j;
    if (j > i) {
      out.append(s.data() + i, j - i);
      i = j;
      if (i == n) break;
    }
    unsigned char c = p[i];
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20) {
            out += "\\u00";
            out += hex[c >> 4];
            out += hex[c & 15];
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    // Multi-byte UTF-8: copy a well-formed sequence, replace anything else with U+FFFD.
    size_t len = 0;
    uint32_t cp = 0;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    }
    bool ok = len != 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80)
        ok = false;
      else
        cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (ok) {
      if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
          (cp >= 0xD800 && cp <= 0xDFFF))
        ok = false;
    }
    if (ok) {
      out.append(s.data() + i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  out += '"';
}

void append_json(std::string& out, const json& j) {
  switch (j.type()) {
    case json::value_t::null:
    case json::value_t::discarded: out += "null"; return;
    case json::value_t::boolean: out += j.get<bool>() ? "true" : "false"; return;
    case json::value_t::number_integer: fmt::format_to(std::back_inserter(out), "{}", j.get<int64_t>()); return;
    case json::value_t::number_unsigned: fmt::format_to(std::back_inserter(out), "{}", j.get<uint64_t>()); return;
    case json::value_t::number_float: {
      double d = j.get<double>();
      if (!std::isfinite(d)) {
        out += "null";
        return;
      }
      out += j.dump();
      return;
    }
    case json::value_t::string: append_json_string(out, j.get_ref<const std::string&>()); return;
    case json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& v : j) {
        if (!first) out += ',';
        first = false;
        append_json(out, v);
      }
      out += ']';
      return;
    }
    case json::value_t::object: {
      out += '{';
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (!first) out += ',';
        first = false;
        append_json_string(out, it.key());
        out += ':';
        append_json(out, it.value());
      }
      out += '}';
      return;
    }
    case json::value_t::binary: out += j.dump(); return;
  }
}

std::string to_json_string(const Event& e) {
  const TypeSpec& sp = spec_of(e.type);
  std::string out;
  out.reserve(128 + e.delta.size());
  out += "{\"type\":\"";
  out += sp.name;
  out += '"';
  for (const Field& f : sp.fields) {
    if (f.kind == Kind::str) {
      const std::string& v = e.*(f.s);
      if (v.empty() && !f.required) continue;
      out += ",\"";
      out += f.key;
      out += "\":";
      append_json_string(out, v);
    } else if (f.kind == Kind::boolean) {
      if (!e.replace) continue;
      out += ",\"replace\":";
      out += *e.replace ? "true" : "false";
    } else {
      const json& v = e.*(f.j);
      if (v.is_null() && !f.required) continue;
      out += ",\"";
      out += f.key;
      out += "\":";
      if (v.is_null() && f.kind == Kind::content) {
        out += "\"\"";
      } else if (v.is_null() && f.kind == Kind::object) {
        out += "{}";
      } else if (v.is_null() && f.kind == Kind::array) {
        out += "[]";
      } else {
        append_json(out, v);
      }
    }
  }
  if (e.timestamp != 0) fmt::format_to(std::back_inserter(out), ",\"timestamp\":{}", e.timestamp);
  if (!e.raw_event.is_null()) {
    out += ",\"rawEvent\":";
    append_json(out, e.raw_event);
  }
  if (e.metadata.is_object()) {
    out += ",\"metadata\":";
    append_json(out, e.metadata);
  }
  out += '}';
  return out;
}

json to_json(const Event& e) { return json::parse(to_json_string(e)); }
void to_json(json& j, const Event& e) { j = to_json(e); }

Event event_from_json(const json& j) {
  if (!j.is_object()) bad("event must be a JSON object");
  auto t = j.find("type");
  if (t == j.end() || !t->is_string()) bad("event: missing string field 'type'");
  auto type = event_type_from_string(t->get_ref<const std::string&>());
  if (!type) bad(fmt::format("event: unknown type '{}'", t->get_ref<const std::string&>()));
  const TypeSpec& sp = spec_of(*type);
  Event e;
  e.type = *type;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (k == "type") continue;
    if (it->is_null()) bad(fmt::format("{}: field '{}' is null (omit it instead)", sp.name, k));
    if (k == "timestamp") {
      if (!it->is_number_integer()) bad(fmt::format("{}: timestamp must be an integer", sp.name));
      e.timestamp = it->get<int64_t>();
      continue;
    }
    if (k == "rawEvent") {
      e.raw_event = *it;
      continue;
    }
    if (k == "metadata") {
      if (!it->is_object()) bad(fmt::format("{}: metadata must be an object", sp.name));
      e.metadata = *it;
      continue;
    }
    const Field* f = nullptr;
    for (const auto& cand : sp.fields)
      if (k == cand.key) f = &cand;
    if (!f) bad(fmt::format("{}: unknown field '{}'", sp.name, k));
    switch (f->kind) {
      case Kind::str:
        if (!it->is_string()) bad(fmt::format("{}: field '{}' must be a string", sp.name, k));
        e.*(f->s) = it->get<std::string>();
        break;
      case Kind::boolean:
        if (!it->is_boolean()) bad(fmt::format("{}: field '{}' must be a boolean", sp.name, k));
        e.replace = it->get<bool>();
        break;
      case Kind::object:
        if (!it->is_object()) bad(fmt::format("{}: field '{}' must be an object", sp.name, k));
        e.*(f->j) = *it;
        break;
      case Kind::array:
        if (!it->is_array()) bad(fmt::format("{}: field '{}' must be an array", sp.name, k));
        e.*(f->j) = *it;
        break;
      case Kind::content:
        if (!it->is_string() && !it->is_array())
          bad(fmt::format("{}: field '{}' must be a string or an array of parts", sp.name, k));
        e.*(f->j) = *it;
        break;
      case Kind::any: e.*(f->j) = *it; break;
    }
  }
  for (const auto& f : sp.fields)
    if (f.required && !j.contains(f.key)) bad(fmt::format("{}: missing required field '{}'", sp.name, f.key));
  if (e.type == EventType::REASONING_MESSAGE_START && e.role != "reasoning")
    bad("REASONING_MESSAGE_START: role must be \"reasoning\"");
  if (e.type == EventType::TOOL_CALL_RESULT && !e.role.empty() && e.role != "tool")
    bad("TOOL_CALL_RESULT: role must be \"tool\"");
  return e;
}

void from_json(const json& j, Event& e) { e = event_from_json(j); }

namespace wire {
namespace {

// {"type":"T", the fields..., "timestamp":N}: the shape to_json_string(Event) gives these types (their
// fields in the type's order; an optional one the caller leaves out when empty; the timestamp last).
std::string event(std::string_view type, std::initializer_list<std::pair<std::string_view, std::string_view>> fields,
                  int64_t timestamp) {
  size_t size = 64;
  for (const auto& [key, value] : fields) size += key.size() + value.size() + 8;
  std::string out;
  out.reserve(size);
  out += "{\"type\":\"";
  out += type;
  out += '"';
  for (const auto& [key, value] : fields) {
    out += ",\"";
    out += key;
    out += "\":";
    append_json_string(out, value);
  }
  if (timestamp != 0) fmt::format_to(std::back_inserter(out), ",\"timestamp\":{}", timestamp);
  out += '}';
  return out;
}

}  // namespace

std::string step_started(std::string_view step, int64_t ts) { return event("STEP_STARTED", {{"stepName", step}}, ts); }
std::string step_finished(std::string_view step, int64_t ts) {
  return event("STEP_FINISHED", {{"stepName", step}}, ts);
}
std::string text_start(std::string_view message_id, int64_t ts) {
  return event("TEXT_MESSAGE_START", {{"messageId", message_id}, {"role", "assistant"}}, ts);
}
std::string text_content(std::string_view message_id, std::string_view delta, int64_t ts) {
  return event("TEXT_MESSAGE_CONTENT", {{"messageId", message_id}, {"delta", delta}}, ts);
}
std::string tool_call_start(std::string_view tool_call_id, std::string_view name, std::string_view parent_message_id,
                            int64_t ts) {
  if (parent_message_id.empty())
    return event("TOOL_CALL_START", {{"toolCallId", tool_call_id}, {"toolCallName", name}}, ts);
  return event("TOOL_CALL_START",
               {{"toolCallId", tool_call_id}, {"toolCallName", name}, {"parentMessageId", parent_message_id}}, ts);
}
std::string tool_call_args(std::string_view tool_call_id, std::string_view delta, int64_t ts) {
  return event("TOOL_CALL_ARGS", {{"toolCallId", tool_call_id}, {"delta", delta}}, ts);
}
std::string tool_call_end(std::string_view tool_call_id, int64_t ts) {
  return event("TOOL_CALL_END", {{"toolCallId", tool_call_id}}, ts);
}

}  // namespace wire

namespace events {
namespace {
Event make(EventType t) {
  Event e;
  e.type = t;
  e.timestamp = now_ms();
  return e;
}
}  // namespace

Event run_started(std::string thread_id, std::string run_id, std::string parent_run_id) {
  Event e = make(EventType::RUN_STARTED);
  e.thread_id = std::move(thread_id);
  e.run_id = std::move(run_id);
  e.parent_run_id = std::move(parent_run_id);
  return e;
}
Event run_finished(std::string thread_id, std::string run_id, json outcome, json usage) {
  Event e = make(EventType::RUN_FINISHED);
  e.thread_id = std::move(thread_id);
  e.run_id = std::move(run_id);
  e.outcome = std::move(outcome);
  e.usage = std::move(usage);
  return e;
}
Event run_error(std::string message, std::string code) {
  Event e = make(EventType::RUN_ERROR);
  e.message = std::move(message);
  e.code = std::move(code);
  return e;
}
Event step_started(std::string step) {
  Event e = make(EventType::STEP_STARTED);
  e.step_name = std::move(step);
  return e;
}
Event step_finished(std::string step) {
  Event e = make(EventType::STEP_FINISHED);
  e.step_name = std::move(step);
  return e;
}
Event text_start(std::string message_id) {
  Event e = make(EventType::TEXT_MESSAGE_START);
  e.message_id = std::move(message_id);
  e.role = "assistant";
  return e;
}
Event text_content(std::string message_id, std::string delta) {
  Event e = make(EventType::TEXT_MESSAGE_CONTENT);
  e.message_id = std::move(message_id);
  e.delta = std::move(delta);
  return e;
}
Event text_end(std::string message_id, json metadata) {
  Event e = make(EventType::TEXT_MESSAGE_END);
  e.message_id = std::move(message_id);
  e.metadata = std::move(metadata);
  return e;
}
Event reasoning_start(std::string message_id) {
  Event e = make(EventType::REASONING_START);
  e.message_id = std::move(message_id);
  return e;
}
Event reasoning_message_start(std::string message_id) {
  Event e = make(EventType::REASONING_MESSAGE_START);
  e.message_id = std::move(message_id);
  e.role = "reasoning";
  return e;
}
Event reasoning_content(std::string message_id, std::string delta) {
  Event e = make(EventType::REASONING_MESSAGE_CONTENT);
  e.message_id = std::move(message_id);
  e.delta = std::move(delta);
  return e;
}
Event reasoning_message_end(std::string message_id) {
  Event e = make(EventType::REASONING_MESSAGE_END);
  e.message_id = std::move(message_id);
  return e;
}
Event reasoning_end(std::string message_id) {
  Event e = make(EventType::REASONING_END);
  e.message_id = std::move(message_id);
  return e;
}
Event tool_call_start(std::string tool_call_id, std::string name, std::string parent_message_id) {
  Event e = make(EventType::TOOL_CALL_START);
  e.tool_call_id = std::move(tool_call_id);
  e.tool_call_name = std::move(name);
  e.parent_message_id = std::move(parent_message_id);
  return e;
}
Event tool_call_args(std::string tool_call_id, std::string delta) {
  Event e = make(EventType::TOOL_CALL_ARGS);
  e.tool_call_id = std::move(tool_call_id);
  e.delta = std::move(delta);
  return e;
}
Event tool_call_end(std::string tool_call_id) {
  Event e = make(EventType::TOOL_CALL_END);
  e.tool_call_id = std::move(tool_call_id);
  return e;
}
Event tool_call_result(std::string message_id, std::string tool_call_id, json content, json metadata) {
  Event e = make(EventType::TOOL_CALL_RESULT);
  e.message_id = std::move(message_id);
  e.tool_call_id = std::move(tool_call_id);
  e.content = std::move(content);
  e.role = "tool";
  e.metadata = std::move(metadata);
  return e;
}
Event custom(std::string name, json value) {
  Event e = make(EventType::CUSTOM);
  e.name = std::move(name);
  e.value = std::move(value);
  return e;
}
}  // namespace events

}  // namespace v1
}  // namespace agentrt
