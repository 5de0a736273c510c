/*
 * agentrt.h — the stable C ABI of agentrt (C99).
 *
 * Conventions (see STYLE.md, "C ABI"):
 * - Opaque handles, JSON strings in and out (UTF-8, NUL-terminated).
 * - Every fallible function returns an int32_t status: AGENTRT_OK (0) or a negative AGENTRT_E_* code.
 *   Out-parameters come first and are named `out`; on failure they are set to NULL (or 0).
 * - agentrt_last_error() returns the calling thread's message for the last failed call. Every agentrt_
 *   call (except agentrt_last_error itself) clears it first.
 * - Strings the library returns through `char **out` are owned by the caller and freed with agentrt_free.
 *   Strings passed in are borrowed for the duration of the call only.
 * - No C++ exception ever leaves a function of this header.
 * - Evolution: functions are added, released signatures never change. agentrt_abi_version() is the
 *   major number of the shared library's SONAME (libagentrt.so.<ABI>); bindings check it at load.
 */
#ifndef AGENTRT_H
#define AGENTRT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AGENTRT_VERSION_MAJOR 0
#define AGENTRT_VERSION_MINOR 1
#define AGENTRT_VERSION_PATCH 0
#define AGENTRT_VERSION_STRING "0.1.0"
/* The ABI generation; equal to agentrt_abi_version() of a library this header matches. */
#define AGENTRT_ABI_VERSION 1

#if defined(_WIN32)
#if defined(AGENTRT_BUILDING)
#define AGENTRT_API __declspec(dllexport)
#else
#define AGENTRT_API __declspec(dllimport)
#endif
#elif defined(__GNUC__) && __GNUC__ >= 4
#define AGENTRT_API __attribute__((visibility("default")))
#else
#define AGENTRT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ status */

/* Status codes. The numbers never change (they are agentrt::ErrorCode in the C++ core). */
typedef enum agentrt_status {
  AGENTRT_OK = 0,
  AGENTRT_E_INVALID_ARGUMENT = -1, /* bad input: NULL, malformed JSON, schema violation, bad id shape */
  AGENTRT_E_NOT_FOUND = -2,        /* unknown thread, turn, approval request, tool */
  AGENTRT_E_CONFLICT = -3,         /* one active turn per thread, a duplicate name, a lost race */
  AGENTRT_E_EXPIRED = -4,          /* an approval deadline has passed */
  AGENTRT_E_TOO_LARGE = -5,        /* a size limit was exceeded */
  AGENTRT_E_CANCELLED = -6,        /* the operation (or the stream, or the model call) was cancelled/closed */
  AGENTRT_E_TIMEOUT = -7,          /* a deadline passed (a pull, a wait) */
  AGENTRT_E_IO = -8,               /* storage or network I/O failed */
  AGENTRT_E_INVALID_STATE = -9,    /* not allowed in the object's current state */
  AGENTRT_E_MODEL = -10,           /* the model provider failed */
  AGENTRT_E_UNAUTHORIZED = -11,    /* missing or wrong credentials */
  AGENTRT_E_UNSUPPORTED = -12,     /* not available in this build or configuration */
  AGENTRT_E_INTERNAL = -13         /* a bug in agentrt, or an exception escaping host code */
} agentrt_status;

/* ----------------------------------------------------------------------------------------- general */

/* The library's version, "MAJOR.MINOR.PATCH". Static storage: never freed. */
AGENTRT_API const char* agentrt_version(void);

/* The ABI generation of the loaded library (the SONAME's major number). A binding refuses to load a
 * library whose value differs from the AGENTRT_ABI_VERSION it was written for. */
AGENTRT_API uint32_t agentrt_abi_version(void);

/* The calling thread's message for its last failed agentrt_ call, or "" when the last call succeeded.
 * Never NULL. Owned by the library; valid until the calling thread's next agentrt_ call. */
AGENTRT_API const char* agentrt_last_error(void);

/* The stable lower-case name of a status ("ok", "invalid_argument", "not_found", ...), or "unknown".
 * Static storage: never freed. */
AGENTRT_API const char* agentrt_status_name(int32_t status);

/* Frees a string (or any buffer) returned by this library. Accepts NULL. */
AGENTRT_API void agentrt_free(void* ptr);

/* A callback that releases host data the library held (stored callbacks' user_data). Called exactly once,
 * also when the registration it was passed to fails. */
typedef void (*agentrt_destroy_cb)(void* user_data);

