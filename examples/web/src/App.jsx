// The agentrt page: sign in with a bearer token, pick or start a thread, and chat. The thread's AG-UI events come
// through @ag-ui/client's HttpAgent (agent.js): streamed text, the stage in progress, tool calls and their cards,
// approvals (approve, reject with a reason, edit the arguments), Stop, errors. A reload re-attaches through connect.
import React, { useCallback, useEffect, useRef, useState } from "react";

import { threadAgent } from "./agent.js";
import {
  call,
  cancelJob,
  cancelRun,
  clearSession,
  deleteThread,
  listJobs,
  listThreads,
  loadSession,
  saveSession,
  transcribe,
  upload,
} from "./api.js";
import { ApprovalCard } from "./approvals.jsx";
import { ToolCard } from "./cards.jsx";

const STAGES = { intent: "Understanding the request", execution: "Working", organization: "Writing the answer" };

function textOf(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.filter((p) => p.type === "text").map((p) => p.text).join("");
  return "";
}

function newId() {
  return crypto.randomUUID();
}

function threadFromHash() {
  const m = /thread=([^&]+)/.exec(window.location.hash);
  return m ? decodeURIComponent(m[1]) : null;
}

function SignIn({ onSignIn }) {
  const [token, setToken] = useState("");
  const [server, setServer] = useState("");
  return (
    <form
      className="signin"
      onSubmit={(e) => {
        e.preventDefault();
        if (token.trim()) onSignIn({ token: token.trim(), server: server.trim() });
      }}
    >
      <h1>agentrt</h1>
      <label>
        Token
        <input type="password" value={token} onChange={(e) => setToken(e.target.value)} autoComplete="off" />
      </label>
      <label>
        Server
        <input value={server} placeholder="this page's server" onChange={(e) => setServer(e.target.value)} />
      </label>
      <button type="submit">Sign in</button>
    </form>
  );
}

function ToolCallView({ toolCall, result, onAction }) {
  return (
    <div className="tool-call">
      <div className="tool-name">{toolCall.function.name}</div>
      <pre className="args">{toolCall.function.arguments}</pre>
      {result &&
        (result.error ? (
          <div className="card failed" data-ui-type="error">
            {textOf(result.content) || result.error}
          </div>
        ) : (
          <ToolCard ui={result.metadata?.ui} summary={textOf(result.content)} onAction={onAction} />
        ))}
    </div>
  );
}

// An image part's URL: a signed URL (history re-signs them), or inline data.
function imageSrc(part) {
  const src = part.source ?? {};
  if (src.type === "url") return src.value;
  if (src.type === "data") return `data:${src.mimeType ?? part.mimeType ?? "image/png"};base64,${src.value}`;
  return null;
}

function MessageView({ m, results, onAction }) {
  if (m.role === "user") {
    const images = Array.isArray(m.content) ? m.content.filter((p) => p.type === "image" && imageSrc(p)) : [];
    return (
      <div className="msg user">
        {textOf(m.content)}
        {images.map((p, i) => (
          <img key={i} className="attachment" src={imageSrc(p)} alt={`attachment ${i + 1}`} />
        ))}
      </div>
    );
  }
  if (m.role === "system") {
    const text = textOf(m.content);
    if (text.startsWith("ERROR ")) {
      return (
        <div className="msg error" role="alert">
          {text.slice("ERROR ".length)}
        </div>
      );
    }
    return <div className="msg system">{text}</div>;
  }
  if (m.role === "reasoning") {
    return (
      <details className="msg reasoning">
        <summary>Reasoning</summary>
        {textOf(m.content)}
      </details>
    );
  }
  if (m.role !== "assistant") return null;
  return (
    <div className="msg assistant">
      {textOf(m.content) && <div className="text">{textOf(m.content)}</div>}
      {(m.toolCalls ?? []).map((c) => (
        <ToolCallView key={c.id} toolCall={c} result={results.get(c.id)} onAction={onAction} />
      ))}
    </div>
  );
}

