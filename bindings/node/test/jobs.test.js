'use strict';
// External jobs through the Node binding: a JS tool answers with call.startJob(), the host completes the job from
// another thread, the outcome reaches history and the event stream; cancel with the hook, expiry (the hook called
// from the sweeper's thread), confirmation interrupts, deltaMessages. Run: node --test test/
const test = require('node:test');
const assert = require('node:assert/strict');
const { setTimeout: sleep } = require('node:timers/promises');

const agentrt = require('..');
const { fns, takeString, STATUS } = require('../lib/capi');
const { collect, withRuntime } = require('../test_support');

// A user message starting with "render" (or "costly") calls that tool once, with the id call_<number of user
// messages>; after its result (or for anything else) the answer is "answer".
function jobModel(request) {
  if (request.stage !== 'execution') return 'ok';
  let users = 0;
  let answered = false;
  let text = '';
  for (const m of request.messages) {
    if (m.role === 'user') {
      users += 1;
      answered = false;
      text = typeof m.content === 'string' ? m.content : '';
    } else if (m.role === 'tool') {
      answered = true;
    }
  }
  if (!answered && (text.startsWith('render') || text.startsWith('costly'))) {
    const name = text.startsWith('costly') ? 'costly_render' : 'render';
    return { toolCalls: [{ id: `call_${users}`, name, arguments: '{"scene":"beach"}' }] };
  }
  return 'answer';
}

const RENDER = {
  name: 'render',
  description: 'Render a scene (a long job)',
  parameters: { type: 'object', properties: { scene: { type: 'string' } } },
};

// A runtime whose model is jobModel, closed and removed after fn.
const withJobRuntime = (fn) => withRuntime(fn, { model: jobModel });

function jobNotes(history) {
  return history.filter((m) => m.metadata && typeof m.metadata === 'object' && 'job_id' in m.metadata);
}

// Until the job's outcome is in history: its delivery commits events on the job's thread, so look again at each
// event (no polling); throws Timeout if nothing comes for a minute.
async function waitDelivered(rt, jobId) {
  let job = rt.job(jobId);
  const stream = rt.events(job.threadId, { timeoutMs: 60000 });
  try {
    while (!job.delivered) {
      const { done } = await stream.next();
      if (done) throw new Error(`job ${jobId} was not delivered`);
      job = rt.job(jobId);
    }
  } finally {
    stream.close();
  }
  return job;
}

