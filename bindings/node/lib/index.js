'use strict';
// The idiomatic layer: Runtime, tools as (async) functions, a host model, events as an async iterator, errors
// mapped from status codes.
//
// Threading. JS runs on the main thread only. The library calls host tools and the host model on its worker
// threads; koffi queues those calls to the main thread, and the worker waits until the event loop runs them.
// So the main thread must never block in a call that waits for a worker: waits, event pulls, transcription and
// close run as koffi .async calls (on libuv's threads), every other call is short and synchronous. The tool and
// model trampolines return at once and do the host's work on a later tick; completions are pushed back with the
// (non-blocking) agentrt_tool_call_* / agentrt_model_call_* functions.

const capi = require('./capi');
const errors = require('./errors');

const { STATUS, fns, koffi, takeString } = capi;
const { Cancelled, InvalidState, Timeout, check, errorFor } = errors;

// The longest wait one C call takes (its timeout_ms is an int32_t).
const MAX_WAIT_MS = 2 ** 31 - 1;

// A wait of `ms` as one C call's timeout_ms: a fraction cut off; Infinity, or more than an int32_t holds, is the
// longest wait a call takes; NaN (or what is not a number) is refused.
function waitMs(ms) {
  if (typeof ms !== 'number' || Number.isNaN(ms)) {
    throw new errors.InvalidArgument(`a timeout is a number of milliseconds, not ${String(ms)}`);
  }
  return Math.trunc(Math.max(Math.min(ms, MAX_WAIT_MS), -MAX_WAIT_MS));
}

// Calls fn.async(...args) and resolves with its status.
function callAsync(fn, ...args) {
  return new Promise((resolve, reject) => {
    fn.async(...args, (err, rc) => (err ? reject(err) : resolve(rc)));
  });
}

// Resolves after a status from an .async call: its message stayed on the worker thread, so say which call.
function asyncError(name, code, detail) {
  return errorFor(code, `${name}: ${detail || fns.agentrt_status_name(code)}`);
}

function describe(e) {
  if (e instanceof Error) return `${e.name}: ${e.message}`;
  return String(e);
}

// The job_json of agentrt_tool_call_start_job from startJob's options (JSON.stringify leaves out the undefined ones).
function jobStartJson({ status = 'running', message, metadata, confirm = false, confirmMessage, timeoutMs } = {}) {
  return JSON.stringify({ status, confirm, message, metadata, confirmMessage, timeoutMs });
}

// What a job cancel hook threw (or rejected with) cannot reach the library: it becomes a process warning.
function hookFailed(e) {
  process.emitWarning(`the job cancel hook threw: ${describe(e)}`, { code: 'AGENTRT_JOB_HOOK' });
}

// A tool's result with a UI card ({type, version: "v1", data, actions}) for the front end.
class ToolResult {
  // stateDelta: a change of the thread's shared state, an RFC 6902 JSON Patch (an array of operations) applied to
  // the call's `state`, streamed as STATE_DELTA and committed with the result.
  constructor(result, ui, stateDelta) {
    this.result = result;
    this.ui = ui;
    this.stateDelta = stateDelta;
  }
}

// Pushes a host model's stream. Each method throws Cancelled once the turn was cancelled.
class ModelStream {
  constructor(call) {
    this._call = call;
  }
  text(delta) {
    check(fns.agentrt_model_call_text(this._call, delta));
  }
  reasoning(delta) {
    check(fns.agentrt_model_call_reasoning(this._call, delta));
  }
  toolCallStart(index, toolCallId, name) {
    check(fns.agentrt_model_call_tool_call_start(this._call, index, toolCallId, name));
  }
  toolCallArgs(index, delta) {
    check(fns.agentrt_model_call_tool_call_args(this._call, index, delta));
  }
}

// A thread's events as an async iterator: the committed ones after afterSeq, then the live tail. Ends after
// `runs` runs have ended (RUN_FINISHED / RUN_ERROR) when given, or when closed (close(), `break`, or the
// runtime closing). `timeoutMs` bounds the wait for each event (Timeout is thrown). Each event is the AG-UI
// object; its sequence number is the non-enumerable property `seq`.
class EventStream {
  constructor(runtime, threadId, { afterSeq = 0, runs, timeoutMs } = {}) {
    const out = [null];
    check(fns.agentrt_events_open(out, runtime._handle(), threadId, afterSeq));
    this._stream = out[0];
    this._pulling = false;
    this._closed = false;
    this._runsLeft = runs;
    this._timeoutMs = timeoutMs;
    this.lastSeq = afterSeq;
  }