/* ----------------------------------------------------------------------------------------- runtime */

/* A runtime: a store, an object store, a model, tools and the worker threads that run turns.
 * Thread-safe: every function taking an agentrt_runtime may be called from any thread at once, except
 * agentrt_runtime_free, which must be the last call on it. */
typedef struct agentrt_runtime agentrt_runtime;

/* A call to a host model (see agentrt_runtime_open_with_model). Thread-safe: push from any thread. */
typedef struct agentrt_model_call agentrt_model_call;

/* A host model. Called on a runtime worker thread for every model call, with the request JSON:
 *   {stage, model?, params, messages: [AG-UI messages], tools: [{name, description, parameters}],
 *    toolChoice?, parallelToolCalls, threadId, turnId, runId, traceparent?}
 * (traceparent: the W3C trace context of the model call's span when tracing is on: send it on to the model server)
 * `request_json` is borrowed for the duration of the callback. The host owns `call` from the callback on:
 * it pushes deltas with agentrt_model_call_text/_reasoning/_tool_call_start/_tool_call_args, ends the call
 * with agentrt_model_call_finish or agentrt_model_call_fail (now, or later from any thread), and then
 * releases the handle with agentrt_model_call_free. The worker waits for the end (or the turn's
 * cancellation); the callback may return before it. */
typedef void (*agentrt_model_cb)(agentrt_model_call* call, const char* request_json, void* user_data);

/* Opens a runtime from a JSON config (NULL or "" means {}). Keys: those of the C++ runtime_config_from_json
 * (data_dir, store, objects, model, stages, workers, max_steps, approval_timeout_ms, context_budget_chars,
 * flush_interval_ms, sweep_interval_ms, instance_lease_ms, max_input_bytes, summary_max_chars,
 * job_timeout_ms — how long a job may stay queued or running before it fails with code "timeout", default
 * 24 h; see agentrt_tool_call_start_job; max_json_depth, max_input_parts, max_input_messages — see below),
 * plus:
 *   demo_tools   true: register the offline demo's tools (book_room, check_availability). Default false.
 * The model section ({type:"demo"} | {type:"openai", base_url, model, ...} | {type:"auto"}) is also the
 * transcription config of agentrt_transcribe. Unknown keys fail with AGENTRT_E_INVALID_ARGUMENT.
 * Limits on what hosts and clients send: every JSON argument of this API nested deeper than max_json_depth
 * (default 64, 1..256; config_json itself: 64) fails with AGENTRT_E_INVALID_ARGUMENT ("<name> is nested deeper
 * than N levels") before it is parsed; a turn's input message over max_input_bytes as stored (default 1 MiB,
 * metadata included), with more than max_input_parts content parts (default 64), or a RunAgentInput with more
 * than max_input_messages messages (default 4096) fails with AGENTRT_E_TOO_LARGE.
 * On success *out is a new runtime, freed with agentrt_runtime_free. */
AGENTRT_API int32_t agentrt_runtime_open(agentrt_runtime** out, const char* config_json);

/* Like agentrt_runtime_open, with the host's model instead of the config's: `model` is called for every
 * model call (see agentrt_model_cb). The config's model section, if any, is used only by agentrt_transcribe.
 * `destroy` (may be NULL) is called exactly once with `user_data`: when the runtime is freed, or before this
 * function returns when it fails. */
AGENTRT_API int32_t agentrt_runtime_open_with_model(agentrt_runtime** out, const char* config_json,
                                                    agentrt_model_cb model, void* user_data,
                                                    agentrt_destroy_cb destroy);

/* Closes and frees a runtime: cancels the turns in flight, joins the worker threads, closes the event
 * streams still open on it (their next pull returns AGENTRT_E_CANCELLED; free them as usual), and calls
 * the destroy callbacks of its tools, model and job cancel hook. Accepts NULL. Must not be called from a
 * callback of the same runtime. May block while a host callback is still running. */
AGENTRT_API void agentrt_runtime_free(agentrt_runtime* rt);

/* -------------------------------------------------------------------------------------------- tools */

/* One call of a host tool. Owned by the host from the tool callback until agentrt_tool_call_free; after
 * that it must not be used. Thread-safe: complete, fail, start a job and free from any thread (free once). */
typedef struct agentrt_tool_call agentrt_tool_call;

