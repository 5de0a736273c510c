"""The idiomatic layer: Runtime (a context manager), @runtime.tool, event iterators, exceptions from status codes.

Threading: tool and model functions run on the runtime's worker threads (ctypes takes the GIL for them); every
blocking call (wait, event pulls, close) releases the GIL while it waits in the library.
"""
import asyncio
import ctypes
import inspect
import itertools
import json
import threading
import time
import weakref

from . import _capi
from ._capi import lib, take_string
from .errors import AgentrtError, Cancelled, InvalidArgument, InvalidState, Timeout, check, error_for
from .schema import description_of, schema_for_function

# ------------------------------------------------------------------------------------------ keep-alive registry
# Host objects the library holds as user_data: a token (an int passed as void*) maps to the object until the
# library calls the destroy callback (_release) — exactly once per registration, on any thread.
_registry_lock = threading.Lock()
_registry = {}
_tokens = itertools.count(1)


def _keep(obj):
    token = next(_tokens)
    with _registry_lock:
        _registry[token] = obj
    return token


def _lookup(token):
    with _registry_lock:
        return _registry.get(token)


@_capi.agentrt_destroy_cb
def _release(user_data):
    with _registry_lock:
        _registry.pop(user_data or 0, None)


def _dumps(value):
    """`value` as the JSON text the library takes. NaN and the infinities have no JSON form (Python would write
    `NaN`, which the library refuses as unparsable): InvalidArgument instead."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except ValueError as e:
        raise InvalidArgument(f"a value JSON cannot carry: {e}") from None


def _given(**fields):
    """The fields that are not None: the optional members of a JSON body, left out when not given."""
    return {key: value for key, value in fields.items() if value is not None}


def _last_error():
    return (lib.agentrt_last_error() or b"").decode("utf-8", "replace")


# The longest wait one C call takes (its timeout_ms is an int32_t).
_MAX_WAIT_MS = 2**31 - 1


def _wait_ms(seconds):
    """A wait of `seconds` as one C call's timeout_ms: inf, or more than an int32_t holds, is the longest wait a call
    takes (the callers that wait longer call again); NaN is refused."""
    if seconds != seconds:
        raise InvalidArgument("a timeout is a number of seconds, not NaN")
    return int(max(min(seconds * 1000, _MAX_WAIT_MS), -_MAX_WAIT_MS))


def _run(result):
    """A coroutine returned by an async tool or model runs to completion on the calling (worker) thread."""
    return asyncio.run(result) if inspect.iscoroutine(result) else result


# ------------------------------------------------------------------------------------------------- tools

class ToolCall:
    """What a tool is called with. Annotate a tool parameter with ToolCall to receive it.

    `job_id` is the id the call's job gets if the tool answers with start_job() (hand it to the system doing the
    work, which reports back with Runtime.complete_job); `job_confirmed` is True when the tool runs again, with the
    same job_id, because the person confirmed that job: start the work now.
    """

    def __init__(self, data, handle=None):
        self.tool_call_id = data.get("toolCallId", "")
        self.tool_name = data.get("toolName", "")
        self.args = data.get("args", {})
        self.thread_id = data.get("threadId", "")
        self.turn_id = data.get("turnId", "")
        self.run_id = data.get("runId", "")
        self.user_id = data.get("userId", "")
        self.stage = data.get("stage", "")
        self.job_id = data.get("jobId", "")
        self.job_confirmed = bool(data.get("jobConfirmed", False))
        self.state = data.get("state", {})  # the thread's shared state when the call started ({} when none)
        self._handle = handle  # the library's agentrt_tool_call, until the tool returns
        self._lock = threading.Lock()
        self._answered = False

    def start_job(self, *, status="running", message=None, metadata=None, confirm=False, confirm_message=None,
                  timeout_ms=None):
        """Answers the call with "started job <job_id>" instead of a result; the tool's return value is then
        ignored. The turn goes on without waiting; the host ends the job later with Runtime.complete_job /
        fail_job / cancel_job, from any thread. Call it before the tool returns.

        status: "running" or "queued"; metadata: a dict kept with the job; timeout_ms: how long the job may run
        (default: the config's job_timeout_ms). confirm=True asks the person first: the turn pauses with an
        interrupt {reason: "confirmation", message: confirm_message}; once it is resolved (Runtime.resume) the tool
        runs again with job_confirmed True and starts the work then. Returns job_id. Raises InvalidArgument for a
        bad value, InvalidState when the call was already answered.
        """
        job = {"status": status, "confirm": confirm,
               **_given(message=message, metadata=metadata, confirmMessage=confirm_message, timeoutMs=timeout_ms)}
        with self._lock:
            if not self._handle:
                raise error_for(_capi.E_INVALID_STATE, "start_job: the tool call is not open (the tool has returned)")
            check(lib.agentrt_tool_call_start_job(self._handle, _dumps(job)))
            self._answered = True
        return self.job_id

    def _close(self):
        with self._lock:
            self._handle = None

    def __repr__(self):
        return f"ToolCall({self.tool_name} {self.tool_call_id} args={self.args!r})"


class ToolResult:
    """A tool's result with a UI card ({type, version:"v1", data, actions}) for the front end, and a change of the
    thread's shared state: state_delta, an RFC 6902 JSON Patch (a list of operations) applied to ToolCall.state,
    streamed as STATE_DELTA and committed with the result."""

    def __init__(self, result, ui=None, state_delta=None):
        self.result = result
        self.ui = ui
        self.state_delta = state_delta


class _ToolEntry:
    def __init__(self, fn):
        self.fn = fn
        sig = inspect.signature(fn)
        hints = {}
        try:
            import typing
            hints = typing.get_type_hints(fn)
        except Exception:  # pragma: no cover - hints that cannot be resolved are not context parameters
            pass
        self.context_params = [n for n in sig.parameters if hints.get(n) is ToolCall]

    def invoke(self, call):
        kwargs = dict(call.args) if isinstance(call.args, dict) else {}
        for name in self.context_params:
            kwargs[name] = call
        return _run(self.fn(**kwargs))


@_capi.agentrt_tool_cb
def _tool_trampoline(call, call_json, user_data):
    # Runs on a runtime worker thread. Nothing may escape into ctypes: every path completes and frees the call.
    context = None
    try:
        entry = _lookup(user_data)
        try:
            if entry is None:
                raise RuntimeError("the tool is no longer registered")
            context = ToolCall(json.loads(call_json), call)
            out = entry.invoke(context)
            if not context._answered:  # start_job() answered it otherwise
                result, ui = (out.result, out.ui) if isinstance(out, ToolResult) else (out, None)
                delta = out.state_delta if isinstance(out, ToolResult) else None
                rc = _capi.OK if delta is None else lib.agentrt_tool_call_state_delta(call, _dumps(delta))
                if rc == _capi.OK:
                    rc = lib.agentrt_tool_call_complete(call, _dumps(result), _dumps(ui) if ui is not None else None)
                if rc != _capi.OK:
                    lib.agentrt_tool_call_fail(call, b"tool_error",
                                               ("the tool's result was refused: " + _last_error()).encode())
        except Exception as e:  # the tool raised: the model is told why (unless it had started a job)
            if context is None or not context._answered:
                lib.agentrt_tool_call_fail(call, b"tool_error",
                                           f"{type(e).__name__}: {e}".encode("utf-8", "replace"))
    except BaseException:  # pragma: no cover - keep the worker alive whatever happens
        pass
    finally:
        if context is not None:
            context._close()
        lib.agentrt_tool_call_free(call)


@_capi.agentrt_job_cb
def _job_hook_trampoline(job_json, user_data):
    # Runs on the thread that cancelled the job, or on the runtime's sweeper thread (expiry). An exception the
    # hook raises is reported by ctypes (sys.unraisablehook) and dropped.
    fn = _lookup(user_data)
    if fn is not None:
        _run(fn(json.loads(job_json)))


# ------------------------------------------------------------------------------------------------ models

class ModelStream:
    """Pushes a host model's stream. Each method raises Cancelled once the turn was cancelled."""

    def __init__(self, call):
        self._call = call

    def text(self, delta):
        check(lib.agentrt_model_call_text(self._call, delta.encode("utf-8")))

    def reasoning(self, delta):
        check(lib.agentrt_model_call_reasoning(self._call, delta.encode("utf-8")))

    def tool_call_start(self, index, tool_call_id, name):
        check(lib.agentrt_model_call_tool_call_start(self._call, index, tool_call_id.encode(), name.encode()))

    def tool_call_args(self, index, delta):
        check(lib.agentrt_model_call_tool_call_args(self._call, index, delta.encode("utf-8")))


@_capi.agentrt_model_cb
def _model_trampoline(call, request_json, user_data):
    # Runs on a runtime worker thread; every path ends the call and frees the handle.
    try:
        fn = _lookup(user_data)
        try:
            if fn is None:
                raise RuntimeError("the model is no longer registered")
            out = _run(fn(json.loads(request_json), ModelStream(call)))
            result = {} if out is None else ({"text": out} if isinstance(out, str) else dict(out))
            if lib.agentrt_model_call_finish(call, _dumps(result)) == _capi.E_INVALID_ARGUMENT:
                lib.agentrt_model_call_fail(call, _capi.E_MODEL, _last_error().encode())
        except Cancelled:
            pass  # the turn was cancelled: nobody waits for the answer
        except AgentrtError as e:
            lib.agentrt_model_call_fail(call, e.code, str(e).encode("utf-8", "replace"))
        except Exception as e:
            lib.agentrt_model_call_fail(call, _capi.E_MODEL, f"{type(e).__name__}: {e}".encode("utf-8", "replace"))
    except BaseException:  # pragma: no cover
        pass
    finally:
        lib.agentrt_model_call_free(call)


# ------------------------------------------------------------------------------------------------ events

class Event(dict):
    """An AG-UI event (the JSON object) with its per-thread sequence number in `seq`."""

    def __init__(self, data, seq):
        super().__init__(data)
        self.seq = seq

    @property
    def type(self):
        return self.get("type")


class EventStream:
    """Iterates a thread's events: the committed ones after `after_seq`, then the live tail.

    Iteration stops after `runs` runs have ended (RUN_FINISHED/RUN_ERROR) when `runs` is given, or when the
    stream is closed (close() from any thread, or the runtime closing). `timeout` (seconds) bounds the wait for
    each event: Timeout is raised when it passes. Use as a context manager, or call close().
    """

    _SLICE_MS = 250  # a pull blocks at most this long, so Ctrl-C and close() are noticed

    def __init__(self, runtime, thread_id, after_seq=0, runs=None, timeout=None):
        out = ctypes.c_void_p()
        check(lib.agentrt_events_open(ctypes.byref(out), runtime._handle(), thread_id.encode(), after_seq))
        self._stream = out.value
        self._lock = threading.Lock()
        self._pulling = False
        self._closed = False
        self._runs_left = runs
        self._timeout = timeout
        self.last_seq = after_seq

    def __iter__(self):
        return self

    def __next__(self):
        if self._runs_left is not None and self._runs_left <= 0:
            raise StopIteration
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        while True:
            slice_ms = self._SLICE_MS
            if deadline is not None:
                slice_ms = max(0, min(slice_ms, _wait_ms(deadline - time.monotonic())))
            event = self.next(slice_ms / 1000)
            if event is not None:
                if self._runs_left is not None and event.type in ("RUN_FINISHED", "RUN_ERROR"):
                    self._runs_left -= 1
                return event
            if self._closed:
                raise StopIteration
            if deadline is not None and time.monotonic() >= deadline:
                raise Timeout(f"no event within {self._timeout} s")

    def next(self, timeout=0.0):
        """One pull: the next event, or None when `timeout` seconds pass first or the stream is closed."""
        with self._lock:
            if self._closed or not self._stream:
                return None
            self._pulling = True
            stream = self._stream
        out, seq = ctypes.c_void_p(), ctypes.c_int64()
        try:
            rc = lib.agentrt_events_next(ctypes.byref(out), ctypes.byref(seq), stream, _wait_ms(timeout))
            if rc == _capi.OK:
                self.last_seq = seq.value
                return Event(json.loads(take_string(out.value)), seq.value)
            if rc == _capi.E_TIMEOUT:
                return None
            if rc == _capi.E_CANCELLED:
                self._closed = True
                return None
            raise error_for(rc)
        finally:
            with self._lock:
                self._pulling = False
                if self._closed:
                    self._free_locked()

    def close(self):
        """Closes the stream (from any thread): a pull in progress returns at once, iteration stops."""
        with self._lock:
            if self._stream:
                lib.agentrt_events_close(self._stream)
            self._closed = True
            if not self._pulling:
                self._free_locked()

    def _free_locked(self):
        if self._stream:
            lib.agentrt_events_free(self._stream)
            self._stream = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass


# ----------------------------------------------------------------------------------------------- runtime

class TurnHandle(dict):
    """The answer to start_turn: {threadId, turnId, runId, existing, firstSeq}, with attribute access. A repeated
    start (existing) has instead the first turn's status and deltaMessages: the messages that turn has added so
    far (see Runtime.turn_messages)."""

    turn_id = property(lambda self: self["turnId"])
    run_id = property(lambda self: self["runId"])
    thread_id = property(lambda self: self["threadId"])
    existing = property(lambda self: self["existing"])
    first_seq = property(lambda self: self.get("firstSeq", 0))  # 0 for a repeated start (existing)
    status = property(lambda self: self.get("status"))  # a repeated start's: its turn's status
    delta_messages = property(lambda self: self.get("deltaMessages", []))


class Runtime:
    """An agentrt runtime: opens from a config dict (see agentrt.h), runs turns on its worker threads.

    `model`: a host model, called as model(request: dict, stream: ModelStream) on a worker thread; it returns
    the result ({text, toolCalls, usage, ...}, a str for a text answer, or None to use what it streamed) or
    raises. Thread-safe; close() (or leaving the `with` block) must be the last call.
    """

    def __init__(self, config=None, *, model=None, **options):
        cfg = dict(config or {})
        cfg.update(options)
        out = ctypes.c_void_p()
        if model is not None:
            token = _keep(model)
            rc = lib.agentrt_runtime_open_with_model(ctypes.byref(out), _dumps(cfg), _model_trampoline, token,
                                                     _release)
        else:
            rc = lib.agentrt_runtime_open(ctypes.byref(out), _dumps(cfg))
        check(rc)
        self._rt = out.value
        # A runtime that is never closed is freed when collected, or at interpreter exit at the latest (while
        # Python can still run the callbacks its workers may be in).
        self._finalizer = weakref.finalize(self, lib.agentrt_runtime_free, self._rt)

    # -- lifetime
    def close(self):
        """Cancels what runs, joins the workers, closes open event streams, releases the tools."""
        if self._rt:
            self._rt = None
            self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _handle(self):
        if not self._rt:
            raise error_for(_capi.E_INVALID_STATE, "the runtime is closed")
        return self._rt

    def _call_json(self, fn, *args):
        out = ctypes.c_void_p()
        check(fn(ctypes.byref(out), self._handle(), *args))
        return json.loads(take_string(out.value))

    # -- tools
    def tool(self, fn=None, *, name=None, description=None, parameters=None, approval="never", stages=None,
             idempotent=False, timeout=None):
        """Registers a function as a tool (usable as @runtime.tool or @runtime.tool(approval="always")).

        The JSON Schema of its arguments comes from the type hints (or `parameters`), the description from the
        docstring. The function is called with the arguments as keyword arguments (plus any parameter annotated
        ToolCall); it returns a JSON value or a ToolResult, may be async, and fails the call by raising.
        """
        def register(f):
            if approval is True or approval is False:
                policy = "always" if approval else "never"
            else:
                policy = approval
            spec = {"name": name or f.__name__,
                    "description": description if description is not None else description_of(f),
                    "parameters": parameters if parameters is not None else schema_for_function(f, (ToolCall,)),
                    "approval": policy,
                    "idempotent": bool(idempotent)}
            if stages is not None:
                spec["stages"] = list(stages)
            if timeout is not None:
                spec["timeoutMs"] = int(timeout * 1000)
            token = _keep(_ToolEntry(f))
            check(lib.agentrt_tool_register(self._handle(), _dumps(spec), _tool_trampoline, token, _release))
            return f

        return register(fn) if fn is not None else register

    def unregister_tool(self, name):
        check(lib.agentrt_tool_unregister(self._handle(), name.encode()))

    # -- turns
    def start_turn(self, thread_id, message, *, user_id, run_id=None, client_message_id=None, context=None,
                   state=None, client_tools=None, traceparent=None):
        """Starts a turn with a new user message (a str, a list of content parts, or a message dict). context:
        [{description, value}] given to the model for this run only (AG-UI's Context), never stored. state: the
        thread's shared state as the client has it (AG-UI state): the run starts with its STATE_SNAPSHOT.
        client_tools: [{name, description, parameters?}] tools the caller runs itself (AG-UI client-provided tools):
        a call to one pauses the turn (WAITING_CLIENT) until resume(..., answers=[...]) answers it. traceparent: a W3C
        trace context whose span the run's span (config `tracing`) is a child of."""
        if isinstance(message, str) or isinstance(message, list):
            message = {"role": "user", "content": message}
        data = {"threadId": thread_id, "userId": user_id, "message": message}
        if run_id:
            data["runId"] = run_id
        if client_message_id:
            data["clientMessageId"] = client_message_id
        if context is not None:
            data["context"] = context
        if state is not None:
            data["state"] = state
        if client_tools is not None:
            data["tools"] = list(client_tools)
        if traceparent:
            data["traceparent"] = traceparent
        return TurnHandle(self._call_json(lib.agentrt_turn_start, _dumps(data)))

    def start_run(self, run_agent_input, *, user_id):
        """Starts a turn from an AG-UI RunAgentInput: only its last user message is taken."""
        data = dict(run_agent_input)
        data["userId"] = user_id
        return TurnHandle(self._call_json(lib.agentrt_turn_start, _dumps(data)))

    def resume(self, turn_id, approval_request_id, decisions=(), *, answers=None, run_id=None, context=None,
               client_tools=None, state=None, traceparent=None):
        """Answers every open interrupt and every pending client tool call: decisions are {interruptId, action:
        approve|reject|cancel, editedArgs?, reason?}; answers are {toolCallId, content, error?, id?} (content: what
        the client tool returned, as text or JSON text). The same approval_request_id again returns the first answer
        and runs nothing. context, client_tools, state: what the model is told and offered in the continuation run,
        and the thread's state it starts with, and the trace context of its span (as start_turn's)."""
        body = {"decisions": list(decisions)}
        if answers is not None:
            body["answers"] = list(answers)
        if run_id:
            body["runId"] = run_id
        if context is not None:
            body["context"] = context
        if client_tools is not None:
            body["tools"] = list(client_tools)
        if state is not None:
            body["state"] = state
        if traceparent:
            body["traceparent"] = traceparent
        return self._call_json(lib.agentrt_turn_resume, turn_id.encode(), approval_request_id.encode(), _dumps(body))

    def approve_all(self, turn_id, *, action="approve"):
        """Resumes a waiting turn with the same action for every open interrupt. InvalidState when the turn does not
        wait for approval."""
        pending = self.interrupts(turn_id)
        if not pending["interrupts"]:
            raise InvalidState(f"approve_all: turn {turn_id} is {pending['status']}, not waiting for approval")
        decisions = [{"interruptId": i["id"], "action": action} for i in pending["interrupts"]]
        return self.resume(turn_id, pending["approvalRequestId"], decisions)

    def cancel(self, turn_id):
        check(lib.agentrt_turn_cancel(self._handle(), turn_id.encode()))

    def turn(self, turn_id):
        return self._call_json(lib.agentrt_turn_get, turn_id.encode())

    def wait(self, turn_id, timeout=30.0):
        """Waits until the turn is neither RUNNING nor RESUMING; returns its record. Raises Timeout after `timeout`
        seconds (math.inf: no deadline)."""
        deadline = time.monotonic() + timeout  # inf: no deadline
        while True:
            left_ms = max(0, _wait_ms(deadline - time.monotonic()))
            out = ctypes.c_void_p()
            rc = lib.agentrt_turn_wait(ctypes.byref(out), self._handle(), turn_id.encode(), min(left_ms, 250))
            if rc == _capi.OK:
                return json.loads(take_string(out.value))
            if rc != _capi.E_TIMEOUT or left_ms == 0:
                raise error_for(rc)

    def interrupts(self, turn_id):
        return self._call_json(lib.agentrt_turn_interrupts, turn_id.encode())

    def turn_messages(self, turn_id):
        """The messages a turn added to its thread, in order (its user message first). NotFound for an unknown
        turn."""
        return self._call_json(lib.agentrt_turn_messages, turn_id.encode())

    def thread_state(self, thread_id):
        """The thread's shared state (AG-UI state) as its events leave it; None when it never had one."""
        return self._call_json(lib.agentrt_thread_state, thread_id.encode())

    def history(self, thread_id):
        return self._call_json(lib.agentrt_thread_history, thread_id.encode())

    def events(self, thread_id, after_seq=0, *, runs=None, timeout=None):
        return EventStream(self, thread_id, after_seq, runs, timeout)

    def events_page(self, thread_id, user_id, after_seq=0, limit=1000):
        """The user's thread's committed events after `after_seq`, at most `limit` (1..1000), without waiting:
        a list of {seq, event}; [] past the last one. NotFound for an unknown, deleted or another user's
        thread."""
        return self._call_json(lib.agentrt_events_page, thread_id.encode(), user_id.encode(), after_seq, limit)

    # -- MCP servers
    def mcp_servers(self):
        """The config's MCP servers: a list of {name, transport, state, protocolVersion, server, version, tools,
        restarts, error}."""
        return self._call_json(lib.agentrt_mcp_servers)

    def mcp_tools(self):
        """Their tools: a list of {name, server, tool, description, inputSchema, outputSchema, hash, offered,
        problem?, changed?}; a tool with `changed` is held back until approve_mcp_tool(name)."""
        return self._call_json(lib.agentrt_mcp_tools)

    def approve_mcp_tool(self, name):
        """Offers the changed definition of MCP tool `name` (SERVER__TOOL). NotFound for a name that is not an MCP
        tool, InvalidState when its definition has not changed."""
        return self._call_json(lib.agentrt_mcp_tool_approve, name.encode())

    # -- spend
    def spend(self, scope, id):
        """What was spent, as committed: scope "turn", "thread" or "user" and its id. A dict {modelCalls,
        toolCalls, inputTokens, outputTokens, cost, unpricedModels?, usage}. NotFound for an unknown turn."""
        return self._call_json(lib.agentrt_spend, scope.encode(), id.encode())

    def flush_traces(self, timeout=10.0):
        """Sends the spans ended so far to the OTLP collector now and waits up to `timeout` seconds for its answers:
        True once each was exported or counted as dropped, False when the time passed first (they are still sent).
        True at once with tracing off. InvalidArgument for a negative timeout."""
        rc = lib.agentrt_flush_traces(self._handle(), _wait_ms(timeout))
        if rc == _capi.E_TIMEOUT:
            return False
        check(rc)
        return True

    # -- threads and uploads
    def threads(self, user_id):
        """The user's threads that are not deleted, most recently updated first: a list of
        {id, title, createdAt, updatedAt, lastSeq}."""
        return self._call_json(lib.agentrt_threads_list, user_id.encode())

    def delete_thread(self, thread_id, user_id):
        """Soft-deletes the user's thread (a running or waiting turn on it is cancelled first). NotFound for an
        unknown, deleted or another user's thread."""
        check(lib.agentrt_thread_delete(self._handle(), thread_id.encode(), user_id.encode()))

    def upload(self, user_id, thread_id, data, mime_type):
        """Stores a file for the user's thread (theirs or not started yet): {id, url, mimeType, size, expiresAt,
        ref, part}, `part` the content part that sends it in a message. Unsupported without an object store."""
        data = bytes(data)
        out = ctypes.c_void_p()
        check(lib.agentrt_upload_create(ctypes.byref(out), self._handle(), user_id.encode(), thread_id.encode(),
                                        data, len(data), mime_type.encode()))
        return json.loads(take_string(out.value))

    # -- jobs
    # Jobs are started by tools (ToolCall.start_job) and ended by the host from any thread (or any process sharing
    # the store). A job is a dict: {id, threadId, turnId, toolCallId, toolName, status, progress, message, result,
    # assets, error: {code, message}, metadata, confirmation, delivered, version, ...} (see agentrt.h). A finished
    # job's outcome is added to the thread's history and streamed as a run with a CUSTOM "agentrt.job" event. The
    # functions that change a job return its new record and raise NotFound for an unknown job, InvalidState when
    # it has ended or waits for the person's confirmation, InvalidArgument / TooLarge for bad values.
    def job(self, job_id):
        """The job's record, or None for an unknown job."""
        out = ctypes.c_void_p()
        rc = lib.agentrt_job_get(ctypes.byref(out), self._handle(), job_id.encode())
        if rc == _capi.E_NOT_FOUND:
            return None
        check(rc)
        return json.loads(take_string(out.value))

    def jobs(self, thread_id):
        """The thread's jobs, in creation order."""
        return self._call_json(lib.agentrt_jobs_list, thread_id.encode())

    def update_job(self, job_id, status=None, progress=None, message=None):
        """Reports progress: status "queued"|"running" (queued may become running), progress 0..1, a message."""
        body = _given(status=status, progress=progress, message=message)
        return self._call_json(lib.agentrt_job_update, job_id.encode(), _dumps(body))

    def complete_job(self, job_id, result, assets=None, message=None):
        """Ends the job successfully with `result` (any JSON value) and `assets` (references to what it made)."""
        body = {"result": result}
        if assets is not None:
            body["assets"] = list(assets)
        if message is not None:
            body["message"] = message
        return self._call_json(lib.agentrt_job_complete, job_id.encode(), _dumps(body))

    def fail_job(self, job_id, code=None, message=None):
        """Ends the job with an error code (None: "job_failed") and message."""
        return self._call_json(lib.agentrt_job_fail, job_id.encode(), code.encode() if code else None,
                               message.encode("utf-8") if message is not None else None)

    def cancel_job(self, job_id, reason=None):
        """Cancels the job and calls the job cancel hook with its new record (cancelling again changes nothing)."""
        return self._call_json(lib.agentrt_job_cancel, job_id.encode(),
                               reason.encode("utf-8") if reason is not None else None)

    def set_job_cancel_hook(self, fn):
        """Sets fn(job: dict) to be told when a job is cancelled or expires (status "failed", error code
        "timeout"), so the work can be stopped; None removes it. It runs on the thread that cancelled the job or on
        the runtime's sweeper thread; what it raises is reported through sys.unraisablehook and dropped."""
        rt = self._handle()
        if fn is None:
            # CFUNCTYPE types take no None: their no-argument instance is the NULL function pointer.
            check(lib.agentrt_runtime_set_job_cancel_hook(rt, _capi.agentrt_job_cb(), None, _capi.agentrt_destroy_cb()))
            return
        if not callable(fn):
            raise TypeError("set_job_cancel_hook needs a function or None")
        token = _keep(fn)  # released by the library's destroy call: at replacement, at close, or on failure
        check(lib.agentrt_runtime_set_job_cancel_hook(rt, _job_hook_trampoline, token, _release))

    # -- speech
    def transcribe(self, audio, mime_type, **options):
        """Speech to text with the config's OpenAI-compatible service. Options: model, language, prompt,
        responseFormat, filename."""
        audio = bytes(audio)
        out = ctypes.c_void_p()
        check(lib.agentrt_transcribe(ctypes.byref(out), self._handle(), audio, len(audio), mime_type.encode(),
                                     _dumps(options) if options else None))
        return take_string(out.value)
