// The AG-UI 1.0 event codec: one table of the fields each event type has, in the order they are written,
// one writer over it and one reader. The runtime's fast path (runtime/event_wire.hpp) goes through the same
// writer with the few text fields it has, so the two cannot drift apart.
#include <charconv>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "agentrt/events.hpp"
#include "agentrt/json_reader.hpp"
#include "runtime/event_wire.hpp"
#include "wire/enum_names.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

constexpr auto kEventTypes =
    wire::enum_names<EventType>("event type", {{EventType::RUN_STARTED, "RUN_STARTED"},
                                               {EventType::RUN_FINISHED, "RUN_FINISHED"},
                                               {EventType::RUN_ERROR, "RUN_ERROR"},
                                               {EventType::STEP_STARTED, "STEP_STARTED"},
                                               {EventType::STEP_FINISHED, "STEP_FINISHED"},
                                               {EventType::TEXT_MESSAGE_START, "TEXT_MESSAGE_START"},
                                               {EventType::TEXT_MESSAGE_CONTENT, "TEXT_MESSAGE_CONTENT"},
                                               {EventType::TEXT_MESSAGE_END, "TEXT_MESSAGE_END"},
                                               {EventType::TEXT_MESSAGE_CHUNK, "TEXT_MESSAGE_CHUNK"},
                                               {EventType::TOOL_CALL_START, "TOOL_CALL_START"},
                                               {EventType::TOOL_CALL_ARGS, "TOOL_CALL_ARGS"},
                                               {EventType::TOOL_CALL_END, "TOOL_CALL_END"},
                                               {EventType::TOOL_CALL_CHUNK, "TOOL_CALL_CHUNK"},
                                               {EventType::TOOL_CALL_RESULT, "TOOL_CALL_RESULT"},
                                               {EventType::STATE_SNAPSHOT, "STATE_SNAPSHOT"},
                                               {EventType::STATE_DELTA, "STATE_DELTA"},
                                               {EventType::MESSAGES_SNAPSHOT, "MESSAGES_SNAPSHOT"},
                                               {EventType::ACTIVITY_SNAPSHOT, "ACTIVITY_SNAPSHOT"},
                                               {EventType::ACTIVITY_DELTA, "ACTIVITY_DELTA"},
                                               {EventType::RAW, "RAW"},
                                               {EventType::CUSTOM, "CUSTOM"},
                                               {EventType::REASONING_START, "REASONING_START"},
                                               {EventType::REASONING_MESSAGE_START, "REASONING_MESSAGE_START"},
                                               {EventType::REASONING_MESSAGE_CONTENT, "REASONING_MESSAGE_CONTENT"},
                                               {EventType::REASONING_MESSAGE_END, "REASONING_MESSAGE_END"},
                                               {EventType::REASONING_MESSAGE_CHUNK, "REASONING_MESSAGE_CHUNK"},
                                               {EventType::REASONING_END, "REASONING_END"},
                                               {EventType::REASONING_ENCRYPTED_VALUE, "REASONING_ENCRYPTED_VALUE"},
                                               {EventType::SUBAGENT_STARTED, "SUBAGENT_STARTED"},
                                               {EventType::SUBAGENT_FINISHED, "SUBAGENT_FINISHED"},
                                               {EventType::SUBAGENT_ERROR, "SUBAGENT_ERROR"}});

enum class Kind { str, any, object, array, content, boolean };

// One key of an event: which Event member holds it (by kind), and whether the type requires it.
struct Field {
  const char* key;
  Kind kind;
  bool required;
  std::string Event::*s = nullptr;
  json Event::*j = nullptr;
  std::optional<bool> Event::*b = nullptr;
};

Field S(const char* k, std::string Event::*m, bool req = false) {
  return Field{k, Kind::str, req, m, nullptr, nullptr};
}
Field J(const char* k, json Event::*m, Kind kind, bool req = false) { return Field{k, kind, req, nullptr, m, nullptr}; }
Field B(const char* k, std::optional<bool> Event::*m) { return Field{k, Kind::boolean, false, nullptr, nullptr, m}; }

struct TypeSpec {
  EventType type;
  std::vector<Field> fields;
};