/* A host tool. Called on a runtime worker thread for every execution, with the call JSON (borrowed for the
 * duration of the callback):
 *   {toolCallId, toolName, args, threadId, turnId, runId, userId, stage, jobId, jobConfirmed, state, traceparent?}
 * (traceparent: the W3C trace context of the call's span when tracing is on)
 * The host completes the call with agentrt_tool_call_complete or agentrt_tool_call_fail (or answers it with
 * agentrt_tool_call_start_job), before returning or later from any thread, and then frees the handle with
 * agentrt_tool_call_free. A call that is freed without being completed fails with code "tool_error". The
 * tool's timeoutMs bounds the wait. `jobId` is the id the call's job gets if the host answers with
 * agentrt_tool_call_start_job (hand it to the system doing the work); `jobConfirmed` is true when the call
 * runs again, with the same jobId, because the person confirmed that job: start the work now. `state` is the
 * thread's shared state (AG-UI state; {} when it has none) when the call started: see
 * agentrt_tool_call_state_delta. */
typedef void (*agentrt_tool_cb)(agentrt_tool_call* call, const char* call_json, void* user_data);

/* Registers a host tool. `spec_json`:
 *   {name, description?, parameters? (JSON Schema object), approval?: "never"|"always",
 *    stages?: ["execution", ...], idempotent?: bool, timeoutMs?: int}
 * `destroy` (may be NULL) is called exactly once with `user_data`, on any thread, when the library no
 * longer needs it: after agentrt_tool_unregister once no call is being dispatched, at agentrt_runtime_free
 * at the latest, or before this function returns when it fails. AGENTRT_E_CONFLICT when the name is taken,
 * AGENTRT_E_INVALID_ARGUMENT for a bad spec. */
AGENTRT_API int32_t agentrt_tool_register(agentrt_runtime* rt, const char* spec_json, agentrt_tool_cb cb,
                                          void* user_data, agentrt_destroy_cb destroy);

/* Removes a tool: it is offered to no later model call. AGENTRT_E_NOT_FOUND when there is none by that name. */
AGENTRT_API int32_t agentrt_tool_unregister(agentrt_runtime* rt, const char* name);

/* Completes a call successfully. `result_json`: any JSON value (the tool's result). `ui_json`: NULL or a
 * UiSchema card {type, version:"v1", data?, actions?}. AGENTRT_E_INVALID_ARGUMENT for malformed JSON (the
 * call stays open) and for a result_json or ui_json nested deeper than the runtime's max_json_depth (the call
 * then fails with code "invalid_result": the model is told, the turn goes on); AGENTRT_E_INVALID_STATE when
 * the call already ended (completed, failed, timed out or cancelled). */
AGENTRT_API int32_t agentrt_tool_call_complete(agentrt_tool_call* call, const char* result_json, const char* ui_json);

/* Changes the thread's shared state with the call's result: `delta_json` is an RFC 6902 JSON Patch (an array of
 * operations) applied to the call JSON's `state` when agentrt_tool_call_complete completes the call (call it
 * before that, on the same thread). The change streams as STATE_DELTA right before the result and commits with
 * it; a patch that does not apply or leaves a state over max_state_bytes fails the call with code
 * "invalid_state_delta" (the state is unchanged). AGENTRT_E_INVALID_ARGUMENT for malformed JSON, a value that
 * is not an array, or one nested deeper than max_json_depth (the call stays open). */
AGENTRT_API int32_t agentrt_tool_call_state_delta(agentrt_tool_call* call, const char* delta_json);

/* Fails a call. `code`: a short machine-readable reason (NULL means "tool_error"); `message`: what went
 * wrong (may be NULL). AGENTRT_E_INVALID_STATE when the call already ended. */
AGENTRT_API int32_t agentrt_tool_call_fail(agentrt_tool_call* call, const char* code, const char* message);

