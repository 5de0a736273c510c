'use strict';
// The Node binding against libagentrt (AGENTRT_LIBRARY): golden path B with a JS tool, a JS model, a tool that
// throws, a duplicate resume, errors, streams and callback registration. Run: node --test test/
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { setTimeout: sleep } = require('node:timers/promises');

const agentrt = require('..');
const { koffi } = require('../lib/capi');
const { collect, withRuntime } = require('../test_support');

const RUN1 = ['RUN_STARTED', 'STEP_STARTED', 'CUSTOM', 'STEP_FINISHED', 'STEP_STARTED', 'TOOL_CALL_START',
  'TOOL_CALL_ARGS', 'TOOL_CALL_END', 'STEP_FINISHED', 'RUN_FINISHED'];
const RUN2 = ['RUN_STARTED', 'STEP_STARTED', 'CUSTOM', 'TOOL_CALL_RESULT', 'TEXT_MESSAGE_START', 'TEXT_MESSAGE_CONTENT',
  'TEXT_MESSAGE_END', 'STEP_FINISHED', 'STEP_STARTED', 'STEP_FINISHED', 'RUN_FINISHED'];

// Event types with runs of streamed deltas collapsed (chunking is the model's business).
function shape(events) {
  const out = [];
  for (const e of events) {
    const streamed = e.type === 'TEXT_MESSAGE_CONTENT' || e.type === 'TOOL_CALL_ARGS';
    if (!(streamed && out[out.length - 1] === e.type)) out.push(e.type);
  }
  return out;
}

const BOOK_ROOM = {
  name: 'book_room',
  description: 'Book a hotel room for a day',
  approval: 'always',
  parameters: {
    type: 'object',
    properties: { room: { type: 'string' }, day: { type: 'string', enum: ['mon', 'tue', 'wed'] } },
    required: ['room', 'day'],
  },
};

test('golden path B: an async JS tool pauses for approval and runs once after resume', async () => {
  const calls = [];
  await withRuntime(async (rt) => {
    rt.tool(BOOK_ROOM, async (args, call) => {
      await sleep(5);
      calls.push([args.room, args.day, call.threadId, call.toolCallId]);
      return new agentrt.ToolResult({ ok: true, booking_id: `BK-${call.threadId}`, room: args.room, day: args.day },
        { type: 'booking_card', version: 'v1', data: { room: args.room } });
    });
    const h = rt.startTurn('t-node-b', 'please book a room', { userId: 'u1' });
    assert.equal(h.existing, false);
    assert.equal(h.firstSeq, 1);
    const turn = await rt.wait(h.turnId);
    assert.equal(turn.status, 'WAITING_APPROVAL');
    assert.deepEqual(calls, []);

    const run1 = await collect(rt.events('t-node-b', { runs: 1, timeoutMs: 10000 }));
    assert.deepEqual(shape(run1), RUN1);
    assert.deepEqual(run1.map((e) => e.seq), run1.map((_, i) => i + 1));
    const interrupt = run1[run1.length - 1].outcome.interrupts[0];
    assert.equal(interrupt.toolCallId, 'call_book_1');

    const pending = rt.interrupts(h.turnId);
    assert.equal(pending.approvalRequestId, turn.approvalRequestId);
    const answer = rt.resume(h.turnId, turn.approvalRequestId, [{ interruptId: interrupt.id, action: 'approve' }]);
    assert.equal(answer.status, 'accepted');
    assert.equal((await rt.wait(h.turnId)).status, 'COMPLETED');
    assert.deepEqual(calls, [['A1', 'mon', 't-node-b', 'call_book_1']]);

    const run2 = await collect(rt.events('t-node-b', { afterSeq: run1[run1.length - 1].seq, runs: 1, timeoutMs: 10000 }));
    assert.deepEqual(shape(run2), RUN2);
    assert.equal(run2[0].parentRunId, h.runId);
    assert.equal(run2[2].name, 'agentrt.started'); // durable before the tool runs
    assert.equal(run2[3].metadata.tool_agent_output.result.booking_id, 'BK-t-node-b');
    assert.equal(run2[3].metadata.ui.type, 'booking_card');

    const history = rt.history('t-node-b');
    assert.deepEqual(history.map((m) => m.role), ['user', 'assistant', 'tool', 'assistant']);
    assert.equal(history[3].content, 'Your booking is confirmed: room A1 on Monday.');
  });
});

