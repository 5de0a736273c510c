"""The attacks of issue 14 (and the server's share of issue 12), each as a test: the answer, and the server's
memory staying bounded. Raw sockets on 127.0.0.1 only; every loop is bounded in count and time."""

import http.client
import json
import os
import resource
import select
import signal
import socket
import threading
import time
import unittest
import urllib.parse

from server_harness import ALICE, BOB, Server, ServerCase, new_id, run_input, types, wait_for

MIB = 1 << 20

# The slowloris test holds over a thousand sockets.
_soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if _soft < min(_hard, 8192):
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(_hard, 8192), _hard))


def rss_kib(pid, key="VmRSS"):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return None


def connect(srv, timeout=10):
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_response(sock, timeout=10, max_body=64 * MIB):
    """(status, headers lower-cased, body) of one HTTP/1.1 answer (Content-Length or chunked), or None when the
    connection closed first."""
    sock.settimeout(timeout)
    f = sock.makefile("rb")
    try:
        line = f.readline()
        if not line:
            return None
        status = int(line.split()[1])
        headers = {}
        while True:
            h = f.readline()
            if h in (b"\r\n", b""):
                break
            k, v = h.decode().split(":", 1)
            headers[k.strip().lower()] = v.strip()
        body = b""
        if "content-length" in headers:
            body = f.read(int(headers["content-length"]))
        elif headers.get("transfer-encoding") == "chunked":
            while len(body) < max_body:
                size = int(f.readline().strip() or b"0", 16)
                if size == 0:
                    f.readline()
                    break
                body += f.read(size)
                f.read(2)
        return status, headers, body
    except (ConnectionError, socket.timeout, ValueError):
        return None
    finally:
        f.close()


def send_until_answered(sock, head, chunks, limit_s=30):
    """Sends `head`, then bytes from the `chunks` iterator until the server answers (the socket is readable)
    or stops reading. Returns the bytes of body sent."""
    sock.sendall(head)
    sent = 0
    deadline = time.time() + limit_s
    sock.setblocking(False)
    try:
        for chunk in chunks:
            if time.time() > deadline:
                break
            view = memoryview(chunk)
            while view:
                r, w, _ = select.select([sock], [sock], [], 1.0)
                if r:
                    return sent
                if w:
                    try:
                        n = sock.send(view)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        return sent
                    view = view[n:]
                    sent += n
                if time.time() > deadline:
                    return sent
    finally:
        sock.setblocking(True)
    return sent