/* Answers the call with "started job <jobId>" (the call JSON's jobId) instead of a result: the runtime records
 * the job, the call's tool result says the job runs, and the turn goes on without waiting. The host ends the job
 * later with agentrt_job_complete, agentrt_job_fail or agentrt_job_cancel (see "jobs" below). `job_json`
 * (NULL or "" means {}):
 *   {status?: "queued"|"running" (default "running"), message?: string, metadata?: object, confirm?: bool,
 *    confirmMessage?: string, timeoutMs?: 1..31536000000 (default: the config's job_timeout_ms)}
 * With confirm true (and jobConfirmed false) the person is asked first: the job is recorded queued with
 * confirmation "pending", and the turn pauses (WAITING_APPROVAL) with an interrupt {reason: "confirmation",
 * toolCallId, message: confirmMessage, metadata: {jobId, job: metadata}}. It is answered with
 * agentrt_turn_resume: resolved ({interruptId, status: "resolved"} or action "approve"), the tool is called
 * again with jobConfirmed true and the same jobId and starts the work then; cancelled (status "cancelled" or
 * action "reject"/"cancel"), the job ends cancelled with code "declined" and the tool is not called again.
 * Over its timeout a queued or running job fails with code "timeout". A message over 4096 bytes or metadata
 * over 64 KiB fails the call with code "invalid_job" when the runtime records it.
 * AGENTRT_E_INVALID_ARGUMENT for malformed JSON, an unknown key or a value of the wrong type or range (the
 * call stays open); AGENTRT_E_INVALID_STATE when the call already ended. */
AGENTRT_API int32_t agentrt_tool_call_start_job(agentrt_tool_call* call, const char* job_json);

/* Releases the host's handle (failing the call if it was never completed). Accepts NULL. */
AGENTRT_API void agentrt_tool_call_free(agentrt_tool_call* call);

/* ------------------------------------------------------------------------------------- host models */

/* Streams a piece of the answer's text. AGENTRT_E_CANCELLED once the model call was cancelled (the turn was
 * cancelled or the runtime is closing), AGENTRT_E_INVALID_STATE once the call ended. */
AGENTRT_API int32_t agentrt_model_call_text(agentrt_model_call* call, const char* delta);

/* Streams a piece of the model's reasoning. Same codes as agentrt_model_call_text. */
AGENTRT_API int32_t agentrt_model_call_reasoning(agentrt_model_call* call, const char* delta);

/* Announces tool call number `index` (0, 1, ...) with its id and name. Same codes. */
AGENTRT_API int32_t agentrt_model_call_tool_call_start(agentrt_model_call* call, int32_t index, const char* id,
                                                       const char* name);

/* Streams a fragment of tool call `index`'s JSON arguments. Same codes. */
AGENTRT_API int32_t agentrt_model_call_tool_call_args(agentrt_model_call* call, int32_t index, const char* delta);

/* Ends the call with its result (NULL or "" means {}):
 *   {text?, reasoning?, toolCalls?: [{id, name, arguments (JSON text or object)}],
 *    usage?: {inputTokens, outputTokens, ...}, finishReason?}
 * Fields left out are taken from what was streamed. AGENTRT_E_INVALID_ARGUMENT for a malformed result
 * (the call stays open), otherwise the same codes as agentrt_model_call_text. */
AGENTRT_API int32_t agentrt_model_call_finish(agentrt_model_call* call, const char* result_json);

/* Ends the call with an error: `status` is the AGENTRT_E_* code to report (AGENTRT_E_MODEL when it is not
 * a negative code), `message` says what went wrong (may be NULL). Same codes as agentrt_model_call_text. */
AGENTRT_API int32_t agentrt_model_call_fail(agentrt_model_call* call, int32_t status, const char* message);

/* Releases the host's handle (failing the call with AGENTRT_E_MODEL if it never ended). Accepts NULL. */
AGENTRT_API void agentrt_model_call_free(agentrt_model_call* call);

/* -------------------------------------------------------------------------------------------- turns */

/* Starts a turn. `input_json` is either
 *   {threadId, userId, message: {id?, role?: "user", content: string | ContentPart[]}, runId?,
 *    clientMessageId?, context?, state?, tools?, traceparent?}
 * or an AG-UI RunAgentInput {threadId, runId, messages, ...} plus "userId": only its last user message is
 * taken (history sent by a client is ignored), with its context. `context` ({description, value}[], AG-UI's
 * Context) is given to the model for this run only, in its system message, and never stored; at most
 * max_context_entries entries (default 64) of max_context_bytes together (default 65536), else
 * AGENTRT_E_TOO_LARGE. `state` (any JSON but null; AG-UI's state) becomes the thread's shared state and the run
 * starts with its STATE_SNAPSHOT ({} on a thread without a state changes nothing); over max_state_bytes
 * (default 262144) AGENTRT_E_TOO_LARGE. `tools` (AG-UI Tool[]: {name, description, parameters?}) are client
 * tools: offered to the model for this run beside the runtime's tools (a name of a registered tool is
 * AGENTRT_E_INVALID_ARGUMENT; at most max_client_tools, default 64, of max_client_tools_bytes, default 262144), run by
 * the host itself: a call to one ends the run with RUN_FINISHED {outcome: {type: "success", pendingToolCallIds}} and
 * the turn WAITING_CLIENT (WAITING_APPROVAL when calls that need approval wait too) until agentrt_turn_resume
 * answers it. `traceparent` (a W3C trace context) makes the run's span a child of the host's when tracing is on (an
 * invalid one is ignored). *out = {threadId, turnId, runId, existing: false, firstSeq}
 * (firstSeq: the RUN_STARTED event's sequence number). A repeated client message id returns the first turn:
 * {threadId, turnId, runId, existing: true, status, deltaMessages}, status that turn's (as agentrt_turn_get),
 * deltaMessages the AG-UI messages it has added so far (its user message first; the ERROR system message when
 * it failed), as agentrt_turn_messages. AGENTRT_E_CONFLICT when the thread has an active turn,
 * AGENTRT_E_NOT_FOUND when the thread belongs to another user. */
