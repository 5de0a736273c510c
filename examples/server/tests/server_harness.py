"""Starts agentrt-server on 127.0.0.1 (a free port) in a temporary data folder, and speaks HTTP/SSE to it.

Standard library only. The binary comes from $AGENTRT_SERVER (ctest sets it)."""

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import uuid

ALICE = "tok-alice-0001"
BOB = "tok-bob-0000002"


def server_binary():
    path = os.environ.get("AGENTRT_SERVER")
    if not path:
        raise RuntimeError("set AGENTRT_SERVER to the agentrt-server binary")
    return path


class Server:
    """One agentrt-server process. Use as a context manager or call stop()."""

    def __init__(self, *flags, config=None, env=None):
        self.dir = tempfile.mkdtemp(prefix="agentrt-server-test-")
        args = [server_binary(), "--listen", "127.0.0.1:0", "--data", os.path.join(self.dir, "data"),
                "--token", ALICE + ":alice", "--token", BOB + ":bob", "--model", "demo",
                "--keepalive-ms", "300", "--log-level", "warn"]
        if config is not None:
            path = os.path.join(self.dir, "config.json")
            with open(path, "w") as f:
                json.dump(config, f)
            args += ["--config", path]
        args += list(flags)
        self.stderr_path = os.path.join(self.dir, "stderr.log")
        self._stderr = open(self.stderr_path, "w")
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self._stderr, text=True, env=full_env)
        line = self.proc.stdout.readline()
        if "port" not in line:
            if not line:  # it exited: its message is complete once it has
                self.proc.wait(timeout=20)
            err = self.stderr()  # before stop() removes the folder it is in
            self.stop()
            raise RuntimeError("server did not start: " + line + err)
        self.port = int(line.rsplit("port ", 1)[1].rstrip(")\n"))
        self.base = "http://127.0.0.1:%d" % self.port

    def stderr(self):
        try:
            with open(self.stderr_path) as f:
                return f.read()
        except OSError:
            return ""

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self._stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    # ------------------------------------------------------------------ plain requests

    def conn(self, timeout=20):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, token=ALICE, headers=None, content_type=None):
        """(status, headers dict lower-cased, body bytes, json-or-None)"""
        h = dict(headers or {})
        if token:
            h["Authorization"] = "Bearer " + token
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        elif isinstance(body, str):
            body = body.encode()
        if content_type:
            h["Content-Type"] = content_type
        c = self.conn()
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            data = r.read()
            hdrs = {k.lower(): v for k, v in r.getheaders()}
        finally:
            c.close()
        parsed = None
        if hdrs.get("content-type", "").startswith("application/json") and data:
            parsed = json.loads(data)
        return r.status, hdrs, data, parsed

    # ------------------------------------------------------------------ streams

    def open_stream(self, method, path, body=None, token=ALICE, headers=None):
        """Starts a request and returns a Stream (status and headers read, body not yet)."""
        return Stream(self, method, path, body, token, headers)

    def run(self, run_input, token=ALICE):
        """POST /agent/runs and read the whole stream: (status, events or error json, Stream)."""
        s = self.open_stream("POST", "/api/v1/agent/runs", run_input, token)
        if s.status != 200:
            err = s.read_error()
            s.close()
            return s.status, err, s
        events = s.read_events()
        s.close()
        return 200, events, s

    def thread_events(self, thread, after=0, token=ALICE):
        s = self.open_stream("GET", "/api/v1/agent/runs/%s/events?after=%d" % (thread, after), token=token)
        assert s.status == 200, (s.status, s.read_error())
        events = s.read_events()
        s.close()
        return events

    def health(self):
        return self.request("GET", "/api/v1/health", token=None)[3]


class ServerCase(unittest.TestCase):
    """Test cases that share one server, started with `server_flags`, for the class."""

    server_flags = ()

    @classmethod
    def setUpClass(cls):
        cls.srv = Server(*cls.server_flags)

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()


class Stream:
    """An SSE response read frame by frame (LF framing, `id:` + `data:` lines, `:` comments)."""

    def __init__(self, server, method, path, body, token, headers):
        h = dict(headers or {})
        if token:
            h["Authorization"] = "Bearer " + token
        h["Accept"] = "text/event-stream"
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        self.conn = server.conn(timeout=20)
        self.conn.connect()
        self.sock = self.conn.sock
        self.conn.request(method, path, body=body, headers=h)
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.headers = {k.lower(): v for k, v in self.resp.getheaders()}
        self.raw = bytearray()  # the body as read (a bytes += per line copied it all each time)
        self.comments = []
        self.frames = []  # (id or None, event dict)

    def read_error(self):
        data = self.resp.read()
        return json.loads(data) if data else None

    def next_frame(self):
        """The next event frame (id, event), or None at the end of the body. Comments are collected."""
        lines = []
        while True:
            line = self.resp.readline()
            if not line:
                return None
            self.raw += line
            if line == b"\n":
                if not lines:
                    continue
                break
            lines.append(line.decode().rstrip("\n"))
        ev_id, data = None, []
        for l in lines:
            if l.startswith(":"):
                self.comments.append(l)
            elif l.startswith("id:"):
                ev_id = int(l[3:].strip())
            elif l.startswith("data:"):
                data.append(l[5:].lstrip(" ") if l.startswith("data: ") else l[5:])
        if not data:
            return self.next_frame()
        frame = (ev_id, json.loads("\n".join(data)))
        self.frames.append(frame)
        return frame

    def read_events(self, until=None):
        """Frames until the body ends (or until(frame) is true); returns the events read by this call."""
        out = []
        while True:
            f = self.next_frame()
            if f is None:
                break
            out.append(f)
            if until and until(f):
                break
        return out

    def abort(self):
        """Drops the connection as a vanishing client would."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.close()

    def close(self):
        try:
            self.resp.close()
        finally:
            self.conn.close()
            try:
                self.sock.close()
            except OSError:
                pass


def types(frames):
    return [e["type"] for _, e in frames]


def squeeze(ts):
    """Consecutive equal *_CONTENT / *_ARGS types as one (chunk counts depend on the text)."""
    out = []
    for t in ts:
        if out and out[-1] == t and t in ("TEXT_MESSAGE_CONTENT", "TOOL_CALL_ARGS"):
            continue
        out.append(t)
    return out


def new_id(prefix):
    return "%s-%s" % (prefix, uuid.uuid4())


def run_input(thread, text, run=None, message_id=None, resume=None, messages=None):
    msgs = messages if messages is not None else [
        {"id": message_id or new_id("msg"), "role": "user", "content": text}]
    body = {"threadId": thread, "runId": run or new_id("run"), "protocolVersion": "1.0", "state": {},
            "messages": msgs, "tools": [], "context": [], "forwardedProps": {}}
    if resume is not None:
        body["resume"] = resume
    return body


def wait_for(predicate, timeout=10.0, interval=0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = predicate()
        if v:
            return v
        time.sleep(interval)
    return predicate()
