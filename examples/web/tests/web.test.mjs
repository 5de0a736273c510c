// The web page in Debian's Chromium (playwright-core), served by a real agentrt-server (--web-root dist) on the
// offline demo model: golden path A; golden path B approved (its card live and again after a reload), rejected with
// a reason, approved with edited arguments (checked against the schema first); Stop; threads. Each test saves a
// screenshot into test-results/ (SCREENSHOTS=dir saves them there instead: the README's come from such a run).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer as createTcpServer, connect as tcpConnect } from "node:net";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

import { chromium } from "playwright-core";

const TOKEN = "web-test-token-1";
const WAIT = { timeout: 60000 };  // never reached on a loaded machine: it only turns a hang into a failure
const dist = fileURLToPath(new URL("../dist/", import.meta.url));
const shots = process.env.SCREENSHOTS ?? fileURLToPath(new URL("../test-results/", import.meta.url));
let browser;
const servers = [];

async function startServer(extra = [], env = {}) {
  const binary = process.env.AGENTRT_SERVER;
  assert.ok(binary, "set AGENTRT_SERVER to the agentrt-server binary");
  const dir = mkdtempSync(join(tmpdir(), "agentrt-web-"));
  const proc = spawn(binary, ["--listen", "127.0.0.1:0", "--data", dir, "--token", `${TOKEN}:web`, "--model", "demo",
    "--log-level", "warn", "--web-root", dist, ...extra], { stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, ...env } });
  const first = await new Promise((resolve, reject) => {
    createInterface({ input: proc.stdout }).once("line", resolve);
    proc.once("exit", (code) => reject(new Error(`agentrt-server exited with ${code}`)));
  });
  const server = { proc, dir, url: `http://127.0.0.1:${Number(/port (\d+)/.exec(first)[1])}` };
  servers.push(server);
  return server;
}

let server;
before(async () => {
  const chromiumPath = process.env.CHROMIUM ?? "/usr/bin/chromium";
  assert.ok(existsSync(chromiumPath), `no Chromium at ${chromiumPath} (scripts/deps installs Debian's chromium)`);
  assert.ok(existsSync(join(dist, "index.html")), "build the page first (npm run build)");
  mkdirSync(shots, { recursive: true });
  server = await startServer();
  browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: ["--no-sandbox"] });
});

after(async () => {
  await browser?.close();
  for (const s of servers) {
    if (s.proc.exitCode === null) {
      const exited = new Promise((resolve) => s.proc.once("exit", resolve));
      s.proc.kill("SIGTERM");
      await exited;
    }
    rmSync(s.dir, { recursive: true, force: true });
    if (s.configDir) rmSync(s.configDir, { recursive: true, force: true });
  }
});

// Runs `fn(page, problems)` on a signed-in page of a new browser context on `base`, closed afterwards.
async function withPage(base, fn) {
  if (typeof base === "function") [base, fn] = [server.url, base];
  const { page, context, problems, requests } = await openPage(base);
  try {
    return await fn(page, problems);
  } catch (e) {
    // What the page showed, said and asked when the test failed: a screenshot in test-results, the rest in the error.
    const shot = join(shots, `failed-${Date.now()}.png`);
    await page.screenshot({ path: shot }).catch(() => {});
    const nav = await page.locator("nav").textContent().catch(() => "?");
    e.message += `\n  screenshot: ${shot}\n  threads nav: ${nav}\n  problems: ${JSON.stringify(problems)}` +
      `\n  API requests: ${JSON.stringify(requests.slice(-30))}`;
    throw e;
  } finally {
    await context.close();
  }
}