  [Symbol.asyncIterator]() {
    return this;
  }

  static SLICE_MS = 250; // a pull waits at most this long on a libuv thread

  async next() {
    if (this._runsLeft !== undefined && this._runsLeft <= 0) return this._done();
    const deadline = this._timeoutMs === undefined ? undefined : Date.now() + this._timeoutMs;
    for (;;) {
      if (this._closed) return this._done();
      let slice = EventStream.SLICE_MS;
      if (deadline !== undefined) slice = Math.max(0, Math.min(slice, waitMs(deadline - Date.now())));
      const out = [null];
      const seq = [0];
      this._pulling = true;
      let rc;
      try {
        rc = await callAsync(fns.agentrt_events_next, out, seq, this._stream, slice);
      } finally {
        this._pulling = false;
      }
      if (this._closed) {
        // Closed while the pull ran: drop what it returned and end.
        if (rc === STATUS.OK) takeString(out[0]);
        return this._done();
      }
      if (rc === STATUS.OK) {
        const event = JSON.parse(takeString(out[0]));
        const n = Number(seq[0]);
        Object.defineProperty(event, 'seq', { value: n, enumerable: false });
        this.lastSeq = n;
        if (this._runsLeft !== undefined && (event.type === 'RUN_FINISHED' || event.type === 'RUN_ERROR')) {
          this._runsLeft -= 1;
        }
        return { value: event, done: false };
      }
      if (rc === STATUS.E_CANCELLED) {
        this._closed = true;
        return this._done();
      }
      if (rc !== STATUS.E_TIMEOUT) throw asyncError('agentrt_events_next', rc);
      if (deadline !== undefined && Date.now() >= deadline) {
        throw new Timeout(`agentrt_events_next: no event within ${this._timeoutMs} ms`);
      }
    }
  }

  async return() {
    this.close();
    return this._done();
  }

  // Closes the stream: a pull in progress returns at once and the iteration ends.
  close() {
    this._closed = true;
    if (this._stream !== null) fns.agentrt_events_close(this._stream);
    if (!this._pulling) this._free();
  }

  _done() {
    if (!this._pulling) this._free();
    return { value: undefined, done: true };
  }

  _free() {
    if (this._stream !== null) {
      fns.agentrt_events_free(this._stream);
      this._stream = null;
    }
  }
}

// An agentrt runtime. Open with Runtime.open(config, { model }); close with `await runtime.close()`. While open
// it keeps the process alive (see unref()).
// `model`: a host model, called as model(request, stream) (may be async); it returns the result ({text,
// toolCalls, usage, ...}), a string for a text answer, or undefined to use what it streamed, or throws.
class Runtime {
  static open(config = {}, { model } = {}) {
    return new Runtime(config, model);
  }

  constructor(config, model) {
    this._tools = new Map(); // user_data id -> tool function, until the library's destroy callback
    this._nextId = 1;
    this._registered = []; // koffi callbacks to unregister at close
    this._toolTrampoline = this._register((call, callJson, userData) => this._onTool(call, callJson, userData),
      capi.types.agentrt_tool_cb);
    this._destroyTrampoline = this._register((userData) => this._tools.delete(Number(userData)),
      capi.types.agentrt_destroy_cb);
    const out = [null];
    let rc;
    try {
      if (model) {
        this._model = model;
        this._modelTrampoline = this._register((call, request, userData) => this._onModel(call, request),
          capi.types.agentrt_model_cb);
        rc = fns.agentrt_runtime_open_with_model(out, JSON.stringify(config), this._modelTrampoline, null, null);
      } else {
        rc = fns.agentrt_runtime_open(out, JSON.stringify(config));
      }
      check(rc);
    } catch (e) {
      this._unregisterAll();
      throw e;
    }
    this._rt = out[0];
    // Keeps the event loop alive while the runtime is open, like an open server: the library's callbacks reach
    // JS through koffi's queue, which alone does not hold the loop open. unref() opts out.
    this._keepAlive = setInterval(() => {}, 1 << 30);
  }

  // Lets the process exit while the runtime is open (as net.Server.unref()); ref() undoes it.
  unref() {
    this._keepAlive?.unref();
    return this;
  }