const std::vector<TypeSpec>& specs() {
  using E = Event;
  static const std::vector<TypeSpec> table = [] {
    auto sub = S("subagentRunId", &E::subagent_run_id);
    std::vector<TypeSpec> t = {
        {EventType::RUN_STARTED,
         {S("threadId", &E::thread_id, true), S("runId", &E::run_id, true), S("protocolVersion", &E::protocol_version),
          S("parentRunId", &E::parent_run_id), J("input", &E::input, Kind::object)}},
        {EventType::RUN_FINISHED,
         {S("threadId", &E::thread_id, true), S("runId", &E::run_id, true), J("result", &E::result, Kind::any),
          J("outcome", &E::outcome, Kind::object), J("usage", &E::usage, Kind::array)}},
        {EventType::RUN_ERROR,
         {S("message", &E::message, true), S("code", &E::code), J("usage", &E::usage, Kind::array)}},
        {EventType::STEP_STARTED, {S("stepName", &E::step_name, true), sub}},
        {EventType::STEP_FINISHED, {S("stepName", &E::step_name, true), sub}},
        {EventType::TEXT_MESSAGE_START,
         {S("messageId", &E::message_id, true), sub, S("role", &E::role), S("name", &E::name)}},
        {EventType::TEXT_MESSAGE_CONTENT, {S("messageId", &E::message_id, true), S("delta", &E::delta, true), sub}},
        {EventType::TEXT_MESSAGE_END, {S("messageId", &E::message_id, true), sub}},
        {EventType::TEXT_MESSAGE_CHUNK,
         {sub, S("messageId", &E::message_id), S("role", &E::role), S("delta", &E::delta), S("name", &E::name)}},
        {EventType::TOOL_CALL_START,
         {S("toolCallId", &E::tool_call_id, true), S("toolCallName", &E::tool_call_name, true), sub,
          S("parentMessageId", &E::parent_message_id)}},
        {EventType::TOOL_CALL_ARGS, {S("toolCallId", &E::tool_call_id, true), S("delta", &E::delta, true), sub}},
        {EventType::TOOL_CALL_END, {S("toolCallId", &E::tool_call_id, true), sub}},
        {EventType::TOOL_CALL_CHUNK,
         {sub, S("toolCallId", &E::tool_call_id), S("toolCallName", &E::tool_call_name),
          S("parentMessageId", &E::parent_message_id), S("delta", &E::delta)}},
        {EventType::TOOL_CALL_RESULT,
         {S("messageId", &E::message_id, true), S("toolCallId", &E::tool_call_id, true),
          J("content", &E::content, Kind::content, true), sub, S("role", &E::role)}},
        {EventType::STATE_SNAPSHOT, {J("snapshot", &E::snapshot, Kind::any, true), sub}},
        {EventType::STATE_DELTA, {J("delta", &E::patch, Kind::array, true), sub}},
        {EventType::MESSAGES_SNAPSHOT, {J("messages", &E::messages, Kind::array, true)}},
        {EventType::ACTIVITY_SNAPSHOT,
         {S("messageId", &E::message_id, true), S("activityType", &E::activity_type, true),
          J("content", &E::content, Kind::object, true), sub, B("replace", &E::replace)}},
        {EventType::ACTIVITY_DELTA,
         {S("messageId", &E::message_id, true), S("activityType", &E::activity_type, true),
          J("patch", &E::patch, Kind::array, true), sub}},
        {EventType::RAW, {J("event", &E::event, Kind::any, true), sub, S("source", &E::source)}},
        {EventType::CUSTOM, {S("name", &E::name, true), J("value", &E::value, Kind::any, true), sub}},
        {EventType::REASONING_START, {S("messageId", &E::message_id, true), sub}},
        {EventType::REASONING_MESSAGE_START, {S("messageId", &E::message_id, true), S("role", &E::role, true), sub}},
        {EventType::REASONING_MESSAGE_CONTENT,
         {S("messageId", &E::message_id, true), S("delta", &E::delta, true), sub}},
        {EventType::REASONING_MESSAGE_END, {S("messageId", &E::message_id, true), sub}},
        {EventType::REASONING_MESSAGE_CHUNK, {sub, S("messageId", &E::message_id), S("delta", &E::delta)}},
        {EventType::REASONING_END, {S("messageId", &E::message_id, true), sub}},
        {EventType::REASONING_ENCRYPTED_VALUE,
         {S("subtype", &E::subtype, true), S("entityId", &E::entity_id, true),
          S("encryptedValue", &E::encrypted_value, true), sub}},
        {EventType::SUBAGENT_STARTED,
         {S("subagentRunId", &E::subagent_run_id, true), S("name", &E::name, true), S("description", &E::description),
          S("parentSubagentRunId", &E::parent_subagent_run_id), S("parentToolCallId", &E::parent_tool_call_id),
          S("parentMessageId", &E::parent_message_id)}},
        {EventType::SUBAGENT_FINISHED,
         {S("subagentRunId", &E::subagent_run_id, true), J("result", &E::result, Kind::any),
          J("outcome", &E::outcome, Kind::object)}},
        {EventType::SUBAGENT_ERROR,
         {S("subagentRunId", &E::subagent_run_id, true), S("message", &E::message, true), S("code", &E::code)}},
    };
    // spec_of() indexes the table by type.
    for (size_t i = 0; i < t.size(); ++i)
      if (t[i].type != static_cast<EventType>(i))
        throw Error(ErrorCode::internal, fmt::format("event table: entry {} holds {}, out of EventType order", i,
                                                     kEventTypes.name(t[i].type)));
    return t;
  }();
  return table;
}

