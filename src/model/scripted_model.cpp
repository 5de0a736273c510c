#include "agentrt/scripted_model.hpp"

#include <algorithm>
#include <cctype>
#include <map>

#include <fmt/format.h>

#include "agentrt/error.hpp"

namespace agentrt {
inline namespace v1 {

namespace {
// Length of a chunk of at most `n` bytes that does not end inside a UTF-8 sequence.
size_t utf8_chunk(std::string_view s, size_t n) {
  if (s.size() <= n) return s.size();
  size_t k = n;
  while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
  return k == 0 ? n : k;
}
}  // namespace

ScriptedModel::ScriptedModel(ModelScript script, ScriptedModelOptions options)
    : script_(std::move(script)), options_(options) {
  if (!script_) throw Error(ErrorCode::invalid_argument, "scripted model: script is empty");
}

ModelResult ScriptedModel::complete(const ModelRequest& request, ModelStreamSink& sink, const CancelToken& cancel) {
  calls_.fetch_add(1, std::memory_order_relaxed);
  if (cancel.cancelled()) throw Error(ErrorCode::cancelled, "model call cancelled");
  ModelResult r = script_(request);
  auto pause = [&] {
    if (options_.chunk_delay.count() > 0 && cancel.wait_for(options_.chunk_delay))
      throw Error(ErrorCode::cancelled, "model call cancelled");
    if (cancel.cancelled()) throw Error(ErrorCode::cancelled, "model call cancelled");
  };
  if (!r.reasoning.empty()) {
    pause();
    sink.on_reasoning(r.reasoning);
  }
  std::string_view text = r.text;
  if (options_.chunk_chars == 0) {
    if (!text.empty()) {
      pause();
      sink.on_text(text);
    }
  } else {
    while (!text.empty()) {
      pause();
      size_t n = utf8_chunk(text, options_.chunk_chars);
      sink.on_text(text.substr(0, n));
      text.remove_prefix(n);
    }
  }
  if (options_.stream_tool_calls) {
    for (size_t i = 0; i < r.tool_calls.size(); ++i) {
      pause();
      const auto& c = r.tool_calls[i];
      sink.on_tool_call_start(static_cast<int>(i), c.id, c.name);
      size_t half = c.arguments.size() / 2;
      if (half > 0) sink.on_tool_call_args(static_cast<int>(i), std::string_view(c.arguments).substr(0, half));
      sink.on_tool_call_args(static_cast<int>(i), std::string_view(c.arguments).substr(half));
    }
  }
  if (r.finish_reason.empty()) r.finish_reason = r.tool_calls.empty() ? "stop" : "tool_calls";
  return r;
}

const Message* last_user_message(const ModelRequest& request) {
  for (auto it = request.messages.rbegin(); it != request.messages.rend(); ++it)
    if (it->role == Role::user) return &*it;
  return nullptr;
}

size_t tool_results_since_last_user(const ModelRequest& request) {
  size_t n = 0;
  for (auto it = request.messages.rbegin(); it != request.messages.rend(); ++it) {
    if (it->role == Role::user) break;
    if (it->role == Role::tool) ++n;
  }
  return n;
}

const Message* last_tool_result_since_last_user(const ModelRequest& request) {
  for (auto it = request.messages.rbegin(); it != request.messages.rend(); ++it) {
    if (it->role == Role::user) break;
    if (it->role == Role::tool) return &*it;
  }
  return nullptr;
}

ModelResult text_result(std::string text) {
  ModelResult r;
  r.text = std::move(text);
  r.finish_reason = "stop";
  return r;
}

ModelResult tool_call_result(std::string id, std::string name, std::string arguments) {
  ModelResult r;
  r.tool_calls.push_back(ModelToolCall{std::move(id), std::move(name), std::move(arguments)});
  r.finish_reason = "tool_calls";
  return r;
}

// Arguments that satisfy a (simple) JSON Schema: each declared property, an enum's or const's first value, a
// string, number or boolean of its type; nested objects and arrays to a few levels.
json sample_value(const json& schema, std::string_view name, int depth) {
  if (!schema.is_object() || depth > 4) return nullptr;
  if (auto c = schema.find("const"); c != schema.end()) return *c;
  if (auto e = schema.find("enum"); e != schema.end() && e->is_array() && !e->empty()) return e->front();
  std::string type = schema.value("type", schema.contains("properties") ? "object" : "string");
  if (auto t = schema.find("type"); t != schema.end() && t->is_array() && !t->empty() && t->front().is_string())
    type = t->front().get<std::string>();
  if (type == "object") {
    json out = json::object();
    if (auto props = schema.find("properties"); props != schema.end() && props->is_object())
      for (const auto& [key, sub] : props->items()) out[key] = sample_value(sub, key, depth + 1);
    return out;
  }
  if (type == "array") {
    json out = json::array();
    const size_t n = schema.value("minItems", 0);
    for (size_t i = 0; i < n && i < 4; ++i)
      out.push_back(sample_value(schema.value("items", json::object()), name, depth + 1));
    return out;
  }
  if (type == "integer" || type == "number") return schema.value("minimum", 1);
  if (type == "boolean") return true;
  if (type == "null") return nullptr;
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower.find("theme") != std::string::npos) return "dark";
  if (lower.find("color") != std::string::npos || lower.find("colour") != std::string::npos) return "#336699";
  return "example";
}

// The tool a message asks for by name ("use change_theme"), when the request offers one by that name.
const ToolDefinition* tool_asked_for(const ModelRequest& req, const std::string& lower) {
  for (size_t at = lower.find("use "); at != std::string::npos; at = lower.find("use ", at + 1)) {
    size_t end = at + 4;
    while (end < lower.size() &&
           (std::isalnum(static_cast<unsigned char>(lower[end])) || lower[end] == '_' || lower[end] == '-'))
      ++end;
    const std::string name = lower.substr(at + 4, end - at - 4);
    for (const auto& t : req.tools) {
      std::string tool = t.name;
      std::transform(tool.begin(), tool.end(), tool.begin(), [](unsigned char c) { return std::tolower(c); });
      if (!name.empty() && tool == name) return &t;
    }
  }
  return nullptr;
}

std::shared_ptr<ScriptedModel> make_demo_model(ScriptedModelOptions options) {
  auto script = [](const ModelRequest& req) -> ModelResult {
    const Message* user = last_user_message(req);
    std::string text = user ? user->text() : std::string();
    std::string lower = text;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    bool booking = lower.find("book") != std::string::npos;
    if (req.stage == "intent")
      return text_result(booking ? "The user wants to book a room." : "The user asks a question.");
    if (req.stage == "organization") return text_result("Done.");
    if (booking) {
      // Look at what happened since the user's message: the tool's result (or its rejection).
      const Message* tool = last_tool_result_since_last_user(req);
      if (!tool) {
        ModelResult r = tool_call_result("call_book_1", "book_room", R"({"room":"A1","day":"mon"})");
        // "book two rooms": two calls in one answer (two approvals at once).
        if (lower.find("two rooms") != std::string::npos)
          r.tool_calls.push_back(ModelToolCall{"call_book_2", "book_room", R"({"room":"B2","day":"tue"})"});
        // "book a room and use change_theme": both calls in one answer (an approval and a client tool at once).
        if (const ToolDefinition* t = tool_asked_for(req, lower); t && t->name != "book_room")
          r.tool_calls.push_back(ModelToolCall{"call_use_1", t->name, sample_value(t->parameters, t->name, 0).dump()});
        return r;
      }
      // Quote what the tool said: after an edited approval the booking differs from the request.
      // Whatever the tool answered (a host tool may answer anything): fields of another type are absent.
      const json result = json::parse(tool->text(), nullptr, false);
      auto field = [](const json& j, const char* key, const std::string& fallback) {
        auto it = j.is_object() ? j.find(key) : j.end();
        return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
      };
      static const std::map<std::string, std::string> days = {
          {"mon", "Monday"}, {"tue", "Tuesday"},  {"wed", "Wednesday"}, {"thu", "Thursday"},
          {"fri", "Friday"}, {"sat", "Saturday"}, {"sun", "Sunday"}};
      auto booked = [&](const json& r) {
        std::string day = field(r, "day", "?");
        if (auto it = days.find(day); it != days.end()) day = it->second;
        return fmt::format("room {} on {}", field(r, "room", "?"), day);
      };
      const Message* calls = nullptr;  // the answer that made the calls
      for (const auto& m : req.messages)
        if (m.role == Role::assistant && !m.tool_calls.empty()) calls = &m;
      const auto bookings = calls ? std::count_if(calls->tool_calls.begin(), calls->tool_calls.end(),
                                                  [](const ToolCall& c) { return c.name == "book_room"; })
                                  : 0;
      if (bookings > 1) {
        // Several bookings: each one's outcome, in the order of the calls.
        std::string list;
        for (const auto& c : calls->tool_calls) {
          if (c.name != "book_room") continue;
          for (const auto& m : req.messages) {
            if (m.role != Role::tool || m.tool_call_id != c.id) continue;
            const json r = json::parse(m.text(), nullptr, false);
            list += (list.empty() ? "" : ", ") +
                    (r.is_object() && r.value("ok", false) == true ? booked(r) : std::string("not booked"));
          }
        }
        return text_result("Your bookings: " + list + ".");
      }
      if (result.is_object() && result.contains("ok") && result["ok"] == true)
        return text_result(fmt::format("Your booking is confirmed: {}.", booked(result)));
      std::string why = tool->text();
      if (result.is_object() && result.contains("error")) why = field(result["error"], "message", why);
      return text_result("I did not book the room: " + why);
    }
    if (text.empty()) return text_result("Hello! Ask me anything, or ask me to book a room.");
    if (req.stage == "execution" && lower.find("use ") != std::string::npos) {
      // "use <tool>": a call of the tool offered by that name (a client tool too), then what it answered.
      if (const Message* tool = last_tool_result_since_last_user(req))
        return text_result(fmt::format("The tool answered: {}", tool->text()));
      if (const ToolDefinition* t = tool_asked_for(req, lower))
        return tool_call_result("call_use_1", t->name, sample_value(t->parameters, t->name, 0).dump());
    }
    if (lower.find("context") != std::string::npos) {
      // What the application told the model for this run (the system message's context section), quoted.
      for (const auto& m : req.messages) {
        if (m.role != Role::system) continue;
        const size_t at = m.content.find(kRunContextHeading);
        if (at == std::string::npos) continue;
        std::string lines = m.content.substr(at + kRunContextHeading.size());
        if (const size_t end = lines.find("\n\n"); end != std::string::npos) lines.resize(end);
        return text_result("The application told me, for this run:" + lines);
      }
      return text_result("The application told me nothing for this run (no context).");
    }
    return text_result(
        "You said: \"" + text +
        "\". I am the offline demo model: ask me to book a room to see a tool call that needs your approval, "
        "what context I was given, or to use a tool by its name (\"use change_theme\").");
  };
  return std::make_shared<ScriptedModel>(script, options);
}

}  // namespace v1
}  // namespace agentrt