test('approveAll() answers every open interrupt, and says when none waits', async () => {
  const ran = [];
  await withRuntime(async (rt) => {
    rt.tool(BOOK_ROOM, (args) => {
      ran.push(args.room);
      return { ok: true };
    });
    const h = rt.startTurn('t-node-all', 'please book a room', { userId: 'u1' });
    assert.equal((await rt.wait(h.turnId)).status, 'WAITING_APPROVAL');
    assert.equal(rt.approveAll(h.turnId).status, 'accepted');
    assert.equal((await rt.wait(h.turnId)).status, 'COMPLETED');
    assert.deepEqual(ran, ['A1']);
    assert.throws(() => rt.approveAll(h.turnId), {
      name: 'InvalidState',
      message: `approveAll: turn ${h.turnId} is COMPLETED, not waiting for approval`,
    });
    assert.deepEqual(ran, ['A1']);
  });
});

test('a duplicate resume returns the first answer and runs nothing', async () => {
  let runs = 0;
  await withRuntime(async (rt) => {
    rt.tool(BOOK_ROOM, () => {
      runs += 1;
      return { ok: true, booking_id: 'BK-1' };
    });
    const h = rt.startTurn('t-node-dup', 'book it', { userId: 'u1' });
    const turn = await rt.wait(h.turnId);
    const decisions = turn.interrupts.map((i) => ({ interruptId: i.id, action: 'approve' }));
    const first = rt.resume(h.turnId, turn.approvalRequestId, decisions);
    const second = rt.resume(h.turnId, turn.approvalRequestId, decisions);
    assert.deepEqual(second, first);
    assert.equal((await rt.wait(h.turnId)).status, 'COMPLETED');
    assert.deepEqual(rt.resume(h.turnId, turn.approvalRequestId, decisions), first);
    assert.equal(runs, 1);
    assert.throws(() => rt.resume(h.turnId, 'apr_another', decisions), (e) => {
      assert.ok(e instanceof agentrt.InvalidState);
      assert.ok(e instanceof agentrt.AgentrtError);
      assert.equal(e.code, agentrt.STATUS.E_INVALID_STATE);
      assert.equal(e.status, 'invalid_state');
      assert.match(e.message, /not waiting for approval/);
      return true;
    });
  });
});

test("a run's context reaches the model, and a bad one is refused", async () => {
  await withRuntime(async (rt) => {
    const h = rt.startTurn('t-node-ctx', 'what context?', { userId: 'u1', context: [{ description: 'theme', value: 'dark' }] });
    assert.equal((await rt.wait(h.turnId)).status, 'COMPLETED');
    const history = rt.history('t-node-ctx');
    assert.equal(history[history.length - 1].content, 'The application told me, for this run:\n- theme: dark');
    assert.throws(() => rt.startTurn('t-node-ctx2', 'hi', { userId: 'u1', context: [{ description: 'theme' }] }),
      (e) => e.status === 'invalid_argument' && /context\[0\]: 'value' must be a string/.test(e.message));
  });
});

test('shared state: a tool reads the state and changes it with a delta', async () => {
  await withRuntime(async (rt) => {
    const seen = [];
    rt.tool({ ...BOOK_ROOM, approval: 'never' }, async (args, call) => {
      seen.push(call.state);
      return new agentrt.ToolResult({ ok: true }, undefined, [{ op: 'add', path: '/booked', value: args.room }]);
    });
    assert.equal(rt.threadState('t-node-state'), null);
    const h = rt.startTurn('t-node-state', 'book a room', { userId: 'u1', state: { theme: 'dark' } });
    assert.equal((await rt.wait(h.turnId)).status, 'COMPLETED');
    assert.deepEqual(seen, [{ theme: 'dark' }]);
    assert.deepEqual(rt.threadState('t-node-state'), { theme: 'dark', booked: 'A1' });
    const types = (await collect(rt.events('t-node-state', { runs: 1, timeoutMs: 10000 }))).map((e) => e.type);
    assert.equal(types[1], 'STATE_SNAPSHOT');
    assert.equal(types[types.indexOf('STATE_DELTA') + 1], 'TOOL_CALL_RESULT');
  });
});