test('a JS tool starts a job; the host completes it from another thread; history and the stream show it', async () => {
  const seen = [];
  const refusals = [];
  await withJobRuntime(async (rt) => {
    rt.tool(RENDER, async (args, call) => {
      seen.push([call.jobId, call.jobConfirmed, call.toolCallId]);
      try {
        call.startJob({ status: 'done' });
      } catch (e) {
        refusals.push(e);
      }
      seen.push(call.startJob({ message: `rendering ${args.scene}`, metadata: { external_id: 'ext-1' } }));
      try {
        call.startJob();
      } catch (e) {
        refusals.push(e);
      }
      return 'this return value is ignored';
    });
    const h = rt.startTurn('t-node-job', 'render the beach', { userId: 'u1' });
    assert.equal((await rt.wait(h.turnId)).status, 'COMPLETED'); // the turn did not wait for the job
    assert.equal(seen.length, 2);
    const [jobId, confirmed, callId] = seen[0];
    assert.match(jobId, /^job_/);
    assert.equal(confirmed, false);
    assert.equal(callId, 'call_1');
    assert.equal(seen[1], jobId); // startJob returns the job's id
    assert.deepEqual(refusals.map((e) => e.constructor), [agentrt.InvalidArgument, agentrt.InvalidState]);
    assert.match(refusals[0].message, /'status' must be "queued" or "running"/);

    const jobs = rt.jobs('t-node-job');
    assert.equal(jobs.length, 1);
    const job = jobs[0];
    assert.deepEqual(rt.job(jobId), job);
    assert.equal(rt.job('job_nope'), null);
    assert.deepEqual([job.id, job.status, job.toolCallId, job.toolName, job.turnId],
      [jobId, 'running', 'call_1', 'render', h.turnId]);
    assert.equal(job.message, 'rendering beach');
    assert.deepEqual(job.metadata, { external_id: 'ext-1' });
    assert.equal(job.delivered, false);

    const run1 = await collect(rt.events('t-node-job', { runs: 1, timeoutMs: 10000 }));
    const result = run1.find((e) => e.type === 'TOOL_CALL_RESULT');
    assert.deepEqual(result.metadata.tool_agent_output.result,
      { jobId, status: 'running', message: 'rendering beach' });
    const announced = run1.filter((e) => e.type === 'CUSTOM' && e.name === 'agentrt.job');
    assert.deepEqual(announced.map((e) => [e.value.id, e.value.status]), [[jobId, 'running']]);

    const progressed = rt.updateJob(jobId, { progress: 0.5, message: 'frame 20/40' });
    assert.deepEqual([progressed.progress, progressed.message], [0.5, 'frame 20/40']);
    assert.equal(progressed.version, job.version + 1);

    // Completed from another thread: the C call runs on one of libuv's threads.
    const out = [null];
    const body = JSON.stringify({
      result: { url: 'https://cdn.example/beach.png' },
      assets: [{ key: 'renders/beach.png', mimeType: 'image/png' }],
    });
    const rc = await new Promise((resolve, reject) => {
      fns.agentrt_job_complete.async(out, rt._handle(), jobId, body, (err, r) => (err ? reject(err) : resolve(r)));
    });
    assert.equal(rc, STATUS.OK);
    const done = JSON.parse(takeString(out[0]));
    assert.equal(done.status, 'succeeded');
    assert.equal(done.delivered, true);
    assert.deepEqual(rt.job(jobId), done);

    const delivery = await collect(rt.events('t-node-job', { afterSeq: run1.at(-1).seq, runs: 1, timeoutMs: 10000 }));
    assert.deepEqual(delivery.map((e) => e.type), ['RUN_STARTED', 'TOOL_CALL_RESULT', 'CUSTOM', 'RUN_FINISHED']);
    assert.equal(delivery[1].toolCallId, 'call_1');
    assert.equal(delivery[2].name, 'agentrt.job');
    assert.equal(delivery[2].value.status, 'succeeded');
    assert.deepEqual(delivery[2].value.result, { url: 'https://cdn.example/beach.png' });

    const history = rt.history('t-node-job');
    const notes = jobNotes(history);
    assert.equal(notes.length, 1);
    assert.equal(notes[0].id, history.at(-1).id);
    assert.deepEqual([notes[0].role, notes[0].toolCallId], ['tool', 'call_1']);
    assert.equal(notes[0].metadata.job_status, 'succeeded');
    assert.ok(notes[0].content.startsWith(`Job ${jobId} (render) succeeded`), notes[0].content);

    assert.throws(() => rt.completeJob(jobId, 1), agentrt.InvalidState);
    assert.throws(() => rt.failJob('job_nope', 'x', 'y'), agentrt.NotFound);
    assert.throws(() => rt.updateJob(jobId, { progress: 0.9 }), agentrt.InvalidState);
  });
});

test('a failed job reaches history with its code', async () => {
  await withJobRuntime(async (rt) => {
    rt.tool(RENDER, (args, call) => { call.startJob({ status: 'queued' }); });
    await rt.wait(rt.startTurn('t-node-fail', 'render', { userId: 'u1' }).turnId);
    const [job] = rt.jobs('t-node-fail');
    assert.equal(job.status, 'queued');
    assert.throws(() => rt.updateJob(job.id, { progress: 2 }), agentrt.InvalidArgument);
    assert.equal(rt.updateJob(job.id, { status: 'running' }).status, 'running');
    const failed = rt.failJob(job.id, 'render_crashed', 'the GPU fell over');
    assert.deepEqual(failed.error, { code: 'render_crashed', message: 'the GPU fell over' });
    const notes = jobNotes(rt.history('t-node-fail'));
    assert.equal(notes.length, 1);
    assert.equal(notes[0].content, `Job ${job.id} (render) failed: render_crashed: the GPU fell over`);
  });
});

