// The test's web server (not an adapter: nothing here reads or changes the protocol): the built page from dist/,
// /api/v1/* passed through to agentrt-server byte for byte (the page and the API on one origin, as a deployment
// behind one reverse proxy has them), and
// /api/copilotkit/* answered by CopilotKit's own CopilotRuntime, whose one agent is an AG-UI HttpAgent pointed at
// agentrt-server. startPageServer() returns {url, close}.
import { createServer, request as httpRequest } from "node:http";
import { readFile } from "node:fs/promises";
import { extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";

import { HttpAgent } from "@ag-ui/client";
import { CopilotRuntime } from "@copilotkit/runtime/v2";
import { createCopilotNodeListener } from "@copilotkit/runtime/v2/node";

const dist = fileURLToPath(new URL("./dist/", import.meta.url));
const types = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml",
  ".woff2": "font/woff2", ".json": "application/json" };

export async function startPageServer({ agentrtUrl, token }) {
  const upstream = new URL(agentrtUrl);
  const copilot = createCopilotNodeListener({
    runtime: new CopilotRuntime({
      agents: { default: new HttpAgent({ url: `${agentrtUrl}/api/v1/agent/runs`,
        headers: { Authorization: `Bearer ${token}` } }) },
    }),
    basePath: "/api/copilotkit",
    activateChannels: false,
  });
  const server = createServer(async (req, res) => {
    const path = new URL(req.url, "http://page").pathname;
    if (path.startsWith("/api/copilotkit")) return copilot(req, res);
    if (path.startsWith("/api/v1/")) {
      const out = httpRequest({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url,
        headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode, answer.headers);
        answer.pipe(res);
      });
      out.on("error", () => res.destroy());
      req.pipe(out);
      return;
    }
    const file = normalize(join(dist, path === "/" ? "index.html" : path));
    if (!file.startsWith(dist)) return res.writeHead(404).end();
    try {
      const body = await readFile(file);
      res.writeHead(200, { "Content-Type": types[extname(file)] ?? "application/octet-stream" }).end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}