const TypeSpec& spec_of(EventType t) { return specs()[static_cast<size_t>(t)]; }

const json kNull;

// The values the writer reads: those of an Event...
class EventFields {
 public:
  explicit EventFields(const Event& e) : e_(e) {}
  size_t size_hint() const { return 128 + e_.delta.size(); }
  std::string_view text(std::string Event::*m) const { return e_.*m; }
  const json& value(json Event::*m) const { return e_.*m; }
  std::optional<bool> flag(std::optional<bool> Event::*m) const { return e_.*m; }
  int64_t timestamp() const { return e_.timestamp; }
  const json& raw_event() const { return e_.raw_event; }
  const json& metadata() const { return e_.metadata; }

 private:
  const Event& e_;
};

// ...or a few text fields and a timestamp, every other field unset (the fast path: no Event to build).
using TextField = std::pair<std::string Event::*, std::string_view>;
class TextFields {
 public:
  TextFields(std::initializer_list<TextField> texts, int64_t timestamp) : texts_(texts), timestamp_(timestamp) {}
  size_t size_hint() const {
    size_t n = 64;
    for (const auto& field : texts_) n += field.second.size() + 24;
    return n;
  }
  std::string_view text(std::string Event::*m) const {
    for (const auto& [member, value] : texts_)
      if (member == m) return value;
    return {};
  }
  const json& value(json Event::*) const { return kNull; }
  std::optional<bool> flag(std::optional<bool> Event::*) const { return std::nullopt; }
  int64_t timestamp() const { return timestamp_; }
  const json& raw_event() const { return kNull; }
  const json& metadata() const { return kNull; }

 private:
  std::initializer_list<TextField> texts_;
  int64_t timestamp_;
};

void append_key(std::string& out, const char* key) {
  out += ",\"";
  out += key;
  out += "\":";
}

// The one serializer: {"type":"T", the type's fields in table order (a required one always, an optional one
// when set), "timestamp" when not 0, "rawEvent" when set, "metadata" when an object}.
template <class Fields>
std::string write_event(EventType type, const Fields& in) {
  std::string out;
  out.reserve(in.size_hint());
  out += "{\"type\":\"";
  out += kEventTypes.name(type);
  out += '"';
  for (const Field& f : spec_of(type).fields) {
    if (f.kind == Kind::str) {
      std::string_view v = in.text(f.s);
      if (v.empty() && !f.required) continue;
      append_key(out, f.key);
      append_json_string(out, v);
    } else if (f.kind == Kind::boolean) {
      std::optional<bool> v = in.flag(f.b);
      if (!v) continue;
      append_key(out, f.key);
      out += *v ? "true" : "false";
    } else {
      const json& v = in.value(f.j);
      if (v.is_null() && !f.required) continue;
      append_key(out, f.key);
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
  if (in.timestamp() != 0) {
    char digits[24];
    out += ",\"timestamp\":";
    out.append(digits, static_cast<size_t>(std::to_chars(digits, digits + sizeof digits, in.timestamp()).ptr - digits));
  }
  if (!in.raw_event().is_null()) {
    append_key(out, "rawEvent");
    append_json(out, in.raw_event());
  }
  if (in.metadata().is_object()) {
    append_key(out, "metadata");
    append_json(out, in.metadata());
  }
  out += '}';
  return out;
}

std::string write_texts(EventType type, std::initializer_list<TextField> texts, int64_t timestamp) {
  return write_event(type, TextFields(texts, timestamp));
}

// A streamed delta (a model's every few tokens) in one pass: `head` is its type and id key, both fields non-empty
// (so both written), the timestamp last: what write_event gives, without walking the type's fields.
std::string write_delta(std::string_view head, std::string_view id, std::string_view delta, int64_t timestamp) {
  std::string out;
  out.reserve(head.size() + id.size() + delta.size() + 48);
  out += head;
  append_json_string(out, id);
  out += ",\"delta\":";
  append_json_string(out, delta);
  if (timestamp != 0) {
    char digits[24];
    out += ",\"timestamp\":";
    out.append(digits, static_cast<size_t>(std::to_chars(digits, digits + sizeof digits, timestamp).ptr - digits));
  }
  out += '}';
  return out;
}

}  // namespace

std::string_view to_string(EventType t) noexcept { return kEventTypes.name(t); }

std::optional<EventType> event_type_from_string(std::string_view s) noexcept { return kEventTypes.find(s); }

std::string to_json_string(const Event& e) { return write_event(e.type, EventFields(e)); }

json to_json(const Event& e) { return json::parse(to_json_string(e)); }
void to_json(json& j, const Event& e) { j = to_json(e); }

Event event_from_json(const json& j) {
  const std::string& type = wire::JsonReader(j, "event").required_string("type");
  Event e;
  e.type = kEventTypes.parse(type);
  const TypeSpec& sp = spec_of(e.type);
  const wire::JsonReader in(j, to_string(e.type));
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (k == "type") continue;
    if (it->is_null()) in.fail(fmt::format("'{}' is null (omit it instead)", k));
    if (k == "timestamp") {
      if (!it->is_number_integer()) in.wrong_type(k, "an integer");
      e.timestamp = it->get<int64_t>();
      continue;
    }
    if (k == "rawEvent") {
      e.raw_event = *it;
      continue;
    }
    if (k == "metadata") {
      if (!it->is_object()) in.wrong_type(k, "a JSON object");
      e.metadata = *it;
      continue;
    }
    const Field* f = nullptr;
    for (const auto& cand : sp.fields)
      if (k == cand.key) f = &cand;
    if (!f) {
      std::string known = "type";
      for (const auto& cand : sp.fields) known += fmt::format(", {}", cand.key);
      in.unknown_key(k, known + ", timestamp, rawEvent, metadata");
    }
    switch (f->kind) {
      case Kind::str:
        if (!it->is_string()) in.wrong_type(k, "a string");
        e.*(f->s) = it->get<std::string>();
        break;
      case Kind::boolean:
        if (!it->is_boolean()) in.wrong_type(k, "a boolean");
        e.*(f->b) = it->get<bool>();
        break;
      case Kind::object:
        if (!it->is_object()) in.wrong_type(k, "a JSON object");
        e.*(f->j) = *it;
        break;
      case Kind::array:
        if (!it->is_array()) in.wrong_type(k, "an array");
        e.*(f->j) = *it;
        break;
      case Kind::content:
        if (!it->is_string() && !it->is_array()) in.wrong_type(k, "a string or an array of parts");
        e.*(f->j) = *it;
        break;
      case Kind::any: e.*(f->j) = *it; break;
    }
  }
  for (const auto& f : sp.fields)
    if (f.required) in.required(f.key);
  if (e.type == EventType::REASONING_MESSAGE_START && e.role != "reasoning") in.fail("'role' must be \"reasoning\"");
  if (e.type == EventType::TOOL_CALL_RESULT && !e.role.empty() && e.role != "tool") in.fail("'role' must be \"tool\"");
  return e;
}

