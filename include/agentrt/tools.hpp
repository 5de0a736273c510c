// Tools: ToolSpec (schema, approval policy, stages, idempotency, timeout), completion handles, registry.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentrt/error.hpp"
#include "agentrt/jobs.hpp"
#include "agentrt/json.hpp"
#include "agentrt/json_schema.hpp"
#include "agentrt/model.hpp"
#include "agentrt/outputs.hpp"

namespace agentrt {
inline namespace v1 {

// Whether a call needs a person's approval before it runs.
struct ApprovalPolicy {
  enum class Mode { never, always, predicate };
  Mode mode = Mode::never;
  std::function<bool(const json& args)> predicate;  // Mode::predicate: true = needs approval

  static ApprovalPolicy never() { return {}; }
  static ApprovalPolicy always() { return {Mode::always, {}}; }
  static ApprovalPolicy when(std::function<bool(const json&)> p) { return {Mode::predicate, std::move(p)}; }
  bool requires_approval(const json& args) const;
};

// A user attachment a tool call names by its ref ("img_<hash>") in its arguments.
struct AttachmentRef {
  std::string ref;
  std::string bucket;
  std::string key;  // the object in the runtime's ObjectStore
  std::string mime_type;
  std::string url;  // signed, expiring
};

// What a tool is called with.
struct ToolCallContext {
  std::string thread_id, turn_id, run_id, user_id, stage;
  std::string tool_call_id;
  std::string tool_name;
  json args;
  std::vector<AttachmentRef> attachments;  // the thread's attachments its arguments name
  // The id the call's job gets if the tool answers with start_job (hand it to the system doing the work, so
  // it can report back with Runtime::complete_job). The same id when the call runs again after the person
  // confirmed the job; `job_confirmed` is then true: start the work now.
  std::string job_id;
  bool job_confirmed = false;
  // The thread's shared state (AG-UI state) when the call started: {} when the thread has none. A tool changes it
  // by answering with ToolResult::state_delta.
  json state = json::object();
  // The person's answer when the call runs again after it asked for input (ToolCompletion::need_input):
  // {action: "accept" | "decline" | "cancel", content (accept: the answer, valid for the request's schema),
  //  state (what the tool kept with the request)}. Null on a first run.
  json input;
  // The W3C traceparent of the call's span ("" when tracing is off): pass it on to what the tool calls, so their
  // traces join the turn's (MCP tools send it as _meta.traceparent and, over HTTP, as the traceparent header).
  std::string traceparent;
};

// What a running call asks of a person (ToolCompletion::need_input): its turn pauses with an interrupt
// {reason: "input_required" (AG-UI 1.0), message, responseSchema: schema}, and the call runs again with the answer in
// ToolCallContext::input.
struct InputRequest {
  std::string message;
  json schema = json{{"type", "object"}};  // the answer's JSON Schema (an object schema)
  json state;  // kept with the call (it travels in the interrupt's metadata.inputState) and handed back
};

// A file a tool produced (an image, say): stored as an attachment of the thread (the upload limits and types apply),
// listed in the tool message's metadata.media (history gives each a signed url) and shown to the model with the
// result.
struct ToolMedia {
  std::string mime_type;
  std::string bytes;
  // Where the result holds the same bytes (a JSON Pointer, e.g. "/content/1/data"; "" = nowhere): once the file is
  // stored, that field is replaced by the file's "ref" (the payload and the model then carry the file once). A file
  // that cannot be stored stays where it was.
  std::string result_pointer;
};

// A successful tool outcome.
struct ToolResult {
  ToolResult() = default;
  ToolResult(json r, std::optional<UiSchema> card = std::nullopt, json delta = nullptr, std::vector<ToolMedia> m = {})
      : result(std::move(r)), ui(std::move(card)), state_delta(std::move(delta)), media(std::move(m)) {}
  json result;
  std::optional<UiSchema> ui;
  // A change of the thread's shared state: an RFC 6902 JSON Patch applied to ToolCallContext::state, streamed as
  // STATE_DELTA and committed with the result. Null: none. One that does not apply, or leaves a state over the
  // runtime's limits, fails the call with code "invalid_state_delta" (the state is unchanged).
  json state_delta;
  std::vector<ToolMedia> media;  // files it produced (see ToolMedia); one that cannot be stored is named in the log
};

// The one-shot completion of a tool call. Copies share the state; the first complete()/fail() wins and
// later ones return false. Thread-safe: complete from any thread, now or later.
class ToolCompletion {
 public:
  ToolCompletion();
  bool complete(ToolResult result);
  bool fail(std::string code, std::string message);
  // Answers "started job ToolCallContext::job_id" instead of a result (see jobs.hpp). The call's tool result
  // says the job runs; the job's outcome reaches the thread's history when the host completes it.
  bool start_job(JobStart job);
  // Answers "ask a person first": the call pauses until its turn is resumed (see InputRequest). The call is not
  // finished: it runs again with the answer, also when the person declines or cancels.
  bool need_input(InputRequest request);
  bool done() const;
  // Reports how far the call has got while it runs (an object, e.g. {progress, total, message}): streamed as
  // CUSTOM agentrt.tool_progress {toolCallId, progress...} while the runtime waits for the call. Reports that
  // arrive faster than the runtime streams them are coalesced (the latest wins). False once the call is done, or
  // for a value that is not an object.
  bool progress(json report);
  // Waits until completed, the deadline passes, or `cancel` fires. Returns false on timeout/cancel.
  bool wait_until(std::chrono::steady_clock::time_point deadline, const CancelToken& cancel) const;
  // As wait_until, but also returns (true) when a progress report is waiting: take it with take_progress().
  enum class Wake { done, progress, deadline, cancelled };
  Wake wait_news(std::chrono::steady_clock::time_point deadline, const CancelToken& cancel) const;
  std::optional<json> take_progress();
  struct Outcome {
    bool ok = false;
    ToolResult result;
    ToolError error;
    std::optional<JobStart> job;        // ok and the tool started a job
    std::optional<InputRequest> input;  // ok and the tool asks a person first
  };
  Outcome outcome() const;  // valid once done()
  // The outcome moved out (valid once done(); later calls find it empty): what the runtime reads, so that a
  // result is never copied before its nesting is checked.
  Outcome take_outcome();

 private:
  struct State;
  template <class Set>
  bool settle(Set&& set);  // the first settlement wins (tools.cpp)
  std::shared_ptr<State> state_;
};

// Called on a runtime worker thread. It may complete the call before returning (synchronous tools) or
// keep the completion and complete it later from any thread. An exception thrown by the handler fails
// the call with code "tool_error" (agentrt::Error keeps its message).
using ToolHandler = std::function<void(const ToolCallContext& call, ToolCompletion completion)>;

// Wraps a synchronous function: its return value completes the call, an exception fails it.
ToolHandler sync_tool(std::function<ToolResult(const ToolCallContext&)> fn);

struct ToolSpec {
  std::string name;  // [A-Za-z0-9_-]{1,64}
  std::string description;
  json parameters = json{{"type", "object"}, {"properties", json::object()}};
  ApprovalPolicy approval;
  std::vector<std::string> stages = {"execution"};  // the stages it is offered in
  bool idempotent = false;  // safe to run again after a crash (and needs no commit before it runs)
  std::chrono::milliseconds timeout{30000};
  ToolHandler handler;
  // Optional: called (on the run's thread) when the runtime stops waiting for a call its handler has not completed
  // -- its timeout passed (reason "timeout") or its turn was cancelled ("cancelled") -- so the tool can stop the
  // work it started. Exceptions are logged and ignored.
  std::function<void(const ToolCallContext& call, std::string_view reason)> on_abandon;
};

// Thread-safe: registration and lookup under one mutex; specs are immutable once added.
class ToolRegistry {
 public:
  // Throws Error(invalid_argument) for a bad name, a schema that does not compile, or no handler;
  // Error(conflict) when the name is taken.
  void add(ToolSpec spec);
  bool remove(std::string_view name);
  struct Entry {
    ToolSpec spec;
    JsonSchema schema;
  };
  std::shared_ptr<const Entry> find(std::string_view name) const;
  // The tools offered in `stage`, optionally narrowed to `allowed` names, sorted by name.
  std::vector<std::shared_ptr<const Entry>> offered(std::string_view stage,
                                                    const std::optional<std::vector<std::string>>& allowed) const;
  std::vector<ToolDefinition> definitions(std::string_view stage,
                                          const std::optional<std::vector<std::string>>& allowed) const;
  // How many times add() and remove() have changed the registry: the same count, the same tools.
  uint64_t generation() const;

 private:
  mutable std::mutex mutex_;
  uint64_t generation_ = 0;
  std::map<std::string, std::shared_ptr<const Entry>, std::less<>> tools_;
};

}  // namespace v1
}  // namespace agentrt