// Voice input: the microphone recorded (MediaRecorder) until Stop recording, the recording transcribed by the server,
// the transcript put in the message box for the person to edit and send.
function VoiceInput({ session, onTranscript, onError }) {
  const [recorder, setRecorder] = useState(null);
  const [busy, setBusy] = useState(false);
  const start = async () => {
    try {
      const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
      const r = new MediaRecorder(stream);
      const chunks = [];
      r.ondataavailable = (e) => {
        if (e.data.size > 0) chunks.push(e.data);
      };
      r.onstop = async () => {
        stream.getTracks().forEach((t) => t.stop());
        setBusy(true);
        try {
          onTranscript(await transcribe(session, new Blob(chunks, { type: r.mimeType || "audio/webm" })));
        } catch (e) {
          onError(e.message);
        } finally {
          setBusy(false);
        }
      };
      r.start();
      setRecorder(r);
    } catch (e) {
      onError(`the microphone: ${e.message}`);
    }
  };
  if (busy) return <span role="status">Transcribing…</span>;
  return recorder ? (
    <button
      type="button"
      onClick={() => {
        recorder.stop();
        setRecorder(null);
      }}
    >
      Stop recording
    </button>
  ) : (
    <button type="button" onClick={start}>
      Record voice
    </button>
  );
}

const openJob = (j) => j.status === "queued" || j.status === "running";

// A job a tool started: its progress while it runs, its outcome when it ends (the outcome also reaches the chat as the
// call's result, in a run of its own).
function JobCard({ job, onCancel }) {
  return (
    <div className="job" data-job-status={job.status} role="group" aria-label={`Job ${job.toolName}`}>
      <div>
        <strong>{job.toolName}</strong> · {job.status}
        {job.confirmation === "pending" ? " · waiting for your confirmation" : ""}
      </div>
      {openJob(job) && <progress max={1} value={job.progress ?? 0} aria-label={`Progress of ${job.toolName}`} />}
      {job.message && <div className="muted">{job.message}</div>}
      {job.error && <div className="error">{job.error.message}</div>}
      {openJob(job) && job.confirmation !== "pending" && (
        <button type="button" onClick={onCancel}>
          Cancel job
        </button>
      )}
    </div>
  );
}