test('client tools: the caller runs one and answers its call', async () => {
  await withRuntime(async (rt) => {
    const theme = { name: 'change_theme', description: 'Change the theme',
      parameters: { type: 'object', properties: { theme: { type: 'string' } }, required: ['theme'] } };
    const h = rt.startTurn('t-node-ct', 'please use change_theme', { userId: 'u1', clientTools: [theme] });
    const turn = await rt.wait(h.turnId);
    assert.equal(turn.status, 'WAITING_CLIENT');
    const events = await collect(rt.events('t-node-ct', { runs: 1, timeoutMs: 10000 }));
    const call = events.find((e) => e.type === 'TOOL_CALL_START');
    assert.equal(call.toolCallName, 'change_theme');
    assert.deepEqual(events[events.length - 1].outcome, { type: 'success', pendingToolCallIds: [call.toolCallId] });
    assert.throws(() => rt.resume(h.turnId, turn.approvalRequestId, [], { answers: [{ toolCallId: 'forged', content: 'x' }] }),
      (e) => e.status === 'invalid_argument');
    const accepted = rt.resume(h.turnId, turn.approvalRequestId, [],
      { answers: [{ toolCallId: call.toolCallId, content: '{"ok":true}', id: 'tm-node' }] });
    assert.equal(accepted.status, 'accepted');
    assert.equal((await rt.wait(h.turnId)).status, 'COMPLETED');
    const history = rt.history('t-node-ct');
    assert.deepEqual(history.map((m) => m.role), ['user', 'assistant', 'tool', 'assistant']);
    assert.equal(history[2].id, 'tm-node');
    assert.equal(history[3].content, 'The tool answered: {"ok":true}');
  });
});

test('a tool that throws fails the call with its message', async () => {
  await withRuntime(async (rt) => {
    rt.tool({ ...BOOK_ROOM, approval: 'never' }, async (args) => {
      throw new RangeError(`no rooms left in ${args.room}`);
    });
    const h = rt.startTurn('t-node-throw', 'book a room', { userId: 'u1' });
    assert.equal((await rt.wait(h.turnId)).status, 'COMPLETED');
    const events = await collect(rt.events('t-node-throw', { runs: 1, timeoutMs: 10000 }));
    const result = events.find((e) => e.type === 'TOOL_CALL_RESULT');
    assert.equal(result.metadata.tool_agent_output.status, 'failed');
    assert.deepEqual(result.metadata.tool_agent_output.error,
      { code: 'tool_error', message: 'RangeError: no rooms left in A1' });
  });
});

test('a JS model streams text and calls a tool; its requests carry the stage and the tools', async () => {
  const requests = [];
  const booked = [];
  const model = async (request, stream) => {
    requests.push(request);
    if (request.stage === 'intent') return 'booking';
    if (request.messages[request.messages.length - 1].role === 'tool') {
      for (const piece of ['Booked ', 'room ', 'B2.']) {
        stream.text(piece);
        await sleep(1);
      }
      return undefined; // the answer is what was streamed
    }
    // Not call 0 again (2 ** 32 cut to 32 bits).
    assert.throws(() => stream.toolCallStart(2 ** 32, 'call_js_0', 'book_room'), { name: 'InvalidArgument' });
    stream.toolCallStart(0, 'call_js_1', 'book_room');
    stream.toolCallArgs(0, '{"room":"B2",');
    stream.toolCallArgs(0, '"day":"tue"}');
    return { usage: { inputTokens: 10, outputTokens: 4 } };
  };
  await withRuntime(async (rt) => {
    rt.tool({ ...BOOK_ROOM, approval: 'never' }, (args) => {
      booked.push([args.room, args.day]);
      return { ok: true };
    });
    const h = rt.startTurn('t-node-model', 'book B2 on tuesday', { userId: 'u1' });
    const turn = await rt.wait(h.turnId);
    assert.equal(turn.status, 'COMPLETED');
    assert.equal(turn.intent, 'booking');
    assert.deepEqual(booked, [['B2', 'tue']]);
    const events = await collect(rt.events('t-node-model', { runs: 1, timeoutMs: 10000 }));
    assert.deepEqual(events.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT').map((e) => e.delta),
      ['Booked ', 'room ', 'B2.']);
    assert.equal(rt.history('t-node-model').at(-1).content, 'Booked room B2.');
  }, { model });
  assert.deepEqual(requests.map((r) => r.stage), ['intent', 'execution', 'execution']);
  assert.equal(requests[1].tools[0].name, 'book_room');
  assert.equal(requests[1].threadId, 't-node-model');
});

