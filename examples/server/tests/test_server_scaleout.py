"""Three agentrt-server processes on one PostgreSQL database and one S3 bucket (issue 15's scale-out).

Needs AGENTRT_TEST_PG_URL (ctest's postgres fixture: a throwaway cluster) and AGENTRT_TEST_S3_* (the s3rver
fixture, through `scripts/s3rver exec`). Without them every test fails, saying so: they are never skipped."""

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import unittest
import urllib.parse
import urllib.request
import uuid

from server_harness import ALICE, Server, new_id, run_input, squeeze, types, wait_for

RUN_B2 = ["RUN_STARTED", "STEP_STARTED", "CUSTOM", "TOOL_CALL_RESULT", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT",
          "TEXT_MESSAGE_END", "STEP_FINISHED", "STEP_STARTED", "STEP_FINISHED", "RUN_FINISHED"]
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


def required_env(name):
    v = os.environ.get(name)
    if not v:
        raise RuntimeError("%s is not set: run this test through ctest (the postgres and s3rver fixtures start the "
                           "servers it needs) or `scripts/s3rver run -- ...` after `scripts/pg-test-cluster start`" % name)
    return v


def psql():
    found = shutil.which("psql")
    if found:
        return found
    for root in sorted(os.listdir("/usr/lib/postgresql"), reverse=True):
        cand = os.path.join("/usr/lib/postgresql", root, "bin", "psql")
        if os.path.exists(cand):
            return cand
    raise RuntimeError("psql not found (Debian's postgresql-client: ./scripts/deps installs postgresql)")


def fresh_database(url):
    """A new database on the fixture's cluster, so the three servers start on an empty one."""
    name = "scaleout_" + uuid.uuid4().hex[:12]
    subprocess.run([psql(), url, "-v", "ON_ERROR_STOP=1", "-qc", "CREATE DATABASE " + name], check=True)
    return url.replace("/postgres?", "/%s?" % name, 1) if "/postgres?" in url else url.rsplit("/", 1)[0] + "/" + name


def shared_config(pg_url, prefix):
    return {"runtime": {
        "store": {"type": "postgres", "url": pg_url, "pool_size": 4},
        "objects": {"type": "s3", "endpoint": required_env("AGENTRT_TEST_S3_ENDPOINT"),
                    "region": required_env("AGENTRT_TEST_S3_REGION"), "bucket": required_env("AGENTRT_TEST_S3_BUCKET"),
                    "prefix": prefix, "path_style": True, "conditional_writes": "emulated",
                    "access_key_env": "AGENTRT_TEST_S3_ACCESS_KEY", "secret_key_env": "AGENTRT_TEST_S3_SECRET_KEY"},
        "sweep_interval_ms": 200,
        "instance_lease_ms": 2000,
    }}


class ScaleOutTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        pg = fresh_database(required_env("AGENTRT_TEST_PG_URL"))
        config = shared_config(pg, "scaleout-%s/" % uuid.uuid4().hex[:8])
        # Started at once: three processes migrate one empty database.
        started = [None] * 3
        errors = []

        def start(i):
            try:
                started[i] = Server(config=config)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=start, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        cls.servers = [s for s in started if s]
        if errors:
            for s in cls.servers:
                s.stop()
            raise errors[0]
        cls.a, cls.b, cls.c = cls.servers

    @classmethod
    def tearDownClass(cls):
        for s in cls.servers:
            s.stop()

    def pause_on(self, srv, thread):
        inp = run_input(thread, "please book a room")
        status, frames, _ = srv.run(inp)
        self.assertEqual(status, 200, frames)
        self.assertEqual(frames[-1][1]["outcome"]["type"], "interrupt")
        return inp, frames

    def history(self, srv, thread):
        st, _, _, hist = srv.request("GET", "/api/v1/agent/runs/%s/history" % thread)
        self.assertEqual(st, 200, hist)
        return hist

    def test_start_on_a_follow_on_b_resume_on_c(self):
        thread = new_id("t")
        inp, first = self.pause_on(self.a, thread)
        intr = first[-1][1]["outcome"]["interrupts"][0]
        # B follows the thread from after the first run: it sees C's run as C commits it.
        follow = self.b.open_stream("GET", "/api/v1/agent/runs/%s/events?follow=1&after=%d" % (thread, len(first)))
        self.assertEqual(follow.status, 200)
        seen = []
        reader = threading.Thread(target=lambda: seen.extend(
            follow.read_events(until=lambda f: f[1]["type"] in ("RUN_FINISHED", "RUN_ERROR"))))
        reader.start()
        resume = run_input(thread, None, messages=inp["messages"],
                           resume=[{"interruptId": intr["id"], "status": "resolved", "payload": {"approved": True}}])
        status, frames, _ = self.c.run(resume)
        self.assertEqual(status, 200, frames)
        self.assertEqual(squeeze(types(frames)), RUN_B2)
        reader.join(timeout=15)
        follow.close()
        self.assertFalse(reader.is_alive(), "B's follower never saw the run C committed")
        self.assertEqual(seen, frames)  # the same ids and events, in order, none twice
        # The log and history are the same from every process, and the tool ran once.
        logs = [s.thread_events(thread) for s in self.servers]
        self.assertEqual(logs[0], first + frames)
        self.assertEqual(logs[1], logs[0])
        self.assertEqual(logs[2], logs[0])
        self.assertEqual(types(logs[0]).count("TOOL_CALL_RESULT"), 1)
        hists = [self.history(s, thread) for s in self.servers]
        self.assertEqual(hists[1], hists[0])
        self.assertEqual(hists[2], hists[0])

    def test_twenty_concurrent_resumes_over_three_processes_run_the_tool_once(self):
        thread = new_id("t")
        inp, _ = self.pause_on(self.a, thread)
        intr = self.a.thread_events(thread)[-1][1]["outcome"]["interrupts"][0]
        answers = [None] * 20

        def resume(i):
            body = run_input(thread, None, messages=inp["messages"],
                             resume=[{"interruptId": intr["id"], "status": "resolved", "payload": {"approved": True}}])
            srv = self.servers[i % 3]
            status, frames, _ = srv.run(body)
            answers[i] = (status, frames)

        workers = [threading.Thread(target=resume, args=(i,)) for i in range(20)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        ran = [f for st, f in answers if st == 200]
        refused = [f for st, f in answers if st != 200]
        self.assertEqual(len(ran), 1, answers)
        self.assertEqual(squeeze(types(ran[0])), RUN_B2)
        for st, f in answers:
            if st != 200:
                self.assertEqual(st, 409, f)
        self.assertEqual(len(refused), 19)
        for s in self.servers:
            self.assertEqual(types(s.thread_events(thread)).count("TOOL_CALL_RESULT"), 1)

    def test_an_upload_on_one_process_is_an_input_on_another(self):
        thread = new_id("t")
        st, _, _, up = self.a.request("POST", "/api/v1/agent/uploads?threadId=" + thread, PNG, content_type="image/png")
        self.assertEqual(st, 201, up)
        # The URL is S3's presigned GET of the object: it fetches the bytes without any token of ours.
        with urllib.request.urlopen(up["url"], timeout=10) as r:
            self.assertEqual(r.read(), PNG)
        msg = {"id": new_id("m"), "role": "user", "content": [{"type": "text", "text": "what is this?"}, up["part"]]}
        status, frames, _ = self.b.run(run_input(thread, None, messages=[msg]))
        self.assertEqual(status, 200, frames)
        self.assertEqual(frames[-1][1]["type"], "RUN_FINISHED")
        # Another thread may not use it, on any process.
        st, _, _, err = self.c.request("POST", "/api/v1/agent/runs", run_input(new_id("t"), None, messages=[msg]))
        self.assertEqual(st, 422, err)
        # History from C shows the image, re-signed, still fetchable.
        part = self.history(self.c, thread)["messages"][0]["content"][1]
        self.assertEqual(part["type"], "image")
        with urllib.request.urlopen(part["source"]["value"], timeout=10) as r:
            self.assertEqual(r.read(), PNG)

    def test_a_turn_paused_on_a_process_killed_with_sigkill_resumes_on_another(self):
        thread = new_id("t")
        extra = Server(config=self.a_config())
        try:
            inp, first = self.pause_on(extra, thread)
            extra.proc.kill()  # kill -9
            extra.proc.wait()
        finally:
            extra.stop()
        intr = first[-1][1]["outcome"]["interrupts"][0]
        resume = run_input(thread, None, messages=inp["messages"],
                           resume=[{"interruptId": intr["id"], "status": "resolved", "payload": {"approved": True}}])
        status, frames, _ = self.b.run(resume)
        self.assertEqual(status, 200, frames)
        self.assertEqual(squeeze(types(frames)), RUN_B2)
        self.assertEqual(types(self.c.thread_events(thread)).count("TOOL_CALL_RESULT"), 1)

    def test_a_turn_running_on_a_killed_process_ends_on_another_within_the_lease(self):
        thread = new_id("t")
        slow = dict(self.a_config(), demo_chunk_delay_ms=300)  # the demo model streams slowly: a turn in flight
        extra = Server(config=slow)
        try:
            inp = run_input(thread, "hello there, tell me something long")
            s = extra.open_stream("POST", "/api/v1/agent/runs", inp)
            self.assertEqual(s.status, 200)
            s.read_events(until=lambda f: f[1]["type"] == "TEXT_MESSAGE_CONTENT")
            extra.proc.kill()  # kill -9 mid-turn
            extra.proc.wait()
            killed_at = time.monotonic()
            s.close()
        finally:
            extra.stop()
        # B sees the turn end (the dead process's lease runs out; a live one fails it) and says why.
        follow = self.b.open_stream("GET", "/api/v1/agent/runs/%s/events?follow=1" % thread)
        ended = follow.read_events(until=lambda f: f[1]["type"] in ("RUN_ERROR", "RUN_FINISHED"))
        took = time.monotonic() - killed_at
        follow.close()
        self.assertEqual(ended[-1][1]["type"], "RUN_ERROR", ended[-3:])
        started = [e for _, e in ended if e["type"] == "RUN_STARTED"]
        self.assertEqual([e["runId"] for e in started], [inp["runId"]])  # the error ends the killed run
        self.assertIn("code", ended[-1][1])
        self.assertLess(took, 10.0)  # lease 2 s, sweeps every 0.2 s
        print("\n  the killed process's turn ended on another after %.2f s (lease 2 s)" % took, file=sys.stderr)
        # The thread is free again, on any process.
        status, frames, _ = self.c.run(run_input(thread, "hello again"))
        self.assertEqual(status, 200, frames)
        self.assertEqual(frames[-1][1]["type"], "RUN_FINISHED")
        logs = [srv.thread_events(thread) for srv in self.servers]
        self.assertEqual(logs[1], logs[0])
        self.assertEqual(logs[2], logs[0])

    def test_a_job_started_on_one_process_and_cancelled_through_two_others_is_delivered_once(self):
        thread = new_id("t")
        extra = Server("--demo-jobs", "60000", config=self.a_config())  # its render job runs for a minute
        try:
            status, frames, _ = extra.run(run_input(thread, "render a sunset"))
            self.assertEqual(status, 200, frames)
            jobs = [e["value"] for _, e in frames if e["type"] == "CUSTOM" and e["name"] == "agentrt.job"]
            self.assertEqual(len(jobs), 1, types(frames))
            path = "/api/v1/agent/jobs/" + jobs[0]["id"]
            self.assertEqual(self.b.request("GET", path)[3]["status"], "running")
            answers = [None] * 6

            def cancel(i):
                answers[i] = (self.b if i % 2 else self.c).request("POST", path + "/cancel", {"reason": "enough"})

            workers = [threading.Thread(target=cancel, args=(i,)) for i in range(6)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            records = [a[3] for a in answers]
            self.assertEqual([a[0] for a in answers], [200] * 6, records)
            self.assertTrue(all(r == records[0] for r in records), records)  # one outcome, the same everywhere
            self.assertEqual((records[0]["status"], records[0]["delivered"]), ("cancelled", True))
            for srv in (extra, self.a, self.b, self.c):
                delivery = srv.thread_events(thread)[len(frames):]
                self.assertEqual(types(delivery), ["RUN_STARTED", "TOOL_CALL_RESULT", "CUSTOM", "RUN_FINISHED"])
                self.assertEqual(srv.request("GET", path)[3], records[0])
        finally:
            extra.stop()

    # The servers' shared configuration, read back from the first one's folder.
    def a_config(self):
        with open(os.path.join(self.a.dir, "config.json")) as f:
            return json.load(f)


if __name__ == "__main__":
    unittest.main()
