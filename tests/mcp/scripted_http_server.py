#!/usr/bin/env python3
"""A streamable-HTTP MCP server (protocol 2025-11-25) for agentrt's tests, standard library only: sessions, SSE
answers with event ids, an answer's stream cut before the answer and resumed with Last-Event-ID, and answers a
hostile or broken server gives (too big, not JSON, HTTP 500, a session that ends).

usage: scripted_http_server.py PORT_FILE LOG_FILE   (writes the port it listens on to PORT_FILE; logs "initialize",
"call <tool>", "resume <Last-Event-ID>", "delete" lines to LOG_FILE)
"""
import json
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT_FILE, LOG_FILE = sys.argv[1], sys.argv[2]
lock = threading.Lock()
sessions = set()
pending = {}  # Last-Event-ID -> (next event id, message) of a stream cut before its answer


def log(line):
    with lock, open(LOG_FILE, "a") as f:
        f.write(line + "\n")


def tool(name, description):
    return {"name": name, "description": description, "inputSchema": {"type": "object", "properties": {}}}


TOOLS = [tool("echo", "Answers on an SSE stream"), tool("cut", "Its answer's stream is cut before the answer"),
         tool("huge", "Answers 2 MiB"), tool("garbage", "Answers text that is not JSON"),
         tool("fail500", "Answers HTTP 500"), tool("expire", "Ends the session")]


def result(rid, text):
    return {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, body=b"", ctype="application/json", headers=None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def sse(self, frames, close=False):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for event_id, msg in frames:
            self.wfile.write(("id: %s\ndata: %s\n\n" % (event_id, json.dumps(msg))).encode())
            self.wfile.flush()
        self.close_connection = True

    def session_ok(self):
        sid = self.headers.get("Mcp-Session-Id")
        with lock:
            return sid in sessions

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        method, rid = body.get("method"), body.get("id")
        if method == "initialize":
            sid = str(uuid.uuid4())
            with lock:
                sessions.add(sid)
            log("initialize")
            reply = {"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                "serverInfo": {"name": "scripted-http", "version": "1.0"}}}
            return self.send(200, json.dumps(reply).encode(), headers={"Mcp-Session-Id": sid})
        if not self.session_ok():
            return self.send(404, b'{"error":"unknown session"}')
        if rid is None:  # a notification
            return self.send(202)
        if method == "tools/list":
            return self.send(200, json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}}).encode())
        if method != "tools/call":
            return self.send(200, json.dumps({"jsonrpc": "2.0", "id": rid,
                                              "error": {"code": -32601, "message": "Method not found"}}).encode())
        name = body["params"]["name"]
        log("call " + name)
        if name == "echo":
            return self.sse([("e1", result(rid, "echoed over SSE"))])
        if name == "cut":
            progress = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "busy"}}
            with lock:
                pending["cut-1"] = ("cut-2", result(rid, "answered after a resume"))
            return self.sse([("cut-1", progress)])  # and the connection closes before the answer
        if name == "huge":
            return self.send(200, json.dumps(result(rid, "x" * (2 << 20))).encode())
        if name == "garbage":
            return self.send(200, b"this is not JSON {")
        if name == "fail500":
            return self.send(500, b"the server is on fire", ctype="text/plain")
        if name == "expire":
            with lock:
                sessions.discard(self.headers.get("Mcp-Session-Id"))
            return self.send(404, b'{"error":"session expired"}')

    def do_GET(self):
        last = self.headers.get("Last-Event-ID")
        if not self.session_ok():
            return self.send(404, b'{"error":"unknown session"}')
        if not last:
            return self.send(405, b"")  # no stream outside answers
        log("resume " + last)
        with lock:
            nxt = pending.pop(last, None)
        if not nxt:
            return self.send(404, b'{"error":"nothing to resume"}')
        return self.sse([nxt])

    def do_DELETE(self):
        with lock:
            sessions.discard(self.headers.get("Mcp-Session-Id"))
        log("delete")
        return self.send(200)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os  # noqa: E402
os.rename(PORT_FILE + ".tmp", PORT_FILE)
server.serve_forever()
