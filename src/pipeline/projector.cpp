// Events to history messages (see projector.hpp for which event carries which message).
#include "pipeline/projector.hpp"

#include <fmt/format.h>

#include "pipeline/facts.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

constexpr std::string_view kFacts = "agentrt";

// The event's metadata without the runtime's part: what a message keeps (null when nothing is left). Copied
// member by member, the runtime's part left out, not copied whole and erased.
json message_metadata(const json& metadata) {
  if (!metadata.is_object()) return nullptr;
  json out = json::object();
  auto& members = out.get_ref<json::object_t&>();
  for (const auto& [key, value] : metadata.get_ref<const json::object_t&>())
    if (key != kFacts) members.emplace_hint(members.end(), key, value);
  return members.empty() ? json(nullptr) : out;
}

}  // namespace

const json* runtime_facts(const Event& e) {
  if (!e.metadata.is_object()) return nullptr;
  auto it = e.metadata.find(kFacts);
  return it != e.metadata.end() && it->is_object() ? &*it : nullptr;
}

Projector::Projector(std::string thread_id) : thread_id_(std::move(thread_id)) {}

std::optional<std::string> Projector::take_state() {
  if (!state_changed_) return std::nullopt;
  state_changed_ = false;
  return state_.dump();
}

void Projector::begin_run(const std::string& run_id, const std::string& turn_id) { turn_of_run_[run_id] = turn_id; }

const std::string& Projector::turn_of(const std::string& run_id) const {
  static const std::string none;
  auto it = turn_of_run_.find(run_id);
  return it == turn_of_run_.end() ? none : it->second;
}

MessageRecord Projector::record(const std::string& run_id, Message m) const {
  return MessageRecord{thread_id_, 0, turn_of(run_id), run_id, std::move(m)};
}

void Projector::step_started(const std::string& run_id, std::string_view step) { step_of_run_[run_id] = step; }

Projector::OpenMessage& Projector::open(std::string_view message_id) {
  auto it = open_.find(message_id);
  if (it == open_.end()) it = open_.emplace(std::string(message_id), OpenMessage{}).first;
  return it->second;
}

void Projector::text_start(std::string_view message_id) { open(message_id); }

void Projector::text_content(std::string_view message_id, std::string_view delta) {
  open(message_id).content.append(delta);
}

void Projector::tool_call_start(std::string_view tool_call_id, std::string_view name,
                                std::string_view parent_message_id) {
  open(parent_message_id).calls.push_back(OpenCall{std::string(tool_call_id), std::string(name), {}});
  message_of_call_[std::string(tool_call_id)] = std::string(parent_message_id);
}

void Projector::tool_call_args(std::string_view tool_call_id, std::string_view delta) {
  auto m = message_of_call_.find(tool_call_id);
  if (m == message_of_call_.end()) return;
  for (auto& c : open(m->second).calls)
    if (c.id == tool_call_id) c.arguments.append(delta);
}

// `facts`: metadata.agentrt.message of the event that ends the message: toolCalls (the calls the message holds,
// in order: an id, or {id, name?, arguments?} where the final answer differs from what was streamed, with the
// ledger's facts), and content where the final text differs from what was streamed.
std::optional<MessageRecord> Projector::complete(const std::string& run_id, const std::string& message_id,
                                                 const json& facts, json metadata) {
  OpenMessage streamed;
  if (auto it = open_.find(message_id); it != open_.end()) {
    streamed = std::move(it->second);
    open_.erase(it);
  }
  for (const auto& c : streamed.calls) message_of_call_.erase(c.id);
  Message m;
  m.id = message_id;
  m.role = Role::assistant;
  auto content = facts.find("content");
  m.content = content != facts.end() && content->is_string() ? content->get<std::string>() : streamed.content;
  m.has_content = !m.content.empty();
  m.encrypted_value = std::move(streamed.encrypted_value);
  auto ids = facts.find("toolCalls");
  const bool has_calls = ids != facts.end() && ids->is_array();
  if (has_calls) {
    for (const auto& listed : *ids) {
      const std::string call_id = listed.is_string() ? listed.get<std::string>() : projection::text_of(listed, "id");
      if (call_id.empty()) continue;
      ToolCall call{call_id, {}, {}};
      for (const auto& c : streamed.calls)
        if (c.id == call_id) {
          call.name = c.name;
          call.arguments = c.arguments;
        }
      if (listed.is_object()) {
        if (auto n = listed.find("name"); n != listed.end() && n->is_string()) call.name = *n;
        if (auto a = listed.find("arguments"); a != listed.end() && a->is_string()) call.arguments = *a;
      }
      m.tool_calls.push_back(std::move(call));
    }
  }
  m.metadata = std::move(metadata);
  if (has_calls) requested(run_id, m, *ids);
  return record(run_id, std::move(m));
}

MessageRecord Projector::tool_call_result(const std::string& run_id, const std::string& message_id,
                                          const std::string& tool_call_id, std::string content, json facts,
                                          const ToolOutcome* result) {
  if (result) outcome(run_id, tool_call_id, *result);
  Message m;
  m.id = message_id;
  m.role = Role::tool;
  m.content = std::move(content);
  m.tool_call_id = tool_call_id;
  if (facts.is_object()) {
    m.error = projection::text_of(facts, "error");
    if (auto meta = facts.find("metadata"); meta != facts.end() && meta->is_object()) m.metadata = std::move(*meta);
  }
  return record(run_id, std::move(m));
}