test('a JS model that throws fails the turn; a cancelled turn makes the stream throw Cancelled', async () => {
  await withRuntime(async (rt) => {
    const h = rt.startTurn('t-node-model-fail', 'hi', { userId: 'u1' });
    const turn = await rt.wait(h.turnId);
    assert.equal(turn.status, 'FAILED');
    assert.match(turn.error, /TypeError: the model server is down/);
    const events = await collect(rt.events('t-node-model-fail', { runs: 1, timeoutMs: 10000 }));
    assert.equal(events.at(-1).type, 'RUN_ERROR');
  }, { model: () => { throw new TypeError('the model server is down'); } });

  let cancelledWith;
  let started;
  let ended;
  const startedPromise = new Promise((resolve) => { started = resolve; });
  const endedPromise = new Promise((resolve) => { ended = resolve; });
  await withRuntime(async (rt) => {
    const h = rt.startTurn('t-node-model-cancel', 'hi', { userId: 'u1' });
    await startedPromise;
    rt.cancel(h.turnId);
    assert.equal((await rt.wait(h.turnId)).status, 'CANCELLED');
    await endedPromise; // the model has seen the cancel (or streamed its minute of text)
  }, {
    model: async (request, stream) => {
      started();
      try {
        for (let i = 0; i < 6000; i++) {
          stream.text('.');
          await sleep(10);
        }
      } catch (e) {
        cancelledWith = e;
        throw e;
      } finally {
        ended();
      }
    },
  });
  assert.ok(cancelledWith instanceof agentrt.Cancelled, String(cancelledWith));
});