def chunked(total, piece=256 * 1024):
    block = b"%x\r\n" % piece + b"x" * piece + b"\r\n"
    for _ in range(total // piece):
        yield block
    yield b"0\r\n\r\n"


def health_ok(srv, timeout=5):
    try:
        st, _, _, body = srv.request("GET", "/api/v1/health", token=None)
        return st == 200 and body["status"] == "ok"
    except OSError:
        return False


class BodyLimitsTest(ServerCase):
    """Issue 14.1: limits on every framing, the token before the body, encodings refused."""

    server_flags = ("--max-body-bytes", str(64 * 1024))

    def test_a_chunked_body_without_a_token_is_refused_before_it_is_read(self):
        before = rss_kib(self.srv.proc.pid)
        s = connect(self.srv)
        head = b"POST /api/v1/agent/runs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        sent = send_until_answered(s, head, chunked(300 * MIB))
        r = read_response(s)
        s.close()
        self.assertIsNotNone(r)
        status, headers, body = r
        self.assertEqual(status, 401)
        self.assertEqual(json.loads(body)["error"]["code"], "unauthorized")
        self.assertEqual(headers.get("connection"), "close")
        self.assertLess(sent, 300 * MIB)  # the answer came before the body was through
        self.assertLess(rss_kib(self.srv.proc.pid) - before, 32 * 1024)
        self.assertTrue(health_ok(self.srv))

    def test_a_chunked_body_over_the_limit_is_413_while_it_is_read(self):
        before = rss_kib(self.srv.proc.pid)
        s = connect(self.srv)
        head = ("POST /api/v1/agent/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" % ALICE).encode()
        sent = send_until_answered(s, head, chunked(300 * MIB))
        r = read_response(s)
        s.close()
        self.assertIsNotNone(r)
        self.assertEqual(r[0], 413)
        self.assertEqual(json.loads(r[2])["error"]["code"], "too_large")
        self.assertLess(sent, 64 * MIB)
        self.assertLess(rss_kib(self.srv.proc.pid) - before, 32 * 1024)
        self.assertTrue(health_ok(self.srv))

    def test_a_declared_length_over_the_limit_is_413_before_any_byte(self):
        s = connect(self.srv)
        s.sendall(("POST /api/v1/agent/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                   "Content-Length: %d\r\n\r\n" % (ALICE, 300 * MIB)).encode())
        r = read_response(s)
        s.close()
        self.assertEqual(r[0], 413)

    def test_a_body_without_framing_is_empty(self):
        # HTTP/1.1: a request without Content-Length or chunked has no body; what follows is the next request.
        s = connect(self.srv)
        s.sendall(("POST /api/v1/agent/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n" % ALICE).encode())
        r = read_response(s)
        s.close()
        self.assertEqual(r[0], 400)
        self.assertEqual(json.loads(r[2])["error"]["code"], "invalid_json")

    def test_an_encoded_body_is_415_and_never_decoded(self):
        import gzip
        bomb = gzip.compress(b"[" * (50 * MIB))  # a small body that would decode to 50 MB
        before = rss_kib(self.srv.proc.pid)
        st, _, _, err = self.srv.request("POST", "/api/v1/agent/runs", bomb,
                                         headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})
        self.assertEqual((st, err["error"]["code"]), (415, "unsupported_encoding"))
        self.assertLess(rss_kib(self.srv.proc.pid) - before, 16 * 1024)


class MalformedRequestTest(ServerCase):
    """A request the server cannot take as it is framed gets a JSON answer that says so, then the connection
    closes (RFC 9112): never a silent close, never a body read another way than the client meant."""

    def answer(self, data):
        s = connect(self.srv)
        try:
            s.sendall(data)
            r = read_response(s)
            self.assertIsNotNone(r, data[:60])
            rest = s.recv(1 << 16)  # the server closes after the answer: what else was sent is not a request
        finally:
            s.close()
        self.assertEqual(r[1].get("connection"), "close", data[:60])
        self.assertEqual(rest, b"", data[:60])
        return r[0], json.loads(r[2])["error"]["code"]

    def run_head(self, *fields):
        return ("POST /api/v1/agent/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                "Content-Type: application/json\r\n" % ALICE + "".join(f + "\r\n" for f in fields) + "\r\n").encode()

    def test_framing_that_could_smuggle_a_request_is_400(self):
        # Content-Length with chunked: the "body" below would otherwise be a GET of its own.
        smuggle = self.run_head("Content-Length: 4", "Transfer-Encoding: chunked") + \
            b"0\r\n\r\nGET /api/v1/health HTTP/1.1\r\nHost: x\r\n\r\n"
        self.assertEqual(self.answer(smuggle), (400, "bad_request"))
        self.assertEqual(self.answer(self.run_head("Content-Length: 2", "Content-Length: 3") + b"{}x"),
                         (400, "bad_request"))
        self.assertEqual(self.answer(self.run_head("Content-Length: -1") + b"{}"), (400, "bad_request"))
        self.assertEqual(self.answer(self.run_head("Transfer-Encoding: chunked") + b"fffffffffffffffffff\r\n{}\r\n"),
                         (400, "bad_request"))
        # A chunk header longer than the connection's buffer: refused, not buffered.
        self.assertEqual(self.answer(self.run_head("Transfer-Encoding: chunked") + b"2;" + b"e" * 90000 + b"\r\n"),
                         (400, "bad_request"))

    def test_a_transfer_coding_other_than_chunked_is_501(self):
        gz = self.run_head("Transfer-Encoding: gzip, chunked") + b"2\r\n{}\r\n0\r\n\r\n"
        self.assertEqual(self.answer(gz), (501, "unsupported_transfer_encoding"))
        self.assertEqual(self.answer(self.run_head("Transfer-Encoding: identity", "Content-Length: 2") + b"{}"),
                         (501, "unsupported_transfer_encoding"))
        http10 = b"POST /api/v1/agent/runs HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
        self.assertEqual(self.answer(http10), (400, "bad_request"))

    def test_a_request_line_or_field_the_parser_refuses_is_400(self):
        for data in (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"A" * 100,  # a TLS hello
                     b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
                     b"GET /api/v1/health HTTP/1.2\r\nHost: x\r\n\r\n",
                     b"GET /api/v1/hea lth HTTP/1.1\r\nHost: x\r\n\r\n",
                     b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n"):
            self.assertEqual(self.answer(data), (400, "bad_request"), data[:30])

    def test_host_is_required_once_in_http_1_1(self):
        self.assertEqual(self.answer(b"GET /api/v1/health HTTP/1.1\r\n\r\n"), (400, "bad_request"))
        self.assertEqual(self.answer(b"GET /api/v1/health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
                         (400, "bad_request"))
        s = connect(self.srv)  # HTTP/1.0 needs none
        s.sendall(b"GET /api/v1/health HTTP/1.0\r\n\r\n")
        self.assertEqual(read_response(s)[0], 200)
        s.close()
        self.assertTrue(health_ok(self.srv))


class HeadTest(unittest.TestCase):
    def test_head_is_a_get_without_its_body_on_one_connection(self):
        with Server() as srv:
            png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 100
            st, _, _, up = srv.request("POST", "/api/v1/agent/uploads?threadId=" + new_id("t"), png,
                                       content_type="image/png")
            self.assertEqual(st, 201, up)
            url = urllib.parse.urlsplit(up["url"])
            auth = "Authorization: Bearer %s\r\n" % ALICE
            cases = (("/api/v1/health", "", 200, None, None), (url.path + "?" + url.query, "", 200, "image/png", "108"),
                     ("/api/v1/agent/threads", auth, 200, "application/json", None),
                     ("/api/v1/agent/threads", "", 401, "application/json", None),
                     ("/api/v1/agent/runs/t/events", auth, 405, "application/json", None),
                     ("/api/v1/nothing", auth, 404, "application/json", None))
            s = connect(srv)
            s.settimeout(10)
            pending = b""
            for path, extra, status, ctype, length in cases:
                s.sendall(("HEAD %s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (path, extra)).encode())
                while b"\r\n\r\n" not in pending:
                    chunk = s.recv(4096)
                    self.assertTrue(chunk, path)
                    pending += chunk
                head, pending = pending.split(b"\r\n\r\n", 1)
                lines = head.decode().split("\r\n")
                fields = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
                self.assertEqual(int(lines[0].split()[1]), status, path)
                if ctype:
                    self.assertEqual(fields["content-type"].split(";")[0], ctype, path)
                if length:
                    self.assertEqual(fields["content-length"], length, path)
                if status == 405:
                    self.assertEqual(fields["allow"], "GET")
                # The length a GET's body has, and not one byte of it: the next answer follows the header.
                self.assertGreater(int(fields["content-length"]), 0, path)
                self.assertEqual(pending, b"", path)
            # The next request on the connection is not a HEAD: a refusal of it has its body.
            s.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
            r = read_response(s)
            self.assertEqual((r[0], json.loads(r[2])["error"]["code"]), (400, "bad_request"))
            s.close()


class NestingTest(unittest.TestCase):
    """Issue 12.3: about 200,000 levels of '[' (400 KB, under the body limit) in any body: 422, never a crash."""

    def test_deeply_nested_json_is_422_in_every_body(self):
        with Server() as srv:
            thread = new_id("t")
            self.assertEqual(srv.run(run_input(thread, "please book a room"))[0], 200)  # waits for approval
            deep = "[" * 200000 + "]" * 200000
            for path, body in [("/api/v1/agent/runs", '{"threadId":"%s","runId":"r","messages":%s}' % (thread, deep)),
                               ("/api/v1/agent/runs", json.dumps(run_input(thread, None, resume=[]))[:-1]
                                + ',"x":' + deep + "}"),
                               ("/api/v1/agent/runs/%s/resume" % thread, '{"approvalRequestId":"a","decisions":' + deep
                                + "}"),
                               ("/api/v1/agent/runs/%s/cancel" % thread, deep)]:
                with self.subTest(path=path):
                    st, _, _, err = srv.request("POST", path, body, content_type="application/json")
                    self.assertEqual((st, err["error"]["code"]), (422, "invalid_argument"), err)
                    self.assertIn("nested deeper than 64", err["error"]["message"])
            # In a content part's metadata.
            text = json.dumps(run_input(new_id("t"), None, messages=[
                {"id": new_id("m"), "role": "user", "content": [{"type": "text", "text": "hi", "metadata": "M"}]}]))
            body = text.replace('"M"', "[" * 100000 + "1" + "]" * 100000)
            st, _, _, err = srv.request("POST", "/api/v1/agent/runs", body, content_type="application/json")
            self.assertEqual((st, err["error"]["code"]), (422, "invalid_argument"))
            self.assertTrue(health_ok(srv))
            self.assertEqual(srv.proc.poll(), None)
            self.assertEqual(srv.run(run_input(new_id("t"), "still here"))[0], 200)


class HeaderLimitsTest(unittest.TestCase):
    """Issue 14.2: header size and count, and the deadline for the whole header (slowloris, 14.4)."""

    def test_endless_headers_are_431_and_cost_no_memory(self):
        with Server() as srv:
            before = rss_kib(srv.proc.pid)
            s = connect(srv)
            lines = (b"X-Filler-%d: %s\r\n" % (i, b"y" * 1000) for i in range(100000))  # 100 MB of headers
            sent = send_until_answered(s, b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n", lines)
            r = read_response(s)
            s.close()
            self.assertEqual(r[0], 431)
            self.assertEqual(json.loads(r[2])["error"]["code"], "header_too_large")
            self.assertLess(sent, 8 * MIB)
            self.assertLess(rss_kib(srv.proc.pid) - before, 16 * 1024)
            self.assertTrue(health_ok(srv))

    def test_too_many_small_headers_are_431(self):
        with Server() as srv:
            s = connect(srv)
            s.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"a%d: b\r\n" % i for i in range(100))
                      + b"\r\n")
            r = read_response(s)
            s.close()
            self.assertEqual(r[0], 431)
            st, _, _, _ = srv.request("GET", "/api/v1/health", token=None, headers={"X-%d" % i: "v" for i in range(40)})
            self.assertEqual(st, 200)

    def test_slow_headers_are_cut_off_and_health_keeps_answering(self):
        config = {"limits": {"header_timeout_ms": 1500, "max_connections_per_client": 5000}}
        with Server(config=config) as srv:
            slow = []
            for i in range(1100):
                s = connect(srv)
                s.sendall(b"GET /api/v1/health HTTP/1.1\r\nX-Slow: 1\r\n")  # and never the end of the header
                slow.append(s)
            for _ in range(3):  # they trickle a header line each
                for s in slow:
                    try:
                        s.sendall(b"X-More: 1\r\n")
                    except OSError:
                        pass
            answered = 0
            for _ in range(20):
                answered += health_ok(srv)
            self.assertEqual(answered, 20)
            # The header deadline closes every one of them.
            time.sleep(1.5)
            closed = 0
            deadline = time.time() + 10
            for s in slow:
                s.settimeout(max(0.1, deadline - time.time()))
                try:
                    closed += s.recv(1024) == b""
                except (ConnectionError, socket.timeout):
                    closed += 1
                s.close()
            self.assertEqual(closed, len(slow))
            self.assertTrue(health_ok(srv))

    def test_waiting_connections_never_take_the_reserve(self):
        # 300 sockets that send nothing, on a server with room for 200: the newest always gets in (the oldest
        # waiting one goes), so /health keeps answering at once.
        config = {"limits": {"max_connections": 200, "reserve_connections": 20, "max_connections_per_client": 5000}}
        with Server(config=config) as srv:
            idle = [connect(srv) for _ in range(300)]
            for _ in range(20):
                self.assertTrue(health_ok(srv))
            # None was refused; the newest (up to the 180 that waiting connections may hold) are still open.
            open_count = 0
            deadline = time.time() + 5
            for s in idle:
                s.setblocking(False)
                try:
                    data = s.recv(1)
                    self.assertEqual(data, b"")  # closed, never answered 503
                except BlockingIOError:
                    open_count += 1
                except ConnectionError:
                    pass
                s.close()
            self.assertLessEqual(open_count, 180)
            self.assertGreaterEqual(open_count, 150)


class ConnectionLimitsTest(unittest.TestCase):
    """Issue 14.4-14.6: connection and stream caps answered at once, per client and per user."""

    def test_connections_over_the_per_client_cap_are_429_at_once(self):
        config = {"limits": {"max_connections_per_client": 20}}
        with Server(config=config) as srv:
            held = [connect(srv) for _ in range(20)]
            time.sleep(0.2)
            s = connect(srv)
            r = read_response(s, timeout=5)
            s.close()
            self.assertEqual(r[0], 429)
            self.assertEqual(r[1].get("connection"), "close")
            self.assertEqual(json.loads(r[2])["error"]["code"], "too_many_connections")
            for h in held:
                h.close()
            self.assertTrue(wait_for(lambda: health_ok(srv)))

    def test_connections_over_the_total_cap_are_503_at_once(self):
        config = {"limits": {"max_connections": 30, "reserve_connections": 0, "max_connections_per_client": 1000}}
        with Server("--max-streams", "100", "--max-streams-per-user", "100", config=config) as srv:
            streams = [srv.open_stream("GET", "/api/v1/agent/runs/%s/events?follow=1" % t, token=ALICE)
                       for t in [self.make_thread(srv) for _ in range(1)] * 30]
            self.assertTrue(all(s.status == 200 for s in streams))
            s = connect(srv)
            r = read_response(s, timeout=5)
            s.close()
            self.assertEqual(r[0], 503)
            self.assertEqual(r[1].get("connection"), "close")
            for st in streams:
                st.abort()

    def make_thread(self, srv):
        thread = new_id("t")
        self.assertEqual(srv.run(run_input(thread, "hello"))[0], 200)
        return thread

    def test_one_user_holding_streams_does_not_lock_out_the_others(self):
        with Server("--max-streams-per-user", "5") as srv:
            thread = self.make_thread(srv)
            # The run's own stream counts until the server has written its end (after the client read
            # RUN_FINISHED and left): the five below must not race it.
            self.assertTrue(wait_for(lambda: srv.health()["streams"] == 0))
            mine = [srv.open_stream("GET", "/api/v1/agent/runs/%s/events?follow=1" % thread) for _ in range(5)]
            self.assertTrue(all(s.status == 200 for s in mine))
            st, hdrs, _, err = srv.request("GET", "/api/v1/agent/runs/%s/events?follow=1" % thread)
            self.assertEqual((st, err["error"]["code"]), (429, "too_many_streams"))
            st, _, _, err = srv.request("POST", "/api/v1/agent/runs", run_input(new_id("t"), "more"))
            self.assertEqual((st, err["error"]["code"]), (429, "too_many_streams"))
            # Bob's runs and streams go on.
            self.assertEqual(srv.run(run_input(new_id("t"), "hello"), token=BOB)[0], 200)
            self.assertTrue(wait_for(lambda: srv.health()["streams"] == 5))  # Bob's ended (see above)
            for s in mine:
                s.abort()
            self.assertTrue(wait_for(lambda: srv.health()["streams"] == 0))
            self.assertEqual(srv.run(run_input(new_id("t"), "hello"))[0], 200)

    def test_tokens_must_match_whole(self):
        with Server() as srv:
            for token in (ALICE[:-1], ALICE + "x", ALICE.upper(), ""):
                with self.subTest(token=token):
                    st, _, _, err = srv.request("GET", "/api/v1/agent/threads", token=None,
                                                headers={"Authorization": "Bearer " + token})
                    self.assertEqual((st, err["error"]["code"]), (401, "unauthorized"))
            self.assertEqual(srv.request("GET", "/api/v1/agent/threads")[0], 200)
            # The scheme's case is free and spaces may follow it (RFC 9110 11.1); another scheme is no token.
            for header in ("bearer " + ALICE, "BEARER " + ALICE, "Bearer   " + ALICE):
                st, _, body, _ = srv.request("GET", "/api/v1/agent/threads", token=None,
                                             headers={"Authorization": header})
                self.assertEqual(st, 200, header)
            st, _, _, err = srv.request("GET", "/api/v1/agent/threads", token=None,
                                        headers={"Authorization": "Basic " + ALICE})
            self.assertEqual((st, err["error"]["code"]), (401, "unauthorized"))
            # Two Authorization fields are one too many, whichever is valid.
            s = connect(srv)
            s.sendall(("GET /api/v1/agent/threads HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\n"
                       "Authorization: Bearer %s\r\n\r\n" % ALICE).encode())
            r = read_response(s)
            s.close()
            self.assertEqual((r[0], json.loads(r[2])["error"]["code"]), (400, "bad_request"))


class ObjectRangesTest(unittest.TestCase):
    """Issue 14.3: objects streamed with one range at most, ETag and If-None-Match."""

    def test_ranges_etag_and_no_multipart(self):
        with Server() as srv:
            data = b"\x89PNG\r\n\x1a\n" + bytes((i * 31) & 0xFF for i in range(MIB - 8))
            st, _, _, up = srv.request("POST", "/api/v1/agent/uploads?threadId=" + new_id("t"), data,
                                       content_type="image/png")
            self.assertEqual(st, 201, up)
            url = urllib.parse.urlsplit(up["url"])
            path = url.path + "?" + url.query
            st, h, body, _ = srv.request("GET", path, token=None)
            self.assertEqual((st, body), (200, data))
            etag = h["etag"]
            self.assertTrue(etag.startswith('"') and len(etag) == 66, etag)
            self.assertEqual(h["accept-ranges"], "bytes")
            # One range: 206 with exactly those bytes.
            st, h, body, _ = srv.request("GET", path, token=None, headers={"Range": "bytes=100-199"})
            self.assertEqual((st, body, h["content-range"]), (206, data[100:200], "bytes 100-199/%d" % len(data)))
            st, h, body, _ = srv.request("GET", path, token=None, headers={"Range": "bytes=-10"})
            self.assertEqual((st, body), (206, data[-10:]))
            st, h, body, _ = srv.request("GET", path, token=None, headers={"Range": "bytes=%d-" % (len(data) - 3)})
            self.assertEqual((st, body), (206, data[-3:]))
            # The unit's case is free, spaces may surround the range, and a last position past the end (past 64
            # bits too) is the end; a first position that is not a number is no range (never taken as "-n").
            for header, want in (("BYTES=0-1", data[:2]), ("bytes= 5-6 ", data[5:7]), ("bytes=\t-2", data[-2:]),
                                 ("bytes=10-%d" % (1 << 70), data[10:]), ("bytes=x-3", data),
                                 ("bytes=3-x", data), ("bytes=-", data), ("bytes=5-2", data)):
                st, h, body, _ = srv.request("GET", path, token=None, headers={"Range": header})
                self.assertEqual((st, body), (206 if want != data else 200, want), header)
            st, h, _, _ = srv.request("GET", path, token=None, headers={"Range": "bytes=%d-" % (1 << 70)})
            self.assertEqual(st, 416)
            # 100 ranges: the whole body once, never a multipart built in memory.
            before = rss_kib(srv.proc.pid)
            many = "bytes=" + ",".join("0-%d" % (len(data) - 1) for _ in range(100))
            st, h, body, _ = srv.request("GET", path, token=None, headers={"Range": many})
            self.assertEqual((st, len(body)), (200, len(data)))
            self.assertNotIn("multipart", h.get("content-type", ""))
            self.assertLess(rss_kib(srv.proc.pid) - before, 16 * 1024)
            # Outside the object: 416.
            st, h, _, err = srv.request("GET", path, token=None, headers={"Range": "bytes=%d-" % len(data)})
            self.assertEqual((st, h["content-range"]), (416, "bytes */%d" % len(data)))
            # ETag: a match is 304 with no body; a stale If-Range gets the whole body.
            st, h, body, _ = srv.request("GET", path, token=None, headers={"If-None-Match": etag})
            self.assertEqual((st, body), (304, b""))
            st, _, body, _ = srv.request("GET", path, token=None, headers={"If-None-Match": '"other"'})
            self.assertEqual((st, len(body)), (200, len(data)))
            st, _, body, _ = srv.request("GET", path, token=None, headers={"Range": "bytes=0-9", "If-Range": '"old"'})
            self.assertEqual((st, len(body)), (200, len(data)))
            # A JSON answer ignores Range.
            st, h, _, threads = srv.request("GET", "/api/v1/agent/threads", headers={"Range": "bytes=0-1"})
            self.assertEqual(st, 200)
            self.assertIn("threads", threads)


class NamespacesTest(unittest.TestCase):
    """Issue 14.7: thread ids live in per-user namespaces; another user's thread is an unknown one."""

    def test_two_users_with_one_thread_id_never_meet(self):
        with Server() as srv:
            thread = new_id("t")
            st, a_frames, _ = srv.run(run_input(thread, "alice here"))
            self.assertEqual(st, 200)
            # Bob's answers for alice's id are byte for byte those for an id nobody has.
            unknown = new_id("t")
            for method, path in [("GET", "/api/v1/agent/runs/%s/history"), ("GET", "/api/v1/agent/runs/%s/events"),
                                 ("POST", "/api/v1/agent/runs/%s/cancel"), ("DELETE", "/api/v1/agent/threads/%s"),
                                 ("GET", "/api/v1/agent/threads/%s/jobs")]:
                with self.subTest(path=path):
                    a = srv.request(method, path % thread, token=BOB)
                    u = srv.request(method, path % unknown, token=BOB)
                    self.assertEqual(a[0], 404)
                    self.assertEqual(a[3]["error"]["message"].replace(thread, "ID"),
                                     u[3]["error"]["message"].replace(unknown, "ID"))
            st, b_frames, _ = srv.run(run_input(thread, "bob here"), token=BOB)
            self.assertEqual(st, 200)
            self.assertEqual([f[0] for f in b_frames][:1], [1])  # a thread of his own: it starts at 1
            self.assertEqual({e.get("threadId") for _, e in b_frames if "threadId" in e}, {thread})
            raw_a = b"".join(json.dumps(e).encode() for _, e in a_frames)
            self.assertNotIn(b'"threadId": "u', raw_a)
            _, _, _, la = srv.request("GET", "/api/v1/agent/threads")
            _, _, _, lb = srv.request("GET", "/api/v1/agent/threads", token=BOB)
            self.assertEqual([t["id"] for t in la["threads"] if t["id"] == thread], [thread])
            self.assertEqual([t["id"] for t in lb["threads"]], [thread])
            self.assertEqual(srv.request("DELETE", "/api/v1/agent/threads/" + thread, token=BOB)[0], 200)
            _, _, _, hist = srv.request("GET", "/api/v1/agent/runs/%s/history" % thread)
            self.assertEqual([m["content"] for m in hist["messages"] if m["role"] == "user"], ["alice here"])

    def test_a_thread_id_too_long_for_the_namespace_is_422(self):
        with Server() as srv:
            st, _, _, err = srv.request("POST", "/api/v1/agent/runs", run_input("t" * 115, "hi"))
            self.assertEqual((st, err["error"]["code"]), (422, "invalid_argument"))
            self.assertEqual(srv.run(run_input("t" * 114, "hi"))[0], 200)


class FanOutTest(unittest.TestCase):
    """Serialize once, write to every follower; a follower that does not read is dropped, not waited for."""

    def test_followers_get_the_same_bytes_and_a_stalled_one_is_dropped(self):
        config = {"limits": {"stream_buffer_bytes": 1 << 20, "max_streams_per_user": 100}}
        with Server(config=config) as srv:
            thread = new_id("t")
            self.assertEqual(srv.run(run_input(thread, "hello"))[0], 200)
            request = ("GET /api/v1/agent/runs/%s/events?follow=1 HTTP/1.1\r\nHost: x\r\n"
                       "Authorization: Bearer %s\r\n\r\n" % (thread, ALICE)).encode()
            followers = []
            for _ in range(8):
                s = connect(srv)
                s.sendall(request)
                followers.append(s)
            raw = [bytearray() for _ in followers]

            def read(i):  # as fast as the socket goes, parsed at the end
                # Into one buffer: recv(1 << 20) allocates (mmaps) a megabyte for each read, and with events
                # arriving a few at a time the eight readers kept a core busy in this client, not the server.
                buf = bytearray(1 << 16)
                view = memoryview(buf)
                try:
                    while True:
                        n = followers[i].recv_into(buf)
                        if not n:
                            return
                        raw[i] += view[:n]
                except OSError:
                    return

            readers = [threading.Thread(target=read, args=(i,), daemon=True) for i in range(len(followers))]
            for t in readers:
                t.start()
            # One more that never reads, with a small receive buffer.
            stalled = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stalled.connect(("127.0.0.1", srv.port))
            stalled.sendall(request)
            self.assertTrue(wait_for(lambda: srv.health()["streams"] == 9))
            for _ in range(20):  # 50 KB answers (about 6,000 events each) until the stalled one is dropped
                st, frames, _ = srv.run(run_input(thread, "z" * 50000))
                self.assertEqual(st, 200)
                mark = b"id: %d\n" % frames[-1][0]
                self.assertTrue(wait_for(lambda: all(r.rfind(mark) >= 0 for r in raw), timeout=30))
                if srv.health()["streams"] == 8:
                    break
            self.assertEqual(srv.health()["streams"], 8)
            everything = srv.thread_events(thread)
            bodies = [dechunk(bytes(r)) for r in raw]
            for body in bodies:
                self.assertEqual(parse_frames(body), everything)
            # The same bytes on every stream (keep-alive comments aside): each event was serialized once.
            events_only = [b"\n\n".join(f for f in b.split(b"\n\n") if f.startswith(b"id:")) for b in bodies]
            self.assertEqual(len(set(events_only)), 1)
            for f in followers:
                f.close()
            stalled.close()


def dechunk(data):
    """The body of a chunked HTTP answer (header included in `data`), as far as it goes."""
    body = bytearray()
    pos = data.index(b"\r\n\r\n") + 4
    while pos < len(data):
        eol = data.index(b"\r\n", pos)
        size = int(data[pos:eol], 16)
        if size == 0:
            break
        body += data[eol + 2:eol + 2 + size]
        pos = eol + 2 + size + 2
    return bytes(body)


def parse_frames(body):
    out = []
    for frame in body.split(b"\n\n"):
        if not frame or frame.startswith(b":"):
            continue
        lines = frame.split(b"\n")
        out.append((int(lines[0][4:]), json.loads(lines[1][6:])))
    return out


class KeepAliveAfterStreamTest(unittest.TestCase):
    """A client that sends its next request the moment a stream's last chunk arrives gets it answered: the read
    that watches a stream for the client leaving can take that request before the stream's end cancels it (the
    web page's thread list hung so once in CI, its GET never answered)."""

    def test_a_request_sent_as_a_stream_ends_is_answered(self):
        with Server() as srv:
            s = connect(srv, timeout=10)
            thread = new_id("t")
            for i in range(300):  # without the fix, one of the first 40 or so hung
                body = json.dumps(run_input(thread, "hi %d" % i)).encode()
                s.sendall(b"POST /api/v1/agent/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                          b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                          % (ALICE.encode(), len(body)) + body)
                streamed = b""
                while not streamed.endswith(b"\r\n0\r\n\r\n"):  # the chunked body's end
                    data = s.recv(1 << 16)
                    self.assertTrue(data, "the connection closed during stream %d" % i)
                    streamed += data
                self.assertIn(b"RUN_FINISHED", streamed)
                s.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
                try:
                    answer = read_response(s, timeout=5)
                except socket.timeout:
                    answer = None
                self.assertIsNotNone(answer, "no answer to the request sent as stream %d ended" % i)
                self.assertEqual(answer[0], 200)
            s.close()


class ShutdownTest(unittest.TestCase):
    def test_sigterm_ends_streams_with_a_keep_alive_and_exits(self):
        srv = Server()
        try:
            thread = new_id("t")
            self.assertEqual(srv.run(run_input(thread, "hello"))[0], 200)
            s = srv.open_stream("GET", "/api/v1/agent/runs/%s/events?follow=1" % thread)
            s.read_events(until=lambda f: f[1]["type"] == "RUN_FINISHED")
            s.comments.clear()
            srv.proc.send_signal(signal.SIGTERM)
            rest = s.read_events()  # ends: the chunked body is closed properly
            self.assertEqual(rest, [])
            self.assertEqual(s.comments[-1:], [": keep-alive"])
            self.assertEqual(srv.proc.wait(timeout=20), 0)
        finally:
            srv.stop()


    def test_sigterm_while_streamed_starts_are_on_their_way_exits_cleanly(self):
        # A streamed start is answered from the runtime's callback once stored: a shutdown can come in between,
        # and callbacks keep coming until the runtime is gone (after the work pool). With no timed group commit, a
        # start is stored with its run's end: every run in flight at the signal has its start on its way.
        srv = Server("--demo-delay-ms", "20", config={"runtime": {"flush_interval_ms": 10000}})
        stop = threading.Event()
        done = []
        some_done = threading.Event()

        def client():
            while not stop.is_set():
                try:
                    srv.run(run_input(new_id("t"), "hello"))
                except Exception:
                    return  # the server went
                done.append(1)
                if len(done) >= 16:
                    some_done.set()

        threads = [threading.Thread(target=client) for _ in range(8)]
        try:
            for t in threads:
                t.start()
            self.assertTrue(some_done.wait(timeout=60))
            srv.proc.send_signal(signal.SIGTERM)
            self.assertEqual(srv.proc.wait(timeout=30), 0)
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=30)
            srv.stop()


class ErrorDetailTest(unittest.TestCase):
    def test_a_storage_failure_is_500_without_paths_or_sql(self):
        with Server() as srv:
            data = os.path.join(srv.dir, "data")
            # Break the object store: a file where its uploads folder would be.
            roots = [os.path.join(dp, d) for dp, dn, _ in os.walk(data) for d in dn if d == "agent-inputs"]
            target = roots[0] if roots else None
            if target is None:
                # The store creates its folders on first use: make it, then turn it into a file.
                st, _, _, _ = srv.request("POST", "/api/v1/agent/uploads?threadId=" + new_id("t"), b"\x89PNG\r\n\x1a\n",
                                          content_type="image/png")
                self.assertEqual(st, 201)
                target = [os.path.join(dp, d) for dp, dn, _ in os.walk(data) for d in dn if d == "agent-inputs"][0]
            import shutil
            shutil.rmtree(target)
            with open(target, "w") as f:
                f.write("not a folder")
            st, _, _, err = srv.request("POST", "/api/v1/agent/uploads?threadId=" + new_id("t"), b"\x89PNG\r\n\x1a\n",
                                        content_type="image/png")
            self.assertEqual(st, 500, err)
            self.assertEqual(err["error"]["code"], "internal")
            text = json.dumps(err)
            self.assertNotIn("/", err["error"]["message"])
            self.assertNotIn(srv.dir, text)
            self.assertIn("agent-inputs", srv.stderr())  # the details are in the log


if __name__ == "__main__":
    unittest.main()
