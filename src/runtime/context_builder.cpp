#include "runtime/context_builder.hpp"

#include <algorithm>

#include "agentrt/events.hpp"

namespace agentrt {
inline namespace v1 {

std::string context_section(const std::vector<ContextEntry>& context) {
  std::string out(kRunContextHeading);
  for (const auto& c : context) {
    out += "\n- ";
    out += c.description;
    out += ": ";
    out += c.value;
  }
  return out;
}

size_t context_size(const Message& m) {
  size_t n = 16 + m.content.size();
  for (const auto& p : m.parts) n += p.text.size() + (p.source ? 64 : 0);
  for (const auto& c : m.tool_calls) n += c.name.size() + c.arguments.size() + c.id.size();
  return n;
}

std::string model_result_text(const ToolAgentOutput& out) {
  if (out.error) {
    std::string t = "{\"status\":\"";
    t += to_string(out.status);
    t += "\",\"error\":{\"code\":";
    append_json_string(t, out.error->code);
    t += ",\"message\":";
    append_json_string(t, out.error->message);
    t += "}}";
    return t;
  }
  if (out.result.is_string()) return out.result.get<std::string>();
  std::string t;
  append_json(t, out.result);
  return t;
}

namespace {
// A job's outcome in history: a tool-result style message answering a call that already has its result
// ("started job J"). Models take one result per call, so the model reads it as a system note instead.
bool is_job_note(const Message& m) {
  return m.role == Role::tool && m.metadata.is_object() && m.metadata.contains("job_id");
}

bool is_tool_result(const Message& m) { return m.role == Role::tool && !is_job_note(m); }

// The message without its metadata: providers never send metadata, and copying it is most of the cost.
Message for_model(const Message& m) {
  Message out;
  out.id = m.id;
  if (is_job_note(m)) {
    out.role = Role::system;
    out.content = m.content;
    out.has_content = true;
    return out;
  }
  out.role = m.role;
  out.content = m.content;
  out.parts = m.parts;
  out.has_content = m.has_content;
  out.tool_calls = m.tool_calls;
  out.tool_call_id = m.tool_call_id;
  out.name = m.name;
  out.error = m.error;
  out.encrypted_value = m.encrypted_value;  // the provider's own state for its answer (thinking signatures)
  // A tool's files (shown to the model after the tool messages; see AttachmentFlow::media_for_model).
  if (m.role == Role::tool && m.metadata.is_object())
    if (auto media = m.metadata.find("media"); media != m.metadata.end())
      out.metadata = json{{"media", *media}, {"tool_name", m.metadata.value("tool_name", "")}};
  return out;
}
}  // namespace

std::vector<Message> build_context(const ContextInput& in, const std::vector<MessageRecord>& history,
                                   const std::map<std::string, std::string>& full_results) {
  std::vector<Message> out;
  Message sys;
  sys.id = "system";
  sys.role = Role::system;
  sys.content = in.system_prompt;
  for (const auto& n : in.system_notes) {
    if (!sys.content.empty()) sys.content += "\n\n";
    sys.content += n;
  }
  size_t used = context_size(sys);

  // The current turn starts at its first message; everything from there on is always sent.
  size_t first_current = history.size();
  for (size_t i = 0; i < history.size(); ++i)
    if (history[i].turn_id == in.turn_id) {
      first_current = i;
      break;
    }
  std::vector<Message> current;
  current.reserve(history.size() - first_current);
  for (size_t i = first_current; i < history.size(); ++i) {
    Message m = for_model(history[i].message);
    if (m.role == Role::tool && history[i].turn_id == in.turn_id) {  // (job notes are system messages now)
      auto it = full_results.find(m.tool_call_id);
      if (it != full_results.end()) {
        m.content = it->second;
        m.parts.clear();
      }
    }
    used += context_size(m);
    current.push_back(std::move(m));
  }

  // Older history in groups, newest first: a group is a message, or an assistant message with tool calls
  // together with the tool results that follow it.
  std::vector<std::vector<const Message*>> groups;
  size_t i = first_current;
  while (i > 0) {
    std::vector<const Message*> g;
    size_t j = i;
    while (j > 0 && is_tool_result(history[j - 1].message)) --j;
    if (j < i && j > 0 && history[j - 1].message.role == Role::assistant && !history[j - 1].message.tool_calls.empty())
      --j;
    if (j == i) --j;  // a single message
    for (size_t k = j; k < i; ++k) g.push_back(&history[k].message);
    groups.push_back(std::move(g));
    i = j;
  }
  std::vector<const Message*> kept;
  for (const auto& g : groups) {
    size_t size = 0;
    for (const auto* m : g) size += context_size(*m);
    if (used + size > in.budget_chars) break;
    // Tool results without their assistant call (cut history) would confuse a model: skip such groups.
    if (is_tool_result(*g.front())) break;
    used += size;
    kept.insert(kept.begin(), g.begin(), g.end());
  }
  out.reserve(1 + kept.size() + current.size());
  out.push_back(std::move(sys));
  for (const auto* m : kept) out.push_back(for_model(*m));
  for (auto& m : current) out.push_back(std::move(m));
  return out;
}

}  // namespace v1
}  // namespace agentrt