function Chat({ session, threadId, onChanged }) {
  const agentRef = useRef(null);
  const failed = useRef(false);  // the last run ended with RUN_ERROR: its ERROR message is the server's to give
  const [messages, setMessages] = useState([]);
  // Running from the start: the mount attaches the thread (connect) at once, and nothing may be sent before it has.
  const [running, setRunning] = useState(true);
  const [stage, setStage] = useState(null);
  const [interrupts, setInterrupts] = useState([]);
  const [decisions, setDecisions] = useState({});
  const [notice, setNotice] = useState(null);
  const [usage, setUsage] = useState(null);
  const [input, setInput] = useState("");
  const [jobs, setJobs] = useState([]);
  // Images picked, pasted or dropped for the next message: {key, name, preview, part?, error?}.
  const [attachments, setAttachments] = useState([]);

  const run = useCallback(
    async (start) => {
      setNotice(null);
      setRunning(true);
      const agent = agentRef.current;
      try {
        await start(agent);
      } catch (e) {
        // The server's refusal ("HTTP 4xx/5xx: ...") is the answer. Anything else is the connection: take the
        // stream up through connect with the last event applied (Last-Event-ID: the run in progress continues after
        // it; a run that ended meanwhile comes as the thread's messages, replaced, not added to), until it answers.
        let error = e;
        for (let attempt = 1; error && !/^HTTP \d/.test(error.message ?? "") && agentRef.current === agent; ++attempt) {
          setNotice({ kind: "info", text: "Connection lost: reconnecting…" });
          await new Promise((r) => setTimeout(r, Math.min(250 * attempt, 3000)));
          try {
            await agent.reconnectAgent({ runId: newId() });
            error = null;
            setNotice(null);
          } catch (again) {
            error = again;
          }
        }
        if (error) setNotice({ kind: "error", text: error.message ?? String(error) });
      }
      try {
        if (failed.current && agentRef.current === agent) {
          // The failure's ERROR message is stored in the thread: re-attach to show it as history will.
          failed.current = false;
          await agent.connectAgent({ runId: newId() });
          setNotice(null);
        }
      } catch {
        // the notice stays
      } finally {
        setRunning(false);
        setStage(null);
        setInterrupts([...(agentRef.current?.pendingInterrupts ?? [])]);
        setDecisions({});
        onChanged();
      }
    },
    [onChanged],
  );

  useEffect(() => {
    const agent = threadAgent(session, threadId);
    agentRef.current = agent;
    setMessages([]);
    setInterrupts([]);
    setUsage(null);
    const sub = agent.subscribe({
      onMessagesChanged: ({ messages: all }) => setMessages([...all]),
      onStepStartedEvent: ({ event }) => setStage(event.stepName),
      onStepFinishedEvent: () => setStage(null),
      onRunFinishedEvent: ({ event, outcome }) => {
        if (event.usage) setUsage(event.usage);
        if (outcome === "cancelled") setNotice({ kind: "info", text: "Stopped." });
      },
      onRunErrorEvent: ({ event }) => {
        failed.current = true;
        setNotice({ kind: "error", text: event.message });
      },
    });
    // Re-attach: the thread's messages and state, its open interrupts, and a run in progress, live.
    run((a) => a.connectAgent({ runId: newId() }));
    return () => sub.unsubscribe();
  }, [session, threadId, run]);

  // The thread's jobs after each run; while one is open, looked at again every 700 ms. A job that ended delivered its
  // outcome as a run of its own: re-attach to show it.
  const started = messages.length > 0;  // a thread without messages has no jobs (nor a record to ask)
  useEffect(() => {
    if (running || !started) return undefined;
    let stop = false;
    let before = null;
    const look = async () => {
      try {
        const now = await listJobs(session, threadId);
        if (stop) return;
        setJobs(now);
        const ended = before && before.some((b) => openJob(b) && now.some((j) => j.id === b.id && !openJob(j)));
        before = now;
        if (ended) run((a) => a.connectAgent({ runId: newId() }));
        else if (now.some(openJob)) setTimeout(look, 700);
      } catch {
        // a thread that does not exist yet has no jobs
      }
    };
    look();
    return () => {
      stop = true;
    };
  }, [session, threadId, running, started, run]);

  const attach = (files) => {
    for (const file of files) {
      if (!file.type.startsWith("image/")) continue;
      const key = newId();
      setAttachments((all) => [...all, { key, name: file.name || "image", preview: URL.createObjectURL(file) }]);
      upload(session, threadId, file)
        .then((up) => setAttachments((all) => all.map((a) => (a.key === key ? { ...a, part: up.part } : a))))
        .catch((e) => setAttachments((all) => all.map((a) => (a.key === key ? { ...a, error: e.message } : a))));
    }
  };
  const uploading = attachments.some((a) => !a.part && !a.error);

  const send = (text) => {
    if (!text.trim() || running || uploading) return;
    const parts = attachments.filter((a) => a.part).map((a) => a.part);
    const content = parts.length > 0 ? [{ type: "text", text }, ...parts] : text;
    agentRef.current.addMessage({ id: newId(), role: "user", content });
    setInput("");
    attachments.forEach((a) => URL.revokeObjectURL(a.preview));
    setAttachments([]);
    run((a) => a.runAgent({ runId: newId() }));
  };

  const decide = (interruptId, entry, label) => {
    const next = { ...decisions, [interruptId]: { entry, label } };
    setDecisions(next);
    if (interrupts.every((i) => next[i.id])) {
      // Every open interrupt answered: one resume for all of them.
      run((a) => a.runAgent({ runId: newId(), resume: interrupts.map((i) => next[i.id].entry) }));
    }
  };

  // A card's action: a message to send, or a call of the endpoint it names (an API path of this server), whose
  // outcome is a notice.
  const onAction = async (action) => {
    if (typeof action.endpoint !== "string") {
      send(String(action.message ?? action.label ?? action.action));
      return;
    }
    const label = String(action.label ?? action.endpoint);
    const method = String(action.method ?? "POST").toUpperCase();
    try {
      await call(session, method, action.endpoint, method === "GET" ? undefined : action.payload ?? {});
      setNotice({ kind: "info", text: `${label}: done` });
    } catch (e) {
      setNotice({ kind: "error", text: `${label}: ${e.message ?? e}` });
    }
  };

  const results = new Map(messages.filter((m) => m.role === "tool").map((m) => [m.toolCallId, m]));
  const tokens = (usage ?? []).reduce(
    (acc, u) => ({ input: acc.input + (u.inputTokens ?? 0), output: acc.output + (u.outputTokens ?? 0) }),
    { input: 0, output: 0 },
  );
  return (
    <main className="chat">
      <div className="messages" aria-live="polite">
        {messages.map((m) => (
          <MessageView key={m.id} m={m} results={results} onAction={onAction} />
        ))}
        {interrupts.map((i) => (
          <ApprovalCard
            key={i.id}
            interrupt={i}
            decided={decisions[i.id]?.label}
            onDecide={(entry, label) => decide(i.id, entry, label)}
            onDismiss={() => {
              agentRef.current.pendingInterrupts = agentRef.current.pendingInterrupts.filter((p) => p.id !== i.id);
              setInterrupts([...agentRef.current.pendingInterrupts]);
            }}
          />
        ))}
      </div>
      {jobs.length > 0 && (
        <section className="jobs" aria-label="Jobs">
          {jobs.map((j) => (
            <JobCard
              key={j.id}
              job={j}
              onCancel={() => cancelJob(session, j.id).catch((e) => setNotice({ kind: "error", text: e.message }))}
            />
          ))}
        </section>
      )}
      {running && (
        <div className="stage" role="status">
          {stage ? (STAGES[stage] ?? stage) : "Working"}…
        </div>
      )}
      {notice && (
        <div className={notice.kind === "error" ? "notice error" : "notice"} role={notice.kind === "error" ? "alert" : "status"}>
          {notice.text}
        </div>
      )}
      <form
        className="composer"
        onSubmit={(e) => {
          e.preventDefault();
          send(input);
        }}
        onDragOver={(e) => e.preventDefault()}
        onDrop={(e) => {
          e.preventDefault();
          attach([...e.dataTransfer.files]);
        }}
      >
        {attachments.length > 0 && (
          <div className="attachments">
            {attachments.map((a) => (
              <figure key={a.key}>
                <img src={a.preview} alt={`preview of ${a.name}`} />
                <figcaption>{a.error ? <span className="error">{a.error}</span> : a.part ? a.name : "uploading…"}</figcaption>
                <button
                  type="button"
                  aria-label={`Remove ${a.name}`}
                  onClick={() => setAttachments((all) => all.filter((x) => x.key !== a.key))}
                >
                  ×
                </button>
              </figure>
            ))}
          </div>
        )}
        <label htmlFor="message">Message</label>
        <textarea
          id="message"
          rows={2}
          value={input}
          onChange={(e) => setInput(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === "Enter" && !e.shiftKey) {
              e.preventDefault();
              send(input);
            }
          }}
          onPaste={(e) => {
            const files = [...e.clipboardData.files];
            if (files.length > 0) attach(files);
          }}
        />
        {running ? (
          <button type="button" onClick={() => cancelRun(session, threadId).catch((e) => setNotice({ kind: "error", text: e.message }))}>
            Stop
          </button>
        ) : (
          <button type="submit" disabled={interrupts.length > 0 || uploading}>
            Send
          </button>
        )}
        <VoiceInput
          session={session}
          onTranscript={(t) => setInput((now) => (now.trim() ? `${now.trim()} ${t}` : t))}
          onError={(text) => setNotice({ kind: "error", text })}
        />
        <label className="attach">
          Attach images
          <input
            type="file"
            accept="image/*"
            multiple
            onChange={(e) => {
              attach([...e.target.files]);
              e.target.value = "";
            }}
          />
        </label>
      </form>
      <footer className="usage" title="Token usage of the last run">
        {usage ? `tokens: ${tokens.input} in, ${tokens.output} out` : ""}
      </footer>
    </main>
  );
}

