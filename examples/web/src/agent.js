// The AG-UI client of a thread: @ag-ui/client's HttpAgent on agentrt-server's /agent/runs, whose connect() (what a
// reload calls) posts to /agent/connect: the thread's messages, state, open interrupts and any run in progress.
import { HttpAgent } from "@ag-ui/client";

import { apiUrl, authHeaders } from "./api.js";

class ThreadAgent extends HttpAgent {
  constructor(session, threadId) {
    super({ url: apiUrl(session, "/agent/runs"), headers: authHeaders(session), threadId });
    this.connectUrl = apiUrl(session, "/agent/connect");
  }

  connect(input) {
    return new HttpAgent({ url: this.connectUrl, headers: this.headers, fetch: this.fetch }).run(input);
  }
}

export function threadAgent(session, threadId) {
  return new ThreadAgent(session, threadId);
}