// A signed-in page on a new thread; page errors and failed requests collected.
async function openPage(base = server.url) {
  const context = await browser.newContext({ viewport: { width: 1100, height: 800 } });
  const page = await context.newPage();
  const problems = [];
  const requests = [];  // the API's answers, for a failure's report
  page.on("response", (r) => {
    if (r.url().includes("/api/")) requests.push(`${r.request().method()} ${new URL(r.url()).pathname} ${r.status()}`);
  });
  page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console: ${m.text()}`);
  });
  await page.goto(`${base}/`);
  await page.getByLabel("Token").fill(TOKEN);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByLabel("Message").waitFor(WAIT);
  return { page, context, problems, requests };
}

async function send(page, text) {
  await page.getByLabel("Message").fill(text);
  await page.getByRole("button", { name: "Send" }).click();
}

const assistant = (page, text) => page.locator(".msg.assistant", { hasText: text });

// Asks the demo model for a booking: its book_room call waits for approval. Returns the approval card.
async function askToBook(page) {
  await send(page, "please book a room");
  const approval = page.getByRole("group", { name: "Approval for book_room" });
  await approval.waitFor(WAIT);
  return approval;
}

test("golden path A: a question streams its answer into the page, and the thread is listed", async () => {
  await withPage(async (page, problems) => {
    await send(page, "hello");
    await assistant(page, 'You said: "hello"').waitFor(WAIT);
    await page.getByRole("button", { name: "Send" }).waitFor(WAIT);  // the run ended
    await page.getByRole("navigation", { name: "Threads" }).getByRole("button", { name: "Delete" }).first().waitFor(WAIT);
    // The demo model reports no token usage: the footer stays empty (a model that reports it fills it).
    assert.equal(await page.locator("footer.usage").textContent(), "");
    await page.screenshot({ path: join(shots, "golden-path-a.png") });
    assert.deepEqual(problems, []);
  });
});

test("golden path B: the approval card, Approve, the booking card live and again after a reload", async () => {
  await withPage(async (page, problems) => {
    const approval = await askToBook(page);
    assert.match(await approval.textContent(), /expires in/);
    assert.match(await approval.textContent(), /"room": "A1"/);
    await page.screenshot({ path: join(shots, "approval.png") });
    await approval.getByRole("button", { name: "Approve" }).click();
    const card = page.locator('[data-ui-type="booking_confirmation"]');
    await card.waitFor(WAIT);
    assert.match(await card.textContent(), /Room A1 booked for mon/);
    await assistant(page, "Your booking is confirmed: room A1 on Monday.").waitFor(WAIT);
    await page.screenshot({ path: join(shots, "live-turn-with-card.png") });
    // A reload re-attaches to the thread: the same messages and the same card.
    await page.reload();
    await page.locator('[data-ui-type="booking_confirmation"]').waitFor(WAIT);
    await assistant(page, "Your booking is confirmed: room A1 on Monday.").waitFor(WAIT);
    assert.equal(await page.locator(".msg.user").count(), 1);
    assert.deepEqual(problems, []);
  });
});

test("golden path B rejected with a reason: the model is told why, nothing is booked", async () => {
  await withPage(async (page, problems) => {
    const approval = await askToBook(page);
    await approval.getByRole("button", { name: "Reject" }).click();
    await approval.getByLabel("Reason").fill("not this week");
    await approval.getByRole("button", { name: "Confirm reject" }).click();
    await assistant(page, "I did not book the room").waitFor(WAIT);
    assert.match(await assistant(page, "I did not book the room").textContent(), /not this week/);
    assert.equal(await page.locator('[data-ui-type="booking_confirmation"]').count(), 0);
    await page.screenshot({ path: join(shots, "rejected.png") });
    assert.deepEqual(problems, []);
  });
});

test("golden path B with edited arguments: checked against the tool's schema, then booked as edited", async () => {
  await withPage(async (page, problems) => {
    const approval = await askToBook(page);
    await approval.getByRole("button", { name: "Edit" }).click();
    const args = approval.getByLabel("Arguments");
    await args.fill('{"room": "B2", "day": "someday"}');
    await approval.getByRole("button", { name: "Approve with edits" }).click();
    assert.match(await approval.getByRole("alert").textContent(), /\/day: should be one of/);
    await args.fill("{not json");
    await approval.getByRole("button", { name: "Approve with edits" }).click();
    assert.match(await approval.getByRole("alert").textContent(), /not JSON/);
    await args.fill('{"room": "B2", "day": "tue"}');
    await approval.getByRole("button", { name: "Approve with edits" }).click();
    await assistant(page, "Your booking is confirmed: room B2 on Tuesday.").waitFor(WAIT);
    assert.match(await page.locator('[data-ui-type="booking_confirmation"]').textContent(), /Room B2 booked for tue/);
    await page.screenshot({ path: join(shots, "edited.png") });
    assert.deepEqual(problems, []);
  });
});

test("Stop cancels the running turn; the page says so and takes the next message", async () => {
  const slow = await startServer(["--demo-delay-ms", "40"]);
  await withPage(slow.url, async (page, problems) => {
    await send(page, "a long answer, slowly please");
    await page.getByRole("status").filter({ hasText: "Working" }).waitFor(WAIT);
    await page.locator(".msg.assistant").first().waitFor(WAIT);  // its text has begun
    await page.getByRole("button", { name: "Stop" }).click();
    await page.getByRole("status").filter({ hasText: "Stopped." }).waitFor(WAIT);
    await send(page, "hello");
    await assistant(page, 'You said: "hello"').waitFor(WAIT);
    await page.screenshot({ path: join(shots, "stopped.png") });
    assert.deepEqual(problems, []);
  });
});

// A TCP relay between the browser and a server whose open connections the test can cut, as a network does.
async function relayTo(target) {
  const { port } = new URL(target);
  const sockets = new Set();
  const relay = createTcpServer((client) => {
    const upstream = tcpConnect(Number(port), "127.0.0.1");
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {});
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise((resolve) => relay.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${relay.address().port}`,
    cut: () => {
      for (const s of sockets) s.destroy();
    },
    close: () => new Promise((resolve) => relay.close(resolve)),
  };
}