AGENTRT_API int32_t agentrt_turn_start(char** out, agentrt_runtime* rt, const char* input_json);

/* Answers every open interrupt and every pending client tool call of a paused turn (WAITING_APPROVAL or
 * WAITING_CLIENT). `decisions_json` is an array of
 *   {interruptId, action: "approve"|"reject"|"cancel", editedArgs?, reason?}
 * or of AG-UI resume entries {interruptId, status: "resolved"|"cancelled", payload?}, or an object
 * {decisions?: [...], answers?: [{toolCallId, content, error?, id?}], runId?, context?, tools?, state?, traceparent?}
 * naming the client tool calls' answers (`content`: what the tool returned, JSON text or text; `error`: it failed;
 * `id`: the tool message's id in history), the new run's id, what the model is told in it, the client tools it is
 * offered, the thread's state as the client has it (the new run starts with it, as a turn input's `state`) and the
 * host's trace context for the new run (as a turn input's `traceparent`).
 * A call that is not pending, or a pending one without an answer, is AGENTRT_E_INVALID_ARGUMENT. *out = {status:
 * "accepted", turnId, runId, approvalRequestId}; the continuation runs as a new run on the workers. The same approval
 * request id again returns the first answer and runs nothing. AGENTRT_E_INVALID_STATE when the turn is not waiting,
 * AGENTRT_E_EXPIRED past its deadline, AGENTRT_E_NOT_FOUND for an unknown turn or approval request. */
AGENTRT_API int32_t agentrt_turn_resume(char** out, agentrt_runtime* rt, const char* turn_id,
                                        const char* approval_request_id, const char* decisions_json);

/* Cancels a running or waiting turn (its run ends with outcome {type:"cancelled"}). Returns at once; a
 * finished turn is left as it is. AGENTRT_E_NOT_FOUND for an unknown turn. */
AGENTRT_API int32_t agentrt_turn_cancel(agentrt_runtime* rt, const char* turn_id);

/* The turn's record: {id, threadId, userId, status ("RUNNING", "WAITING_APPROVAL", "WAITING_CLIENT", "RESUMING",
 * "COMPLETED", "FAILED", "EXPIRED", "CANCELLED"), version, clientMessageId, runId, parentRunId, stage,
 * approvalRequestId, interrupts, expiresAt, intent, error, usage, steps, createdAt, updatedAt}. */
AGENTRT_API int32_t agentrt_turn_get(char** out, agentrt_runtime* rt, const char* turn_id);

/* Waits until the turn is neither RUNNING nor RESUMING and returns its record (as agentrt_turn_get).
 * AGENTRT_E_TIMEOUT (and *out = NULL) when `timeout_ms` passes first. A negative timeout is invalid. */
AGENTRT_API int32_t agentrt_turn_wait(char** out, agentrt_runtime* rt, const char* turn_id, int32_t timeout_ms);

/* The turn's open interrupts: {turnId, threadId, status, approvalRequestId, expiresAt, interrupts: [AG-UI
 * Interrupt]}. `interrupts` is empty unless the status is WAITING_APPROVAL (approvalRequestId and expiresAt are set
 * for WAITING_CLIENT too). */
AGENTRT_API int32_t agentrt_turn_interrupts(char** out, agentrt_runtime* rt, const char* turn_id);

/* The messages a turn added to its thread, in order, as a JSON array of AG-UI messages (its user message
 * first). AGENTRT_E_NOT_FOUND for an unknown turn. */