  ref() {
    this._keepAlive?.ref();
    return this;
  }

  _register(fn, type) {
    const cb = koffi.register(fn, koffi.pointer(type));
    this._registered.push(cb);
    return cb;
  }

  _unregisterAll() {
    for (const cb of this._registered) koffi.unregister(cb);
    this._registered = [];
  }

  _handle() {
    if (!this._rt) throw new InvalidState('the runtime is closed');
    return this._rt;
  }

  _json(fn, ...args) {
    const out = [null];
    check(fn(out, this._handle(), ...args));
    return JSON.parse(takeString(out[0]));
  }

  // Cancels what runs, joins the workers (on a libuv thread, so the queued callbacks can still run), closes
  // the event streams, and unregisters the callbacks. Must be the last call.
  async close() {
    const rt = this._rt;
    if (!rt) return;
    this._rt = null;
    try {
      await callAsync(fns.agentrt_runtime_free, rt);
    } finally {
      clearInterval(this._keepAlive);
      this._tools.clear();
      this._unregisterAll();
    }
  }

  // ------------------------------------------------------------------------------------------------ tools

  // Registers a tool. spec: {name, description, parameters (JSON Schema), approval: "never"|"always", stages,
  // idempotent, timeoutMs}. fn(args, call) may be async; it returns a JSON value or a ToolResult, and fails
  // the call by throwing. `call` is {toolCallId, toolName, args, threadId, turnId, runId, userId, stage, jobId,
  // jobConfirmed} with a method call.startJob({status, message, metadata, confirm, confirmMessage, timeoutMs})
  // that answers "started job <jobId>" instead of a result (the return value is then ignored; call it before fn
  // settles). The host ends the job later with completeJob / failJob / cancelJob. With confirm: true the person
  // is asked first (an interrupt with reason "confirmation"); once it is resolved through resume(), fn runs
  // again with call.jobConfirmed true and the same jobId, and starts the work then. startJob returns the jobId
  // and throws InvalidArgument for bad options, InvalidState once the call was answered.
  tool(spec, fn) {
    if (typeof fn !== 'function') throw new TypeError('agentrt: tool(spec, fn) needs a function');
    const id = this._nextId++;
    this._tools.set(id, fn);
    // On failure the library calls destroy (which forgets the id) before returning.
    check(fns.agentrt_tool_register(this._handle(), JSON.stringify(spec), this._toolTrampoline, id,
      this._destroyTrampoline));
    return fn;
  }

  unregisterTool(name) {
    check(fns.agentrt_tool_unregister(this._handle(), name));
  }

  // Runs on the main thread, queued by koffi while a worker waits: return at once.
  _onTool(call, callJson, userData) {
    const fn = this._tools.get(Number(userData));
    setImmediate(() => this._runTool(call, callJson, fn));
  }

  async _runTool(call, callJson, fn) {
    const state = { open: true, answered: false }; // the handle is freed once fn settles
    try {
      if (!fn) throw new Error('the tool is no longer registered');
      const request = JSON.parse(callJson);
      Object.defineProperty(request, 'startJob', {
        value: (options) => {
          if (!state.open) throw new InvalidState('startJob: the tool call is not open (the tool has returned)');
          check(fns.agentrt_tool_call_start_job(call, jobStartJson(options)));
          state.answered = true;
          return request.jobId;
        },
      });
      const out = await fn(request.args, request);
      if (!state.answered) {
        const [result, ui] = out instanceof ToolResult ? [out.result, out.ui] : [out, undefined];
        const delta = out instanceof ToolResult ? out.stateDelta : undefined;
        let rc = delta === undefined || delta === null ? STATUS.OK
          : fns.agentrt_tool_call_state_delta(call, JSON.stringify(delta));
        if (rc === STATUS.OK) {
          rc = fns.agentrt_tool_call_complete(call, JSON.stringify(result ?? null),
            ui === undefined ? null : JSON.stringify(ui));
        }
        if (rc !== STATUS.OK) {
          fns.agentrt_tool_call_fail(call, 'tool_error', `the tool's result was refused: ${fns.agentrt_last_error()}`);
        }
      }
    } catch (e) {
      if (!state.answered) fns.agentrt_tool_call_fail(call, 'tool_error', describe(e));
    } finally {
      state.open = false;
      fns.agentrt_tool_call_free(call);
    }
  }

  _onModel(call, requestJson) {
    setImmediate(() => this._runModel(call, requestJson));
  }