test('cancel calls the hook once with the cancelled record; expiry calls it from the sweeper', async () => {
  const hooked = [];
  await withJobRuntime(async (rt) => {
    const timeouts = [undefined, 100, undefined]; // the second job expires after 100 ms
    rt.tool(RENDER, (args, call) => { call.startJob({ timeoutMs: timeouts.shift() }); });
    let hookedTwice;
    const secondCall = new Promise((resolve) => { hookedTwice = resolve; });
    rt.setJobCancelHook((job) => {
      hooked.push(job);
      if (hooked.length === 2) hookedTwice();
    });
    await rt.wait(rt.startTurn('t-node-cancel', 'render a', { userId: 'u1' }).turnId);
    const [job] = rt.jobs('t-node-cancel');
    const cancelled = rt.cancelJob(job.id, 'the user changed their mind');
    assert.equal(cancelled.status, 'cancelled');
    assert.deepEqual(cancelled.error, { code: 'cancelled', message: 'the user changed their mind' });
    assert.deepEqual(hooked, [cancelled]); // called inside cancelJob
    assert.deepEqual(rt.cancelJob(job.id), cancelled); // again: unchanged, no second call
    assert.equal(hooked.length, 1);
    const notes = jobNotes(rt.history('t-node-cancel'));
    assert.equal(notes.length, 1);
    assert.equal(notes[0].content, `Job ${job.id} (render) was cancelled: the user changed their mind`);

    // A job past its timeout fails with code "timeout"; the sweeper's thread calls the hook through koffi.
    await rt.wait(rt.startTurn('t-node-cancel', 'render b', { userId: 'u1' }).turnId);
    const expiring = rt.jobs('t-node-cancel')[1];
    const expired = await waitDelivered(rt, expiring.id);
    assert.deepEqual([expired.status, expired.error.code], ['failed', 'timeout']);
    // The sweeper calls the hook after it committed the record (and koffi runs it on this thread's loop).
    await Promise.race([secondCall, sleep(60000, undefined, { ref: false })]);
    assert.equal(hooked.length, 2);
    assert.deepEqual([hooked[1].id, hooked[1].status, hooked[1].error.code], [expiring.id, 'failed', 'timeout']);

    // Removed: no more calls.
    rt.setJobCancelHook(null);
    await rt.wait(rt.startTurn('t-node-cancel', 'render c', { userId: 'u1' }).turnId);
    rt.cancelJob(rt.jobs('t-node-cancel')[2].id);
    assert.equal(hooked.length, 2);
    assert.throws(() => rt.setJobCancelHook('not a function'), TypeError);
  });
});

test('a confirmation is answered through resume and the tool runs again confirmed', async () => {
  const calls = [];
  await withJobRuntime(async (rt) => {
    rt.tool({ ...RENDER, name: 'costly_render' }, (args, call) => {
      calls.push([call.jobId, call.jobConfirmed]);
      if (call.jobConfirmed) {
        call.startJob({ message: 'started after confirmation' });
      } else {
        call.startJob({ confirm: true, confirmMessage: 'Rendering costs 3 credits. Go ahead?', metadata: { cost: 3 } });
      }
    });
    const h = rt.startTurn('t-node-conf', 'costly render', { userId: 'u1' });
    assert.equal((await rt.wait(h.turnId)).status, 'WAITING_APPROVAL');
    const pending = rt.interrupts(h.turnId);
    assert.equal(pending.interrupts.length, 1);
    const [interrupt] = pending.interrupts;
    assert.equal(interrupt.reason, 'confirmation');
    assert.equal(interrupt.message, 'Rendering costs 3 credits. Go ahead?');
    const jobId = interrupt.metadata.jobId;
    assert.deepEqual(calls, [[jobId, false]]);
    const job = rt.job(jobId);
    assert.deepEqual([job.status, job.confirmation], ['queued', 'pending']);
    assert.throws(() => rt.completeJob(jobId, { too: 'early' }), agentrt.InvalidState);

    const answer = rt.resume(h.turnId, pending.approvalRequestId, [{ interruptId: interrupt.id, status: 'resolved' }]);
    assert.equal(answer.status, 'accepted');
    assert.equal((await rt.wait(h.turnId)).status, 'COMPLETED');
    assert.deepEqual(calls, [[jobId, false], [jobId, true]]);
    const started = rt.job(jobId);
    assert.deepEqual([started.status, started.confirmation, started.message],
      ['running', 'confirmed', 'started after confirmation']);
    assert.deepEqual(started.metadata, { cost: 3 });
    assert.equal(rt.completeJob(jobId, { frames: 40 }).delivered, true);
    const notes = jobNotes(rt.history('t-node-conf'));
    assert.equal(notes.length, 1);
    assert.equal(notes[0].metadata.job_status, 'succeeded');
  });
});

test('a repeated start returns deltaMessages, the same as turnMessages', async () => {
  await withJobRuntime(async (rt) => {
    const first = rt.startTurn('t-node-delta', 'hi', { userId: 'u1', clientMessageId: 'cm-1' });
    assert.equal(first.existing, false);
    assert.equal('deltaMessages' in first, false);
    await rt.wait(first.turnId);
    const again = rt.startTurn('t-node-delta', 'hi', { userId: 'u1', clientMessageId: 'cm-1' });
    assert.equal(again.existing, true);
    assert.equal(again.turnId, first.turnId);
    assert.deepEqual(again.deltaMessages.map((m) => [m.role, m.content]), [['user', 'hi'], ['assistant', 'answer']]);
    assert.deepEqual(again.deltaMessages, rt.turnMessages(first.turnId));
    assert.throws(() => rt.turnMessages('turn_nope'), agentrt.NotFound);
  });
});
