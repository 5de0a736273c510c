"""Tracing through agentrt-server: the traceparent header of POST /agent/runs (a run, and a resume) is the parent of
the run's span, as an in-process OTLP/HTTP JSON collector receives it."""

import http.server
import json
import threading
import unittest

from server_harness import Server, new_id, run_input

HOST_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
HOST_SPAN = "00f067aa0ba902b7"
RESUME_SPAN = "b7ad6b7169203331"


class Collector:
    """Receives OTLP/HTTP JSON exports on 127.0.0.1 and keeps their spans."""

    def __init__(self):
        self.spans = []
        self.cv = threading.Condition()
        collector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                with collector.cv:
                    for rs in body.get("resourceSpans", []):
                        for ss in rs.get("scopeSpans", []):
                            collector.spans.extend(ss.get("spans", []))
                    collector.cv.notify_all()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.endpoint = "http://127.0.0.1:%d/v1/traces" % self.httpd.server_address[1]

    def wait_for(self, predicate, timeout=30):
        with self.cv:
            self.cv.wait_for(lambda: predicate(self.spans), timeout)
            return list(self.spans)

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def runs_of(spans, run_id):
    """The run spans of a run (by its AG-UI runId: the server keeps the client's)."""
    return [s for s in spans if s["name"].startswith("invoke_agent") and attr(s, "agentrt.run.id") == run_id]


def attr(span, key):
    for a in span.get("attributes", []):
        if a["key"] == key:
            return next(iter(a["value"].values()))
    return None


class TracingServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.collector = Collector()
        cls.srv = Server(config={"runtime": {"tracing": {"otlp_endpoint": cls.collector.endpoint,
                                                          "export_interval_ms": 20}}})

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.collector.stop()

    def run_with(self, body, traceparent):
        s = self.srv.open_stream("POST", "/api/v1/agent/runs", body, headers={"traceparent": traceparent})
        self.assertEqual(s.status, 200)
        frames = s.read_events()
        s.close()
        return frames

    def test_the_traceparent_header_of_a_run_and_of_its_resume_is_the_parent_of_each_run_span(self):
        thread = new_id("t")
        inp = run_input(thread, "please book a room")
        frames = self.run_with(inp, "00-%s-%s-01" % (HOST_TRACE, HOST_SPAN))
        outcome = frames[-1][1]["outcome"]
        self.assertEqual(outcome["type"], "interrupt")
        spans = self.collector.wait_for(lambda sp: len(runs_of(sp, inp["runId"])) >= 1)
        first = runs_of(spans, inp["runId"])[0]
        self.assertEqual(first["traceId"], HOST_TRACE)
        self.assertEqual(first["parentSpanId"], HOST_SPAN)
        self.assertEqual(attr(first, "agentrt.outcome"), "interrupt")

        intr = outcome["interrupts"][0]
        resume = run_input(thread, None, messages=inp["messages"],
                           resume=[{"interruptId": intr["id"], "status": "resolved", "payload": {"approved": True}}])
        self.run_with(resume, "00-%s-%s-01" % (HOST_TRACE, RESUME_SPAN))
        spans = self.collector.wait_for(lambda sp: len(runs_of(sp, resume["runId"])) >= 1)
        second = runs_of(spans, resume["runId"])[0]
        self.assertEqual(second["traceId"], HOST_TRACE)
        self.assertEqual(second["parentSpanId"], RESUME_SPAN)
        self.assertEqual(attr(second, "agentrt.outcome"), "success")
        # The approval wait hangs under the paused run; the resumed run links to it.
        spans = self.collector.wait_for(lambda sp: any(s["name"] == "agentrt.approval_wait" for s in sp))
        wait = [s for s in spans if s["name"] == "agentrt.approval_wait" and s.get("parentSpanId") == first["spanId"]]
        self.assertEqual(len(wait), 1)
        self.assertEqual(second.get("links", [{}])[0].get("spanId"), wait[0]["spanId"])

    def test_an_invalid_traceparent_header_is_ignored(self):
        inp = run_input(new_id("t"), "hello")
        frames = self.run_with(inp, "00-zz-nope-01")
        self.assertEqual(frames[-1][1]["type"], "RUN_FINISHED")
        spans = self.collector.wait_for(lambda sp: len(runs_of(sp, inp["runId"])) >= 1)
        run = runs_of(spans, inp["runId"])[0]
        self.assertNotEqual(run["traceId"], HOST_TRACE)
        self.assertNotIn("parentSpanId", run)


if __name__ == "__main__":
    unittest.main()