AGENTRT_API int32_t agentrt_turn_messages(char** out, agentrt_runtime* rt, const char* turn_id);

/* The thread's history as a JSON array of AG-UI messages (tool messages carry their `ui` in metadata; a
 * finished job's outcome is a tool message with metadata {job_id, job_status, tool_call_id, tool_name,
 * turn_id, assets?, error_code?}). An unknown thread has an empty history. */
AGENTRT_API int32_t agentrt_thread_history(char** out, agentrt_runtime* rt, const char* thread_id);

/* The thread's shared state (AG-UI state) as its events leave it: *out = the state's JSON, or null when the
 * thread never had one. A turn input's `state` (or a RunAgentInput's) sets it at the run's start; host tools
 * change it with agentrt_tool_call_state_delta. */
AGENTRT_API int32_t agentrt_thread_state(char** out, agentrt_runtime* rt, const char* thread_id);

/* The user's threads that are not deleted, most recently updated first, as a JSON array of
 *   {id, title, createdAt, updatedAt, lastSeq}   (times in ms; lastSeq: its last event's sequence number)
 * A user without threads has []. AGENTRT_E_INVALID_ARGUMENT for a NULL or empty user_id. */
AGENTRT_API int32_t agentrt_threads_list(char** out, agentrt_runtime* rt, const char* user_id);

/* Soft-deletes `user_id`'s thread: a running or waiting turn on it is cancelled first, and no turn can start
 * on it afterwards (agentrt_turn_start fails with AGENTRT_E_NOT_FOUND). Its history, events and jobs are no
 * longer listed for the user. AGENTRT_E_NOT_FOUND for an unknown thread, one already deleted, or another
 * user's thread (which looks exactly like an unknown one). */
AGENTRT_API int32_t agentrt_thread_delete(agentrt_runtime* rt, const char* thread_id, const char* user_id);

/* MCP servers (the config's mcp_servers; their tools are offered to the model as SERVER__TOOL). *out = a JSON array
 * of {name, transport, state: "ready"|"starting"|"failed", protocolVersion, server, version, tools, restarts, error}
 * ([] without servers). */
AGENTRT_API int32_t agentrt_mcp_servers(char** out, agentrt_runtime* rt);

/* What was spent, as committed: scope "turn" (id = a turn id; AGENTRT_E_NOT_FOUND for an unknown one), "thread"
 * (every turn of the thread) or "user" (every turn of the user's threads, deleted ones too). *out = JSON
 *   {modelCalls, toolCalls, inputTokens, outputTokens, cost, unpricedModels?: [model], usage: TokenUsage[]}
 * (cost from the config's `prices`; toolCalls: the calls the model made, whatever their outcome).
 * AGENTRT_E_INVALID_ARGUMENT for another scope or a NULL or empty id. */
AGENTRT_API int32_t agentrt_spend(char** out, agentrt_runtime* rt, const char* scope, const char* id);

/* Sends the spans ended so far to the OTLP collector (the config's tracing) now, not after its export interval, and
 * waits up to `timeout_ms` for the collector's answers: AGENTRT_OK once each was exported or counted as dropped,
 * AGENTRT_E_TIMEOUT when the time passed first (they are still sent). AGENTRT_OK at once with tracing off. A
 * negative timeout is invalid. For a host about to pause, fork or measure; destroying the runtime flushes too. */
AGENTRT_API int32_t agentrt_flush_traces(agentrt_runtime* rt, int32_t timeout_ms);

/* The MCP servers' tools: a JSON array of {name, server, tool, description, inputSchema, outputSchema, hash,
 * offered, problem?, changed?: {hash, definition}}. A tool whose server changed its definition after it was pinned
 * has `changed` and is not offered until agentrt_mcp_tool_approve. */
AGENTRT_API int32_t agentrt_mcp_tools(char** out, agentrt_runtime* rt);

/* Takes the changed definition of MCP tool `name` (SERVER__TOOL) as approved and offers it again; *out = the tool as
 * agentrt_mcp_tools lists it. AGENTRT_E_NOT_FOUND for a name that is not an MCP tool, AGENTRT_E_INVALID_STATE when
 * its definition has not changed. */
AGENTRT_API int32_t agentrt_mcp_tool_approve(char** out, agentrt_runtime* rt, const char* name);