std::optional<MessageRecord> Projector::run_started(const std::string& run_id, const std::string& turn_id,
                                                    const Message* input) {
  if (!turn_id.empty()) begin_run(run_id, turn_id);
  if (!input) return std::nullopt;
  return record(run_id, *input);
}

std::optional<MessageRecord> Projector::apply(const std::string& run_id, Event&& e) {
  if (e.type != EventType::TEXT_MESSAGE_END || !e.metadata.is_object())
    return apply(run_id, static_cast<const Event&>(e));
  // What message_metadata() would copy is what is left once the facts are taken out.
  auto& members = e.metadata.get_ref<json::object_t&>();
  auto it = members.find(kFacts);
  if (it == members.end() || !it->second.is_object() || !it->second.contains("message")) return std::nullopt;
  const json facts = std::move(it->second);
  members.erase(it);
  return complete(run_id, e.message_id, facts["message"], members.empty() ? json(nullptr) : std::move(e.metadata));
}

std::optional<MessageRecord> Projector::apply(const std::string& run_id, const Event& e) {
  const json* facts = runtime_facts(e);
  switch (e.type) {
    case EventType::RUN_STARTED: {
      if (!facts) return std::nullopt;
      const std::string turn_id = projection::text_of(*facts, "turnId");
      if (auto d = facts->find("decision"); d != facts->end() && !turn_id.empty()) {
        begin_run(run_id, turn_id);
        decided(run_id, turn_id, *d);
      }
      turn_started(run_id, turn_id, e);
      auto input = facts->find("message");
      if (input == facts->end()) return run_started(run_id, turn_id, nullptr);
      const Message m = input->get<Message>();
      return run_started(run_id, turn_id, &m);
    }
    case EventType::STEP_STARTED:
      step_started(run_id, e.step_name);
      turn_step(run_id, e.step_name);
      return std::nullopt;
    case EventType::RUN_FINISHED:
      interrupted(run_id, e.outcome);
      turn_ended(run_id, e);
      return std::nullopt;
    case EventType::CUSTOM:
      if (e.name == kToolAnswerEvent) {
        auto result = outcome_of(e);
        return tool_call_result(run_id, projection::text_of(e.value, "messageId"),
                                projection::text_of(e.value, "toolCallId"), projection::text_of(e.value, "content"),
                                facts ? *facts : json(nullptr), result ? &*result : nullptr);
      }
      if (e.name == "agentrt.started") started(run_id, e.value);
      if (e.name == "agentrt.intent") turn_intent(run_id, e.value);
      if (e.name == "agentrt.job") job_changed(e.value);
      return std::nullopt;
    case EventType::STATE_SNAPSHOT:
      state_ = e.snapshot;
      state_changed_ = true;
      return std::nullopt;
    case EventType::STATE_DELTA:
      // The runtime emits only a delta it has applied to the same state: this one applies too.
      state_ = state_.patch(e.patch);
      state_changed_ = true;
      return std::nullopt;
    case EventType::TEXT_MESSAGE_START: text_start(e.message_id); return std::nullopt;
    case EventType::TEXT_MESSAGE_CONTENT: text_content(e.message_id, e.delta); return std::nullopt;
    case EventType::TOOL_CALL_START:
      tool_call_start(e.tool_call_id, e.tool_call_name, e.parent_message_id);
      return std::nullopt;
    case EventType::TOOL_CALL_ARGS: tool_call_args(e.tool_call_id, e.delta); return std::nullopt;
    case EventType::REASONING_ENCRYPTED_VALUE:
      // A message's provider state arrives before the event that completes the message.
      if (e.subtype == "message") open(e.entity_id).encrypted_value = e.encrypted_value;
      return std::nullopt;
    case EventType::TEXT_MESSAGE_END: {
      if (!facts || !facts->contains("message")) return std::nullopt;
      return complete(run_id, e.message_id, (*facts)["message"], message_metadata(e.metadata));
    }
    case EventType::TOOL_CALL_END: {
      if (!facts || !facts->contains("message")) return std::nullopt;
      auto m = message_of_call_.find(e.tool_call_id);
      if (m == message_of_call_.end()) return std::nullopt;
      const std::string message_id = m->second;
      return complete(run_id, message_id, (*facts)["message"], nullptr);
    }
    case EventType::TOOL_CALL_RESULT: {
      auto result = outcome_of(e);
      return tool_call_result(run_id, e.message_id, e.tool_call_id,
                              e.content.is_string() ? e.content.get<std::string>() : e.content.dump(),
                              facts ? *facts : json(nullptr), result ? &*result : nullptr);
    }
    case EventType::RUN_ERROR: {
      turn_ended(run_id, e);
      if (!facts) return std::nullopt;
      auto id = projection::text_of(*facts, "messageId");
      if (id.empty()) return std::nullopt;
      Message m;
      m.id = id;
      m.role = Role::system;
      m.content = fmt::format("ERROR {}: {}", e.code, e.message);
      return record(run_id, std::move(m));
    }
    default: return std::nullopt;
  }
}

}  // namespace v1
}  // namespace agentrt