test("a connection cut mid-turn: the page reconnects and shows the whole answer once", async () => {
  const slow = await startServer(["--demo-delay-ms", "40"]);
  const relay = await relayTo(slow.url);
  const { page, context, problems } = await openPage(relay.url);
  // The reconnects' Last-Event-ID: the SSE id of the last event the page applied.
  const resumedAfter = [];
  page.on("request", (r) => {
    if (r.method() === "POST" && r.url().endsWith("/agent/connect")) resumedAfter.push(r.headers()["last-event-id"]);
  });
  // About 40 chunks of 8 bytes, 40 ms apart: the run is still going when the page reconnects.
  const text = "a long answer, slowly please; ".repeat(10).trim();
  try {
    await send(page, text);
    await page.locator(".msg.assistant").first().waitFor(WAIT);  // its text has begun
    const before = resumedAfter.length;
    relay.cut();
    await page.getByRole("status").filter({ hasText: "Connection lost: reconnecting" }).waitFor(WAIT);
    await page.getByRole("button", { name: "Send" }).waitFor(WAIT);  // the run ended, seen through the new connection
    const answers = page.locator(".msg.assistant");
    assert.equal(await answers.count(), 1);
    const shown = await answers.first().textContent();
    assert.ok(shown.startsWith(`You said: "${text}"`), shown);
    // It took the stream up after the last event it had (a sequence number), not the whole run again.
    const reconnects = resumedAfter.slice(before);
    assert.ok(reconnects.length >= 1, "no reconnect");
    assert.match(reconnects[0] ?? "", /^\d+$/);
    // What the page shows is what the server stored: nothing missed, nothing twice.
    const thread = decodeURIComponent(/thread=([^&]+)/.exec(new URL(page.url()).hash)[1]);
    const res = await fetch(`${slow.url}/api/v1/agent/runs/${thread}/history`, {
      headers: { Authorization: `Bearer ${TOKEN}` },
    });
    const history = await res.json();
    assert.equal(shown, history.messages[1].content);
    // The cut itself is reported by the browser and the client (a failed fetch); nothing else went wrong.
    await page.screenshot({ path: join(shots, "reconnected.png") });
    assert.deepEqual(problems.filter((p) => !/Agent execution failed|network|Failed to fetch|ERR_/.test(p)), []);
  } finally {
    await context.close();
    await relay.close();
  }
});

