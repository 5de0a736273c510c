// The constructors of the events the runtime emits (agentrt/events.hpp); their JSON is src/wire/agui_codec.
#include <string>
#include <utility>

#include "agentrt/clock.hpp"
#include "agentrt/events.hpp"

namespace agentrt {
inline namespace v1 {
namespace events {
namespace {

// One field an event is made with: which member, and the value it takes.
template <class T>
struct Set {
  T Event::*member;
  T value;
};
template <class T>
Set(T Event::*, T) -> Set<T>;

template <class... T>
Event make(EventType type, Set<T>... fields) {
  Event e;
  e.type = type;
  e.timestamp = now_ms();
  ((e.*fields.member = std::move(fields.value)), ...);
  return e;
}

}  // namespace

Event run_started(std::string thread_id, std::string run_id, std::string parent_run_id) {
  return make(EventType::RUN_STARTED, Set{&Event::thread_id, std::move(thread_id)},
              Set{&Event::run_id, std::move(run_id)}, Set{&Event::parent_run_id, std::move(parent_run_id)});
}
Event run_finished(std::string thread_id, std::string run_id, json outcome, json usage) {
  return make(EventType::RUN_FINISHED, Set{&Event::thread_id, std::move(thread_id)},
              Set{&Event::run_id, std::move(run_id)}, Set{&Event::outcome, std::move(outcome)},
              Set{&Event::usage, std::move(usage)});
}
Event run_error(std::string message, std::string code) {
  return make(EventType::RUN_ERROR, Set{&Event::message, std::move(message)}, Set{&Event::code, std::move(code)});
}
Event step_started(std::string step) { return make(EventType::STEP_STARTED, Set{&Event::step_name, std::move(step)}); }
Event step_finished(std::string step) {
  return make(EventType::STEP_FINISHED, Set{&Event::step_name, std::move(step)});
}
Event text_start(std::string message_id) {
  return make(EventType::TEXT_MESSAGE_START, Set{&Event::message_id, std::move(message_id)},
              Set{&Event::role, std::string("assistant")});
}
Event text_content(std::string message_id, std::string delta) {
  return make(EventType::TEXT_MESSAGE_CONTENT, Set{&Event::message_id, std::move(message_id)},
              Set{&Event::delta, std::move(delta)});
}
Event text_end(std::string message_id, json metadata) {
  return make(EventType::TEXT_MESSAGE_END, Set{&Event::message_id, std::move(message_id)},
              Set{&Event::metadata, std::move(metadata)});
}
Event reasoning_start(std::string message_id) {
  return make(EventType::REASONING_START, Set{&Event::message_id, std::move(message_id)});
}
Event reasoning_message_start(std::string message_id) {
  return make(EventType::REASONING_MESSAGE_START, Set{&Event::message_id, std::move(message_id)},
              Set{&Event::role, std::string("reasoning")});
}
Event reasoning_content(std::string message_id, std::string delta) {
  return make(EventType::REASONING_MESSAGE_CONTENT, Set{&Event::message_id, std::move(message_id)},
              Set{&Event::delta, std::move(delta)});
}
Event reasoning_message_end(std::string message_id) {
  return make(EventType::REASONING_MESSAGE_END, Set{&Event::message_id, std::move(message_id)});
}
Event reasoning_end(std::string message_id) {
  return make(EventType::REASONING_END, Set{&Event::message_id, std::move(message_id)});
}
Event reasoning_encrypted_value(std::string subtype, std::string entity_id, std::string encrypted_value) {
  return make(EventType::REASONING_ENCRYPTED_VALUE, Set{&Event::subtype, std::move(subtype)},
              Set{&Event::entity_id, std::move(entity_id)}, Set{&Event::encrypted_value, std::move(encrypted_value)});
}
Event tool_call_start(std::string tool_call_id, std::string name, std::string parent_message_id) {
  return make(EventType::TOOL_CALL_START, Set{&Event::tool_call_id, std::move(tool_call_id)},
              Set{&Event::tool_call_name, std::move(name)},
              Set{&Event::parent_message_id, std::move(parent_message_id)});
}
Event tool_call_args(std::string tool_call_id, std::string delta) {
  return make(EventType::TOOL_CALL_ARGS, Set{&Event::tool_call_id, std::move(tool_call_id)},
              Set{&Event::delta, std::move(delta)});
}
Event tool_call_end(std::string tool_call_id) {
  return make(EventType::TOOL_CALL_END, Set{&Event::tool_call_id, std::move(tool_call_id)});
}
Event tool_call_result(std::string message_id, std::string tool_call_id, json content, json metadata) {
  return make(EventType::TOOL_CALL_RESULT, Set{&Event::message_id, std::move(message_id)},
              Set{&Event::tool_call_id, std::move(tool_call_id)}, Set{&Event::content, std::move(content)},
              Set{&Event::role, std::string("tool")}, Set{&Event::metadata, std::move(metadata)});
}
Event custom(std::string name, json value) {
  return make(EventType::CUSTOM, Set{&Event::name, std::move(name)}, Set{&Event::value, std::move(value)});
}
Event state_snapshot(json snapshot) {
  return make(EventType::STATE_SNAPSHOT, Set{&Event::snapshot, std::move(snapshot)});
}
Event state_delta(json patch) { return make(EventType::STATE_DELTA, Set{&Event::patch, std::move(patch)}); }

}  // namespace events
}  // namespace v1
}  // namespace agentrt