test('the config takes an S3 object store and refuses its bad values', async () => {
  process.env.AGENTRT_NODE_TEST_S3_KEY = 'AKIDEXAMPLE';
  process.env.AGENTRT_NODE_TEST_S3_SECRET = 'secret';
  const s3 = {
    type: 's3', endpoint: 'http://127.0.0.1:9', bucket: 'agentrt-test', path_style: true,
    access_key_env: 'AGENTRT_NODE_TEST_S3_KEY', secret_key_env: 'AGENTRT_NODE_TEST_S3_SECRET',
  };
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentrt-node-s3-'));
  try {
    await agentrt.Runtime.open({ data_dir: dataDir, model: { type: 'demo' }, objects: s3 }).close();  // no request made
    assert.throws(() => agentrt.Runtime.open({ data_dir: dataDir, objects: { ...s3, bucket: 'Bad_Bucket' } }), (e) => {
      assert.ok(e instanceof agentrt.InvalidArgument);
      assert.match(e.message, /config: objects: invalid S3 bucket 'Bad_Bucket'/);
      return true;
    });
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});

test('status codes map to error classes with the library message', async () => {
  assert.throws(() => agentrt.Runtime.open({ colour: 'blue' }), (e) => {
    assert.ok(e instanceof agentrt.InvalidArgument);
    assert.match(e.message, /^agentrt_runtime_open: config: unknown key 'colour'/);
    return true;
  });
  let closed;
  await withRuntime(async (rt) => {
    closed = rt;
    assert.throws(() => rt.turn('turn_nope'), { name: 'NotFound', message: 'agentrt_turn_get: turn turn_nope not found' });
    await assert.rejects(rt.wait('turn_nope'), agentrt.NotFound);
    await assert.rejects(rt.transcribe(Buffer.from('RIFF0000WAVE'), 'audio/wav', { language: 'en' }), agentrt.Unsupported);
    assert.throws(() => rt.startTurn('bad thread!', 'hi', { userId: 'u1' }), agentrt.InvalidArgument);
    const h = rt.startTurn('t-node-busy', 'book', { userId: 'u1' });
    assert.equal((await rt.wait(h.turnId)).status, 'WAITING_APPROVAL'); // the demo book_room needs approval
    assert.throws(() => rt.startTurn('t-node-busy', 'again', { userId: 'u1' }), agentrt.Conflict);
    rt.cancel(h.turnId);
    assert.throws(() => rt.tool({ name: 'bad name!' }, () => 1), agentrt.InvalidArgument);
    assert.throws(() => rt.unregisterTool('nope'), agentrt.NotFound);
  }, { config: { demo_tools: true } });
  assert.throws(() => closed.history('t-node-busy'), agentrt.InvalidState);
  assert.equal(agentrt.ABI_VERSION, 1);
  assert.match(agentrt.version(), /^\d+\.\d+\.\d+$/);
  assert.throws(() => require('../lib/capi').checkAbi(2, 1), /ABI version 2/);
});

test('streams time out, stop on close, and end when the runtime closes', async () => {
  await withRuntime(async (rt) => {
    const idle = rt.events('t-node-idle', { timeoutMs: 100 });
    const t0 = Date.now();
    await assert.rejects(idle.next(), agentrt.Timeout);
    assert.ok(Date.now() - t0 >= 90);
    idle.close();
    const s = rt.events('t-node-idle');
    setTimeout(() => s.close(), 100);
    assert.deepEqual(await collect(s), []);
    // break out of a for-await: the stream is closed by return()
    const h = rt.startTurn('t-node-break', 'hello', { userId: 'u1' });
    // Timeouts: Infinity is the longest wait a call takes, a fraction is cut, NaN is refused.
    assert.equal((await rt.wait(h.turnId, { timeoutMs: Infinity })).status, 'COMPLETED');
    assert.equal((await rt.wait(h.turnId, { timeoutMs: 1000.5 })).status, 'COMPLETED');
    await assert.rejects(rt.wait(h.turnId, { timeoutMs: NaN }),
      { name: 'InvalidArgument', message: 'a timeout is a number of milliseconds, not NaN' });
    assert.equal(await rt.flushTraces({ timeoutMs: Infinity }), true);
    const fractional = rt.events('t-node-break', { timeoutMs: 2000.5 });
    assert.equal((await fractional.next()).value.type, 'RUN_STARTED');
    fractional.close();
    await assert.rejects(rt.events('t-node-break', { timeoutMs: NaN }).next(), { name: 'InvalidArgument' });
    for await (const e of rt.events('t-node-break')) {
      assert.equal(e.type, 'RUN_STARTED');
      break;
    }
  });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentrt-node-'));
  const rt = agentrt.Runtime.open({ data_dir: dir, model: { type: 'demo' } });
  const pending = collect(rt.events('t-node-idle'));
  await sleep(50);
  await rt.close();
  assert.deepEqual(await pending, []);
  fs.rmSync(dir, { recursive: true, force: true });
});

test('the AG-UI RunAgentInput form takes only the last user message', async () => {
  await withRuntime(async (rt) => {
    const h = rt.startRun({
      threadId: 't-node-agui', runId: 'run-node-1', state: {}, tools: [], context: [],
      messages: [{ id: 'm0', role: 'user', content: 'forged' }, { id: 'm1', role: 'user', content: 'hello' }],
    }, { userId: 'u1' });
    assert.equal(h.runId, 'run-node-1');
    await rt.wait(h.turnId);
    const history = rt.history('t-node-agui');
    assert.equal(history.length, 2);
    assert.equal(history[0].id, 'm1');
  });
});

test('spend() reports a turn, a thread and a user; a thread budget ends the turn that would pass it', async () => {
  await withRuntime(async (rt) => {
    const first = rt.startTurn('t-node-spend', 'hello', { userId: 'u1' });
    assert.equal((await rt.wait(first.turnId)).status, 'COMPLETED');
    const refused = await rt.wait(rt.startTurn('t-node-spend', 'again', { userId: 'u1' }).turnId);
    assert.equal(refused.status, 'FAILED');
    assert.deepEqual(rt.spend('turn', first.turnId),
      { modelCalls: 2, toolCalls: 0, inputTokens: 0, outputTokens: 0, cost: 0, usage: [] });
    assert.equal(rt.spend('thread', 't-node-spend').modelCalls, 3);
    assert.equal(rt.spend('user', 'u1').modelCalls, 3);
    assert.throws(() => rt.spend('team', 'x'), agentrt.InvalidArgument);
    assert.throws(() => rt.spend('turn', 'turn-unknown'), agentrt.NotFound);
  }, { config: { budgets: { thread: { model_calls: 3 } } } });
});

test('a host traceparent given to startTurn is the parent of the run\'s span', async () => {
  const http = require('node:http');
  const spans = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      for (const rs of JSON.parse(body).resourceSpans) for (const ss of rs.scopeSpans) spans.push(...ss.spans);
      res.writeHead(200, { 'Content-Type': 'application/json' }).end('{}');
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  const parent = '00f067aa0ba902b7';
  try {
    // Nothing leaves before a flush: the spans are there when flushTraces resolves.
    await withRuntime(async (rt) => {
      const h = rt.startTurn('t-node-trace', 'hello', { userId: 'u1', traceparent: `00-${traceId}-${parent}-01` });
      assert.equal((await rt.wait(h.turnId)).status, 'COMPLETED');
      assert.equal(spans.length, 0);
      assert.equal(await rt.flushTraces(), true);
      assert.ok(spans.length > 0);
      await assert.rejects(rt.flushTraces({ timeoutMs: -1 }), agentrt.InvalidArgument);
    }, { config: { tracing: { otlp_endpoint: `http://127.0.0.1:${server.address().port}/v1/traces`, export_interval_ms: 600000 } } });
    await withRuntime(async (rt) => assert.equal(await rt.flushTraces({ timeoutMs: 0 }), true));
    const runs = spans.filter((s) => s.name.startsWith('invoke_agent'));
    assert.equal(runs.length, 1);
    assert.deepEqual([runs[0].traceId, runs[0].parentSpanId], [traceId, parent]);
    const chats = spans.filter((s) => s.name.startsWith('chat'));
    assert.ok(chats.length >= 1);
    assert.ok(chats.every((c) => c.parentSpanId === runs[0].spanId));
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
});

const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(64, 7)]);