// A 1x1 PNG.
const DOT = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==", "base64");

test("an image attached: previewed, uploaded, sent as an AG-UI part, and shown again from history", async () => {
  const { page, context, problems } = await openPage();
  try {
    await page.getByLabel("Attach images").setInputFiles({ name: "dot.png", mimeType: "image/png", buffer: DOT });
    await page.getByAltText("preview of dot.png").waitFor(WAIT);
    await page.locator("figcaption", { hasText: "dot.png" }).waitFor(WAIT);  // uploaded
    await send(page, "what is this?");
    // The demo model quotes the message as it reached it: the text, then how the image is named to it.
    await assistant(page, 'You said: "what is this?').waitFor(WAIT);
    assert.match(await assistant(page, "You said").textContent(), /img_[0-9a-f]+/);
    const shown = page.locator(".msg.user img.attachment");
    assert.match(await shown.getAttribute("src"), /\/api\/v1\/objects\//);
    assert.equal(await page.locator(".attachments").count(), 0);  // the composer is empty again
    // After a reload the image comes from history, re-signed, and loads under the page's CSP.
    await page.reload();
    const again = page.locator(".msg.user img.attachment");
    await again.waitFor(WAIT);
    await page.waitForFunction(() => document.querySelector(".msg.user img.attachment")?.naturalWidth === 1, null, WAIT);
    await page.screenshot({ path: join(shots, "image.png") });
    assert.deepEqual(problems, []);
  } finally {
    await context.close();
  }
});

test("a job a tool started: its progress while it runs, its outcome in the chat when it ends", async () => {
  const jobsServer = await startServer(["--demo-jobs", "1500"]);
  await withPage(jobsServer.url, async (page, problems) => {
    await send(page, "render the beach");
    const job = page.getByRole("group", { name: "Job render_preview" });
    await job.waitFor(WAIT);
    await page.getByRole("progressbar", { name: "Progress of render_preview" }).waitFor(WAIT);
    await job.filter({ hasText: "half done" }).waitFor(WAIT);
    await page.locator('.job[data-job-status="succeeded"]').waitFor(WAIT);
    // Its outcome came as a run of its own: the page re-attached, and the call's result is the outcome.
    await page.locator(".tool-call", { hasText: "succeeded: rendered the beach" }).waitFor(WAIT);
    assert.match(await job.textContent(), /render_preview · succeeded/);
    await page.screenshot({ path: join(shots, "job-outcome.png") });
    assert.deepEqual(problems, []);
  });
});

// One second of a 440 Hz tone, 16-bit mono PCM at 16 kHz: what Chromium's fake microphone plays.
function toneWav() {
  const rate = 16000;
  const samples = rate;
  const b = Buffer.alloc(44 + samples * 2);
  b.write("RIFF", 0);
  b.writeUInt32LE(36 + samples * 2, 4);
  b.write("WAVEfmt ", 8);
  b.writeUInt32LE(16, 16);
  b.writeUInt16LE(1, 20);
  b.writeUInt16LE(1, 22);
  b.writeUInt32LE(rate, 24);
  b.writeUInt32LE(rate * 2, 28);
  b.writeUInt16LE(2, 32);
  b.writeUInt16LE(16, 34);
  b.write("data", 36);
  b.writeUInt32LE(samples * 2, 40);
  for (let i = 0; i < samples; ++i) b.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / rate)), 44 + i * 2);
  return b;
}

