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

namespace {
// The size the budget counts for a message of this much text, these parts and tool calls (null: none).
size_t size_of(size_t content_chars, const std::vector<ContentPart>* parts, const std::vector<ToolCall>* calls) {
  size_t n = 16 + content_chars;
  if (parts)
    for (const auto& p : *parts) n += p.text.size() + (p.source ? 64 : 0);
  if (calls)
    for (const auto& c : *calls) n += c.name.size() + c.arguments.size() + c.id.size();
  return n;
}
}  // namespace

size_t context_size(const Message& m) { return size_of(m.content.size(), &m.parts, &m.tool_calls); }

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

// `out` (whatever it held) made a system message of its id and text alone, its text set by `text`.
template <class Text>
void make_system(Message& out, std::string_view id, Text&& text) {
  out.id = id;
  out.role = Role::system;
  text(out.content);
  out.parts.clear();
  out.has_content = true;
  out.tool_calls.clear();
  out.tool_call_id.clear();
  out.name.clear();
  out.error.clear();
  out.encrypted_value.clear();
  out.metadata = nullptr;
}

// The message as a model reads it, written over `out`: without its metadata (providers never send metadata,
// and copying it is most of the cost). Every field is set, so `out` may hold any message before; its strings and
// lists keep their room (a stage's requests are rebuilt in the same messages call after call).
void assign_for_model(Message& out, const Message& m) {
  if (is_job_note(m)) return make_system(out, m.id, [&](std::string& content) { content = m.content; });
  out.id = m.id;
  out.metadata = nullptr;
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
}
}  // namespace

void build_context(const ContextInput& in, const std::vector<MessageRecord>& history,
                   const std::map<std::string, std::string>& full_results, std::vector<Message>& out) {
  // The current turn starts at its first message; everything from there on is always sent.
  size_t first_current = history.size();
  for (size_t i = 0; i < history.size(); ++i)
    if (history[i].turn_id == in.turn_id) {
      first_current = i;
      break;
    }
  // The text a current tool message is sent with: its result in full, from the ledger (null: its own).
  auto full_result = [&](size_t i) -> const std::string* {
    const Message& m = history[i].message;
    if (!is_tool_result(m) || history[i].turn_id != in.turn_id) return nullptr;
    auto it = full_results.find(m.tool_call_id);
    return it == full_results.end() ? nullptr : &it->second;
  };
  size_t system_chars = in.system_prompt.size();  // the system message's text: the prompt, then the notes
  for (const auto& n : in.system_notes) system_chars += (system_chars ? 2 : 0) + n.size();
  size_t used = size_of(system_chars, nullptr, nullptr);
  // The current messages' sizes as the model reads them (a job note without its parts and calls, a full result
  // without the summary's parts): they decide how much older history fits.
  for (size_t i = first_current; i < history.size(); ++i) {
    const Message& m = history[i].message;
    const std::string* full = full_result(i);
    used += is_job_note(m) ? size_of(m.content.size(), nullptr, nullptr)
                           : size_of((full ? *full : m.content).size(), full ? nullptr : &m.parts, &m.tool_calls);
  }

  // Older history in groups, newest first: a group is a message, or an assistant message with tool calls
  // together with the tool results that follow it. The kept ones are the history from `first_kept` on.
  size_t first_kept = first_current;
  for (size_t i = first_current; i > 0;) {
    size_t j = i;
    while (j > 0 && is_tool_result(history[j - 1].message)) --j;
    if (j < i && j > 0 && history[j - 1].message.role == Role::assistant && !history[j - 1].message.tool_calls.empty())
      --j;
    if (j == i) --j;  // a single message
    size_t size = 0;
    for (size_t k = j; k < i; ++k) size += context_size(history[k].message);
    if (used + size > in.budget_chars) break;
    // Tool results without their assistant call (cut history) would confuse a model: skip such groups.
    if (is_tool_result(history[j].message)) break;
    used += size;
    first_kept = j;
    i = j;
  }

  // System prompt, kept history, current turn: each message written over the one `out` holds there.
  const size_t count = 1 + history.size() - first_kept;
  // A list that grows (a stage's next call) gets room for a few more calls; a new one only what it holds (one of
  // 1 KiB or more costs glibc far more to allocate than a smaller one).
  if (out.capacity() < count) out.reserve(out.empty() ? count : count + count / 2 + 4);
  out.resize(count);
  make_system(out[0], "system", [&](std::string& content) {
    content = in.system_prompt;
    for (const auto& n : in.system_notes) {
      if (!content.empty()) content += "\n\n";
      content += n;
    }
  });
  for (size_t i = first_kept; i < history.size(); ++i) {
    Message& m = out[1 + i - first_kept];
    assign_for_model(m, history[i].message);
    if (i < first_current) continue;
    if (const std::string* full = full_result(i)) {
      m.content = *full;
      m.parts.clear();
    }
  }
}

std::vector<Message> build_context(const ContextInput& in, const std::vector<MessageRecord>& history,
                                   const std::map<std::string, std::string>& full_results) {
  std::vector<Message> out;
  build_context(in, history, full_results, out);
  return out;
}

}  // namespace v1
}  // namespace agentrt
