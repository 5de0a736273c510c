// AG-UI input as the runtime takes it: RunAgentInput (the user message to answer) and the resume entries of
// a run that continues an interrupt, with the nesting, part and message limits.
#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "agentrt/json_limits.hpp"
#include "agentrt/runtime.hpp"
#include "util/printable.hpp"

namespace agentrt {
inline namespace v1 {

InputLimits input_limits(const RuntimeConfig& config) {
  return InputLimits{config.max_json_depth,      config.max_input_parts,        config.max_input_messages,
                     config.max_context_entries, config.max_context_bytes,      config.max_state_bytes,
                     config.max_client_tools,    config.max_client_tools_bytes, config.max_input_bytes};
}

void check_client_tools(const std::vector<ToolDefinition>& tools, const InputLimits& limits) {
  if (tools.size() > limits.max_client_tools)
    throw Error(ErrorCode::too_large,
                fmt::format("client tools: {} tools; the limit is {}", tools.size(), limits.max_client_tools));
  size_t bytes = 0;
  std::set<std::string_view> names;
  for (const auto& t : tools) {
    const bool valid = !t.name.empty() && t.name.size() <= 64 && std::all_of(t.name.begin(), t.name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
    });
    if (!valid)
      throw Error(
          ErrorCode::invalid_argument,
          fmt::format("client tool '{}': a name is 1 to 64 letters, digits, '_' or '-'", printable(t.name, 80)));
    if (!names.insert(t.name).second)
      throw Error(ErrorCode::invalid_argument, fmt::format("client tool '{}' is offered twice", t.name));
    if (!t.parameters.is_null() && !t.parameters.is_object())
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("client tool '{}': parameters must be a JSON Schema object", t.name));
    check_json_depth(t.parameters, limits.max_json_depth, "client tool parameters");
    bytes += t.name.size() + t.description.size() + (t.parameters.is_null() ? 0 : t.parameters.dump().size());
  }
  if (bytes > limits.max_client_tools_bytes)
    throw Error(ErrorCode::too_large,
                fmt::format("client tools: {} bytes; the limit is {}", bytes, limits.max_client_tools_bytes));
}

std::vector<ToolDefinition> client_tools_from_agui(const json& tools, const InputLimits& limits) {
  if (tools.is_null()) return {};
  check_json_depth(tools, limits.max_json_depth, "tools");
  if (!tools.is_array()) throw Error(ErrorCode::invalid_argument, "tools must be an array of {name, description}");
  if (tools.size() > limits.max_client_tools)
    throw Error(ErrorCode::too_large,
                fmt::format("client tools: {} tools; the limit is {}", tools.size(), limits.max_client_tools));
  std::vector<ToolDefinition> out;
  out.reserve(tools.size());
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    if (!t.is_object()) throw Error(ErrorCode::invalid_argument, fmt::format("tools[{}] must be an object", i));
    ToolDefinition d;
    auto name = t.find("name");
    if (name == t.end() || !name->is_string())
      throw Error(ErrorCode::invalid_argument, fmt::format("tools[{}]: 'name' must be a string", i));
    d.name = name->get<std::string>();
    if (auto desc = t.find("description"); desc != t.end() && !desc->is_null()) {
      if (!desc->is_string())
        throw Error(ErrorCode::invalid_argument, fmt::format("tools[{}]: 'description' must be a string", i));
      d.description = desc->get<std::string>();
    }
    if (auto p = t.find("parameters"); p != t.end()) d.parameters = *p;
    out.push_back(std::move(d));
  }
  check_client_tools(out, limits);
  return out;
}