test("voice input: recorded from the microphone, transcribed by the server, put in the message box to edit", async () => {
  // The transcription service the server is configured with (OpenAI's API shape), answering with a fixed text.
  const received = [];
  const asr = createHttpServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      received.push({ path: req.url, type: req.headers["content-type"], body: Buffer.concat(chunks) });
      res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify({ text: "book a room for tuesday" }));
    });
  });
  await new Promise((resolve) => asr.listen(0, "127.0.0.1", resolve));
  const dir = mkdtempSync(join(tmpdir(), "agentrt-voice-"));
  const config = join(dir, "config.json");
  writeFileSync(config, JSON.stringify({ asr: { type: "openai", base_url: `http://127.0.0.1:${asr.address().port}/v1`,
    api_key_env: "AGENTRT_TEST_ASR_KEY", max_retries: 0 } }));
  const wav = join(dir, "tone.wav");
  writeFileSync(wav, toneWav());
  const voiceServer = await startServer(["--config", config], { AGENTRT_TEST_ASR_KEY: "sk-test" });
  const micBrowser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium", headless: true,
    args: ["--no-sandbox", "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
      `--use-file-for-fake-audio-capture=${wav}`] });
  const context = await micBrowser.newContext({ permissions: ["microphone"] });
  const page = await context.newPage();
  const problems = [];
  const requests = [];  // the API's answers, for a failure's report
  page.on("response", (r) => {
    if (r.url().includes("/api/")) requests.push(`${r.request().method()} ${new URL(r.url()).pathname} ${r.status()}`);
  });
  page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
  try {
    await page.goto(`${voiceServer.url}/`);
    await page.getByLabel("Token").fill(TOKEN);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByLabel("Message").fill("please");
    await page.getByRole("button", { name: "Record voice" }).click(WAIT);
    await page.getByRole("button", { name: "Stop recording" }).click(WAIT);
    await page.waitForFunction(() => document.getElementById("message").value === "please book a room for tuesday",
      null, WAIT);
    assert.equal(received.length, 1);
    assert.equal(received[0].path, "/v1/audio/transcriptions");
    assert.match(received[0].type, /^multipart\/form-data/);
    assert.ok(received[0].body.length > 100, "the recording reached the transcription service");
    // The person sends the transcript as written.
    await page.getByRole("button", { name: "Send" }).click();
    await page.getByRole("group", { name: "Approval for book_room" }).waitFor(WAIT);
    await page.screenshot({ path: join(shots, "voice.png") });
    assert.deepEqual(problems, []);
  } finally {
    await context.close();
    await micBrowser.close();
    await new Promise((resolve) => asr.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  }
});

