// The session (a bearer token and the server's URL, kept in session storage) and agentrt-server's REST calls. The
// event stream itself goes through @ag-ui/client's HttpAgent (see agent.js).
const TOKEN_KEY = "agentrt.token";
const SERVER_KEY = "agentrt.server";

export function loadSession() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { token, server: sessionStorage.getItem(SERVER_KEY) ?? "" } : null;
}

export function saveSession({ token, server }) {
  sessionStorage.setItem(TOKEN_KEY, token);
  sessionStorage.setItem(SERVER_KEY, server);
}

export function clearSession() {
  sessionStorage.removeItem(TOKEN_KEY);
  sessionStorage.removeItem(SERVER_KEY);
}

export function apiUrl(session, path) {
  return `${session.server.replace(/\/$/, "")}/api/v1${path}`;
}

export function authHeaders(session) {
  return { Authorization: `Bearer ${session.token}` };
}

// A JSON call; throws an Error with the server's message on a non-2xx answer.
export async function call(session, method, path, body) {
  const headers = { ...authHeaders(session), Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(apiUrl(session, path), { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  const data = text ? JSON.parse(text) : null;
  if (!res.ok) throw new Error(data?.error?.message ?? `${method} ${path}: HTTP ${res.status}`);
  return data;
}

// Stores an image for the thread (POST /agent/uploads): {id, url, mimeType, size, part}; `part` goes in a message.
export async function upload(session, threadId, file) {
  const res = await fetch(apiUrl(session, `/agent/uploads?threadId=${encodeURIComponent(threadId)}`), {
    method: "POST",
    headers: { ...authHeaders(session), "Content-Type": file.type || "application/octet-stream" },
    body: file,
  });
  const data = await res.json().catch(() => null);
  if (!res.ok) throw new Error(data?.error?.message ?? `upload: HTTP ${res.status}`);
  return data;
}

// Speech to text (POST /asr/transcriptions, multipart `file`): the transcript.
export async function transcribe(session, audio) {
  const form = new FormData();
  form.append("file", audio, audio.type.includes("ogg") ? "voice.ogg" : "voice.webm");
  const res = await fetch(apiUrl(session, "/asr/transcriptions"), { method: "POST", headers: authHeaders(session), body: form });
  const data = await res.json().catch(() => null);
  if (!res.ok) throw new Error(data?.error?.message ?? `transcription: HTTP ${res.status}`);
  return data.transcript;
}

export const listThreads = (s) => call(s, "GET", "/agent/threads").then((d) => d.threads);
export const deleteThread = (s, id) => call(s, "DELETE", `/agent/threads/${encodeURIComponent(id)}`);
export const listJobs = (s, threadId) =>
  call(s, "GET", `/agent/threads/${encodeURIComponent(threadId)}/jobs`).then((d) => d.jobs);
export const cancelJob = (s, id) => call(s, "POST", `/agent/jobs/${encodeURIComponent(id)}/cancel`, {});
export const cancelRun = (s, id) => call(s, "POST", `/agent/runs/${encodeURIComponent(id)}/cancel`);