/* Stores a file a user sends on a thread (the thread must be the user's or not exist yet) in the runtime's
 * object store, under agent-inputs/{user}/{thread}/uploads/{id}. `bytes` (`len` bytes; NULL only when `len`
 * is 0: empty files are allowed) is borrowed for the call; `mime_type` e.g. "image/png" (parameters such as "; charset"
 * are dropped, case is folded). *out = {id, url, mimeType, size, expiresAt, ref, part}: url a signed URL that expires
 * at expiresAt (ms), ref the name the model knows it by ("img_..."), part the content part that sends it in a turn's
 * message
 * ({type: "image"|"audio"|"video"|"document", source: {type: "url", value: url, mimeType}}; a part
 * {type, source: {type: "file", value: id}} does too). AGENTRT_E_UNSUPPORTED when the runtime has no object
 * store (config "objects": null), AGENTRT_E_NOT_FOUND for another user's (or a deleted) thread,
 * AGENTRT_E_INVALID_ARGUMENT for NULL or empty ids or MIME type, a bad id or a MIME type that is not accepted,
 * AGENTRT_E_TOO_LARGE for a file over the attachment limits. */
AGENTRT_API int32_t agentrt_upload_create(char** out, agentrt_runtime* rt, const char* user_id, const char* thread_id,
                                          const void* bytes, size_t len, const char* mime_type);

/* --------------------------------------------------------------------------------------------- jobs */

/* External jobs: tool work that outlives the turn that started it (agentrt_tool_call_start_job). The host
 * reports on a job and ends it from any thread, or from any process sharing the runtime's store. A job's
 * record (the job JSON):
 *   {id, threadId, turnId, runId, toolCallId, toolName, userId,
 *    status: "queued"|"running"|"succeeded"|"failed"|"cancelled", progress (0..1), message?, result?,
 *    assets: [...], error?: {code, message}, metadata: {...}, confirmation?: "pending"|"confirmed"|"declined",
 *    confirmMessage?, timeoutMs?, expiresAt?, delivered, version, createdAt, updatedAt, finishedAt?}   (times in ms)
 * A finished job's outcome is added to the thread's history (a tool message answering the call that started
 * the job) and streamed as a run of its own: RUN_STARTED, TOOL_CALL_RESULT (toolCallId of that call), CUSTOM
 * {name: "agentrt.job", value: the job JSON}, RUN_FINISHED; at once when no run is open on the thread, else
 * when the open run ends. `delivered` is true once that happened.
 * The functions that change a job return its new record in *out. They fail with AGENTRT_E_NOT_FOUND for an
 * unknown job, AGENTRT_E_INVALID_STATE when it has already ended or still waits for the person's
 * confirmation, AGENTRT_E_INVALID_ARGUMENT for malformed JSON or bad values, AGENTRT_E_TOO_LARGE for a text
 * over 4096 bytes or a result with its assets over 1 MiB. */

/* The job's record. AGENTRT_E_NOT_FOUND for an unknown job. */
AGENTRT_API int32_t agentrt_job_get(char** out, agentrt_runtime* rt, const char* job_id);

/* The thread's jobs as a JSON array of job records, in creation order (an unknown thread has none). */
AGENTRT_API int32_t agentrt_jobs_list(char** out, agentrt_runtime* rt, const char* thread_id);

/* Reports progress: `progress_json` = {status?: "queued"|"running", progress?: 0..1, message?}. A queued job may
 * become running, not the reverse (AGENTRT_E_INVALID_STATE). Nothing is streamed. */
AGENTRT_API int32_t agentrt_job_update(char** out, agentrt_runtime* rt, const char* job_id, const char* progress_json);

/* Ends a job successfully: `result_json` = {result (any JSON, required), assets?: [references to generated
 * assets, e.g. {url|key, mimeType}], message?}. Its progress becomes 1. */
AGENTRT_API int32_t agentrt_job_complete(char** out, agentrt_runtime* rt, const char* job_id, const char* result_json);

/* Ends a job with an error: `code` a short machine-readable reason (NULL or "" means "job_failed"),
 * `message` what went wrong (may be NULL). */
AGENTRT_API int32_t agentrt_job_fail(char** out, agentrt_runtime* rt, const char* job_id, const char* code,
                                     const char* message);

/* Cancels a job (error code "cancelled", message `reason`; NULL or "" means "cancelled by the host") and calls
 * the job cancel hook with its new record. Cancelling a cancelled job returns it unchanged and calls nothing. */
AGENTRT_API int32_t agentrt_job_cancel(char** out, agentrt_runtime* rt, const char* job_id, const char* reason);