void from_json(const json& j, Event& e) { e = event_from_json(j); }

namespace wire {

std::string step_started(std::string_view step, int64_t ts) {
  return write_texts(EventType::STEP_STARTED, {{&Event::step_name, step}}, ts);
}
std::string step_finished(std::string_view step, int64_t ts) {
  return write_texts(EventType::STEP_FINISHED, {{&Event::step_name, step}}, ts);
}
std::string text_start(std::string_view message_id, int64_t ts) {
  return write_texts(EventType::TEXT_MESSAGE_START, {{&Event::message_id, message_id}, {&Event::role, "assistant"}},
                     ts);
}
std::string text_content(std::string_view message_id, std::string_view delta, int64_t ts) {
  if (!message_id.empty() && !delta.empty())
    return write_delta(R"({"type":"TEXT_MESSAGE_CONTENT","messageId":)", message_id, delta, ts);
  return write_texts(EventType::TEXT_MESSAGE_CONTENT, {{&Event::message_id, message_id}, {&Event::delta, delta}}, ts);
}
std::string tool_call_start(std::string_view tool_call_id, std::string_view name, std::string_view parent_message_id,
                            int64_t ts) {
  return write_texts(EventType::TOOL_CALL_START,
                     {{&Event::tool_call_id, tool_call_id},
                      {&Event::tool_call_name, name},
                      {&Event::parent_message_id, parent_message_id}},
                     ts);
}
std::string tool_call_args(std::string_view tool_call_id, std::string_view delta, int64_t ts) {
  if (!tool_call_id.empty() && !delta.empty())
    return write_delta(R"({"type":"TOOL_CALL_ARGS","toolCallId":)", tool_call_id, delta, ts);
  return write_texts(EventType::TOOL_CALL_ARGS, {{&Event::tool_call_id, tool_call_id}, {&Event::delta, delta}}, ts);
}
std::string tool_call_end(std::string_view tool_call_id, int64_t ts) {
  return write_texts(EventType::TOOL_CALL_END, {{&Event::tool_call_id, tool_call_id}}, ts);
}

}  // namespace wire

}  // namespace v1
}  // namespace agentrt