std::vector<ToolAnswer> tool_answers_from_agui(const json& in, const InputLimits& limits) {
  check_json_depth(in, limits.max_json_depth, "RunAgentInput");
  std::vector<ToolAnswer> out;
  auto msgs = in.is_object() ? in.find("messages") : in.end();
  if (!in.is_object() || msgs == in.end() || !msgs->is_array()) return out;
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    auto role = m.is_object() ? m.find("role") : m.end();
    if (!m.is_object() || role == m.end() || !role->is_string() || *role != "tool") continue;
    auto text = [&](const char* k, bool required) -> std::string {
      auto it = m.find(k);
      if (it == m.end() || it->is_null()) {
        if (required)
          throw Error(ErrorCode::invalid_argument, fmt::format("messages[{}] (tool): '{}' must be a string", i, k));
        return {};
      }
      if (!it->is_string())
        throw Error(ErrorCode::invalid_argument, fmt::format("messages[{}] (tool): '{}' must be a string", i, k));
      return it->get<std::string>();
    };
    ToolAnswer a;
    a.tool_call_id = text("toolCallId", true);
    a.message_id = text("id", false);
    a.error = text("error", false);
    auto c = m.find("content");
    if (c != m.end() && c->is_array()) {
      // Parts: the text ones, in order. Media in a tool's answer is not taken (there is nowhere to put it).
      for (const auto& p : *c) {
        auto type = p.is_object() ? p.find("type") : p.end();
        if (type == p.end() || !type->is_string() || *type != "text")
          throw Error(ErrorCode::invalid_argument,
                      fmt::format("messages[{}] (tool): only text parts can answer a client tool", i));
        auto t = p.find("text");
        if (t == p.end() || !t->is_string())
          throw Error(ErrorCode::invalid_argument, fmt::format("messages[{}] (tool): a text part needs 'text'", i));
        a.content += t->get_ref<const std::string&>();
      }
    } else {
      a.content = text("content", false);
    }
    if (a.content.size() + a.error.size() > limits.max_answer_bytes)
      throw Error(ErrorCode::too_large, fmt::format("messages[{}] (tool): {} bytes; the limit is {}", i,
                                                    a.content.size() + a.error.size(), limits.max_answer_bytes));
    out.push_back(std::move(a));
  }
  return out;
}

void check_state(const json& state, const InputLimits& limits) {
  if (state.is_null()) throw Error(ErrorCode::invalid_argument, "state must not be null");
  check_json_depth(state, limits.max_json_depth, "state");
  const size_t bytes = state.dump().size();
  if (bytes > limits.max_state_bytes)
    throw Error(ErrorCode::too_large, fmt::format("state: {} bytes; the limit is {}", bytes, limits.max_state_bytes));
}

void check_context(const std::vector<ContextEntry>& context, const InputLimits& limits) {
  if (context.size() > limits.max_context_entries)
    throw Error(ErrorCode::too_large,
                fmt::format("context: {} entries; the limit is {}", context.size(), limits.max_context_entries));
  size_t bytes = 0;
  for (const auto& c : context) bytes += c.description.size() + c.value.size();
  if (bytes > limits.max_context_bytes)
    throw Error(ErrorCode::too_large,
                fmt::format("context: {} bytes; the limit is {}", bytes, limits.max_context_bytes));
}

std::vector<ContextEntry> context_from_agui(const json& context, const InputLimits& limits) {
  if (context.is_null()) return {};
  check_json_depth(context, limits.max_json_depth, "context");
  if (!context.is_array()) throw Error(ErrorCode::invalid_argument, "context must be an array of {description, value}");
  if (context.size() > limits.max_context_entries)
    throw Error(ErrorCode::too_large,
                fmt::format("context: {} entries; the limit is {}", context.size(), limits.max_context_entries));
  std::vector<ContextEntry> out;
  out.reserve(context.size());
  for (size_t i = 0; i < context.size(); ++i) {
    const json& c = context[i];
    auto text = [&](const char* k) {
      auto it = c.is_object() ? c.find(k) : c.end();
      if (it == c.end() || !it->is_string())
        throw Error(ErrorCode::invalid_argument, fmt::format("context[{}]: '{}' must be a string", i, k));
      return it->get<std::string>();
    };
    out.push_back(ContextEntry{text("description"), text("value")});
  }
  check_context(out, limits);
  return out;
}

