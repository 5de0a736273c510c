// Runtime: the facade hosts use — start turns, resume with decisions, cancel, subscribe, read history.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentrt/attachments.hpp"
#include "agentrt/budgets.hpp"
#include "agentrt/content.hpp"
#include "agentrt/events.hpp"
#include "agentrt/jobs.hpp"
#include "agentrt/json.hpp"
#include "agentrt/json_limits.hpp"
#include "agentrt/log.hpp"
#include "agentrt/mcp.hpp"
#include "agentrt/model.hpp"
#include "agentrt/stages.hpp"
#include "agentrt/storage.hpp"
#include "agentrt/summary.hpp"
#include "agentrt/tools.hpp"
#include "agentrt/tracing.hpp"

namespace agentrt {
inline namespace v1 {

struct RuntimeConfig {
  std::shared_ptr<Store> store;          // required
  std::shared_ptr<ObjectStore> objects;  // optional (tool payloads, uploads)
  std::shared_ptr<ModelProvider> model;  // required
  StagePolicies stages;
  int workers = 2;    // threads that run turns
  int max_steps = 8;  // model calls per turn in the execution stage
  std::chrono::milliseconds approval_timeout{24LL * 3600 * 1000};
  size_t context_budget_chars = 200000;            // the model input's size budget (characters)
  std::chrono::milliseconds flush_interval{10};    // longest a streamed delta waits for its commit
  std::chrono::milliseconds sweep_interval{500};   // expiry and crash-recovery sweeper period
  std::chrono::milliseconds instance_lease{5000};  // a runtime whose heartbeat is older is dead
  size_t max_input_bytes = 1 << 20;                // a turn's input message as stored (serialised, metadata included)
  // A commit that fails for a transient reason (an I/O error, a full disk, a busy database) is tried this many
  // more times, commit_retry_backoff apart (doubled each time), before its run ends with RUN_ERROR
  // {code:"storage"}. The run holds its events meanwhile: none is shown before it is committed.
  int commit_retries = 2;
  std::chrono::milliseconds commit_retry_backoff{20};
  // Hostile-input limits (too_large / invalid_argument past them): the nesting of any JSON that enters
  // (arguments, tool results, model tool-call arguments, job payloads; 1..kMaxConfigurableJsonDepth), the
  // content parts of an input message, the messages of an AG-UI RunAgentInput.
  size_t max_json_depth = kDefaultMaxJsonDepth;
  size_t max_input_parts = 64;
  size_t max_input_messages = 4096;
  // A run's context (TurnInput::context, AG-UI RunAgentInput.context): at most this many entries, of at most
  // this many bytes together (descriptions and values).
  size_t max_context_entries = 64;
  size_t max_context_bytes = 64 * 1024;
  // A thread's shared state (AG-UI state) as JSON text: at most this many bytes (its nesting: max_json_depth).
  size_t max_state_bytes = 256 * 1024;
  // A run's client tools (TurnInput::client_tools, AG-UI RunAgentInput.tools): at most this many, of at most
  // this many bytes together (names, descriptions and parameter schemas as JSON text). A client tool's answer
  // (ToolAnswer::content and error) is limited by max_input_bytes.
  size_t max_client_tools = 64;
  size_t max_client_tools_bytes = 256 * 1024;
  LogSink log;
  LogLevel log_level = LogLevel::info;
  std::shared_ptr<Summarizer> summarizer;  // default: Summarizer{}
  // Tools registered before the runtime recovers anything. Turns a dead process left in RESUMING are taken
  // over at the first sweep (sweep_interval after construction), so tools added with tools().add() right
  // after construction are there too.
  std::vector<ToolSpec> tools;
  std::string instance_id;                    // default: random
  AttachmentLimits attachment_limits;         // per uploaded or inline file
  size_t max_attachments = 8;                 // media parts per user message
  std::chrono::seconds signed_url_ttl{3600};  // lifetime of URLs handed out by history() and upload()
  bool model_images_as_urls = false;          // false: images reach the model inline (data URLs)
  // A job still queued or running this long after it started fails with code "timeout" (JobStart::timeout
  // overrides it per job).
  std::chrono::milliseconds job_timeout{24LL * 3600 * 1000};
  // Called once a started job is cancelled (cancel_job) or has expired, so the host stops the work: on the
  // thread that cancelled it, or on the sweeper's. Not called for a job that never started (its confirmation
  // was declined, expired or its turn cancelled). Exceptions are logged and ignored.
  std::function<void(const JobRecord&)> job_cancel_hook;
  // MCP servers whose tools the model is offered (see mcp.hpp). The runtime starts them when it is constructed
  // (and returns once each is ready or has failed its first start; one that fails is tried again with backoff) and
  // stops them when it is destroyed.
  std::vector<McpServerConfig> mcp_servers;
  // Where the MCP tools' pinned definition hashes are kept ("" = in memory: a restart pins what it then finds).
  std::string mcp_pins_path;
  // Hard limits per turn, thread and user, checked before each model call and each batch of tool calls against
  // the turn's spend and what the thread's and user's other turns committed (so a restart or another process on
  // the store sees it). A turn that would pass one ends with RUN_ERROR {code: "budget_exceeded"} naming it.
  Budgets budgets;
  // Prices per model (cost in RUN_FINISHED, in Runtime::spend and in cost budgets).
  ModelPrices prices;
  // OpenTelemetry traces of runs, model and tool calls, approval waits and jobs (off by default; see tracing.hpp).
  // The runtime owns the export thread and flushes it, within tracing.export_timeout, when it is destroyed.
  TracingConfig tracing;
};

// A stored user upload (bytes under agent-inputs/{user}/{thread}/uploads/{id}).
struct Upload {
  std::string id;  // the upload id: a `file` source's value
  std::string bucket;
  std::string key;
  std::string url;  // signed, expiring
  std::string mime_type;
  uint64_t size = 0;
  int64_t expires_at = 0;  // the URL's expiry, ms
  std::string ref;         // "img_<hash>": how the model names it
};

// Something the application tells the model for one run (AG-UI's Context): given to the model as a section of
// the run's system message, never stored (not in history, not in the event log).
struct ContextEntry {
  std::string description;
  std::string value;
  bool operator==(const ContextEntry&) const = default;
};

// A tool the client offers for one run and runs itself (AG-UI client-provided tools: RunAgentInput.tools), as
// ToolDefinition {name, description, parameters (a JSON Schema object; null: any object)}. The model sees it in the
// execution stage beside the server's tools. A call to it is validated against its schema, recorded in the ledger
// (`client`), streamed as TOOL_CALL_START/ARGS/END, and the turn waits for its answer: the run ends with
// RUN_FINISHED {outcome: {type: "success", pendingToolCallIds}} (WAITING_CLIENT), or with the interrupt outcome when
// calls that need approval wait too (WAITING_APPROVAL). A resume (ResumeInput::answers) answers it.
// The name of a client tool: 1..64 of [A-Za-z0-9_-], not the name of a registered tool, once per run.

// A client tool's answer: what the client's tool returned for one of the turn's pending client calls (AG-UI: a
// role "tool" message). Stored as the call's result like a server tool's (ToolAgentOutput: `result` is the
// content's JSON when it is JSON text, else the text; the summary; the payload object) and given to the model.
struct ToolAnswer {
  std::string tool_call_id;
  std::string content;     // what the tool returned
  std::string error;       // non-empty: the tool failed (the call's status is failed; content may hold more)
  std::string message_id;  // the client's id of its tool message: history's tool message keeps it when it is a
                           // valid id not used in the thread yet (generated otherwise)
  bool operator==(const ToolAnswer&) const = default;
};

// A turn's new input. Only `message` is taken; a caller's history never reaches the model.
struct TurnInput {
  std::string thread_id;
  std::string user_id;
  Message message;                    // role user; content string or parts; id = client message id if set
  std::string client_message_id;      // dedupes repeated starts (defaults to message.id when set)
  std::string run_id;                 // the caller's run id (AG-UI runId); generated when empty
  std::vector<ContextEntry> context;  // for this run's model calls only (a run that continues after a pause
                                      // is given the context of the call that resumes it)
  // The thread's shared state as the client has it (AG-UI RunAgentInput.state): it becomes the thread's state,
  // and the run starts with its STATE_SNAPSHOT. Unset: the thread keeps its state (the run starts with a snapshot
  // of it when it has one).
  std::optional<json> state;
  // Tools the client runs itself, offered to the model for this run only (see ToolDefinition above).
  std::vector<ToolDefinition> client_tools;
  // The host's W3C trace context ("00-<trace id>-<span id>-<flags>"): the run's span becomes its child. "" or an
  // invalid value: the run's span starts a trace of its own. Ignored when tracing is off.
  std::string traceparent;
};

struct TurnHandle {
  std::string thread_id;
  std::string turn_id;
  std::string run_id;
  bool existing = false;  // true: a repeated start returned the turn already started by this message
  int64_t first_seq = 0;  // the RUN_STARTED event's sequence number
  // existing: the messages that turn has added so far (its user message first; the ERROR system message
  // when it failed), the same answer for every repeat once the turn has ended.
  std::vector<Message> delta_messages;
};

struct Decision {
  enum class Action { approve, reject, cancel };
  Decision() = default;
  Decision(std::string interrupt, Action act, std::optional<json> edited = std::nullopt, std::string why = {},
           std::optional<json> answer = std::nullopt)
      : interrupt_id(std::move(interrupt)),
        action(act),
        edited_args(std::move(edited)),
        reason(std::move(why)),
        response(std::move(answer)) {}

  std::string interrupt_id;  // or the tool call id
  Action action = Action::approve;
  std::optional<json> edited_args;  // approve with edits: a full replacement, validated again
  std::string reason;               // reject: what the model is told
  // An interrupt with reason "input_required" (a tool asking a person): approve = accept with this answer (valid for
  // the interrupt's responseSchema; none = {}), reject = decline, cancel = cancel. The call runs again with it.
  std::optional<json> response;
};
// What continues a paused turn (WAITING_APPROVAL or WAITING_CLIENT): a decision for every open interrupt and an
// answer for every pending client tool call, both exactly once.
struct ResumeInput {
  std::string turn_id;
  std::string approval_request_id;  // the pause's (TurnRecord::approval_request_id): a repeat gets the first answer
  std::vector<Decision> decisions;
  std::vector<ToolAnswer> answers;
  std::string run_id;                        // the continuation run's id; generated when empty
  std::vector<ContextEntry> context;         // for the continuation's model calls (as TurnInput::context)
  std::vector<ToolDefinition> client_tools;  // offered in the continuation (as TurnInput::client_tools)
  // The thread's shared state as the client has it now (as TurnInput::state): the continuation starts with it.
  // Unset: the thread keeps its state.
  std::optional<json> state;
  // The host's W3C trace context for the continuation run (as TurnInput::traceparent). "": the continuation's span
  // follows the approval wait it ends (same trace when this process saw the pause).
  std::string traceparent;
};

// {interruptId|toolCallId, action|approved, editedArgs, reason, response}. Error(invalid_argument) for a malformed
// decision or one nested deeper than max_depth (from_json: kDefaultMaxJsonDepth).
Decision decision_from_json(const json& j, size_t max_depth);
void from_json(const json& j, Decision& d);

// The limits the decoders of host input below apply (a runtime's: input_limits(config)).
struct InputLimits {
  size_t max_json_depth = kDefaultMaxJsonDepth;  // the whole input value's nesting
  size_t max_input_parts = 64;                   // content parts of the input message
  size_t max_input_messages = 4096;              // messages of a RunAgentInput
  size_t max_context_entries = 64;               // a run's context entries
  size_t max_context_bytes = 64 * 1024;          // their descriptions and values together
  size_t max_state_bytes = 256 * 1024;           // a thread's state as JSON text
  size_t max_client_tools = 64;                  // a run's client tools
  size_t max_client_tools_bytes = 256 * 1024;    // their names, descriptions and schemas together
  size_t max_answer_bytes = 1 << 20;             // a client tool answer's content and error together
};
InputLimits input_limits(const RuntimeConfig& config);
// Error(too_large) when a run's context has more entries or bytes than the limits allow.
void check_context(const std::vector<ContextEntry>& context, const InputLimits& limits);
// Error(invalid_argument) for a null state or one nested deeper than the limit, Error(too_large) when its JSON text
// is longer than max_state_bytes.
void check_state(const json& state, const InputLimits& limits);
// Error(invalid_argument) for a client tool without a valid name, with a name twice, with parameters that are not a
// JSON Schema object, or nested deeper than the limit; Error(too_large) for more tools or bytes than the limits
// allow. (A clash with a registered tool is checked by the runtime that has the registry.)
void check_client_tools(const std::vector<ToolDefinition>& tools, const InputLimits& limits);

// The new input of an AG-UI RunAgentInput: the latest user message only. The client's history (every other
// message) is ignored. Throws Error(invalid_argument) for a malformed input, one without a user message or
// one nested deeper than limits.max_json_depth (checked before anything is copied), Error(too_large) for
// more messages or parts than the limits allow.
TurnInput turn_input_from_agui(const json& run_agent_input, std::string user_id, const InputLimits& limits = {});
// AG-UI RunAgentInput.context ({description, value}[], both strings; null or absent: none), checked against the
// limits: Error(invalid_argument) for a malformed list, Error(too_large) past the limits.
std::vector<ContextEntry> context_from_agui(const json& context, const InputLimits& limits = {});
// AG-UI RunAgentInput.tools ({name, description, parameters?}[]; null or absent: none) as client tools, checked
// (check_client_tools): Error(invalid_argument) / Error(too_large).
std::vector<ToolDefinition> client_tools_from_agui(const json& tools, const InputLimits& limits = {});
// Every role "tool" message of an AG-UI RunAgentInput, as answers ({id, toolCallId, content: string | parts (text
// parts only), error?}), in order. Which of them answer a pending call is the caller's to pick (the others are the
// client's history: ignored). Error(invalid_argument) for a malformed tool message or media in its content,
// Error(too_large) for one longer than limits.max_answer_bytes.
std::vector<ToolAnswer> tool_answers_from_agui(const json& run_agent_input, const InputLimits& limits = {});
// AG-UI resume entries ({interruptId, status:"resolved"|"cancelled", payload:{approved, editedArgs, reason}})
// as decisions. "resolved" without a payload approves. Error(invalid_argument) for a malformed list or one
// nested deeper than limits.max_json_depth.
std::vector<Decision> decisions_from_agui_resume(const json& resume, const InputLimits& limits = {});

// Pulls a thread's events: first the committed ones after the start sequence, then the live tail. These are the
// AG-UI events of the thread's runs, each with its sequence number in the thread's log; the log's own records
// (a job's change that no run carries, such as a host's progress report) are skipped.
// Thread-safe: next() from one consumer thread, close() and on_ready() from any.
class Subscription {
 public:
  virtual ~Subscription() = default;
  // The next event, or nullopt when the timeout passes first or the subscription is closed. Throws Error(io) when
  // the store cannot be read (the subscription stays usable: a later call reads again from where it was).
  virtual std::optional<StoredEvent> next(std::chrono::milliseconds timeout) = 0;
  virtual void close() = 0;
  virtual bool closed() const = 0;
  // For consumers that wait on many subscriptions without a thread each: `ready` is called whenever next()
  // may have something new to return (events committed on the thread, a store change to look at, close()),
  // on the thread that caused it, and once right away (the committed events after the start may be there).
  // A call can be spurious (next(0) then returns nullopt), and several changes can share one call: after a
  // call, drain with next(0) until it returns nullopt. `ready` must be quick and must not call this
  // subscription back (post the work to an executor). Replaces an earlier callback; an empty function removes
  // it, and once on_ready() or the destructor has returned, the old callback is never called again.
  virtual void on_ready(std::function<void()> ready) = 0;
  // What next(0) would return now, at most `max` events, each handed to `take` in order; returns how many.
  // The runtime's own subscriptions hand over the events they share with every other subscriber of the thread
  // (a commit's events are kept once) without a copy each; `take` runs after the subscription's lock is released
  // and may keep what it needs, not the reference. Throws what next() throws, but only when it has handed
  // nothing over (events read before a failure are handed over; the next call reads again).
  virtual size_t drain(size_t max, const std::function<void(const StoredEvent&)>& take);
};

// The most events one events_page() call returns.
inline constexpr size_t kMaxEventsPage = 1000;

struct RuntimeStats {
  int64_t model_calls = 0;
  int64_t tool_executions = 0;
  int64_t runs_started = 0;
  int64_t spans_exported = 0;  // spans the OTLP collector accepted
  int64_t spans_dropped = 0;   // spans lost: the export queue was full, or their export failed
};

// Thread-safe. Owns its worker, flusher and sweeper threads and joins them on destruction (runs still in
// flight are cancelled first).
class Runtime {
 public:
  explicit Runtime(RuntimeConfig config);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  ToolRegistry& tools();

  // The configured MCP servers and their tools (RuntimeConfig::mcp_servers). A tool whose definition the server
  // changed after it was pinned is not offered to the model (runs in its stages report it as CUSTOM
  // agentrt.mcp_tool_changed) until approve_mcp_tool(SERVER__TOOL) takes the new definition: Error(not_found) for a
  // name that is not an MCP tool, Error(invalid_state) when its definition has not changed.
  std::vector<McpServerInfo> mcp_servers() const;
  std::vector<McpToolInfo> mcp_tools() const;
  McpToolInfo approve_mcp_tool(std::string_view name);

  // Starts a turn: validates, commits the turn with its user message and RUN_STARTED, and queues the run.
  // Error(conflict) when the thread has an active turn; a repeated client message id returns the first
  // turn (existing = true). Error(not_found) when the thread belongs to another user.
  TurnHandle start_turn(const TurnInput& input);

  // start_turn without waiting for the start's commit: the start rides on the run's first commit, as run_turn's
  // does (the run's first pause or end, a tool's start, or the group-commit flusher's within flush_interval), so
  // a short turn is one commit instead of two. `started` is called exactly once: with the handle once the start is
  // durable (first_seq set), or with what refused it, nothing of the turn stored (Error conflict, not_found,
  // too_large or io, as start_turn throws them; cancelled when the runtime stops before the run begins). A
  // repeated client message id calls it before this returns (existing = true, as start_turn answers). It runs on
  // the thread that committed the start (a worker, the flusher), with none of the runtime's locks held: it may call
  // the runtime (subscribe to the thread, read), but must be quick (the run, or the flusher's other commits, wait
  // for it) and must not wait for the turn itself (wait() on it from there never returns). The turn's waiters wake
  // after it has returned. The input's checks throw here, before anything runs, as start_turn's do. Returns the turn's
  // ids (first_seq 0: the start is not stored yet; a repeat's handle as `started` is told it); wait() on them waits
  // for the start too (not_found once it was refused; timeout when the timeout passes before the start is stored),
  // other calls naming the turn find it once it is stored.
  using Started = std::function<void(const TurnHandle& handle, std::exception_ptr error)>;
  TurnHandle start_turn_async(const TurnInput& input, Started started);

  // Answers a paused turn's open interrupts (every one of them). Returns {status:"accepted", turnId,
  // runId, approvalRequestId} at once; the continuation runs as a new run. The same approval request id
  // again returns the first answer and runs nothing. Error(invalid_state) when the turn is not waiting,
  // Error(expired) when its deadline passed, Error(invalid_argument) for decisions that don't cover the
  // interrupts exactly or edited arguments that fail the tool's schema.
  // `run_id`: the continuation run's id (e.g. the AG-UI request's runId); generated when empty. `context`: for
  // the continuation's model calls (as TurnInput::context). Error(too_large) past the context limits.
  json resume(std::string_view turn_id, std::string_view approval_request_id, const std::vector<Decision>& decisions,
              std::string_view run_id = {}, const std::vector<ContextEntry>& context = {});
  // The same with client tool answers (a turn WAITING_CLIENT, or WAITING_APPROVAL with client calls pending too):
  // every pending client call answered exactly once (Error(invalid_argument) otherwise, also for an answer to a
  // call that is not one of them), Error(too_large) for an answer past the limits. The answers are committed with
  // the decision and given to the model in the continuation.
  json resume(const ResumeInput& input);

  // The same, run on the calling thread instead of a worker (no hand-off): they return the turn's record
  // once it is paused for approval or finished. For hosts that want a blocking call (scripts, CLIs, tests).
  TurnRecord run_turn(const TurnInput& input);
  TurnRecord resume_turn(std::string_view turn_id, std::string_view approval_request_id,
                         const std::vector<Decision>& decisions, std::string_view run_id = {},
                         const std::vector<ContextEntry>& context = {});
  TurnRecord resume_turn(const ResumeInput& input);

  // Stores an upload for a user's thread (the thread must be theirs or not exist yet) and signs its URL.
  // Error(unsupported) without an object store; Error(too_large)/Error(invalid_argument) per the limits.
  Upload upload(std::string_view user_id, std::string_view thread_id, std::string_view bytes,
                std::string_view mime_type);

  // Stops a running or waiting turn; its run ends with outcome {type:"cancelled"}. No-op on a finished turn.
  void cancel(std::string_view turn_id);

  std::unique_ptr<Subscription> subscribe(std::string_view thread_id, int64_t after_seq = 0);

  // The thread's messages (the messages projection), tool messages with their `ui` restored.
  std::vector<Message> history(std::string_view thread_id);
  // The thread's shared state (AG-UI state) as its events leave it; nullopt when it never had one.
  std::optional<json> thread_state(std::string_view thread_id);
  std::optional<TurnRecord> turn(std::string_view turn_id);
  std::optional<TurnRecord> active_turn(std::string_view thread_id);
  std::optional<ThreadRecord> thread(std::string_view thread_id);
  // The user's threads that are not deleted, most recently updated first, each with its last_seq.
  std::vector<ThreadRecord> threads(std::string_view user_id);
  // A page of a user's thread's committed events: those after `after_seq`, in order, at most `limit`
  // (1..kMaxEventsPage); empty past the last one. Like subscribe(), it gives the AG-UI events of the thread's
  // runs: the log's own records (a job's change outside any run) are skipped, so sequence numbers may jump.
  // Error(not_found) for an unknown, deleted or another user's thread, Error(invalid_argument) for a negative after_seq
  // or a limit out of range.
  std::vector<StoredEvent> events_page(std::string_view thread_id, std::string_view user_id, int64_t after_seq,
                                       size_t limit);
  // The thread's latest turn, whatever its status; nullopt when it has none.
  std::optional<TurnRecord> last_turn(std::string_view thread_id);
  // An answered approval request (its thread, turn, decisions and the answer resume() gave); nullopt for an
  // id that was never answered.
  std::optional<ApprovalRecord> approval(std::string_view approval_request_id);
  // The turn's tool calls as its ledger records them (arguments, status, decision, outcome); empty for an
  // unknown turn.
  std::vector<LedgerEntry> tool_calls(std::string_view turn_id);
  // What was spent, as committed (a turn's row is written at each end or pause of its runs), cost from
  // RuntimeConfig::prices: by one turn (Error(not_found) for an unknown one), by every turn of a thread, by every
  // turn of a user's threads (deleted ones too). The tool calls are those the model made, whatever their outcome.
  Spend turn_spend(std::string_view turn_id);
  Spend thread_spend(std::string_view thread_id);
  Spend user_spend(std::string_view user_id);
  // Soft-deletes a user's thread: an active turn is cancelled first, and no turn can start on it afterwards
  // (the store checks both in the delete's transaction and refuses a start on a deleted thread). Error(not_found)
  // for an unknown, deleted or another user's thread.
  void delete_thread(std::string_view thread_id, std::string_view user_id);

  // Blocks until the turn is not RUNNING/RESUMING (or the timeout passes); returns its record.
  TurnRecord wait(std::string_view turn_id, std::chrono::milliseconds timeout);
  // Runs one expiry + recovery pass now (the sweeper does it every sweep_interval).
  void sweep();

  // External jobs (jobs.hpp). job(): nullopt for an unknown id. jobs(): the thread's, in creation order.
  // The others change a job from any thread (or any process sharing the store) and return its new record:
  // Error(not_found) for an unknown job, Error(invalid_state) when it has already ended (cancelling a
  // cancelled job returns it unchanged) or still waits for the person's confirmation, Error(invalid_argument)
  // / Error(too_large) for bad values. A finished job's outcome is added to the thread's history (a tool
  // message answering the call that started it) and streamed as a run of its own with a CUSTOM
  // "agentrt.job" event, at once when no run is open on the thread, else when the open run ends.
  std::optional<JobRecord> job(std::string_view job_id);
  std::vector<JobRecord> jobs(std::string_view thread_id);
  JobRecord update_job(std::string_view job_id, const JobProgress& progress);
  JobRecord complete_job(std::string_view job_id, const JobResult& result);
  JobRecord fail_job(std::string_view job_id, std::string code, std::string message);
  // Also calls RuntimeConfig::job_cancel_hook.
  JobRecord cancel_job(std::string_view job_id, std::string reason = {});

  // The messages a turn added to its thread, in order (as TurnHandle::delta_messages).
  std::vector<Message> turn_messages(std::string_view turn_id);

  RuntimeStats stats() const;
  // Sends the spans ended so far to the OTLP collector now (not after TracingConfig::export_interval) and waits
  // until the collector has answered for each, or `timeout`: true when every one was exported or counted as
  // dropped in stats(), false on the timeout (they are still sent). True at once when tracing is off. What an
  // OpenTelemetry SDK calls ForceFlush: for a host about to pause, fork or measure.
  bool flush_traces(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  const RuntimeConfig& config() const;

  struct Impl;  // opaque: the implementation's own

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace v1
}  // namespace agentrt