  async _runModel(call, requestJson) {
    try {
      const out = await this._model(JSON.parse(requestJson), new ModelStream(call));
      const result = out === undefined || out === null ? {} : typeof out === 'string' ? { text: out } : out;
      if (fns.agentrt_model_call_finish(call, JSON.stringify(result)) === STATUS.E_INVALID_ARGUMENT) {
        fns.agentrt_model_call_fail(call, STATUS.E_MODEL, fns.agentrt_last_error());
      }
    } catch (e) {
      if (!(e instanceof Cancelled)) {
        const code = e instanceof errors.AgentrtError ? e.code : STATUS.E_MODEL;
        fns.agentrt_model_call_fail(call, code, describe(e));
      }
    } finally {
      fns.agentrt_model_call_free(call);
    }
  }

  // ------------------------------------------------------------------------------------------------ turns

  // Starts a turn with a new user message (a string, an array of content parts, or a message object). Returns
  // {threadId, turnId, runId, existing: false, firstSeq}; a repeated clientMessageId returns the first turn with
  // existing: true, its status and deltaMessages (the messages it has added so far, as turnMessages()).
  // context: [{description, value}] given to the model for this run only (AG-UI's Context), never stored. state:
  // the thread's shared state as the client has it (AG-UI state): the run starts with its STATE_SNAPSHOT.
  // clientTools: [{name, description, parameters?}] tools the caller runs itself (AG-UI client-provided tools): a
  // call to one pauses the turn (WAITING_CLIENT) until resume(..., { answers }) answers it.
  startTurn(threadId, message, { userId, runId, clientMessageId, context, state, clientTools, traceparent } = {}) {
    const msg = typeof message === 'string' || Array.isArray(message) ? { role: 'user', content: message } : message;
    const input = { threadId, userId, message: msg };
    if (runId) input.runId = runId;
    if (clientMessageId) input.clientMessageId = clientMessageId;
    if (context !== undefined) input.context = context;
    if (state !== undefined) input.state = state;
    if (clientTools !== undefined) input.tools = clientTools;
    if (traceparent) input.traceparent = traceparent;  // W3C trace context: the run's span is its child
    return this._json(fns.agentrt_turn_start, JSON.stringify(input));
  }

  // Starts a turn from an AG-UI RunAgentInput: only its last user message is taken.
  startRun(runAgentInput, { userId } = {}) {
    return this._json(fns.agentrt_turn_start, JSON.stringify({ ...runAgentInput, userId }));
  }

  // Answers every open interrupt and every pending client tool call: decisions are {interruptId, action:
  // "approve"|"reject"|"cancel", editedArgs?, reason?}; answers are {toolCallId, content, error?, id?} (content:
  // what the client tool returned, text or JSON text). The same approvalRequestId again returns the first answer
  // and runs nothing. context, clientTools, state: what the model is told and offered in the continuation run, and
  // the thread's state it starts with (as startTurn's).
  resume(turnId, approvalRequestId, decisions = [], { runId, context, answers, clientTools, state, traceparent } = {}) {
    const body = { decisions };
    if (answers !== undefined) body.answers = answers;
    if (runId) body.runId = runId;
    if (context !== undefined) body.context = context;
    if (clientTools !== undefined) body.tools = clientTools;
    if (state !== undefined) body.state = state;
    if (traceparent) body.traceparent = traceparent;
    return this._json(fns.agentrt_turn_resume, turnId, approvalRequestId, JSON.stringify(body));
  }

  // InvalidState when the turn does not wait for approval.
  approveAll(turnId, { action = 'approve' } = {}) {
    const pending = this.interrupts(turnId);
    if (pending.interrupts.length === 0) {
      throw new InvalidState(`approveAll: turn ${turnId} is ${pending.status}, not waiting for approval`);
    }
    return this.resume(turnId, pending.approvalRequestId,
      pending.interrupts.map((i) => ({ interruptId: i.id, action })));
  }

  cancel(turnId) {
    check(fns.agentrt_turn_cancel(this._handle(), turnId));
  }

  turn(turnId) {
    return this._json(fns.agentrt_turn_get, turnId);
  }