// A server started with a config file of `extra` keys.
async function startConfigured(extra, flags = []) {
  const dir = mkdtempSync(join(tmpdir(), "agentrt-web-config-"));
  const file = join(dir, "config.json");
  writeFileSync(file, JSON.stringify(extra));
  try {
    const s = await startServer(["--config", file, ...flags]);
    s.configDir = dir;  // removed with the server's data folder
    return s;
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}

test("threads: two of them, switched between with their own history, one deleted", async () => {
  await withPage(async (page, problems) => {
    await send(page, "hello");
    await assistant(page, 'You said: "hello"').waitFor(WAIT);
    const first = decodeURIComponent(/thread=([^&]+)/.exec(new URL(page.url()).hash)[1]);
    await page.getByRole("button", { name: "New thread" }).click();
    await send(page, "second thread");
    await assistant(page, 'You said: "second thread"').waitFor(WAIT);
    assert.equal(await assistant(page, 'You said: "hello"').count(), 0);
    const nav = page.getByRole("navigation", { name: "Threads" });
    await nav.getByRole("button", { name: first, exact: true }).click();
    await assistant(page, 'You said: "hello"').waitFor(WAIT);
    assert.equal(await assistant(page, 'You said: "second thread"').count(), 0);
    await nav.getByRole("button", { name: `Delete thread ${first}` }).click();
    await nav.getByRole("button", { name: first, exact: true }).waitFor({ state: "detached", ...WAIT });
    assert.equal(await page.locator(".msg").count(), 0);  // a new, empty thread took its place
    await page.screenshot({ path: join(shots, "threads.png") });
    assert.deepEqual(problems, []);
  });
});

test("an approval past its deadline is shown expired and can be dismissed; the thread goes on", async () => {
  const short = await startConfigured({ runtime: { approval_timeout_ms: 1500, sweep_interval_ms: 100 } });
  await withPage(short.url, async (page, problems) => {
    const approval = await askToBook(page);
    await approval.locator(".expired", { hasText: "expired" }).waitFor(WAIT);
    await approval.getByRole("button", { name: "Dismiss" }).click();
    await approval.waitFor({ state: "detached", ...WAIT });
    await send(page, "hello");
    await assistant(page, 'You said: "hello"').waitFor(WAIT);
    await page.screenshot({ path: join(shots, "expired.png") });
    assert.deepEqual(problems, []);
  });
});

test("an ERROR message is shown as an error, without its prefix", async () => {
  const failing = await startConfigured({ runtime: { max_steps: 1 } });  // the execution stage's call is one too many
  await withPage(failing.url, async (page, problems) => {
    await send(page, "hello");
    const error = page.locator(".msg.error");
    await error.waitFor(WAIT);
    const text = await error.textContent();
    assert.match(text, /^step_limit: step limit reached/);
    assert.equal(await error.getAttribute("role"), "alert");
    await page.screenshot({ path: join(shots, "error.png") });
    assert.deepEqual(problems.filter((p) => !/Failed to load resource/.test(p)), []);
  });
});

test("a card's action sends its message; a job's confirmation is an approval card", async () => {
  const jobsServer = await startServer(["--demo-jobs", "300"]);
  await withPage(jobsServer.url, async (page, problems) => {
    const approval = await askToBook(page);
    await approval.getByRole("button", { name: "Approve" }).click();
    const card = page.locator('[data-ui-type="booking_confirmation"]');
    await card.getByRole("button", { name: "Cancel booking" }).click(WAIT);
    await page.locator(".msg.user", { hasText: "Cancel booking" }).waitFor(WAIT);
    // The demo model takes any message about a booking as a request for one: it asks again; declined.
    const again = page.getByRole("group", { name: "Approval for book_room" });
    await again.getByRole("button", { name: "Reject" }).click(WAIT);
    await again.getByRole("button", { name: "Confirm reject" }).click();
    await assistant(page, "I did not book the room").waitFor(WAIT);
    // "render beach confirm": the tool asks before its job starts.
    await send(page, "render beach confirm");
    const confirm = page.getByRole("group", { name: "Approval for render_preview" });
    await confirm.waitFor(WAIT);
    assert.equal(await confirm.getByRole("button", { name: "Edit" }).count(), 0);  // a confirmation takes no edits
    await confirm.getByRole("button", { name: "Approve" }).click();
    await page.locator('.job[data-job-status="succeeded"]').waitFor(WAIT);
    await page.screenshot({ path: join(shots, "job.png") });
    assert.deepEqual(problems, []);
  });
});

test("a card's action that names an endpoint calls it; its outcome is a notice", async () => {
  // An MCP tool (the repository's scripted server) answers a card whose actions name API paths of this server.
  const dir = mkdtempSync(join(tmpdir(), "agentrt-web-mcp-"));
  const config = join(dir, "config.json");
  const script = fileURLToPath(new URL("../../../tests/mcp/scripted_server.py", import.meta.url));
  writeFileSync(config, JSON.stringify({
    runtime: { mcp_servers: { scripted: { command: ["python3", script], approval: "never" } } },
  }));
  const mcpServer = await startServer(["--config", config]);
  const { page, context, problems } = await openPage(mcpServer.url);
  try {
    await send(page, "use scripted__card");
    const card = page.locator('[data-ui-type="weather_card"]');
    await card.waitFor(WAIT);
    const called = page.waitForResponse((r) => r.url().endsWith("/api/v1/mcp/tools") && r.request().method() === "GET");
    await card.getByRole("button", { name: "Refresh tools" }).click();
    assert.equal((await called).status(), 200);
    await page.getByRole("status").filter({ hasText: "Refresh tools: done" }).waitFor(WAIT);
    await card.getByRole("button", { name: "Broken link" }).click();
    const alert = page.getByRole("alert").filter({ hasText: "Broken link: no such endpoint" });
    await alert.waitFor(WAIT);
    await page.screenshot({ path: join(shots, "card-endpoint-action.png") });
    assert.deepEqual(problems.filter((p) => !/Failed to load resource/.test(p)), []);
  } finally {
    await context.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("keyboard only: sign in, ask, and approve without the mouse", async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  try {
    await page.goto(`${server.url}/`);
    await page.getByLabel("Token").waitFor(WAIT);
    await page.keyboard.press("Tab");  // the token field first
    await page.keyboard.type(TOKEN);
    await page.keyboard.press("Enter");
    await page.getByLabel("Message").waitFor(WAIT);
    await page.getByLabel("Message").focus();
    await page.keyboard.type("please book a room");
    await page.keyboard.press("Enter");
    const approval = page.getByRole("group", { name: "Approval for book_room" });
    await approval.waitFor(WAIT);
    await approval.getByRole("button", { name: "Approve" }).focus();
    await page.keyboard.press("Enter");
    await assistant(page, "Your booking is confirmed").waitFor(WAIT);
    await page.screenshot({ path: join(shots, "keyboard.png") });
  } finally {
    await context.close();
  }
});

test("two approvals at once: each decided on its card, both sent in one resume", async () => {
  const { page, context, problems } = await openPage();
  const resumes = [];
  page.on("request", (r) => {
    if (r.method() === "POST" && r.url().endsWith("/agent/runs") && (r.postData() ?? "").includes('"resume"'))
      resumes.push(JSON.parse(r.postData()).resume);
  });
  try {
    await send(page, "please book two rooms");
    const cards = page.getByRole("group", { name: "Approval for book_room" });
    await cards.nth(1).waitFor(WAIT);
    assert.equal(await cards.count(), 2);
    await cards.nth(0).getByRole("button", { name: "Approve" }).click();
    await cards.nth(0).getByText("Approved: waiting for the other decisions").waitFor(WAIT);
    assert.equal(resumes.length, 0);  // nothing sent until every open interrupt has its decision
    await cards.nth(1).getByRole("button", { name: "Reject" }).click();
    await cards.nth(1).getByLabel("Reason").fill("one is enough");
    await cards.nth(1).getByRole("button", { name: "Confirm reject" }).click();
    await page.getByRole("button", { name: "Send" }).waitFor(WAIT);
    await assistant(page, "Your bookings: room A1 on Monday, not booked.").waitFor(WAIT);
    assert.equal(resumes.length, 1);
    assert.deepEqual(resumes[0].map((e) => [e.status, e.payload.approved]), [["resolved", true], ["resolved", false]]);
    assert.equal(await page.locator('[data-ui-type="booking_confirmation"]').count(), 1);
    await page.screenshot({ path: join(shots, "two-approvals.png") });
    assert.deepEqual(problems, []);
  } finally {
    await context.close();
  }
});

test("reasoning: the draft the organization stage rewrites is shown collapsed, the answer below it", async () => {
  const organizing = await startConfigured({ runtime: { stages: { organization: { call_model: true } } } });
  await withPage(organizing.url, async (page, problems) => {
    await send(page, "hello");
    const reasoning = page.locator("details.msg.reasoning");
    await reasoning.waitFor(WAIT);
    assert.equal(await reasoning.getAttribute("open"), null);  // collapsed
    await reasoning.locator("summary").click();
    assert.match(await reasoning.textContent(), /You said: "hello"/);
    await assistant(page, "Done.").waitFor(WAIT);
    await page.screenshot({ path: join(shots, "reasoning.png") });
    assert.deepEqual(problems, []);
  });
});

test("images dropped on the composer or pasted into the message box are attached too", async () => {
  await withPage(async (page, problems) => {
    const png = DOT.toString("base64");
    await page.evaluate((b64) => {
      const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
      const dropped = new DataTransfer();
      dropped.items.add(new File([bytes], "dropped.png", { type: "image/png" }));
      document.querySelector("form.composer").dispatchEvent(new DragEvent("drop", { dataTransfer: dropped, bubbles: true,
        cancelable: true }));
      const pasted = new DataTransfer();
      pasted.items.add(new File([bytes], "pasted.png", { type: "image/png" }));
      document.getElementById("message").dispatchEvent(new ClipboardEvent("paste", { clipboardData: pasted, bubbles: true,
        cancelable: true }));
    }, png);
    await page.locator("figcaption", { hasText: "dropped.png" }).waitFor(WAIT);
    await page.locator("figcaption", { hasText: "pasted.png" }).waitFor(WAIT);
    await send(page, "two pictures");
    await assistant(page, 'You said: "two pictures').waitFor(WAIT);
    assert.equal(await page.locator(".msg.user img.attachment").count(), 2);
    await page.screenshot({ path: join(shots, "dropped-and-pasted.png") });
    assert.deepEqual(problems, []);
  });
});

test("token usage: a model that reports it gets the run's tokens in the footer", async () => {
  // An OpenAI-compatible model (its streamed chat completions API) that answers every call with a short text and
  // reports 12 prompt and 3 completion tokens.
  const model = createHttpServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      const chunk = (o) => res.write(`data: ${JSON.stringify(o)}\n\n`);
      chunk({ id: "c1", object: "chat.completion.chunk", model: "m", choices: [{ index: 0, delta: { role: "assistant", content: "Hi there." } }] });
      chunk({ id: "c1", object: "chat.completion.chunk", model: "m", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] });
      chunk({ id: "c1", object: "chat.completion.chunk", model: "m", choices: [], usage: { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 } });
      res.end("data: [DONE]\n\n");
    });
  });
  await new Promise((resolve) => model.listen(0, "127.0.0.1", resolve));
  const counted = await startServer(["--model", "openai"], {
    OPENAI_BASE_URL: `http://127.0.0.1:${model.address().port}/v1`, OPENAI_API_KEY: "sk-test" });
  const { page, context, problems } = await openPage(counted.url);
  try {
    await send(page, "hello");
    await assistant(page, "Hi there.").waitFor(WAIT);
    // Two model calls (the intent stage's and the execution stage's), 12 + 3 tokens each.
    await page.locator("footer.usage", { hasText: "tokens: 24 in, 6 out" }).waitFor(WAIT);
    await page.screenshot({ path: join(shots, "usage.png") });
    assert.deepEqual(problems, []);
  } finally {
    await context.close();
    await new Promise((resolve) => model.close(resolve));
  }
});