export function App() {
  const [session, setSession] = useState(loadSession);
  const [threads, setThreads] = useState([]);
  const [threadId, setThreadId] = useState(() => threadFromHash() ?? newId());
  const [problem, setProblem] = useState(null);

  const asked = useRef(0);  // the latest list asked for: an older answer arriving late is not shown over it
  const refresh = useCallback(() => {
    if (!session) return;
    const n = ++asked.current;
    listThreads(session)
      .then((list) => {
        if (n === asked.current) setThreads(list);
      })
      .catch((e) => setProblem(e.message));
  }, [session]);
  useEffect(refresh, [refresh]);
  useEffect(() => {
    window.location.hash = `thread=${encodeURIComponent(threadId)}`;
  }, [threadId]);

  if (!session) {
    return (
      <SignIn
        onSignIn={(s) => {
          saveSession(s);
          setSession(s);
        }}
      />
    );
  }
  return (
    <div className="layout">
      <nav className="threads" aria-label="Threads">
        <button type="button" onClick={() => setThreadId(newId())}>
          New thread
        </button>
        <ul>
          {threads.map((t) => (
            <li key={t.id} className={t.id === threadId ? "current" : ""}>
              <button type="button" className="link" onClick={() => setThreadId(t.id)}>
                {t.title || t.id}
              </button>
              <button
                type="button"
                aria-label={`Delete thread ${t.title || t.id}`}
                onClick={() =>
                  deleteThread(session, t.id)
                    .then(() => {
                      if (t.id === threadId) setThreadId(newId());
                      refresh();
                    })
                    .catch((e) => setProblem(e.message))
                }
              >
                Delete
              </button>
            </li>
          ))}
        </ul>
        <button
          type="button"
          onClick={() => {
            clearSession();
            setSession(null);
          }}
        >
          Sign out
        </button>
        {problem && (
          <div className="notice error" role="alert">
            {problem}
          </div>
        )}
      </nav>
      <Chat key={threadId} session={session} threadId={threadId} onChanged={refresh} />
    </div>
  );
}