  // Resolves with the turn's record once it is neither RUNNING nor RESUMING; rejects with Timeout.
  async wait(turnId, { timeoutMs = 30000 } = {}) {
    this.turn(turnId); // NotFound (with the library's message) for an unknown turn
    const out = [null];
    const rc = await callAsync(fns.agentrt_turn_wait, out, this._handle(), turnId, waitMs(timeoutMs));
    if (rc === STATUS.OK) return JSON.parse(takeString(out[0]));
    if (rc === STATUS.E_TIMEOUT) throw new Timeout(`agentrt_turn_wait: turn ${turnId} did not settle in ${timeoutMs} ms`);
    throw asyncError('agentrt_turn_wait', rc);
  }

  interrupts(turnId) {
    return this._json(fns.agentrt_turn_interrupts, turnId);
  }

  // The messages a turn added to its thread, in order (its user message first). NotFound for an unknown turn.
  turnMessages(turnId) {
    return this._json(fns.agentrt_turn_messages, turnId);
  }

  history(threadId) {
    return this._json(fns.agentrt_thread_history, threadId);
  }

  // The thread's shared state (AG-UI state) as its events leave it; null when it never had one.
  threadState(threadId) {
    return this._json(fns.agentrt_thread_state, threadId);
  }

  events(threadId, options = {}) {
    return new EventStream(this, threadId, options);
  }

  // The user's thread's committed events after `afterSeq`, at most `limit` (1..1000), without waiting: an array
  // of {seq, event}; [] past the last one. NotFound for an unknown, deleted or another user's thread.
  eventsPage(threadId, userId, { afterSeq = 0, limit = 1000 } = {}) {
    return this._json(fns.agentrt_events_page, threadId, userId, afterSeq, limit);
  }

  // ---------------------------------------------------------------------------------------- MCP servers

  // The config's MCP servers: [{name, transport, state, protocolVersion, server, version, tools, restarts, error}].
  mcpServers() {
    return this._json(fns.agentrt_mcp_servers);
  }

  // Their tools: [{name, server, tool, description, inputSchema, outputSchema, hash, offered, problem?, changed?}];
  // a tool with `changed` is held back until approveMcpTool(name).
  mcpTools() {
    return this._json(fns.agentrt_mcp_tools);
  }

  // Offers the changed definition of MCP tool `name` (SERVER__TOOL). NotFound for a name that is not an MCP tool,
  // InvalidState when its definition has not changed.
  approveMcpTool(name) {
    return this._json(fns.agentrt_mcp_tool_approve, name);
  }

  // ---------------------------------------------------------------------------------------- spend

  // What was spent, as committed: scope 'turn' | 'thread' | 'user' and its id. {modelCalls, toolCalls,
  // inputTokens, outputTokens, cost, unpricedModels?, usage}. NotFound for an unknown turn.
  spend(scope, id) {
    return this._json(fns.agentrt_spend, scope, id);
  }

  // Sends the spans ended so far to the OTLP collector now; resolves true once the collector has answered for each
  // (exported, or counted as dropped), false when timeoutMs passed first (they are still sent). True at once with
  // tracing off. Off the event loop: a collector in this process answers meanwhile.
  async flushTraces({ timeoutMs = 10000 } = {}) {
    const rc = await callAsync(fns.agentrt_flush_traces, this._handle(), waitMs(timeoutMs));
    if (rc === STATUS.OK) return true;
    if (rc === STATUS.E_TIMEOUT) return false;
    throw asyncError('agentrt_flush_traces', rc);
  }

  // ---------------------------------------------------------------------------------------- threads, uploads

  // The user's threads that are not deleted, most recently updated first: [{id, title, createdAt, updatedAt,
  // lastSeq}].
  threads(userId) {
    return this._json(fns.agentrt_threads_list, userId);
  }

  // Soft-deletes the user's thread (a running or waiting turn on it is cancelled first). NotFound for an
  // unknown, deleted or another user's thread.
  deleteThread(threadId, userId) {
    check(fns.agentrt_thread_delete(this._handle(), threadId, userId));
  }

  // Stores a file (a Buffer or Uint8Array) for the user's thread (theirs or not started yet): {id, url,
  // mimeType, size, expiresAt, ref, part}, `part` the content part that sends it in a message. Unsupported
  // without an object store.
  upload(userId, threadId, data, mimeType) {
    const bytes = Buffer.isBuffer(data) ? data : Buffer.from(data);
    return this._json(fns.agentrt_upload_create, userId, threadId, bytes, bytes.length, mimeType);
  }