test("the page hosted on another origin talks to the server named at sign-in (its cors_origins allows the page)", async () => {
  // dist/ on a plain static server of its own origin.
  const host = createHttpServer((req, res) => {
    const path = new URL(req.url, "http://x").pathname;
    const file = join(dist, path === "/" ? "index.html" : path);
    if (!file.startsWith(dist) || !existsSync(file)) return res.writeHead(404).end();
    const type = file.endsWith(".js") ? "text/javascript" : file.endsWith(".css") ? "text/css" : "text/html";
    res.writeHead(200, { "Content-Type": type }).end(readFileSync(file));
  });
  await new Promise((resolve) => host.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${host.address().port}`;
  const api = await startConfigured({ cors_origins: [origin] });
  const context = await browser.newContext();
  const page = await context.newPage();
  const problems = [];
  const requests = [];  // the API's answers, for a failure's report
  page.on("response", (r) => {
    if (r.url().includes("/api/")) requests.push(`${r.request().method()} ${new URL(r.url()).pathname} ${r.status()}`);
  });
  page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console: ${m.text()}`);
  });
  try {
    await page.goto(`${origin}/`);
    await page.getByLabel("Token").fill(TOKEN);
    await page.getByLabel("Server").fill(api.url);
    await page.getByRole("button", { name: "Sign in" }).click();
    await send(page, "hello");
    await assistant(page, 'You said: "hello"').waitFor(WAIT);
    const res = await fetch(`${api.url}/api/v1/agent/threads`, { headers: { Authorization: `Bearer ${TOKEN}` } });
    assert.equal((await res.json()).threads.length, 1);  // the thread is on the server named at sign-in
    await page.screenshot({ path: join(shots, "other-origin.png") });
    assert.deepEqual(problems, []);
  } finally {
    await context.close();
    await new Promise((resolve) => host.close(resolve));
  }
});
