// The context builder: what the model sees, within a size budget.
#pragma once

#include <string>
#include <vector>

#include <map>

#include "agentrt/content.hpp"
#include "agentrt/outputs.hpp"
#include "agentrt/runtime.hpp"
#include "agentrt/storage.hpp"

namespace agentrt {
inline namespace v1 {

struct ContextInput {
  std::string system_prompt;
  std::vector<std::string> system_notes;  // appended to the system prompt
  std::string turn_id;                    // the current turn: its messages are always included
  size_t budget_chars = 200000;
};

// System prompt first; then the current turn's messages (always, its tool results in full from the
// ledger); then older history, newest first, as long as it fits the budget. An assistant message with
// tool calls and its tool results are kept or dropped together, and the kept history is contiguous.
// `full_results`: the current turn's tool results as the model reads them, by tool call id.
std::vector<Message> build_context(const ContextInput& in, const std::vector<MessageRecord>& history,
                                   const std::map<std::string, std::string>& full_results);
// The same, written over `out` (whatever it held: every message of it is set whole). Its messages keep their
// strings' room, so a stage that rebuilds its request for each model call reuses the same memory instead of
// freeing and allocating every message again.
void build_context(const ContextInput& in, const std::vector<MessageRecord>& history,
                   const std::map<std::string, std::string>& full_results, std::vector<Message>& out);

// The system message's section that gives the model a run's context (AG-UI Context entries): a heading line
// (kRunContextHeading, model.hpp), then one line per entry, "- <description>: <value>" (line breaks kept).
std::string context_section(const std::vector<ContextEntry>& context);

// What the model reads as a tool's result in the turn that ran it: the whole result (or the error), not the
// summary.
std::string model_result_text(const ToolAgentOutput& out);

// The size the budget counts for one message (text, parts, tool-call arguments).
size_t context_size(const Message& m);

}  // namespace v1
}  // namespace agentrt