  // ------------------------------------------------------------------------------------------------- jobs
  // Jobs are started by tools (call.startJob) and ended by the host, from any thread or any process sharing the
  // store. A job is {id, threadId, turnId, toolCallId, toolName, status, progress, message, result, assets,
  // error: {code, message}, metadata, confirmation, delivered, version, ...} (see agentrt.h). A finished job's
  // outcome is added to the thread's history and streamed as a run with a CUSTOM "agentrt.job" event. The
  // methods that change a job return its new record and throw NotFound for an unknown job, InvalidState when it
  // has ended or waits for the person's confirmation, InvalidArgument / TooLarge for bad values.

  // The job's record, or null for an unknown job.
  job(jobId) {
    const out = [null];
    const rc = fns.agentrt_job_get(out, this._handle(), jobId);
    if (rc === STATUS.E_NOT_FOUND) return null;
    check(rc);
    return JSON.parse(takeString(out[0]));
  }

  // The thread's jobs, in creation order.
  jobs(threadId) {
    return this._json(fns.agentrt_jobs_list, threadId);
  }

  // Reports progress: status "queued"|"running" (queued may become running), progress 0..1, a message.
  updateJob(jobId, { status, progress, message } = {}) {
    return this._json(fns.agentrt_job_update, jobId, JSON.stringify({ status, progress, message }));
  }

  // Ends the job successfully with `result` (any JSON value) and `assets` (references to what it made).
  completeJob(jobId, result, { assets, message } = {}) {
    return this._json(fns.agentrt_job_complete, jobId, JSON.stringify({ result: result ?? null, assets, message }));
  }

  // Ends the job with an error code (undefined: "job_failed") and message.
  failJob(jobId, code, message) {
    return this._json(fns.agentrt_job_fail, jobId, code ?? null, message ?? null);
  }

  // Cancels the job and calls the job cancel hook with its new record (cancelling again changes nothing).
  cancelJob(jobId, reason) {
    return this._json(fns.agentrt_job_cancel, jobId, reason ?? null);
  }

  // Sets fn(job) to be told when a job is cancelled or expires (status "failed", error code "timeout"), so the
  // work can be stopped; null removes it. It runs on the main thread: at once inside cancelJob(), or queued by
  // koffi when the runtime's sweeper expires a job (the sweeper waits for it). What it throws becomes a process
  // warning.
  setJobCancelHook(fn) {
    const rt = this._handle();
    if (fn === null || fn === undefined) {
      check(fns.agentrt_runtime_set_job_cancel_hook(rt, null, null, null));
      this._jobCancelHook = undefined;
      return;
    }
    if (typeof fn !== 'function') throw new TypeError('agentrt: setJobCancelHook(fn) needs a function or null');
    if (!this._jobHookTrampoline) {
      this._jobHookTrampoline = this._register((jobJson) => this._onJobCancelled(jobJson), capi.types.agentrt_job_cb);
    }
    this._jobCancelHook = fn;
    check(fns.agentrt_runtime_set_job_cancel_hook(rt, this._jobHookTrampoline, null, null));
  }

  _onJobCancelled(jobJson) {
    const fn = this._jobCancelHook;
    if (!fn) return;
    try {
      const r = fn(JSON.parse(jobJson));
      if (r && typeof r.then === 'function') r.then(undefined, hookFailed);
    } catch (e) {
      hookFailed(e);
    }
  }

  // Speech to text with the config's OpenAI-compatible service (a Buffer or Uint8Array of audio). Options:
  // model, language, prompt, responseFormat, filename.
  async transcribe(audio, mimeType, options) {
    const bytes = Buffer.isBuffer(audio) ? audio : Buffer.from(audio);
    const out = [null];
    const rc = await callAsync(fns.agentrt_transcribe, out, this._handle(), bytes, bytes.length, mimeType,
      options ? JSON.stringify(options) : null);
    if (rc !== STATUS.OK) {
      const hints = {
        [STATUS.E_UNSUPPORTED]: 'the runtime has no transcription service (config model.type "openai")',
        [STATUS.E_INVALID_ARGUMENT]: 'the audio, MIME type or options were refused',
      };
      throw asyncError('agentrt_transcribe', rc, hints[rc]);
    }
    return takeString(out[0]);
  }
}

function version() {
  return fns.agentrt_version();
}

module.exports = {
  Runtime, EventStream, ModelStream, ToolResult, version, ABI_VERSION: capi.ABI_VERSION, STATUS, ...errors,
};