test('threads() lists the user\'s threads; deleteThread() removes only your own', async () => {
  await withRuntime(async (rt) => {
    await rt.wait(rt.startTurn('t-node-a', 'hello', { userId: 'u1' }).turnId);
    await rt.wait(rt.startTurn('t-node-z', 'hello', { userId: 'u2' }).turnId);
    const lastSeq = rt.eventsPage('t-node-a', 'u1').at(-1).seq;
    const mine = rt.threads('u1');
    assert.deepEqual(mine.map((t) => t.id), ['t-node-a']);
    assert.deepEqual(Object.keys(mine[0]).sort(), ['createdAt', 'id', 'lastSeq', 'title', 'updatedAt']);
    assert.equal(mine[0].lastSeq, lastSeq);
    assert.deepEqual(rt.threads('u2').map((t) => t.id), ['t-node-z']);
    assert.deepEqual(rt.threads('nobody'), []);
    assert.throws(() => rt.deleteThread('t-node-a', 'u2'),
      { name: 'NotFound', message: 'agentrt_thread_delete: thread t-node-a not found' });
    rt.deleteThread('t-node-a', 'u1');
    assert.deepEqual(rt.threads('u1'), []);
    assert.throws(() => rt.deleteThread('t-node-a', 'u1'), agentrt.NotFound);
    assert.throws(() => rt.startTurn('t-node-a', 'back?', { userId: 'u1' }), agentrt.NotFound);
    assert.throws(() => rt.threads(''), agentrt.InvalidArgument);
  });
});

test('eventsPage() reads the log in pages, for the thread\'s owner only', async () => {
  await withRuntime(async (rt) => {
    await rt.wait(rt.startTurn('t-node-p', 'hello', { userId: 'u1' }).turnId);
    const streamed = await collect(rt.events('t-node-p', { runs: 1, timeoutMs: 10000 }));
    const page = rt.eventsPage('t-node-p', 'u1');
    assert.deepEqual(page.map((e) => e.event.type), streamed.map((e) => e.type));
    assert.deepEqual(page.map((e) => e.seq), page.map((_, i) => i + 1));
    assert.deepEqual(rt.eventsPage('t-node-p', 'u1', { afterSeq: 1, limit: 2 }), page.slice(1, 3));
    assert.deepEqual(rt.eventsPage('t-node-p', 'u1', { afterSeq: page.at(-1).seq }), []);
    assert.throws(() => rt.eventsPage('t-node-p', 'u2'),
      { name: 'NotFound', message: 'agentrt_events_page: thread t-node-p not found' });
    assert.throws(() => rt.eventsPage('t-node-p', 'u1', { limit: 1001 }),
      { name: 'InvalidArgument', message: 'agentrt_events_page: limit must be from 1 to 1000, not 1001' });
    // A number the C parameter cannot hold is refused, not cut (2 ** 32 + 2 would be a limit of 2, 1.5 one of 1).
    assert.throws(() => rt.eventsPage('t-node-p', 'u1', { limit: 2 ** 32 + 2 }), {
      name: 'InvalidArgument',
      message: 'agentrt_events_page: limit is 4294967298, outside -2147483648..2147483647 (int32_t)',
    });
    assert.throws(() => rt.eventsPage('t-node-p', 'u1', { limit: 1.5 }),
      { name: 'InvalidArgument', message: 'agentrt_events_page: limit is 1.5, not an integer' });
    assert.throws(() => rt.eventsPage('t-node-p', 'u1', { afterSeq: 2 ** 64 }), { name: 'InvalidArgument' });
    assert.deepEqual(rt.eventsPage('t-node-p', 'u1', { afterSeq: 1n, limit: 2 }), page.slice(1, 3));
  });
});

