// The AG-UI client of a thread: @ag-ui/client's HttpAgent on agentrt-server's /agent/runs, whose connect() (what a
// reload calls) posts to /agent/connect: the thread's messages, state, open interrupts and any run in progress.
//
// A dropped connection is taken up where it broke: the agent remembers the SSE id of the last event it applied and
// reconnectAgent() sends it as Last-Event-ID, so the server answers with the run's RUN_STARTED, what was open at
// that event opened again, and the events after it (nothing twice, nothing missed). The ids are read from the
// stream's bytes as the client reads them, one per event, and taken in order as the events are applied (onEvent):
// an event read but not applied before the connection broke is asked for again.
import { HttpAgent } from "@ag-ui/client";

import { apiUrl, authHeaders } from "./api.js";

// The SSE ids of a stream's events, in order, pushed to `ids` as the client reads the bytes.
function trackIds(body, ids) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let pending = "";
  let lastId = null;  // SSE: an event's id is the last `id:` field seen, in it or before it
  let data = false;
  const scan = (text) => {
    pending += text;
    let nl;
    while ((nl = pending.indexOf("\n")) >= 0) {
      const line = pending.slice(0, nl).replace(/\r$/, "");
      pending = pending.slice(nl + 1);
      if (line === "") {
        if (data) ids.push(lastId);
        data = false;
      } else if (line.startsWith("id:")) {
        lastId = line.slice(line.startsWith("id: ") ? 4 : 3);
      } else if (line.startsWith("data:")) {
        data = true;
      }
    }
  };
  return new ReadableStream(
    {
      async pull(controller) {
        try {
          const { done, value } = await reader.read();
          if (done) {
            controller.close();
            return;
          }
          scan(decoder.decode(value, { stream: true }));
          controller.enqueue(value);
        } catch (e) {
          controller.error(e);
        }
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}

class ThreadAgent extends HttpAgent {
  constructor(session, threadId) {
    const stream = { ids: [] };  // the ids of the current stream's events read but not yet applied
    super({
      url: apiUrl(session, "/agent/runs"),
      headers: authHeaders(session),
      threadId,
      fetch: async (url, init) => {
        const res = await fetch(url, init);
        stream.ids = [];
        if (!res.ok || !res.body || !(res.headers.get("content-type") ?? "").startsWith("text/event-stream")) return res;
        return new Response(trackIds(res.body, stream.ids), {
          status: res.status,
          statusText: res.statusText,
          headers: res.headers,
        });
      },
    });
    this.connectUrl = apiUrl(session, "/agent/connect");
    this.lastEventId = null;  // the SSE id of the last event applied
    this.resumeAfter = null;  // the Last-Event-ID of the next connect
    this.subscribe({
      onEvent: () => {
        const id = stream.ids.shift();
        if (id) this.lastEventId = id;
      },
    });
  }

  connect(input) {
    const headers = this.resumeAfter ? { ...this.headers, "Last-Event-ID": this.resumeAfter } : this.headers;
    this.resumeAfter = null;
    return new HttpAgent({ url: this.connectUrl, headers, fetch: this.fetch }).run(input);
  }

  // Connects after a dropped connection: from the last event applied when there is one (see above).
  reconnectAgent(params) {
    this.resumeAfter = this.lastEventId;
    return this.connectAgent(params);
  }
}

export function threadAgent(session, threadId) {
  return new ThreadAgent(session, threadId);
}
