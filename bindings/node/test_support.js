'use strict';
// What the binding's tests share: a runtime on a temporary folder, and the events of a stream collected. It lives
// beside test/, not in it: `node --test test/` runs every file of that folder as a test file.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const agentrt = require('.');

async function collect(stream) {
  const out = [];
  for await (const e of stream) out.push(e);
  return out;
}

// A runtime on a temp dir (two workers, short flush and sweep intervals, the offline demo model unless `model` is
// given), closed and removed after fn.
async function withRuntime(fn, { config = {}, model } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentrt-node-'));
  const rt = agentrt.Runtime.open({
    data_dir: dir, model: { type: 'demo' }, workers: 2, flush_interval_ms: 5, sweep_interval_ms: 50, ...config,
  }, { model });
  try {
    return await fn(rt);
  } finally {
    await rt.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

module.exports = { collect, withRuntime };
