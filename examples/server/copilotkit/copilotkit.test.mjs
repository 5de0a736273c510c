// CopilotKit itself against agentrt-server, in Debian's Chromium driven by playwright-core: a page that uses
// useFrontendTool, useHumanInTheLoop, useAgentContext and useAgent's state (src/main.jsx), with CopilotKit's AG-UI
// agent pointed at agentrt-server directly, and the same page behind CopilotKit's CopilotRuntime whose agent is an
// HttpAgent on agentrt-server. No adapter code in either: the page, CopilotKit and the runtime are as shipped.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

import { chromium } from "playwright-core";

import { startPageServer } from "./serve.mjs";

process.env.COPILOTKIT_TELEMETRY_DISABLED = "true";  // nothing leaves the machine

const TOKEN = "copilotkit-token-1";
const WAIT = { timeout: 60000 };  // never reached on a loaded machine: it only turns a hang into a failure
let agentrt;
let pages;
let browser;

before(async () => {
  const binary = process.env.AGENTRT_SERVER;
  assert.ok(binary, "set AGENTRT_SERVER to the agentrt-server binary");
  const chromiumPath = process.env.CHROMIUM ?? "/usr/bin/chromium";
  assert.ok(existsSync(chromiumPath), `no Chromium at ${chromiumPath} (scripts/deps installs Debian's chromium)`);
  assert.ok(existsSync(new URL("./dist/index.html", import.meta.url)), "build the page first (npm run build)");
  const dir = mkdtempSync(join(tmpdir(), "agentrt-copilotkit-"));
  const proc = spawn(binary, ["--listen", "127.0.0.1:0", "--data", dir, "--token", `${TOKEN}:copilotkit`,
    "--model", "demo", "--log-level", "warn"], { stdio: ["ignore", "pipe", "inherit"] });
  const first = await new Promise((resolve, reject) => {
    createInterface({ input: proc.stdout }).once("line", resolve);
    proc.once("exit", (code) => reject(new Error(`agentrt-server exited with ${code}`)));
  });
  agentrt = { proc, dir, url: `http://127.0.0.1:${Number(/port (\d+)/.exec(first)[1])}` };
  pages = await startPageServer({ agentrtUrl: agentrt.url, token: TOKEN });
  browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: ["--no-sandbox"] });
});

after(async () => {
  await browser?.close();
  await pages?.close();
  if (agentrt) {
    if (agentrt.proc.exitCode === null) {
      const exited = new Promise((resolve) => agentrt.proc.once("exit", resolve));
      agentrt.proc.kill("SIGTERM");
      await exited;
    }
    rmSync(agentrt.dir, { recursive: true, force: true });
  }
});

async function send(page, text) {
  const input = page.locator("textarea").first();
  await input.fill(text);
  await input.press("Enter");
}

const headers = { Authorization: `Bearer ${TOKEN}` };
async function api(path) {
  const res = await fetch(`${agentrt.url}/api/v1${path}`, { headers });
  assert.equal(res.status, 200);
  return res.json();
}

for (const mode of ["direct", "runtime"]) {
  test(`CopilotKit (${mode}): frontend tool, human in the loop, context and shared state on agentrt-server`, async () => {
    const before = new Set((await api("/agent/threads")).threads.map((t) => t.id));
    const context = await browser.newContext();
    const page = await context.newPage();
    const problems = [];
    page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
    page.on("console", (m) => { if (m.type() === "error") problems.push(`console: ${m.text()}`); });
    try {
      await page.goto(`${pages.url}/?mode=${mode}&token=${TOKEN}`);
      await page.locator("textarea").first().waitFor(WAIT);

      // useFrontendTool: the demo model calls change_theme, the page runs it, its answer continues the turn.
      await send(page, "please use change_theme");
      await page.locator("#theme[data-theme=dark]").waitFor(WAIT);
      await page.getByText("The tool answered: theme is dark").waitFor(WAIT);

      // useHumanInTheLoop: the call waits for the person's click.
      await send(page, "please use confirm_plan");
      await page.getByRole("button", { name: "Confirm" }).click(WAIT);
      await page.getByText("The tool answered: confirmed by the person").waitFor(WAIT);

      // useAgentContext reaches the model (the demo model quotes its context).
      await send(page, "what context do you have?");
      await page.getByText("The user's timezone: Europe/Paris").waitFor(WAIT);

      // useAgent's state: set on the page, sent with the next run, stored by the thread, snapshot back.
      await page.click("#set-state");
      await send(page, "hello");
      await page.getByText('You said: "hello"').waitFor(WAIT);
      await page.locator("#state", { hasText: '"plan":"pro"' }).waitFor(WAIT);

      // On the server: one new thread, its history the turns above with the tools' answers, its state the page's.
      const threads = (await api("/agent/threads")).threads.filter((t) => !before.has(t.id));
      assert.equal(threads.length, 1);
      const history = await api(`/agent/runs/${threads[0].id}/history`);
      assert.deepEqual(history.messages.map((m) => m.role), ["user", "assistant", "tool", "assistant", "user",
        "assistant", "tool", "assistant", "user", "assistant", "user", "assistant"]);
      assert.equal(history.messages[2].content.length > 0, true);
      assert.deepEqual(history.state, { plan: "pro", seats: 3 });
      assert.deepEqual(problems, []);
    } catch (e) {
      console.error(`page problems: ${JSON.stringify(problems)}`);
      throw e;
    } finally {
      await context.close();
    }
  });
}