/* A job cancel hook: told that a job was cancelled or has expired (status "failed", error code "timeout"), so
 * the host stops the work. `job_json` is the job's new record, borrowed for the duration of the callback. Runs
 * on the thread that cancelled the job (inside agentrt_job_cancel) or on the runtime's sweeper thread (expiry).
 * It must not call agentrt_runtime_free. */
typedef void (*agentrt_job_cb)(const char* job_json, void* user_data);

/* Sets the runtime's job cancel hook, replacing the previous one; a NULL `cb` removes it. `destroy` (may be
 * NULL) is called exactly once with `user_data`, on any thread: when the hook is replaced or removed (once no
 * call of it is running), at agentrt_runtime_free at the latest, at once when `cb` is NULL, or before this
 * function returns when it fails. */
AGENTRT_API int32_t agentrt_runtime_set_job_cancel_hook(agentrt_runtime* rt, agentrt_job_cb cb, void* user_data,
                                                        agentrt_destroy_cb destroy);

/* ------------------------------------------------------------------------------------------- events */

/* A pull stream of a thread's events: the committed ones after a sequence number, then the live tail.
 * Thread-safe: agentrt_events_next from one thread at a time, agentrt_events_close from any thread. */
typedef struct agentrt_events agentrt_events;

/* Opens a stream of `thread_id`'s events with sequence numbers greater than `after_seq` (0: from the
 * start): the AG-UI events of its runs. The log's own records (a job's change that no run carries, such as
 * agentrt_job_update's) take sequence numbers too but are never given, so the numbers may jump. Freed with
 * agentrt_events_free, before or after the runtime. */
AGENTRT_API int32_t agentrt_events_open(agentrt_events** out, agentrt_runtime* rt, const char* thread_id,
                                        int64_t after_seq);

/* A page of `user_id`'s thread's committed events, without waiting for more: those with sequence numbers
 * greater than `after_seq`, in order, at most `limit` (1..1000), as a JSON array of {seq, event} (event: the
 * AG-UI event object; as agentrt_events_open, the log's own records are skipped). [] past the last event; ask
 * again after the last seq returned for the next page.
 * AGENTRT_E_NOT_FOUND for an unknown, deleted or another user's thread, AGENTRT_E_INVALID_ARGUMENT for a
 * negative after_seq or a limit out of range. */
AGENTRT_API int32_t agentrt_events_page(char** out, agentrt_runtime* rt, const char* thread_id, const char* user_id,
                                        int64_t after_seq, int32_t limit);

/* Pulls the next event: *out = the AG-UI event JSON (free with agentrt_free), *out_seq = its sequence
 * number (`out_seq` may be NULL). Waits up to `timeout_ms` (0: does not wait). AGENTRT_E_TIMEOUT when no
 * event came in time, AGENTRT_E_CANCELLED when the stream was closed (or its runtime freed). */
AGENTRT_API int32_t agentrt_events_next(char** out, int64_t* out_seq, agentrt_events* stream, int32_t timeout_ms);

/* Closes the stream from any thread: a pull waiting in agentrt_events_next returns AGENTRT_E_CANCELLED at
 * once, and so do later pulls. The handle stays valid until agentrt_events_free. */
AGENTRT_API int32_t agentrt_events_close(agentrt_events* stream);

/* Closes (if needed) and frees a stream. Accepts NULL. */
AGENTRT_API void agentrt_events_free(agentrt_events* stream);

/* ---------------------------------------------------------------------------------------------- ASR */

/* Transcribes audio with the runtime's OpenAI-compatible transcription service (the config's model section
 * with type "openai", or OPENAI_BASE_URL / OPENAI_API_KEY for type "auto"). `audio` is borrowed for the call;
 * `mime_type` e.g. "audio/wav"; `options_json` NULL or {model?, language?, prompt?, responseFormat?,
 * filename?}. *out = the transcript text. AGENTRT_E_UNSUPPORTED when the runtime has no transcription
 * service (the offline demo), AGENTRT_E_TOO_LARGE for audio over the limit, AGENTRT_E_MODEL /
 * AGENTRT_E_IO when the service fails. Blocks for the length of the HTTP request. */
AGENTRT_API int32_t agentrt_transcribe(char** out, agentrt_runtime* rt, const void* audio, size_t audio_len,
                                       const char* mime_type, const char* options_json);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AGENTRT_H */