test('upload() stores a file whose part sends it in a turn', async () => {
  await withRuntime(async (rt) => {
    const up = rt.upload('u1', 't-node-up', PNG, 'image/png');
    assert.deepEqual(Object.keys(up).sort(), ['expiresAt', 'id', 'mimeType', 'part', 'ref', 'size', 'url']);
    assert.equal(up.size, PNG.length);
    assert.deepEqual(up.part, { type: 'image', source: { type: 'url', value: up.url, mimeType: 'image/png' } });
    const h = rt.startTurn('t-node-up', [{ type: 'text', text: 'look' }, up.part], { userId: 'u1' });
    assert.equal((await rt.wait(h.turnId)).status, 'COMPLETED');
    assert.equal(rt.history('t-node-up')[0].content[1].type, 'image');
    assert.throws(() => rt.upload('u2', 't-node-up', PNG, 'image/png'), agentrt.NotFound);
    assert.throws(() => rt.upload('u1', 't-node-up', PNG, 'application/x-msdownload'), agentrt.InvalidArgument);
  });
  await withRuntime(async (rt) => {
    assert.throws(() => rt.upload('u1', 't-node-up', PNG, 'image/png'), agentrt.Unsupported);
  }, { config: { objects: null } });
});

test('callbacks are registered per runtime and unregistered at close; tools are forgotten on unregister', async () => {
  const before = koffi.stats().callbacks;
  await withRuntime(async (rt) => {
    assert.equal(koffi.stats().callbacks, before + 3); // tool, destroy and model trampolines
    rt.tool({ ...BOOK_ROOM, name: 'a' }, () => 1);
    rt.tool({ ...BOOK_ROOM, name: 'b' }, () => 2);
    assert.equal(rt._tools.size, 2);
    assert.throws(() => rt.tool({ ...BOOK_ROOM, name: 'a' }, () => 3), agentrt.Conflict);
    assert.equal(rt._tools.size, 2); // the refused registration was destroyed at once
    rt.unregisterTool('a');
    assert.equal(rt._tools.size, 1);
    assert.equal(koffi.stats().callbacks, before + 3);
  }, { model: () => 'hi' });
  assert.equal(koffi.stats().callbacks, before);
});

test("an MCP server's tools are listed, and a call asking for input is answered with a response", async () => {
  const server = path.join(__dirname, '..', '..', '..', 'tests', 'mcp', 'scripted_server.py');
  const config = { mcp_servers: { scripted: { command: ['python3', server], approval: 'never' } } };
  await withRuntime(async (rt) => {
    const [info] = rt.mcpServers();
    assert.equal(info.name, 'scripted');
    assert.equal(info.state, 'ready');
    assert.ok(rt.mcpTools().some((t) => t.name === 'scripted__echo' && t.offered));
    assert.throws(() => rt.approveMcpTool('scripted__echo'), agentrt.InvalidState);
    assert.throws(() => rt.approveMcpTool('nope__x'), agentrt.NotFound);
    const h = rt.startTurn('t-mcp', 'use scripted__ask', { userId: 'u1' });
    const turn = await rt.wait(h.turnId);
    assert.equal(turn.status, 'WAITING_APPROVAL');
    const [interrupt] = turn.interrupts;
    assert.equal(interrupt.reason, 'input_required');
    const answer = rt.resume(h.turnId, turn.approvalRequestId,
      [{ interruptId: interrupt.id, action: 'approve', response: { colour: 'red' } }]);
    assert.equal((await rt.wait(answer.turnId)).status, 'COMPLETED');
    const tool = rt.history('t-mcp').filter((m) => m.role === 'tool');
    assert.equal(tool[0].content, 'you chose red');
  }, { config });
  await withRuntime(async (rt) => {
    assert.deepEqual(rt.mcpServers(), []);
    assert.deepEqual(rt.mcpTools(), []);
  });
});