TurnInput turn_input_from_agui(const json& in, std::string user_id, const InputLimits& limits) {
  check_json_depth(in, limits.max_json_depth, "RunAgentInput");
  if (!in.is_object()) throw Error(ErrorCode::invalid_argument, "RunAgentInput must be a JSON object");
  auto str = [&](const char* k) -> std::string {
    auto it = in.find(k);
    if (it == in.end() || !it->is_string())
      throw Error(ErrorCode::invalid_argument, fmt::format("RunAgentInput: '{}' must be a string", k));
    return it->get<std::string>();
  };
  TurnInput t;
  t.thread_id = str("threadId");
  t.run_id = str("runId");
  t.user_id = std::move(user_id);
  auto msgs = in.find("messages");
  if (msgs == in.end() || !msgs->is_array())
    throw Error(ErrorCode::invalid_argument, "RunAgentInput: 'messages' must be an array");
  if (msgs->size() > limits.max_input_messages)
    throw Error(ErrorCode::too_large,
                fmt::format("RunAgentInput: {} messages; the limit is {}", msgs->size(), limits.max_input_messages));
  const json* last_user = nullptr;
  for (const auto& m : *msgs)
    if (m.is_object())
      if (auto role = m.find("role"); role != m.end() && role->is_string() && *role == "user") last_user = &m;
  if (!last_user) throw Error(ErrorCode::invalid_argument, "RunAgentInput: no user message to answer");
  if (auto c = last_user->find("content"); c != last_user->end() && c->is_array() && c->size() > limits.max_input_parts)
    throw Error(ErrorCode::too_large, fmt::format("the user message has {} content parts; the limit is {}", c->size(),
                                                  limits.max_input_parts));
  t.message = message_from_json(*last_user, limits.max_json_depth);
  t.client_message_id = t.message.id;
  if (auto c = in.find("context"); c != in.end()) t.context = context_from_agui(*c, limits);
  if (auto s = in.find("state"); s != in.end() && !s->is_null()) {
    check_state(*s, limits);
    t.state = *s;
  }
  if (auto tools = in.find("tools"); tools != in.end()) t.client_tools = client_tools_from_agui(*tools, limits);
  return t;
}

std::vector<Decision> decisions_from_agui_resume(const json& resume, const InputLimits& limits) {
  check_json_depth(resume, limits.max_json_depth, "resume");
  if (!resume.is_array()) throw Error(ErrorCode::invalid_argument, "resume must be an array of entries");
  std::vector<Decision> out;
  for (const auto& r : resume) {
    if (!r.is_object() || !r.contains("interruptId") || !r["interruptId"].is_string())
      throw Error(ErrorCode::invalid_argument, "resume entry: needs a string 'interruptId'");
    Decision d;
    d.interrupt_id = r["interruptId"].get<std::string>();
    const auto st = r.find("status");
    const std::string status = st != r.end() && st->is_string() ? st->get<std::string>() : std::string();
    if (status == "cancelled") {
      d.action = Decision::Action::cancel;
    } else if (status == "resolved") {
      // payload: {approved?, editedArgs?, reason?}, or a bare boolean (approved), or absent (approves); for an
      // interrupt asking for input, the answer (approved: false declines).
      const auto p = r.find("payload");
      if (p != r.end() && p->is_boolean()) {
        d.action = p->get<bool>() ? Decision::Action::approve : Decision::Action::reject;
      } else if (p != r.end() && p->is_object()) {
        const auto ap = p->find("approved");
        if (ap != p->end() && !ap->is_boolean())
          throw Error(ErrorCode::invalid_argument, "resume payload: approved must be a boolean");
        d.action = ap == p->end() || ap->get<bool>() ? Decision::Action::approve : Decision::Action::reject;
        if (auto e = p->find("editedArgs"); e != p->end() && !e->is_null()) {
          if (!e->is_object()) throw Error(ErrorCode::invalid_argument, "resume payload: editedArgs must be an object");
          d.edited_args = *e;
        }
        if (auto rs = p->find("reason"); rs != p->end() && rs->is_string()) d.reason = rs->get<std::string>();
        // An interrupt asking for input (reason "input") takes the payload itself as the answer.
        d.response = *p;
        d.response->erase("approved");
      } else {
        d.action = Decision::Action::approve;
      }
    } else {
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("resume entry: status must be \"resolved\" or \"cancelled\", not '{}'", status));
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace v1
}  // namespace agentrt
