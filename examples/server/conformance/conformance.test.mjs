// The official AG-UI 1.0 client (@ag-ui/client HttpAgent) against agentrt-server, no adapters: golden path A
// (a streamed answer) and golden path B (a tool call interrupt, then resume through `resume` entries). Every
// event that crossed the wire is validated with @ag-ui/core's schemas (closed at the top level) and the
// client's own verifyEvents; RUN_STARTED/RUN_FINISHED must carry the request's threadId and runId. A job's
// outcome, delivered later as a run of its own on the thread's stream, passes the same checks.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { randomUUID } from "node:crypto";
import { createInterface } from "node:readline";

import { HttpAgent, verifyEvents } from "@ag-ui/client";
import { AgentCapabilitiesSchema, EventSchemas, RunAgentInputSchema } from "@ag-ui/core/schemas";
import { from, lastValueFrom, toArray } from "rxjs";

const TOKEN = "conformance-token-1";
let server;
let baseUrl;

// An agentrt-server on the offline demo model, on a free port, with its own data folder.
async function startServer(extraArgs = []) {
  const binary = process.env.AGENTRT_SERVER;
  assert.ok(binary, "set AGENTRT_SERVER to the agentrt-server binary");
  const dir = mkdtempSync(join(tmpdir(), "agentrt-conformance-"));
  const proc = spawn(binary, ["--listen", "127.0.0.1:0", "--data", dir, "--token", `${TOKEN}:conformance`,
    "--model", "demo", "--log-level", "warn", ...extraArgs], { stdio: ["ignore", "pipe", "inherit"] });
  const lines = createInterface({ input: proc.stdout });
  const first = await new Promise((resolve, reject) => {
    lines.once("line", resolve);
    proc.once("exit", (code) => reject(new Error(`agentrt-server exited with ${code}`)));
  });
  const port = Number(/port (\d+)/.exec(first)[1]);
  return { proc, dir, url: `http://127.0.0.1:${port}/api/v1` };
}

async function stopServer({ proc, dir }) {
  if (proc && proc.exitCode === null) {
    const exited = new Promise((resolve) => proc.once("exit", resolve));
    proc.kill("SIGTERM");
    await exited;
  }
  rmSync(dir, { recursive: true, force: true });
}

before(async () => {
  server = await startServer(["--demo-jobs", "300"]);
  baseUrl = server.url;
});

after(async () => {
  await stopServer(server);
});

// A fetch that keeps a copy of every request body and of every response's raw bytes.
function recordingFetch(log) {
  return async (url, init) => {
    const entry = { url, request: JSON.parse(init.body), status: 0, contentType: "", raw: "" };
    log.push(entry);
    const res = await fetch(url, init);
    entry.status = res.status;
    entry.contentType = res.headers.get("content-type");
    const [mine, theirs] = res.body.tee();
    entry.done = (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of mine) entry.raw += decoder.decode(chunk, { stream: true });
    })();
    return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

// The events of one raw SSE body, framed the way the spec says: LF only, one data payload per event.
function parseSse(raw) {
  assert.ok(!raw.includes("\r"), "the stream must use LF framing only");
  const events = [];
  for (const frame of raw.split("\n\n")) {
    if (!frame.trim()) continue;
    const data = frame.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, ""));
    if (data.length === 0) continue;  // a comment (keep-alive)
    assert.equal(data.length, 1, "one data line per event");
    assert.match(frame, /^id: \d+\n/m, "every event frame carries its sequence number");
    events.push(JSON.parse(data[0]));
  }
  return events;
}

const strictSchemas = new Map(EventSchemas.options.map((o) => [o.shape.type.value, o.strict()]));

async function checkEvents(events) {
  for (const e of events) {
    const schema = strictSchemas.get(e.type);
    assert.ok(schema, `unknown event type ${e.type}`);
    EventSchemas.parse(e);
    schema.parse(e);  // no property the protocol does not define
    assert.ok(Number.isInteger(e.timestamp), `${e.type}: integer timestamp`);
  }
  // The client's own ordering rules (throws an AGUIError on a violation).
  const verified = await lastValueFrom(from(events).pipe(verifyEvents(), toArray()));
  assert.equal(verified.length, events.length);
}

function squeeze(types) {
  return types.filter((t, i) => !(i > 0 && t === types[i - 1] && /_(CONTENT|ARGS)$/.test(t)));
}

async function runAndRecord(agent, log, params) {
  const warnings = [];
  const warn = console.warn;
  console.warn = (...args) => warnings.push(args.join(" "));
  let result;
  try {
    result = await agent.runAgent(params);
  } finally {
    console.warn = warn;
  }
  const entry = log[log.length - 1];
  await entry.done;
  assert.equal(entry.status, 200);
  assert.equal(entry.contentType, "text/event-stream");
  RunAgentInputSchema.parse(entry.request);
  assert.deepEqual(warnings, [], "the client warned (stripped fields, legacy events, ...)");
  const events = parseSse(entry.raw);
  await checkEvents(events);
  return { result, events, request: entry.request };
}

function newAgent(log, url = baseUrl) {
  return new HttpAgent({
    url: `${url}/agent/runs`,
    headers: { Authorization: `Bearer ${TOKEN}` },
    threadId: randomUUID(),
    fetch: recordingFetch(log),
  });
}

