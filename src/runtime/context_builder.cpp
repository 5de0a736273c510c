#include "runtime/context_builder.hpp"

#include <algorithm>

namespace agentrt {
inline namespace v1 {

size_t context_size(const Message& m) {
  size_t n = 16 + m.content.size();
  for (const auto& p : m.parts) n += p.text.size() + (p.source ? 64 : 0);
  for (const auto& c : m.tool_calls) n += c.name.size() + c.arguments.size() + c.id.size();
  return n;
}

namespace {

// What the model reads as a tool's result in the turn that ran it: the whole result, not the summary.
std::string full_result_text(const json& output) {
  if (!output.is_object()) return {};
  const json& err = output.contains("error") ? output["error"] : json();
  if (err.is_object() && !err.empty())
    return json{{"error", err}, {"status", output.value("status", "failed")}}.dump(-1, ' ', false,
                                                                                   json::error_handler_t::replace);
  const json& r = output.contains("result") ? output["result"] : json();
  if (r.is_string()) return r.get<std::string>();
  return r.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

std::vector<Message> build_context(const ContextInput& in, const std::vector<MessageRecord>& history,
                                   const std::vector<LedgerEntry>& ledger) {
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
  for (size_t i = first_current; i < history.size(); ++i) {
    Message m = history[i].message;
    if (m.role == Role::tool && history[i].turn_id == in.turn_id) {
      for (const auto& l : ledger)
        if (l.tool_call_id == m.tool_call_id && !l.output.is_null()) {
          m.content = full_result_text(l.output);
          m.parts.clear();
          break;
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
    while (j > 0 && history[j - 1].message.role == Role::tool) --j;
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
    if (g.front()->role == Role::tool) break;
    used += size;
    kept.insert(kept.begin(), g.begin(), g.end());
  }
  out.push_back(std::move(sys));
  for (const auto* m : kept) out.push_back(*m);
  for (auto& m : current) out.push_back(std::move(m));
  return out;
}

}  // namespace v1
}  // namespace agentrt