test("golden path A: HttpAgent runs a turn and receives the streamed answer", async () => {
  const log = [];
  const agent = newAgent(log);
  agent.addMessage({ id: randomUUID(), role: "user", content: "hello" });
  const runId = randomUUID();
  const { result, events, request } = await runAndRecord(agent, log, { runId });

  assert.equal(request.runId, runId);
  assert.deepEqual(squeeze(events.map((e) => e.type)), [
    "RUN_STARTED", "STEP_STARTED", "CUSTOM", "STEP_FINISHED", "STEP_STARTED", "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "STEP_FINISHED", "STEP_STARTED", "STEP_FINISHED", "RUN_FINISHED"]);
  const [first, last] = [events[0], events[events.length - 1]];
  assert.equal(first.threadId, agent.threadId);
  assert.equal(first.runId, runId);
  assert.equal(last.threadId, agent.threadId);
  assert.equal(last.runId, runId);
  assert.deepEqual(last.outcome, { type: "success" });

  assert.equal(result.newMessages.length, 1);
  const answer = agent.messages[agent.messages.length - 1];
  assert.equal(answer.role, "assistant");
  assert.match(answer.content, /You said: "hello"/);
  assert.deepEqual(agent.pendingInterrupts, []);

  // A second turn: the client sends its whole history again; only the new message is taken.
  agent.addMessage({ id: randomUUID(), role: "user", content: "and again" });
  const second = await runAndRecord(agent, log, { runId: randomUUID() });
  assert.equal(second.request.messages.length, 3);
  assert.match(agent.messages[agent.messages.length - 1].content, /You said: "and again"/);
  assert.equal(agent.messages.length, 4);
});

test("golden path B: an interrupt, then resume entries run the tool once in a run with the request's runId", async () => {
  const log = [];
  const agent = newAgent(log);
  agent.addMessage({ id: randomUUID(), role: "user", content: "please book a room" });
  const run1 = randomUUID();
  const paused = await runAndRecord(agent, log, { runId: run1 });
  assert.deepEqual(squeeze(paused.events.map((e) => e.type)), [
    "RUN_STARTED", "STEP_STARTED", "CUSTOM", "STEP_FINISHED", "STEP_STARTED", "TOOL_CALL_START", "TOOL_CALL_ARGS",
    "TOOL_CALL_END", "STEP_FINISHED", "RUN_FINISHED"]);
  const fin = paused.events[paused.events.length - 1];
  assert.equal(fin.threadId, agent.threadId);
  assert.equal(fin.runId, run1);
  assert.equal(fin.outcome.type, "interrupt");
  assert.equal(agent.pendingInterrupts.length, 1);
  const interrupt = agent.pendingInterrupts[0];
  assert.equal(interrupt.reason, "tool_call");
  const toolCallId = interrupt.toolCallId;
  assert.ok(toolCallId);

  const run2 = randomUUID();
  const resumed = await runAndRecord(agent, log, {
    runId: run2,
    resume: [{ interruptId: interrupt.id, status: "resolved", payload: { approved: true } }],
  });
  assert.deepEqual(resumed.request.resume, [{ interruptId: interrupt.id, status: "resolved", payload: { approved: true } }]);
  assert.deepEqual(squeeze(resumed.events.map((e) => e.type)), [
    "RUN_STARTED", "STEP_STARTED", "CUSTOM", "TOOL_CALL_RESULT", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
    "STEP_FINISHED", "STEP_STARTED", "STEP_FINISHED", "RUN_FINISHED"]);
  const [start, end] = [resumed.events[0], resumed.events[resumed.events.length - 1]];
  assert.equal(start.threadId, agent.threadId);
  assert.equal(start.runId, run2);
  assert.equal(start.parentRunId, run1);
  assert.equal(end.threadId, agent.threadId);
  assert.equal(end.runId, run2);
  assert.deepEqual(end.outcome, { type: "success" });
  const result = resumed.events.find((e) => e.type === "TOOL_CALL_RESULT");
  assert.equal(result.toolCallId, toolCallId);

  assert.deepEqual(agent.pendingInterrupts, []);
  const tool = agent.messages.find((m) => m.role === "tool");
  assert.equal(tool.toolCallId, toolCallId);
  assert.match(agent.messages[agent.messages.length - 1].content, /booking is confirmed/);
  // Exactly one tool result in the whole thread.
  const res = await fetch(`${baseUrl}/agent/runs/${agent.threadId}/history`, {
    headers: { Authorization: `Bearer ${TOKEN}` },
  });
  const history = await res.json();
  assert.deepEqual(history.messages.map((m) => m.role), ["user", "assistant", "tool", "assistant"]);
});

test("invalid input is refused before any event, and HttpAgent surfaces it as an HTTP error", async () => {
  const log = [];
  const agent = newAgent(log);
  agent.addMessage({ id: randomUUID(), role: "assistant", content: "no user message here" });
  await assert.rejects(agent.runAgent({ runId: randomUUID() }), /HTTP 422/);
  await log[0].done;
  assert.equal(log[0].status, 422);
  assert.equal(JSON.parse(log[0].raw).error.code, "invalid_argument");
});

test("a job's outcome arrives as a run of its own that passes the client's checks", async () => {
  const log = [];
  const agent = newAgent(log);
  agent.addMessage({ id: randomUUID(), role: "user", content: "render the beach" });
  const { events } = await runAndRecord(agent, log, { runId: randomUUID() });
  const started = events.find((e) => e.type === "CUSTOM" && e.name === "agentrt.job");
  assert.ok(started, "the turn's run announces the job");
  const job = started.value;
  assert.equal(job.status, "running");
  assert.equal(events[events.length - 1].outcome.type, "success");  // the turn did not wait for the job

  // The demo job tool finishes it 300 ms later; the runtime delivers the outcome at once (the thread is idle).
  const headers = { Authorization: `Bearer ${TOKEN}` };
  let record;
  for (let i = 0; i < 200; i++) {
    record = await (await fetch(`${baseUrl}/agent/jobs/${job.id}`, { headers })).json();
    if (record.delivered) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.equal(record.status, "succeeded");
  assert.equal(record.delivered, true);

  // The thread's whole stream: the turn's run, then the delivery run.
  const res = await fetch(`${baseUrl}/agent/runs/${agent.threadId}/events`, {
    headers: { ...headers, Accept: "text/event-stream" },
  });
  assert.equal(res.status, 200);
  const all = parseSse(await res.text());
  await checkEvents(all);
  const delivery = all.slice(events.length);
  assert.deepEqual(delivery.map((e) => e.type), ["RUN_STARTED", "TOOL_CALL_RESULT", "CUSTOM", "RUN_FINISHED"]);
  assert.equal(delivery[0].threadId, agent.threadId);
  assert.equal(delivery[0].runId, delivery[3].runId);
  assert.notEqual(delivery[0].runId, events[0].runId);
  assert.equal(delivery[1].toolCallId, job.toolCallId);
  assert.equal(delivery[2].name, "agentrt.job");
  assert.equal(delivery[2].value.status, "succeeded");
  assert.deepEqual(delivery[3].outcome, { type: "success" });
  await checkEvents(delivery);  // on its own too: a client that reconnects after the turn sees just this run
});

test("context from HttpAgent reaches the model for that run only, and the user message is stored without it", async () => {
  const log = [];
  const agent = newAgent(log);
  agent.addMessage({ id: randomUUID(), role: "user", content: "what context do you have?" });
  const context = [{ description: "theme", value: "dark" }, { description: "open page", value: "settings" }];
  const first = await runAndRecord(agent, log, { runId: randomUUID(), context });
  assert.deepEqual(first.request.context, context);
  assert.equal(agent.messages[agent.messages.length - 1].content,
    "The application told me, for this run:\n- theme: dark\n- open page: settings");
  // No event carries the context as such (the answer quotes it, and so does the worker output with it).
  assert.ok(!JSON.stringify(first.events).includes('"context"'), "no event has a context member");
  assert.equal(first.events[0].input, undefined);

  agent.addMessage({ id: randomUUID(), role: "user", content: "any context now?" });
  await runAndRecord(agent, log, { runId: randomUUID() });
  assert.equal(agent.messages[agent.messages.length - 1].content,
    "The application told me nothing for this run (no context).");
  const history = await (await fetch(`${baseUrl}/agent/runs/${agent.threadId}/history`, {
    headers: { Authorization: `Bearer ${TOKEN}` },
  })).json();
  const users = history.messages.filter((m) => m.role === "user");
  assert.deepEqual(users.map((m) => Object.keys(m).sort()), [["content", "id", "role"], ["content", "id", "role"]]);

  // A malformed context is refused before any event.
  agent.addMessage({ id: randomUUID(), role: "user", content: "again" });
  const bad = await fetch(`${baseUrl}/agent/runs`, {
    method: "POST",
    headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" },
    body: JSON.stringify({ threadId: agent.threadId, runId: randomUUID(), messages: agent.messages,
      context: [{ description: "theme" }] }),
  });
  assert.equal(bad.status, 422);
  assert.equal((await bad.json()).error.message, "context[0]: 'value' must be a string");
  const many = await fetch(`${baseUrl}/agent/runs`, {
    method: "POST",
    headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" },
    body: JSON.stringify({ threadId: agent.threadId, runId: randomUUID(), messages: agent.messages,
      context: Array.from({ length: 65 }, () => ({ description: "d", value: "v" })) }),
  });
  assert.equal(many.status, 413);
});

test("GET /agent/capabilities is an AG-UI AgentCapabilities object true to the server's configuration", async () => {
  const unauthorized = await fetch(`${baseUrl}/agent/capabilities`);
  assert.equal(unauthorized.status, 401);
  const res = await fetch(`${baseUrl}/agent/capabilities`, { headers: { Authorization: `Bearer ${TOKEN}` } });
  assert.equal(res.status, 200);
  const caps = await res.json();
  AgentCapabilitiesSchema.strict().parse(caps);
  assert.equal(caps.identity.name, "agentrt");
  assert.deepEqual(caps.transport, { streaming: true, websocket: false, httpBinary: false, pushNotifications: false,
    resumable: true });
  // The demo tools, and the demo job tool this server was started with (--demo-jobs).
  assert.deepEqual(caps.tools.items.map((t) => t.name), ["book_room", "check_availability", "render_preview"]);
  assert.equal(caps.tools.supported, true);
  assert.equal(caps.tools.clientProvided, true);
  const book = caps.tools.items[0];
  assert.equal(book.parameters.type, "object");
  assert.deepEqual(caps.humanInTheLoop, { supported: true, approvals: true, interventions: false, feedback: false,
    interrupts: true, approveWithEdits: true });
  assert.deepEqual(caps.state, { snapshots: true, deltas: true, memory: false, persistentState: true });
  assert.deepEqual(caps.execution, { codeExecution: false, maxIterations: 8 });
  // The default object store (files under --data) takes the default attachment types.
  assert.deepEqual(caps.multimodal.input, { image: true, audio: true, video: false, pdf: true, file: true });
  assert.deepEqual(caps.reasoning, { supported: false, streaming: false, encrypted: false });
});

test("shared state: the client's state in, STATE_SNAPSHOT first, a tool's STATE_DELTA out, kept by the thread", async () => {
  const log = [];
  const agent = newAgent(log);
  agent.setState({ theme: "light" });
  agent.addMessage({ id: randomUUID(), role: "user", content: "please book a room" });
  const paused = await runAndRecord(agent, log, { runId: randomUUID() });
  assert.deepEqual(paused.request.state, { theme: "light" });
  assert.deepEqual(paused.events.slice(0, 2).map((e) => e.type), ["RUN_STARTED", "STATE_SNAPSHOT"]);
  assert.deepEqual(paused.events[1].snapshot, { theme: "light" });
  const interrupt = agent.pendingInterrupts[0];

  // The resume request's state is the client's now: the resumed run starts with it; the demo's book_room adds the
  // booking to it.
  agent.setState({ theme: "dark" });
  const resumed = await runAndRecord(agent, log, {
    runId: randomUUID(),
    resume: [{ interruptId: interrupt.id, status: "resolved" }],
  });
  const types = resumed.events.map((e) => e.type);
  assert.deepEqual(types.slice(0, 2), ["RUN_STARTED", "STATE_SNAPSHOT"]);
  assert.deepEqual(resumed.events[1].snapshot, { theme: "dark" });
  const delta = resumed.events.find((e) => e.type === "STATE_DELTA");
  assert.deepEqual(delta.delta, [{ op: "add", path: "/bookings", value: [{ room: "A1", day: "mon" }] }]);
  assert.equal(types[types.indexOf("STATE_DELTA") + 1], "TOOL_CALL_RESULT");
  // The client applied the snapshot and the delta.
  assert.deepEqual(agent.state, { theme: "dark", bookings: [{ room: "A1", day: "mon" }] });

  // The thread keeps it: history has it, and the next run (the client sends what it has) starts with it.
  const headers = { Authorization: `Bearer ${TOKEN}` };
  const history = await (await fetch(`${baseUrl}/agent/runs/${agent.threadId}/history`, { headers })).json();
  assert.deepEqual(history.state, { theme: "dark", bookings: [{ room: "A1", day: "mon" }] });
  agent.addMessage({ id: randomUUID(), role: "user", content: "thanks" });
  const next = await runAndRecord(agent, log, { runId: randomUUID() });
  assert.deepEqual(next.events[1].snapshot, { theme: "dark", bookings: [{ room: "A1", day: "mon" }] });

  // A state over the server's limit is refused before any event.
  const big = await fetch(`${baseUrl}/agent/runs`, {
    method: "POST",
    headers: { ...headers, "Content-Type": "application/json" },
    body: JSON.stringify({ threadId: agent.threadId, runId: randomUUID(), state: { blob: "x".repeat(300000) },
      messages: [{ id: randomUUID(), role: "user", content: "hi" }] }),
  });
  assert.equal(big.status, 413);
});

const THEME_TOOL = {
  name: "change_theme",
  description: "Change the page's colour theme",
  parameters: { type: "object", properties: { theme: { type: "string", enum: ["dark", "light"] } },
    required: ["theme"], additionalProperties: false },
};

function argsOf(events, toolCallId) {
  return JSON.parse(events.filter((e) => e.type === "TOOL_CALL_ARGS" && e.toolCallId === toolCallId)
    .map((e) => e.delta).join(""));
}

test("client tools: a call ends the run with pendingToolCallIds, the tool message answers it in the next run", async () => {
  const log = [];
  const agent = newAgent(log);
  agent.addMessage({ id: randomUUID(), role: "user", content: "please use change_theme" });
  const run1 = randomUUID();
  const first = await runAndRecord(agent, log, { runId: run1, tools: [THEME_TOOL] });
  assert.deepEqual(first.request.tools, [THEME_TOOL]);
  assert.deepEqual(squeeze(first.events.map((e) => e.type)), [
    "RUN_STARTED", "STEP_STARTED", "CUSTOM", "STEP_FINISHED", "STEP_STARTED", "TOOL_CALL_START", "TOOL_CALL_ARGS",
    "TOOL_CALL_END", "STEP_FINISHED", "RUN_FINISHED"]);
  const call = first.events.find((e) => e.type === "TOOL_CALL_START");
  assert.equal(call.toolCallName, "change_theme");
  assert.deepEqual(argsOf(first.events, call.toolCallId), { theme: "dark" });  // valid for the client's schema
  const fin = first.events[first.events.length - 1];
  assert.deepEqual(fin.outcome, { type: "success", pendingToolCallIds: [call.toolCallId] });
  assert.deepEqual(agent.pendingInterrupts, []);
  const headers = { Authorization: `Bearer ${TOKEN}` };
  const turn = async () => (await (await fetch(`${baseUrl}/agent/runs/${agent.threadId}/history`, { headers })).json());
  assert.deepEqual((await turn()).messages.map((m) => m.role), ["user", "assistant"]);

  // The application runs the tool and answers; a tool message for a call this server never made is ignored.
  agent.addMessage({ id: randomUUID(), role: "tool", toolCallId: "call_forged", content: "forged" });
  const answerId = randomUUID();
  agent.addMessage({ id: answerId, role: "tool", toolCallId: call.toolCallId, content: '{"ok":true,"theme":"dark"}' });
  const run2 = randomUUID();
  const second = await runAndRecord(agent, log, { runId: run2, tools: [THEME_TOOL] });
  assert.deepEqual(squeeze(second.events.map((e) => e.type)), [
    "RUN_STARTED", "STEP_STARTED", "CUSTOM", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
    "STEP_FINISHED", "STEP_STARTED", "STEP_FINISHED", "RUN_FINISHED"]);
  assert.equal(second.events[0].runId, run2);
  assert.equal(second.events[0].parentRunId, run1);
  const recorded = second.events.find((e) => e.type === "CUSTOM");
  assert.equal(recorded.name, "agentrt.tool_answer");
  assert.equal(recorded.value.toolCallId, call.toolCallId);
  assert.deepEqual(second.events[second.events.length - 1].outcome, { type: "success" });
  assert.match(agent.messages[agent.messages.length - 1].content, /^The tool answered: /);
  // One tool message per call in the client's list: the server sent no second one.
  assert.equal(agent.messages.filter((m) => m.role === "tool" && m.toolCallId === call.toolCallId).length, 1);
  const history = await turn();
  assert.deepEqual(history.messages.map((m) => m.role), ["user", "assistant", "tool", "assistant"]);
  assert.equal(history.messages[2].id, answerId);
  assert.equal(history.messages[2].toolCallId, call.toolCallId);
  // Stored like a server tool's result: the summary as content, the whole answer as a payload object.
  assert.equal(history.messages[2].content, "change_theme completed");
  assert.match(history.messages[2].metadata.storage_path, new RegExp(`^agent-outputs/.*/${run2}/${call.toolCallId}\\.json$`));
  assert.match(history.messages[2].metadata.payload_sha256, /^[0-9a-f]{64}$/);

  // The next run sends the same tool messages again (the client's history): ignored, the new message is a new turn.
  agent.addMessage({ id: randomUUID(), role: "user", content: "thanks" });
  const third = await runAndRecord(agent, log, { runId: randomUUID(), tools: [THEME_TOOL] });
  assert.deepEqual(third.events[third.events.length - 1].outcome, { type: "success" });
  assert.equal((await turn()).messages.length, 6);
});

test("client tools: a clash with a server tool is 422; a request that answers nothing of a waiting turn is 409", async () => {
  const headers = { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json", Accept: "text/event-stream" };
  const post = (body) => fetch(`${baseUrl}/agent/runs`, { method: "POST", headers, body: JSON.stringify(body) });
  const threadId = randomUUID();
  const user = { id: randomUUID(), role: "user", content: "please use change_theme" };
  const clash = await post({ threadId, runId: randomUUID(), messages: [user],
    tools: [{ name: "book_room", description: "mine" }] });
  assert.equal(clash.status, 422);
  assert.match((await clash.json()).error.message, /client tool 'book_room' has the name of a tool/);
  const bad = await post({ threadId, runId: randomUUID(), messages: [user], tools: [{ name: "a b", description: "" }] });
  assert.equal(bad.status, 422);

  const log = [];
  const agent = newAgent(log);
  agent.addMessage(user);
  const first = await runAndRecord(agent, log, { runId: randomUUID(), tools: [THEME_TOOL] });
  const callId = first.events.find((e) => e.type === "TOOL_CALL_START").toolCallId;
  // Only a forged answer: nothing new for the waiting turn.
  const forged = await post({ threadId: agent.threadId, runId: randomUUID(), tools: [THEME_TOOL],
    messages: [...agent.messages, { id: randomUUID(), role: "tool", toolCallId: "call_other", content: "x" }] });
  assert.equal(forged.status, 409);
  // A new user message while the call waits.
  const newer = await post({ threadId: agent.threadId, runId: randomUUID(), tools: [THEME_TOOL],
    messages: [...agent.messages, { id: randomUUID(), role: "user", content: "hello?" }] });
  assert.equal(newer.status, 409);
  const body = await newer.json();
  assert.equal(body.error.code, "pending_tool_calls");
  assert.match(body.error.message, new RegExp(callId));
});

test("client tools: an approval and a client tool pending together are answered by one run", async () => {
  const log = [];
  const agent = newAgent(log);
  agent.addMessage({ id: randomUUID(), role: "user", content: "book a room and use change_theme" });
  const first = await runAndRecord(agent, log, { runId: randomUUID(), tools: [THEME_TOOL] });
  const starts = first.events.filter((e) => e.type === "TOOL_CALL_START");
  assert.deepEqual(starts.map((e) => e.toolCallName), ["book_room", "change_theme"]);
  const fin = first.events[first.events.length - 1];
  assert.equal(fin.outcome.type, "interrupt");
  assert.equal(agent.pendingInterrupts.length, 1);
  const interrupt = agent.pendingInterrupts[0];
  assert.equal(interrupt.toolCallId, starts[0].toolCallId);

  agent.addMessage({ id: randomUUID(), role: "tool", toolCallId: starts[1].toolCallId, content: "theme is dark" });
  const second = await runAndRecord(agent, log, {
    runId: randomUUID(),
    tools: [THEME_TOOL],
    resume: [{ interruptId: interrupt.id, status: "resolved", payload: { approved: true } }],
  });
  const results = second.events.filter((e) => e.type === "TOOL_CALL_RESULT");
  assert.deepEqual(results.map((e) => e.toolCallId), [starts[0].toolCallId]);  // the server's tool, run once
  assert.match(agent.messages[agent.messages.length - 1].content, /booking is confirmed/);
  assert.deepEqual(second.events[second.events.length - 1].outcome, { type: "success" });
  const headers = { Authorization: `Bearer ${TOKEN}` };
  const history = await (await fetch(`${baseUrl}/agent/runs/${agent.threadId}/history`, { headers })).json();
  assert.deepEqual(history.messages.map((m) => m.role), ["user", "assistant", "tool", "tool", "assistant"]);
});

// A client that reloads the way AG-UI clients do: connectAgent() calls connect(), which here posts the request to
// agentrt-server's /agent/connect instead of starting a run.
class ReattachingAgent extends HttpAgent {
  constructor(config) {
    super(config);
    this.connectUrl = config.connectUrl;
  }

  connect(input) {
    return new HttpAgent({ url: this.connectUrl, headers: this.headers, fetch: this.fetch }).run(input);
  }
}

function reloadedAgent(threadId, log, url = baseUrl) {
  return new ReattachingAgent({
    url: `${url}/agent/runs`,
    connectUrl: `${url}/agent/connect`,
    headers: { Authorization: `Bearer ${TOKEN}` },
    threadId,
    fetch: recordingFetch(log),
  });
}

async function connectAndRecord(agent, log, params = {}) {
  await agent.connectAgent({ runId: randomUUID(), ...params });
  const entry = log[log.length - 1];
  await entry.done;
  assert.equal(entry.status, 200);
  assert.match(entry.contentType, /^text\/event-stream/);
  const events = parseSse(entry.raw);
  await checkEvents(events);
  return events;
}

test("connect: a reloaded client gets the thread's messages and state, and a paused turn's interrupts to answer", async () => {
  const log = [];
  const agent = newAgent(log);
  agent.setState({ theme: "light" });
  agent.addMessage({ id: randomUUID(), role: "user", content: "hello" });
  await runAndRecord(agent, log, { runId: randomUUID() });
  agent.addMessage({ id: randomUUID(), role: "user", content: "please book a room" });
  await runAndRecord(agent, log, { runId: randomUUID() });
  assert.equal(agent.pendingInterrupts.length, 1);

  // A reload: a new client that knows only the thread id.
  const reloadLog = [];
  const reloaded = reloadedAgent(agent.threadId, reloadLog);
  const events = await connectAndRecord(reloaded, reloadLog);
  assert.deepEqual(events.map((e) => e.type), ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"]);
  const headers = { Authorization: `Bearer ${TOKEN}` };
  const history = await (await fetch(`${baseUrl}/agent/runs/${agent.threadId}/history`, { headers })).json();
  assert.deepEqual(reloaded.messages.map((m) => [m.id, m.role]), history.messages.map((m) => [m.id, m.role]));
  assert.deepEqual(reloaded.state, { theme: "light" });
  assert.equal(events[3].outcome.type, "interrupt");
  assert.equal(reloaded.pendingInterrupts.length, 1);
  assert.equal(reloaded.pendingInterrupts[0].id, agent.pendingInterrupts[0].id);

  // The reloaded client answers the interrupt and the turn goes on.
  const resumed = await runAndRecord(reloaded, reloadLog, {
    runId: randomUUID(),
    resume: [{ interruptId: reloaded.pendingInterrupts[0].id, status: "resolved" }],
  });
  assert.deepEqual(resumed.events[resumed.events.length - 1].outcome, { type: "success" });
  assert.match(reloaded.messages[reloaded.messages.length - 1].content, /booking is confirmed/);

  // A thread nobody used yet: an empty snapshot, no state, a finished run.
  const emptyLog = [];
  const fresh = reloadedAgent(randomUUID(), emptyLog);
  const none = await connectAndRecord(fresh, emptyLog);
  assert.deepEqual(none.map((e) => e.type), ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]);
  assert.deepEqual(none[1].messages, []);
  assert.deepEqual(none[2].outcome, { type: "success" });
});

test("connect: a turn waiting for a client tool's answer is re-attached with its pendingToolCallIds", async () => {
  const log = [];
  const agent = newAgent(log);
  agent.addMessage({ id: randomUUID(), role: "user", content: "please use change_theme" });
  const first = await runAndRecord(agent, log, { runId: randomUUID(), tools: [THEME_TOOL] });
  const callId = first.events.find((e) => e.type === "TOOL_CALL_START").toolCallId;
  const reloadLog = [];
  const reloaded = reloadedAgent(agent.threadId, reloadLog);
  const events = await connectAndRecord(reloaded, reloadLog);
  assert.deepEqual(events[events.length - 1].outcome, { type: "success", pendingToolCallIds: [callId] });
  const call = reloaded.messages.find((m) => m.role === "assistant" && m.toolCalls?.length);
  assert.equal(call.toolCalls[0].id, callId);
  // It answers from where it stands.
  reloaded.addMessage({ id: randomUUID(), role: "tool", toolCallId: callId, content: "dark" });
  const done = await runAndRecord(reloaded, reloadLog, { runId: randomUUID(), tools: [THEME_TOOL] });
  assert.deepEqual(done.events[done.events.length - 1].outcome, { type: "success" });
  assert.equal(reloaded.messages[reloaded.messages.length - 1].content, "The tool answered: dark");
});

// A slow run started on `url` with a raw POST, its stream read until `enough(raw)` holds (the run in progress).
async function startSlowRun(url, enough) {
  const headers = { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json", Accept: "text/event-stream" };
  const threadId = randomUUID();
  const runId = randomUUID();
  const user = { id: randomUUID(), role: "user", content: "a long answer, slowly please" };
  const res = await fetch(`${url}/agent/runs`, { method: "POST", headers,
    body: JSON.stringify({ threadId, runId, messages: [user], tools: [], context: [], state: {}, forwardedProps: {} }) });
  assert.equal(res.status, 200);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let raw = "";
  while (!enough(raw)) {
    const { value, done } = await reader.read();
    assert.ok(!done, "the run ended before its text streamed");
    raw += decoder.decode(value, { stream: true });
  }
  return { headers, threadId, runId, user, reader, raw };
}

test("connect: a run in progress is re-attached from its start, live to its end, nothing twice", async () => {
  const slow = await startServer(["--demo-delay-ms", "30"]);
  try {
    // Read the first run's stream until its text has started, then reload.
    const { headers, threadId, runId, user, reader } =
      await startSlowRun(slow.url, (raw) => raw.includes("TEXT_MESSAGE_CONTENT"));
    const reloadLog = [];
    const reloaded = reloadedAgent(threadId, reloadLog, slow.url);
    const events = await connectAndRecord(reloaded, reloadLog);
    assert.equal(events[0].type, "RUN_STARTED");
    assert.equal(events[0].runId, runId);  // the run in progress, not a new one
    assert.equal(events[1].type, "MESSAGES_SNAPSHOT");
    assert.deepEqual(events[1].messages.map((m) => m.id), [user.id]);
    // The snapshot, then the run's own events from its start (the part streamed before the reload too), once.
    assert.deepEqual(squeeze(events.map((e) => e.type)), [
      "RUN_STARTED", "MESSAGES_SNAPSHOT", "STEP_STARTED", "CUSTOM", "STEP_FINISHED", "STEP_STARTED",
      "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "STEP_FINISHED", "STEP_STARTED",
      "STEP_FINISHED", "RUN_FINISHED"]);
    const text = events.filter((e) => e.type === "TEXT_MESSAGE_CONTENT").map((e) => e.delta).join("");
    // What the reloaded client holds is the thread's history.
    const history = await (await fetch(`${slow.url}/agent/runs/${threadId}/history`, { headers })).json();
    assert.deepEqual(reloaded.messages.map((m) => [m.id, m.role, m.content]),
      history.messages.map((m) => [m.id, m.role, m.content]));
    assert.equal(history.messages[1].content, text);
    await reader.cancel();
  } finally {
    await stopServer(slow);
  }
});

test("connect with Last-Event-ID: a client that lost its connection mid-run takes the run up after its last event", async () => {
  const slow = await startServer(["--demo-delay-ms", "30"]);
  try {
    // Read until two text deltas have come, then lose the connection.
    const { headers, threadId, runId, user, reader, raw } = await startSlowRun(slow.url,
      (r) => (r.match(/TEXT_MESSAGE_CONTENT/g) ?? []).length >= 2 && r.endsWith("\n\n"));
    await reader.cancel();
    const seen = parseSse(raw);
    const lastId = /(?:^|\n)id: (\d+)\n[^\n]*\n\n$/.exec(raw)[1];
    const message = seen.find((e) => e.type === "TEXT_MESSAGE_START");
    const before = seen.filter((e) => e.type === "TEXT_MESSAGE_CONTENT").map((e) => e.delta).join("");
    // The client as it stood: the user's message and the answer so far.
    const log = [];
    const agent = new ReattachingAgent({
      url: `${slow.url}/agent/runs`, connectUrl: `${slow.url}/agent/connect`, threadId,
      headers: { Authorization: `Bearer ${TOKEN}`, "Last-Event-ID": lastId }, fetch: recordingFetch(log) });
    agent.setMessages([user, { id: message.messageId, role: "assistant", content: before }]);
    const events = await connectAndRecord(agent, log);
    assert.equal(events[0].type, "RUN_STARTED");
    assert.equal(events[0].runId, runId);
    // No snapshot: what was open at that event is opened again (the step, the message), then the rest of the run.
    assert.deepEqual(squeeze(events.map((e) => e.type)).slice(0, 4),
      ["RUN_STARTED", "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"]);
    assert.equal(events[2].messageId, message.messageId);
    const after = events.filter((e) => e.type === "TEXT_MESSAGE_CONTENT").map((e) => e.delta).join("");
    const history = await (await fetch(`${slow.url}/agent/runs/${threadId}/history`, { headers })).json();
    assert.equal(before + after, history.messages[1].content);  // nothing missed, nothing twice
    assert.deepEqual(agent.messages.map((m) => [m.id, m.role, m.content]),
      history.messages.map((m) => [m.id, m.role, m.content]));
  } finally {
    await stopServer(slow);
  }
});

test("a client before AG-UI 1.0 (no protocolVersion) gets run ends it can read: no pendingToolCallIds, no cancelled", async () => {
  const headers = { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json", Accept: "text/event-stream" };
  const threadId = randomUUID();
  const body = { threadId, runId: randomUUID(), tools: [THEME_TOOL], context: [], state: {}, forwardedProps: {},
    messages: [{ id: randomUUID(), role: "user", content: "please use change_theme" }] };
  const old = await fetch(`${baseUrl}/agent/runs`, { method: "POST", headers, body: JSON.stringify(body) });
  assert.equal(old.status, 200);
  const events = parseSse(await old.text());
  assert.deepEqual(events[events.length - 1].outcome, { type: "success" });
  assert.ok(events.some((e) => e.type === "TOOL_CALL_START"));  // the client derives the pending call from these
  // The same thread re-attached by a 1.0 client names the pending call.
  const current = await fetch(`${baseUrl}/agent/connect`, { method: "POST", headers,
    body: JSON.stringify({ threadId, runId: randomUUID(), protocolVersion: "1.0.0", messages: [] }) });
  const attached = parseSse(await current.text());
  assert.equal(attached[attached.length - 1].outcome.pendingToolCallIds.length, 1);
  const legacy = await fetch(`${baseUrl}/agent/connect`, { method: "POST", headers,
    body: JSON.stringify({ threadId, runId: randomUUID(), messages: [] }) });
  const plain = parseSse(await legacy.text());
  assert.deepEqual(plain[plain.length - 1].outcome, { type: "success" });
});

test("the official 1.0 client says its protocol version, so it gets the 1.0 outcomes", async () => {
  const log = [];
  const agent = newAgent(log);
  agent.addMessage({ id: randomUUID(), role: "user", content: "hello" });
  const run = await runAndRecord(agent, log, { runId: randomUUID() });
  assert.match(run.request.protocolVersion, /^1\./);
});

// The repository's scripted MCP server (tests/mcp/scripted_server.py), over stdio.
const SCRIPTED_MCP = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "tests", "mcp", "scripted_server.py");

test("an MCP tool through agentrt-server: approved, its result streamed, and its server asking for input", async () => {
  const dir = mkdtempSync(join(tmpdir(), "agentrt-conformance-mcp-"));
  const config = join(dir, "config.json");
  writeFileSync(config, JSON.stringify({
    runtime: { mcp_servers: { scripted: { command: ["python3", SCRIPTED_MCP], env: { MCP_TEST_LOG: join(dir, "calls.log") } } } },
  }));
  const mcp = await startServer(["--config", config]);
  try {
    const log = [];
    const agent = newAgent(log, mcp.url);
    agent.addMessage({ id: randomUUID(), role: "user", content: "please use scripted__echo" });
    const paused = await runAndRecord(agent, log, { runId: randomUUID() });
    assert.equal(paused.events.at(-1).outcome.type, "interrupt");
    const approval = agent.pendingInterrupts[0];
    assert.equal(approval.reason, "tool_call");  // an MCP server is foreign code: its calls need approval
    assert.equal(approval.metadata.toolName, "scripted__echo");
    const resumed = await runAndRecord(agent, log, {
      runId: randomUUID(),
      resume: [{ interruptId: approval.id, status: "resolved", payload: { approved: true } }],
    });
    const result = resumed.events.find((e) => e.type === "TOOL_CALL_RESULT");
    assert.ok(result, "the MCP tool's result is streamed");
    assert.match(result.content, /^echo: /);
    assert.deepEqual(resumed.events.at(-1).outcome, { type: "success" });

    // The server asks for input while the call runs: an input_required interrupt, answered by a resume entry.
    agent.addMessage({ id: randomUUID(), role: "user", content: "use scripted__ask" });
    const first = await runAndRecord(agent, log, { runId: randomUUID() });
    const go = agent.pendingInterrupts[0];
    assert.equal(go.reason, "tool_call");
    await runAndRecord(agent, log, {
      runId: randomUUID(),
      resume: [{ interruptId: go.id, status: "resolved", payload: { approved: true } }],
    });
    assert.equal(agent.pendingInterrupts.length, 1);
    const ask = agent.pendingInterrupts[0];
    assert.equal(ask.reason, "input_required");
    assert.equal(ask.message, "Which colour?");
    assert.deepEqual(ask.responseSchema.properties.colour.enum, ["red", "blue"]);
    const answered = await runAndRecord(agent, log, {
      runId: randomUUID(),
      resume: [{ interruptId: ask.id, status: "resolved", payload: { colour: "blue" } }],
    });
    const chose = answered.events.find((e) => e.type === "TOOL_CALL_RESULT");
    assert.equal(chose.content, "you chose blue");
    assert.ok(first.events.length > 0);

    // What the server offers, and who may approve a changed definition.
    const headers = { Authorization: `Bearer ${TOKEN}` };
    const tools = await (await fetch(`${mcp.url}/mcp/tools`, { headers })).json();
    assert.equal(tools.servers[0].state, "ready");
    assert.ok(tools.tools.some((t) => t.name === "scripted__echo" && t.offered));
    const approve = await fetch(`${mcp.url}/mcp/tools/scripted__echo/approve`, { method: "POST", headers });
    assert.equal(approve.status, 403);
  } finally {
    await stopServer(mcp);
    rmSync(dir, { recursive: true, force: true });
  }
});
