"""HTTP tests of agentrt-server: every endpoint, every error status, ownership, reconnect, disconnect, limits."""

import concurrent.futures
import http.server
import json
import socket
import subprocess
import threading
import time
import unittest
import urllib.parse

from server_harness import (ALICE, BOB, Server, ServerCase, new_id, run_input, server_binary, squeeze, types,
                            wait_for)

RUN_A = ["RUN_STARTED", "STEP_STARTED", "CUSTOM", "STEP_FINISHED", "STEP_STARTED", "TEXT_MESSAGE_START",
         "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "STEP_FINISHED", "STEP_STARTED", "STEP_FINISHED", "RUN_FINISHED"]
RUN_B1 = ["RUN_STARTED", "STEP_STARTED", "CUSTOM", "STEP_FINISHED", "STEP_STARTED", "TOOL_CALL_START",
          "TOOL_CALL_ARGS", "TOOL_CALL_END", "STEP_FINISHED", "RUN_FINISHED"]
RUN_B2 = ["RUN_STARTED", "STEP_STARTED", "CUSTOM", "TOOL_CALL_RESULT", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT",
          "TEXT_MESSAGE_END", "STEP_FINISHED", "STEP_STARTED", "STEP_FINISHED", "RUN_FINISHED"]
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


def error_code(parsed):
    return parsed["error"]["code"] if parsed and "error" in parsed else None


class ServerTest(ServerCase):
    """One server for the tests that don't need special flags."""

    def assertError(self, result, status, code=None):
        st, hdrs, _, parsed = result
        self.assertEqual(st, status, parsed)
        self.assertTrue(hdrs.get("content-type", "").startswith("application/json"), hdrs)
        self.assertIn("error", parsed)
        self.assertIsInstance(parsed["error"]["message"], str)
        if code:
            self.assertEqual(parsed["error"]["code"], code, parsed)

    def pause_for_approval(self, thread, token=ALICE):
        inp = run_input(thread, "please book a room")
        status, frames, _ = self.srv.run(inp, token)
        self.assertEqual(status, 200, frames)
        fin = frames[-1][1]
        self.assertEqual(fin["outcome"]["type"], "interrupt")
        return inp, fin["outcome"]["interrupts"]

    # ------------------------------------------------------------------ POST /agent/runs

    def test_golden_path_a_streams_one_run_with_sequence_ids(self):
        thread = new_id("t")
        inp = run_input(thread, "hello")
        s = self.srv.open_stream("POST", "/api/v1/agent/runs", inp)
        self.assertEqual(s.status, 200)
        self.assertEqual(s.headers["content-type"], "text/event-stream")
        frames = s.read_events()
        s.close()
        self.assertEqual(squeeze(types(frames)), RUN_A)
        self.assertNotIn(b"\r", s.raw)  # LF framing only
        ids = [i for i, _ in frames]
        self.assertEqual(ids, list(range(1, len(frames) + 1)))
        first, last = frames[0][1], frames[-1][1]
        self.assertEqual((first["threadId"], first["runId"]), (thread, inp["runId"]))
        self.assertEqual((last["threadId"], last["runId"]), (thread, inp["runId"]))
        self.assertEqual(last["outcome"], {"type": "success"})
        text = "".join(e["delta"] for _, e in frames if e["type"] == "TEXT_MESSAGE_CONTENT")
        self.assertIn('You said: "hello"', text)

    def test_client_history_is_ignored_only_the_latest_user_message_is_taken(self):
        thread = new_id("t")
        self.assertEqual(self.srv.run(run_input(thread, "first"))[0], 200)
        fake = [{"id": "m-old", "role": "user", "content": "forged history"},
                {"id": "a-old", "role": "assistant", "content": "forged answer"},
                {"id": new_id("m"), "role": "user", "content": "second"}]
        status, frames, _ = self.srv.run(run_input(thread, None, messages=fake))
        self.assertEqual(status, 200)
        _, _, _, hist = self.srv.request("GET", "/api/v1/agent/runs/%s/history" % thread)
        contents = [m.get("content") for m in hist["messages"] if m["role"] == "user"]
        self.assertEqual(contents, ["first", "second"])
        self.assertEqual(len(hist["messages"]), 4)

    def test_repeated_request_replays_the_same_run_and_starts_nothing(self):
        thread = new_id("t")
        inp = run_input(thread, "hello")
        _, frames1, _ = self.srv.run(inp)
        status, frames2, _ = self.srv.run(inp)
        self.assertEqual(status, 200)
        self.assertEqual(frames1, frames2)
        other = dict(inp, runId=new_id("run"))  # the same message under another run id
        self.assertError(self.srv.request("POST", "/api/v1/agent/runs", other), 409, "already_answered")
        self.assertEqual(types(self.srv.thread_events(thread)).count("RUN_STARTED"), 1)

    def test_golden_path_b_interrupt_then_resume_entries_execute_the_tool_once(self):
        thread = new_id("t")
        inp, interrupts = self.pause_for_approval(thread)
        self.assertEqual(len(interrupts), 1)
        intr = interrupts[0]
        self.assertEqual((intr["reason"], intr["metadata"]["toolName"]), ("tool_call", "book_room"))
        # A new message while the interrupt is open is refused before any event.
        self.assertError(self.srv.request("POST", "/api/v1/agent/runs", run_input(thread, "other")), 409,
                         "pending_interrupts")
        # Resume entries that do not cover the interrupt: 422, nothing runs.
        bad = run_input(thread, None, messages=inp["messages"],
                        resume=[{"interruptId": "nope", "status": "resolved"}])
        self.assertError(self.srv.request("POST", "/api/v1/agent/runs", bad), 422)
        resume = run_input(thread, None, messages=inp["messages"],
                           resume=[{"interruptId": intr["id"], "status": "resolved", "payload": {"approved": True}}])
        status, frames, _ = self.srv.run(resume)
        self.assertEqual(status, 200, frames)
        self.assertEqual(squeeze(types(frames)), RUN_B2)
        self.assertEqual(frames[0][1]["runId"], resume["runId"])  # the request's runId
        self.assertEqual(frames[0][1]["parentRunId"], inp["runId"])
        self.assertEqual(frames[-1][1]["runId"], resume["runId"])
        self.assertEqual(frames[2][1]["name"], "agentrt.started")  # durable before the tool runs
        self.assertEqual(frames[2][1]["value"], {"toolCallIds": [intr["toolCallId"]]})
        result = frames[3][1]
        self.assertEqual(result["toolCallId"], intr["toolCallId"])
        self.assertEqual(result["metadata"]["ui"]["type"], "booking_confirmation")
        # The same request again: the same run replayed, the tool not run again.
        status, again, _ = self.srv.run(resume)
        self.assertEqual(status, 200)
        self.assertEqual(again, frames)
        # Resume entries under a new run id once nothing waits: 409.
        self.assertError(self.srv.request("POST", "/api/v1/agent/runs", dict(resume, runId=new_id("run"))), 409,
                         "no_pending_interrupts")
        all_types = types(self.srv.thread_events(thread))
        self.assertEqual(all_types.count("TOOL_CALL_RESULT"), 1)
        self.assertEqual(all_types.count("RUN_STARTED"), 2)

    def test_rejecting_through_resume_entries_does_not_run_the_tool(self):
        thread = new_id("t")
        inp, interrupts = self.pause_for_approval(thread)
        resume = run_input(thread, None, messages=inp["messages"],
                           resume=[{"interruptId": interrupts[0]["id"], "status": "resolved",
                                    "payload": {"approved": False, "reason": "not today"}}])
        status, frames, _ = self.srv.run(resume)
        self.assertEqual(status, 200)
        result = [e for _, e in frames if e["type"] == "TOOL_CALL_RESULT"]
        self.assertEqual(len(result), 1)
        self.assertNotEqual(result[0]["metadata"]["tool_agent_output"]["status"], "succeeded")
        text = "".join(e["delta"] for _, e in frames if e["type"] == "TEXT_MESSAGE_CONTENT")
        self.assertIn("I did not book the room", text)

    def test_invalid_run_input_is_refused_before_any_event(self):
        runs = "/api/v1/agent/runs"
        self.assertError(self.srv.request("POST", runs, "{not json", content_type="application/json"), 400,
                         "invalid_json")
        self.assertError(self.srv.request("POST", runs, [1, 2]), 422)
        self.assertError(self.srv.request("POST", runs, {"runId": "r", "messages": []}), 422)
        no_user = run_input(new_id("t"), None, messages=[{"id": "a", "role": "assistant", "content": "hi"}])
        self.assertError(self.srv.request("POST", runs, no_user), 422)
        bad_part = run_input(new_id("t"), None, messages=[{"id": "m", "role": "user", "content": [{"type": "zzz"}]}])
        self.assertError(self.srv.request("POST", runs, bad_part), 422)
        self.assertError(self.srv.request("POST", runs, run_input("bad/thread id", "hi")), 422)
        # The message names this server's bound (the runtime's 128 bytes less the user's namespace prefix).
        rule = " (ids are 1-114 of A-Z a-z 0-9 _ - . : @, not starting with '.')"
        for thread_id, problem in (("a" * 115, "is longer than 114 bytes"),
                                   ("bad/thread", "holds a character other than A-Z a-z 0-9 _ - . : @")):
            result = self.srv.request("POST", runs, run_input(thread_id, "hi"))
            self.assertError(result, 422, "invalid_argument")
            self.assertEqual(result[3]["error"]["message"], "thread id '%s' %s%s" % (thread_id, problem, rule))
        self.assertEqual(self.srv.request("POST", runs, run_input("a" * 114, "hi"))[0], 200)
        self.assertError(self.srv.request("POST", runs, dict(run_input(new_id("t"), "x"), resume={})), 422)

    def test_foreign_attachment_urls_are_refused_with_422(self):
        thread = new_id("t")
        msg = {"id": new_id("m"), "role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "source": {"type": "url", "value": "http://169.254.169.254/latest/meta-data",
                                         "mimeType": "image/png"}}]}
        self.assertError(self.srv.request("POST", "/api/v1/agent/runs", run_input(thread, None, messages=[msg])), 422,
                         "invalid_argument")
        self.assertEqual(self.srv.request("GET", "/api/v1/agent/runs/%s/history" % thread)[0], 404)

    # ------------------------------------------------------------------ resume endpoint

    def test_resume_endpoint_accepts_once_and_repeats_the_same_answer(self):
        thread = new_id("t")
        _, interrupts = self.pause_for_approval(thread)
        approval = interrupts[0]["metadata"]["approvalRequestId"]
        path = "/api/v1/agent/runs/%s/resume" % thread
        body = {"approvalRequestId": approval, "decisions": [{"interruptId": interrupts[0]["id"], "action": "approve"}]}
        st, _, _, first = self.srv.request("POST", path, body)
        self.assertEqual(st, 202, first)
        self.assertEqual(first["status"], "accepted")
        self.assertEqual(first["approvalRequestId"], approval)
        st, _, _, second = self.srv.request("POST", path, body)
        self.assertEqual((st, second), (202, first))
        frames = self.srv.thread_events(thread)
        self.assertEqual(types(frames).count("TOOL_CALL_RESULT"), 1)
        self.assertEqual(types(frames).count("RUN_STARTED"), 2)
        self.assertEqual(frames[-1][1]["outcome"]["type"], "success")
        st, _, _, third = self.srv.request("POST", path, body)
        self.assertEqual((st, third), (202, first))
        self.assertEqual(types(self.srv.thread_events(thread)).count("TOOL_CALL_RESULT"), 1)

    def test_resume_endpoint_errors(self):
        thread = new_id("t")
        _, interrupts = self.pause_for_approval(thread)
        approval = interrupts[0]["metadata"]["approvalRequestId"]
        path = "/api/v1/agent/runs/%s/resume" % thread
        self.assertError(self.srv.request("POST", path, "[", content_type="application/json"), 400)
        self.assertError(self.srv.request("POST", path, {"decisions": []}), 422)
        self.assertError(self.srv.request("POST", path, {"approvalRequestId": "apr_unknown", "decisions": []}), 404)
        self.assertError(self.srv.request("POST", path, {"approvalRequestId": approval,
                                                         "decisions": [{"interruptId": "x", "action": "approve"}]}),
                         422)
        self.assertError(self.srv.request("POST", path, {"approvalRequestId": approval,
                                                         "decisions": [{"interruptId": interrupts[0]["id"]}]}), 422)
        self.assertError(self.srv.request("POST", path, {"approvalRequestId": approval, "decisions": []}), 422)
        self.assertError(self.srv.request("POST", path, {"approvalRequestId": approval, "decisions": []}, token=BOB),
                         404)
        self.assertError(self.srv.request("POST", path, {"approvalRequestId": approval, "decisions": []}, token=None),
                         401)
        # Still waiting: none of the above changed anything.
        self.assertEqual(self.srv.thread_events(thread)[-1][1]["outcome"]["type"], "interrupt")

    # ------------------------------------------------------------------ events endpoint

    def test_events_replay_after_a_cursor_then_end_when_idle(self):
        thread = new_id("t")
        _, frames, _ = self.srv.run(run_input(thread, "hello"))
        everything = self.srv.thread_events(thread)
        self.assertEqual(everything, frames)
        tail = self.srv.thread_events(thread, after=5)
        self.assertEqual(tail, frames[5:])
        s = self.srv.open_stream("GET", "/api/v1/agent/runs/%s/events" % thread, headers={"Last-Event-ID": "7"})
        self.assertEqual(s.read_events(), frames[7:])
        s.close()
        self.assertEqual(self.srv.thread_events(thread, after=len(frames)), [])
        self.assertError(self.srv.request("GET", "/api/v1/agent/runs/%s/events?after=abc" % thread), 400,
                         "invalid_cursor")
        self.assertError(self.srv.request("GET", "/api/v1/agent/runs/%s/events?after=-1" % thread), 400)

    def test_follow_stream_sends_keep_alive_comments_during_silence(self):
        thread = new_id("t")
        self.srv.run(run_input(thread, "hello"))
        s = self.srv.open_stream("GET", "/api/v1/agent/runs/%s/events?follow=1" % thread)
        frames = s.read_events(until=lambda f: f[1]["type"] == "RUN_FINISHED")
        self.assertEqual(frames[-1][1]["type"], "RUN_FINISHED")
        s.sock.settimeout(5)
        while len(s.comments) < 2:
            line = s.resp.readline()
            self.assertTrue(line, "stream ended")
            if line.startswith(b":"):
                s.comments.append(line.decode().strip())
        self.assertEqual(s.comments[:2], [": keep-alive", ": keep-alive"])
        # New runs show up on the open stream.
        self.srv.run(run_input(thread, "again"))
        more = s.read_events(until=lambda f: f[1]["type"] == "RUN_FINISHED")
        self.assertEqual(squeeze(types(more)), RUN_A)
        self.assertEqual(more[0][0], frames[-1][0] + 1)
        s.abort()

    # ------------------------------------------------------------------ history, threads, delete

    def test_history_threads_and_soft_delete(self):
        thread = new_id("t")
        self.srv.run(run_input(thread, "hello"))
        st, _, _, hist = self.srv.request("GET", "/api/v1/agent/runs/%s/history" % thread)
        self.assertEqual(st, 200)
        self.assertEqual(hist["threadId"], thread)
        self.assertEqual([m["role"] for m in hist["messages"]], ["user", "assistant"])
        self.assertEqual(hist["messages"][0]["content"], "hello")
        st, _, _, listing = self.srv.request("GET", "/api/v1/agent/threads")
        self.assertEqual(st, 200)
        ids = [t["id"] for t in listing["threads"]]
        self.assertIn(thread, ids)
        listed = [t for t in listing["threads"] if t["id"] == thread][0]
        self.assertEqual(sorted(listed), ["createdAt", "id", "lastSeq", "title", "updatedAt"])
        self.assertEqual(listed["lastSeq"], self.srv.thread_events(thread)[-1][0])  # the thread's last event
        self.assertNotIn(thread, [t["id"] for t in self.srv.request("GET", "/api/v1/agent/threads", token=BOB)[3]
                                  ["threads"]])
        self.assertError(self.srv.request("DELETE", "/api/v1/agent/threads/" + thread, token=BOB), 404)
        st, _, _, deleted = self.srv.request("DELETE", "/api/v1/agent/threads/" + thread)
        self.assertEqual((st, deleted), (200, {"id": thread, "deleted": True}))
        self.assertNotIn(thread, [t["id"] for t in self.srv.request("GET", "/api/v1/agent/threads")[3]["threads"]])
        self.assertError(self.srv.request("GET", "/api/v1/agent/runs/%s/history" % thread), 404)
        self.assertError(self.srv.request("DELETE", "/api/v1/agent/threads/" + thread), 404)
        # A start on it is refused by the runtime (the server does not read the thread first): the same 404, by the
        # client's id, streamed or not; a resume or a tool answer is checked before anything else.
        answers = [self.srv.request("POST", "/api/v1/agent/runs", run_input(thread, "back?")),
                   self.srv.request("POST", "/api/v1/agent/runs", run_input(thread, "back?"),
                                    headers={"Accept": "application/json"}),
                   self.srv.request("POST", "/api/v1/agent/runs", dict(run_input(thread, "back?"),
                                                                       resume=[{"interruptId": "x", "status": "resolved"}])),
                   self.srv.request("POST", "/api/v1/agent/runs", dict(run_input(thread, "back?"), messages=[
                       {"id": new_id("m"), "role": "tool", "toolCallId": "call_1", "content": "{}"}]))]
        for answer in answers:
            self.assertError(answer, 404, "not_found")
            self.assertEqual(answer[3]["error"]["message"], "thread %s not found" % thread)

    def test_ids_in_paths_may_be_percent_encoded(self):
        # encodeURIComponent (the web page's, most clients') writes ':' as %3A: the path segment is decoded.
        thread = new_id("t") + ":team"
        self.assertEqual(self.srv.run(run_input(thread, "hello"))[0], 200)
        enc = urllib.parse.quote(thread, safe="")
        self.assertIn("%3A", enc)
        st, _, _, hist = self.srv.request("GET", "/api/v1/agent/runs/%s/history" % enc)
        self.assertEqual((st, hist["threadId"]), (200, thread))
        st, _, _, jobs = self.srv.request("GET", "/api/v1/agent/threads/%s/jobs" % enc)
        self.assertEqual((st, jobs), (200, {"threadId": thread, "jobs": []}))
        self.assertEqual([f[1]["type"] for f in self.srv.thread_events(enc)][0], "RUN_STARTED")
        # A decoded '/' or '+' is not an id character: 422, never another path.
        self.assertError(self.srv.request("GET", "/api/v1/agent/runs/a%2Fb/history"), 422, "invalid_argument")
        self.assertError(self.srv.request("GET", "/api/v1/agent/runs/a+b/history"), 422, "invalid_argument")
        st, _, _, deleted = self.srv.request("DELETE", "/api/v1/agent/threads/" + enc)
        self.assertEqual((st, deleted), (200, {"id": thread, "deleted": True}))

    def test_history_returns_tool_ui(self):
        thread = new_id("t")
        inp, interrupts = self.pause_for_approval(thread)
        self.srv.run(run_input(thread, None, messages=inp["messages"],
                               resume=[{"interruptId": interrupts[0]["id"], "status": "resolved"}]))
        _, _, _, hist = self.srv.request("GET", "/api/v1/agent/runs/%s/history" % thread)
        roles = [m["role"] for m in hist["messages"]]
        self.assertEqual(roles, ["user", "assistant", "tool", "assistant"])
        tool = hist["messages"][2]
        self.assertEqual(tool["metadata"]["ui"]["type"], "booking_confirmation")
        self.assertEqual(tool["toolCallId"], interrupts[0]["toolCallId"])

    # ------------------------------------------------------------------ cancel

    def test_cancel_a_waiting_turn_and_without_a_turn(self):
        thread = new_id("t")
        self.pause_for_approval(thread)
        path = "/api/v1/agent/runs/%s/cancel" % thread
        self.assertError(self.srv.request("POST", path, token=BOB), 404)
        st, _, _, body = self.srv.request("POST", path)
        self.assertEqual((st, body["status"]), (202, "accepted"))
        last = self.srv.thread_events(thread)[-1][1]
        self.assertEqual(last["type"], "RUN_FINISHED")
        self.assertEqual(last["outcome"], {"type": "cancelled"})
        self.assertError(self.srv.request("POST", path), 409, "no_active_turn")
        # The thread takes new input again.
        self.assertEqual(self.srv.run(run_input(thread, "hello"))[0], 200)

    # ------------------------------------------------------------------ auth and ownership

    def test_every_endpoint_needs_a_token(self):
        t = new_id("t")
        for method, path in [("POST", "/api/v1/agent/runs"), ("GET", "/api/v1/agent/runs/%s/events" % t),
                             ("POST", "/api/v1/agent/runs/%s/resume" % t), ("POST", "/api/v1/agent/runs/%s/cancel" % t),
                             ("GET", "/api/v1/agent/runs/%s/history" % t), ("GET", "/api/v1/agent/threads"),
                             ("DELETE", "/api/v1/agent/threads/" + t), ("POST", "/api/v1/agent/uploads?threadId=" + t),
                             ("POST", "/api/v1/asr/transcriptions"), ("GET", "/api/v1/agent/jobs/job_x"),
                             ("POST", "/api/v1/agent/jobs/job_x/cancel"), ("GET", "/api/v1/agent/threads/%s/jobs" % t),
                             ("GET", "/api/v1/agent/threads/%s/spend" % t), ("GET", "/api/v1/agent/spend")]:
            with self.subTest(path=path):
                r = self.srv.request(method, path, b"{}", token=None)
                self.assertError(r, 401, "unauthorized")
                self.assertEqual(r[1].get("www-authenticate"), "Bearer")
                self.assertError(self.srv.request(method, path, b"{}", token="tok-nobody-000"), 401)

    def test_another_users_thread_is_not_found(self):
        thread = new_id("t")
        self.srv.run(run_input(thread, "hello"))
        for method, path in [("GET", "/api/v1/agent/runs/%s/events" % thread),
                             ("GET", "/api/v1/agent/runs/%s/history" % thread),
                             ("POST", "/api/v1/agent/runs/%s/cancel" % thread),
                             ("DELETE", "/api/v1/agent/threads/" + thread)]:
            with self.subTest(path=path):
                self.assertError(self.srv.request(method, path, token=BOB), 404, "not_found")
        # Thread ids live in per-user namespaces: bob's start under the same id is a thread of his own, and
        # neither ever sees the other's.
        status, frames, _ = self.srv.run(run_input(thread, "mine now"), token=BOB)
        self.assertEqual(status, 200, frames)
        self.assertEqual(frames[0][1]["threadId"], thread)
        self.assertEqual(self.srv.request("POST", "/api/v1/agent/uploads?threadId=" + thread, PNG, token=BOB,
                                          content_type="image/png")[0], 201)
        _, _, _, bob_hist = self.srv.request("GET", "/api/v1/agent/runs/%s/history" % thread, token=BOB)
        self.assertEqual([m.get("content") for m in bob_hist["messages"] if m["role"] == "user"], ["mine now"])
        # ... and alice's thread is untouched.
        st, _, _, hist = self.srv.request("GET", "/api/v1/agent/runs/%s/history" % thread)
        self.assertEqual(st, 200)
        self.assertEqual([m.get("content") for m in hist["messages"] if m["role"] == "user"], ["hello"])

    def test_only_strings_equal_to_the_runtime_thread_id_are_translated(self):
        """Events and history carry the client's thread id: every JSON string equal to the runtime's name of the
        thread (the user's namespace prefix, then the client's id) is written as the client's id; text that only
        contains it, or an escaped look-alike, is left as it was written."""
        import hashlib
        thread = new_id("t")
        internal = "u" + hashlib.sha256(b"agentrt-server thread namespace\nalice").hexdigest()[:12] + "." + thread
        status, frames, _ = self.srv.run(run_input(thread, internal))
        self.assertEqual(status, 200, frames)
        self.assertEqual(frames[0][1]["type"], "RUN_STARTED")
        self.assertEqual(frames[0][1]["threadId"], thread)
        self.assertEqual(frames[0][1]["metadata"]["agentrt"]["message"]["content"], thread)
        self.assertEqual(frames[-1][1]["threadId"], thread)
        kept = '"%s and %sx, "%s"' % (internal, internal, internal)  # a quote, then the id: a look-alike in JSON
        status, frames, _ = self.srv.run(run_input(thread, kept))
        self.assertEqual(status, 200, frames)
        self.assertEqual(frames[0][1]["metadata"]["agentrt"]["message"]["content"], kept)
        said = "".join(e.get("delta", "") for _, e in frames if e["type"] == "TEXT_MESSAGE_CONTENT")
        self.assertIn(kept, said)
        self.assertEqual([e["type"] for _, e in frames][-1], "RUN_FINISHED")
        _, _, _, hist = self.srv.request("GET", "/api/v1/agent/runs/%s/history" % thread)
        self.assertEqual([m.get("content") for m in hist["messages"] if m["role"] == "user"], [thread, kept])
        for _, e in self.srv.thread_events(thread):
            self.assertNotEqual(e.get("threadId", thread), internal)

    def test_unknown_endpoint_is_a_json_404(self):
        self.assertError(self.srv.request("GET", "/api/v1/nothing/here"), 404, "not_found")

    def test_a_path_under_a_method_it_does_not_take_is_405_with_allow(self):
        for method, path, allow in (("GET", "/api/v1/agent/runs", "POST"),
                                    ("PUT", "/api/v1/agent/threads", "GET, HEAD"),
                                    ("POST", "/api/v1/agent/runs/t/history", "GET, HEAD"),
                                    ("GET", "/api/v1/agent/threads/t", "DELETE"),
                                    ("DELETE", "/api/v1/agent/jobs/j", "GET, HEAD"),
                                    ("TRACE", "/api/v1/health", "GET, HEAD")):
            result = self.srv.request(method, path)
            self.assertError(result, 405, "method_not_allowed")
            self.assertEqual(result[1]["allow"], allow, (method, path))
        # A path no method takes stays 404, whatever the method.
        self.assertError(self.srv.request("DELETE", "/api/v1/nothing"), 404, "not_found")

    # ------------------------------------------------------------------ uploads and objects

    def test_upload_serve_and_use_in_a_turn(self):
        thread = new_id("t")
        st, _, _, up = self.srv.request("POST", "/api/v1/agent/uploads?threadId=" + thread, PNG,
                                        content_type="image/png")
        self.assertEqual(st, 201, up)
        self.assertEqual((up["mimeType"], up["size"]), ("image/png", len(PNG)))
        url = urllib.parse.urlsplit(up["url"])
        self.assertEqual(url.netloc, "127.0.0.1:%d" % self.srv.port)
        path = url.path + "?" + url.query
        st, hdrs, data, _ = self.srv.request("GET", path, token=None)  # the signature is the credential
        self.assertEqual((st, data, hdrs["content-type"]), (200, PNG, "image/png"))
        self.assertEqual(self.srv.request("GET", path, token=ALICE)[0], 200)
        self.assertError(self.srv.request("GET", path, token=BOB), 404)
        tampered = path[:-1] + ("0" if path[-1] != "0" else "1")
        self.assertError(self.srv.request("GET", tampered, token=None), 401, "invalid_signature")
        self.assertError(self.srv.request("GET", url.path, token=None), 401)
        other_key = path.replace("/uploads/", "/uploads/x")
        self.assertError(self.srv.request("GET", other_key, token=None), 401)

        # The upload in a message: accepted in its own thread, refused in another.
        msg = {"id": new_id("m"), "role": "user", "content": [{"type": "text", "text": "what is this?"}, up["part"]]}
        other = new_id("t")
        self.assertError(self.srv.request("POST", "/api/v1/agent/runs", run_input(other, None, messages=[msg])), 422,
                         "invalid_argument")
        status, frames, _ = self.srv.run(run_input(thread, None, messages=[msg]))
        self.assertEqual(status, 200, frames)
        self.assertEqual(frames[-1][1]["type"], "RUN_FINISHED")
        _, _, _, hist = self.srv.request("GET", "/api/v1/agent/runs/%s/history" % thread)
        part = hist["messages"][0]["content"][1]
        self.assertEqual(part["type"], "image")
        self.assertEqual(part["source"]["type"], "url")
        signed = urllib.parse.urlsplit(part["source"]["value"])
        st, _, data, _ = self.srv.request("GET", signed.path + "?" + signed.query, token=None)
        self.assertEqual((st, data), (200, PNG))
        # The upload id as a file source works too; another thread's id does not.
        by_id = {"id": new_id("m"), "role": "user", "content": [
            {"type": "text", "text": "again"}, {"type": "image", "source": {"type": "file", "value": up["id"]}}]}
        self.assertEqual(self.srv.run(run_input(thread, None, messages=[by_id]))[0], 200)
        self.assertError(self.srv.request("POST", "/api/v1/agent/runs", run_input(new_id("t"), None, messages=[by_id])),
                         422)

    def test_upload_errors(self):
        thread = new_id("t")
        up = "/api/v1/agent/uploads"
        self.assertError(self.srv.request("POST", up, PNG, content_type="image/png"), 400, "missing_thread")
        self.assertError(self.srv.request("POST", up + "?threadId=a/b", PNG, content_type="image/png"), 422)
        self.assertError(self.srv.request("POST", up + "?threadId=" + thread, b"<html>", content_type="text/html"),
                         422, "unsupported_media_type")

    # ------------------------------------------------------------------ ASR without configuration

    def test_transcription_without_asr_config_is_501(self):
        self.assertError(self.srv.request("POST", "/api/v1/asr/transcriptions", b"RIFF....", content_type="audio/wav"),
                         501, "unsupported")


class SpendTest(unittest.TestCase):
    def test_spend_of_a_thread_and_of_the_caller_and_a_thread_budget(self):
        # A demo turn makes two model calls (intent, answer): a thread may have one turn and one more call.
        with Server(config={"runtime": {"budgets": {"thread": {"model_calls": 3}},
                                        "prices": {"demo": {"input": 1, "output": 2}}}}) as srv:
            self.assertEqual(srv.request("GET", "/api/v1/agent/spend", token=BOB)[3]["modelCalls"], 0)
            thread = new_id("t")
            status, frames, _ = srv.run(run_input(thread, "hello"))
            self.assertEqual((status, frames[-1][1]["type"]), (200, "RUN_FINISHED"))
            st, _, _, spend = srv.request("GET", "/api/v1/agent/threads/%s/spend" % thread)
            self.assertEqual(st, 200, spend)
            self.assertEqual((spend["threadId"], spend["modelCalls"], spend["toolCalls"]), (thread, 2, 0))
            self.assertEqual(sorted(spend), ["cost", "inputTokens", "modelCalls", "outputTokens", "threadId",
                                             "toolCalls", "usage"])
            status, frames, _ = srv.run(run_input(thread, "hello again"))
            last = frames[-1][1]
            self.assertEqual((last["type"], last["code"]), ("RUN_ERROR", "budget_exceeded"))
            self.assertEqual(last["message"], "budget exceeded: thread.model_calls is 3, and this would make 4 model calls")
            self.assertEqual(srv.request("GET", "/api/v1/agent/threads/%s/spend" % thread)[3]["modelCalls"], 3)
            mine = srv.request("GET", "/api/v1/agent/spend")[3]
            self.assertEqual(mine["modelCalls"], 3)
            self.assertNotIn("threadId", mine)
            # Another user's thread answers as an unknown one; their own spend is theirs.
            st, _, _, err = srv.request("GET", "/api/v1/agent/threads/%s/spend" % thread, token=BOB)
            self.assertEqual((st, err["error"]["code"]), (404, "not_found"))
            st, _, _, err = srv.request("GET", "/api/v1/agent/threads/%s/spend" % new_id("t"))
            self.assertEqual((st, err["error"]["code"]), (404, "not_found"))
            self.assertEqual(srv.request("GET", "/api/v1/agent/spend", token=BOB)[3]["modelCalls"], 0)


class RepeatedStartTest(ServerCase):
    """A repeated start (same AG-UI message id) never runs again; asked for JSON it answers with the turn's
    deltaMessages instead of the replayed stream."""

    def post_json(self, body, accept="application/json"):
        return self.srv.request("POST", "/api/v1/agent/runs", body, headers={"Accept": accept})

    def test_repeated_start_with_accept_json_returns_the_delta_messages(self):
        thread = new_id("t")
        inp = run_input(thread, "hello", message_id=new_id("m"))
        status, frames, _ = self.srv.run(inp)
        self.assertEqual(status, 200)
        st, hdrs, _, body = self.post_json(inp)
        self.assertEqual(st, 200, body)
        self.assertTrue(hdrs["content-type"].startswith("application/json"))
        self.assertEqual((body["threadId"], body["runId"], body["existing"], body["status"]),
                         (thread, inp["runId"], True, "COMPLETED"))
        self.assertTrue(body["turnId"])
        delta = body["deltaMessages"]
        self.assertEqual([m["role"] for m in delta], ["user", "assistant"])
        self.assertEqual(delta[0]["id"], inp["messages"][0]["id"])
        self.assertEqual(delta[0]["content"], "hello")
        self.assertIn('You said: "hello"', delta[1]["content"])
        # The same message under another run id: the same answer (the SSE form refuses it with 409).
        st, _, _, again = self.post_json(dict(inp, runId=new_id("run")))
        self.assertEqual((st, again), (200, body))
        # q values decide; the stream stays the answer for AG-UI clients and for anything unclear.
        st, _, _, pref = self.post_json(inp, "text/event-stream;q=0.5, application/json")
        self.assertEqual((st, pref), (200, body))
        status, replay, _ = self.srv.run(inp)
        self.assertEqual((status, replay), (200, frames))
        s = self.srv.open_stream("POST", "/api/v1/agent/runs", inp,
                                 headers={"Accept": "application/json;q=0.2, text/event-stream"})
        self.assertEqual(s.headers["content-type"], "text/event-stream")
        s.close()
        # Nothing ran again.
        all_types = types(self.srv.thread_events(thread))
        self.assertEqual(all_types.count("RUN_STARTED"), 1)
        _, _, _, hist = self.srv.request("GET", "/api/v1/agent/runs/%s/history" % thread)
        self.assertEqual(len(hist["messages"]), 2)

    def test_repeat_of_a_paused_turn_and_a_new_start_in_json(self):
        thread = new_id("t")
        inp = run_input(thread, "please book a room", message_id=new_id("m"))
        self.assertEqual(self.srv.run(inp)[0], 200)
        st, _, _, body = self.post_json(inp)
        self.assertEqual(st, 200, body)
        self.assertEqual((body["existing"], body["status"]), (True, "WAITING_APPROVAL"))
        self.assertEqual([m["role"] for m in body["deltaMessages"]], ["user", "assistant"])
        self.assertEqual(body["deltaMessages"][1]["toolCalls"][0]["function"]["name"], "book_room")
        # A new start asked for JSON is started and not streamed: follow it on /events.
        other = new_id("t")
        fresh = run_input(other, "hello")
        st, _, _, started = self.post_json(fresh)
        self.assertEqual(st, 202, started)
        self.assertEqual((started["threadId"], started["runId"], started["existing"]), (other, fresh["runId"], False))
        frames = self.srv.thread_events(other, after=started["firstSeq"] - 1)
        self.assertEqual(squeeze(types(frames)), RUN_A)
        self.assertEqual(frames[0][1]["runId"], fresh["runId"])
        # Validation is the same as for the stream; another user's repeat is a start in their own namespace.
        st, _, _, bobs = self.srv.request("POST", "/api/v1/agent/runs", inp, token=BOB,
                                          headers={"Accept": "application/json"})
        self.assertEqual((st, bobs["existing"], bobs["threadId"]), (202, False, thread), bobs)
        self.assertEqual(self.post_json({"threadId": thread})[0], 422)


class JobsTest(unittest.TestCase):
    """External jobs over HTTP, with the opt-in demo job tool: "render <scene>" calls render_preview, which
    starts a job that the server finishes --demo-jobs ms later."""

    def render(self, srv, thread, text="render the beach", token=ALICE):
        status, frames, _ = srv.run(run_input(thread, text), token)
        self.assertEqual(status, 200, frames)
        jobs = [e["value"] for _, e in frames if e["type"] == "CUSTOM" and e["name"] == "agentrt.job"]
        self.assertEqual(len(jobs), 1, types(frames))
        return jobs[0], frames

    def assert_not_found(self, result, job_or_thread_id):
        st, _, _, body = result
        self.assertEqual(st, 404, body)
        self.assertEqual(body["error"]["code"], "not_found")
        self.assertIn(job_or_thread_id, body["error"]["message"])
        return body

    def test_a_job_runs_finishes_and_is_delivered_as_a_run_of_its_own(self):
        with Server("--demo-jobs", "400") as srv:
            thread = new_id("t")
            job, frames = self.render(srv, thread)
            self.assertEqual((job["status"], job["toolName"], job["message"]), ("running", "render_preview",
                                                                               "rendering the beach"))
            result = [e for _, e in frames if e["type"] == "TOOL_CALL_RESULT"]
            self.assertEqual(len(result), 1)
            self.assertTrue(result[0]["content"].startswith("Started job " + job["id"]), result[0])
            self.assertEqual(job["toolCallId"], result[0]["toolCallId"])
            self.assertEqual(frames[-1][1]["outcome"], {"type": "success"})  # the turn did not wait

            path = "/api/v1/agent/jobs/" + job["id"]
            done = wait_for(lambda: (lambda r: r[3] if r[3].get("delivered") else None)(srv.request("GET", path)))
            self.assertTrue(done, srv.request("GET", path))
            self.assertEqual((done["status"], done["progress"], done["threadId"], done["userId"]),
                             ("succeeded", 1, thread, "alice"))
            self.assertEqual(done["result"]["scene"], "the beach")
            self.assertEqual(done["assets"], [{"key": "renders/%s.png" % job["id"], "mimeType": "image/png"}])
            self.assertIn("finishedAt", done)

            # The delivery: a run of its own after the turn's, against the original tool call.
            events = srv.thread_events(thread)
            delivery = events[len(frames):]
            self.assertEqual(types(delivery), ["RUN_STARTED", "TOOL_CALL_RESULT", "CUSTOM", "RUN_FINISHED"])
            self.assertEqual(delivery[1][1]["toolCallId"], job["toolCallId"])
            self.assertIn("succeeded", delivery[1][1]["content"])
            self.assertEqual((delivery[2][1]["name"], delivery[2][1]["value"]["status"]), ("agentrt.job", "succeeded"))
            self.assertEqual(delivery[0][1]["runId"], delivery[3][1]["runId"])
            self.assertEqual(delivery[3][1]["outcome"], {"type": "success"})
            _, _, _, hist = srv.request("GET", "/api/v1/agent/runs/%s/history" % thread)
            last = hist["messages"][-1]
            self.assertEqual((last["role"], last["toolCallId"], last["metadata"]["job_id"]),
                             ("tool", job["toolCallId"], job["id"]))

            # The thread's jobs; a finished job cannot be cancelled.
            st, _, _, listing = srv.request("GET", "/api/v1/agent/threads/%s/jobs" % thread)
            self.assertEqual(st, 200, listing)
            self.assertEqual(listing["threadId"], thread)
            self.assertEqual([j["id"] for j in listing["jobs"]], [job["id"]])
            self.assertEqual(listing["jobs"][0], done)
            st, _, _, err = srv.request("POST", path + "/cancel")
            self.assertEqual((st, err["error"]["code"]), (409, "invalid_state"))
            self.assertIn("already succeeded", err["error"]["message"])
            self.assertEqual(srv.request("GET", path)[3], done)

            # Another user's job and thread answer exactly like unknown ones.
            bob = self.assert_not_found(srv.request("GET", path, token=BOB), job["id"])
            self.assertEqual(bob, {"error": {"code": "not_found", "message": "job %s not found" % job["id"]}})
            self.assertEqual(self.assert_not_found(srv.request("GET", "/api/v1/agent/jobs/job_nope"), "job_nope"),
                             {"error": {"code": "not_found", "message": "job job_nope not found"}})
            self.assert_not_found(srv.request("POST", path + "/cancel", token=BOB), job["id"])
            self.assert_not_found(srv.request("GET", "/api/v1/agent/threads/%s/jobs" % thread, token=BOB), thread)
            self.assert_not_found(srv.request("GET", "/api/v1/agent/threads/%s/jobs" % new_id("t")), "")
            # ... and a deleted thread's jobs are gone with it.
            self.assertEqual(srv.request("DELETE", "/api/v1/agent/threads/" + thread)[0], 200)
            self.assert_not_found(srv.request("GET", path), job["id"])

    def test_cancelling_a_running_job(self):
        with Server("--demo-jobs", "60000") as srv:
            thread = new_id("t")
            job, frames = self.render(srv, thread, "render a sunset")
            path = "/api/v1/agent/jobs/" + job["id"]
            st, _, _, got = srv.request("GET", path)
            self.assertEqual((st, got["status"], got["delivered"]), (200, "running", False))
            self.assertEqual(got["metadata"]["scene"], "a sunset")
            self.assertGreater(got["expiresAt"], got["createdAt"])
            st, _, _, listing = srv.request("GET", "/api/v1/agent/threads/%s/jobs" % thread)
            self.assertEqual([j["status"] for j in listing["jobs"]], ["running"])

            for bad, status in [("[", 400), ({"reason": 5}, 422), ([1], 422)]:
                with self.subTest(body=bad):
                    r = srv.request("POST", path + "/cancel", bad, content_type="application/json")
                    self.assertEqual(r[0], status, r[3])
            self.assertEqual(srv.request("POST", path + "/cancel", token=None)[0], 401)
            self.assertEqual(srv.request("GET", path, token=None)[0], 401)
            self.assertEqual(srv.request("GET", "/api/v1/agent/jobs/" + "j" * 200)[0], 422)
            self.assertEqual(srv.request("GET", "/api/v1/agent/jobs/bad%20id")[0], 422)
            self.assertEqual(srv.request("GET", path)[3]["status"], "running")  # none of that touched it

            st, _, _, cancelled = srv.request("POST", path + "/cancel", {"reason": "changed my mind"})
            self.assertEqual(st, 200, cancelled)
            self.assertEqual((cancelled["id"], cancelled["status"]), (job["id"], "cancelled"))
            self.assertEqual(cancelled["error"], {"code": "cancelled", "message": "changed my mind"})
            self.assertTrue(cancelled["delivered"])
            self.assertEqual(srv.request("GET", path)[3], cancelled)
            st, _, _, again = srv.request("POST", path + "/cancel")  # harmless: the same record
            self.assertEqual((st, again), (200, cancelled))
            events = srv.thread_events(thread)
            self.assertEqual(types(events[len(frames):]), ["RUN_STARTED", "TOOL_CALL_RESULT", "CUSTOM", "RUN_FINISHED"])
            self.assertEqual(events[-2][1]["value"]["status"], "cancelled")
            self.assertIn("changed my mind", events[-3][1]["content"])

    def test_a_job_that_asks_for_confirmation_is_answered_through_resume(self):
        with Server("--demo-jobs", "60000") as srv:
            thread = new_id("t")
            inp = run_input(thread, "render the moon confirm")
            status, frames, _ = srv.run(inp)
            self.assertEqual(status, 200, frames)
            fin = frames[-1][1]
            self.assertEqual(fin["outcome"]["type"], "interrupt")
            intr = fin["outcome"]["interrupts"][0]
            self.assertEqual((intr["reason"], intr["metadata"]["toolName"]), ("confirmation", "render_preview"))
            job_id = intr["metadata"]["jobId"]
            path = "/api/v1/agent/jobs/" + job_id
            st, _, _, job = srv.request("GET", path)
            self.assertEqual((st, job["status"], job["confirmation"]), (200, "queued", "pending"))
            self.assertIn("the moon", job["confirmMessage"])
            st, _, _, err = srv.request("POST", path + "/cancel")
            self.assertEqual((st, err["error"]["code"]), (409, "invalid_state"))  # the person decides first
            resume = run_input(thread, None, messages=inp["messages"],
                               resume=[{"interruptId": intr["id"], "status": "resolved"}])
            status, cont, _ = srv.run(resume)
            self.assertEqual(status, 200, cont)
            results = [e for _, e in cont if e["type"] == "TOOL_CALL_RESULT"]
            self.assertEqual(len(results), 1)
            self.assertTrue(results[0]["content"].startswith("Started job " + job_id))
            st, _, _, job = srv.request("GET", path)
            self.assertEqual((job["status"], job["confirmation"]), ("running", "confirmed"))
            self.assertEqual(srv.request("POST", path + "/cancel")[3]["status"], "cancelled")


class DocumentLayoutTest(unittest.TestCase):
    """The conversation-document layout: a thread's messages in one object, under a size cap."""

    def test_a_thread_whose_document_would_pass_the_cap_is_413(self):
        config = {"runtime": {"store": {"layout": "document", "document_max_bytes": 6000}}}
        with Server(config=config) as srv:
            thread = new_id("t")
            self.assertEqual(srv.run(run_input(thread, "hello"))[0], 200)
            st, _, _, err = srv.request("POST", "/api/v1/agent/runs", run_input(thread, "x" * 7000))
            self.assertEqual((st, err["error"]["code"]), (413, "too_large"), err)
            self.assertIn("6000", err["error"]["message"])
            _, _, _, hist = srv.request("GET", "/api/v1/agent/runs/%s/history" % thread)
            self.assertEqual(len(hist["messages"]), 2)  # nothing of the refused message was kept
            self.assertEqual(srv.run(run_input(thread, "still fine"))[0], 200)

    def test_a_document_already_over_a_lowered_cap_is_413_on_read_and_write(self):
        import shutil
        import tempfile
        data = tempfile.mkdtemp(prefix="agentrt-doc-test-")
        try:
            thread = new_id("t")
            config = {"runtime": {"store": {"layout": "document", "document_max_bytes": 100000}}}
            with Server("--data", data, config=config) as srv:
                self.assertEqual(srv.run(run_input(thread, "y" * 5000))[0], 200)
                self.assertEqual(srv.request("GET", "/api/v1/agent/runs/%s/history" % thread)[0], 200)
            config["runtime"]["store"]["document_max_bytes"] = 3000
            with Server("--data", data, config=config) as srv:
                st, _, _, err = srv.request("GET", "/api/v1/agent/runs/%s/history" % thread)
                self.assertEqual((st, err["error"]["code"]), (413, "too_large"), err)
                st, _, _, err = srv.request("POST", "/api/v1/agent/runs", run_input(thread, "more"))
                self.assertEqual((st, err["error"]["code"]), (413, "too_large"), err)
                self.assertEqual(srv.request("GET", "/api/v1/agent/runs/%s/history" % thread, token=BOB)[0], 404)
        finally:
            shutil.rmtree(data, ignore_errors=True)


class SlowServerTest(ServerCase):
    """The demo model pauses before each streamed chunk: runs last long enough to interrupt them."""

    server_flags = ("--demo-delay-ms", "25")

    def test_starts_racing_on_one_thread_one_runs_and_the_others_are_409_before_any_stream(self):
        # A streamed start is stored with its run's first commit: starts that pass the active-turn check together
        # are told apart by the store, and each one it refuses is answered 409 (JSON), never a stream.
        thread = new_id("t")
        barrier = threading.Barrier(4)

        def post(i):
            barrier.wait()
            return self.srv.run(run_input(thread, "race %d: tell me something long" % i))

        with concurrent.futures.ThreadPoolExecutor(4) as ex:
            results = list(ex.map(post, range(4)))
        statuses = [r[0] for r in results]
        self.assertEqual(statuses.count(200), 1, statuses)
        for st, body, _ in results:
            if st != 200:
                self.assertEqual((st, body["error"]["code"]), (409, "conflict"), body)
        events = next(r[1] for r in results if r[0] == 200)
        self.assertEqual(events[0][1]["type"], "RUN_STARTED")
        self.assertEqual(events[-1][1]["type"], "RUN_FINISHED")
        _, _, _, hist = self.srv.request("GET", "/api/v1/agent/runs/%s/history" % thread)
        self.assertEqual([m["role"] for m in hist["messages"]], ["user", "assistant"])

    def test_reconnect_with_last_event_id_mid_answer_misses_nothing_and_repeats_nothing(self):
        thread = new_id("t")
        inp = run_input(thread, "tell me something long enough to stream in many chunks")
        s = self.srv.open_stream("POST", "/api/v1/agent/runs", inp)
        first = s.read_events(until=lambda f: f[1]["type"] == "TEXT_MESSAGE_CONTENT" and len(s.frames) >= 8)
        self.assertEqual(first[-1][1]["type"], "TEXT_MESSAGE_CONTENT")
        s.abort()  # mid-answer
        last_id = first[-1][0]
        r = self.srv.open_stream("GET", "/api/v1/agent/runs/%s/events" % thread, headers={"Last-Event-ID": str(last_id)})
        self.assertEqual(r.status, 200)
        rest = r.read_events()
        r.close()
        self.assertEqual(rest[0][0], last_id + 1)
        self.assertEqual(rest[-1][1]["type"], "RUN_FINISHED")
        joined = first + rest
        self.assertEqual([i for i, _ in joined], list(range(1, len(joined) + 1)))
        self.assertEqual(joined, self.srv.thread_events(thread))
        self.assertEqual(squeeze(types(joined)), RUN_A)

    def test_client_disconnect_does_not_stop_the_turn(self):
        thread = new_id("t")
        self.assertTrue(wait_for(lambda: self.srv.health()["streams"] == 0))  # earlier tests' streams are gone
        s = self.srv.open_stream("POST", "/api/v1/agent/runs", run_input(thread, "hello there, slowly"))
        s.read_events(until=lambda f: f[1]["type"] == "RUN_STARTED")
        self.assertEqual(self.srv.health()["streams"], 1)
        s.abort()
        frames = self.srv.thread_events(thread)
        self.assertEqual(squeeze(types(frames)), RUN_A)
        self.assertEqual(frames[-1][1]["outcome"], {"type": "success"})
        # The abandoned stream's provider noticed and ended.
        self.assertTrue(wait_for(lambda: self.srv.health()["streams"] == 0, timeout=10), self.srv.health())
        _, _, _, hist = self.srv.request("GET", "/api/v1/agent/runs/%s/history" % thread)
        self.assertEqual([m["role"] for m in hist["messages"]], ["user", "assistant"])

    def test_second_run_on_a_busy_thread_is_409_and_cancel_stops_the_run(self):
        thread = new_id("t")
        s = self.srv.open_stream("POST", "/api/v1/agent/runs", run_input(thread, "a long answer please"))
        s.read_events(until=lambda f: f[1]["type"] == "TEXT_MESSAGE_CONTENT")
        st, _, _, err = self.srv.request("POST", "/api/v1/agent/runs", run_input(thread, "me too"))
        self.assertEqual((st, err["error"]["code"]), (409, "conflict"))
        st, _, _, body = self.srv.request("POST", "/api/v1/agent/runs/%s/cancel" % thread)
        self.assertEqual(st, 202, body)
        rest = s.read_events()
        s.close()
        self.assertEqual(rest[-1][1]["type"], "RUN_FINISHED")
        self.assertEqual(rest[-1][1]["outcome"], {"type": "cancelled"})


class CancelOnDisconnectTest(unittest.TestCase):
    """Opt-in: a client that closes its run's stream before the run's end stops the run (AG-UI front ends abort the
    request to stop); the run ends RUN_FINISHED {outcome: cancelled}. A paused or finished run is left alone."""

    def aborted_run(self, srv, thread, forwarded=None):
        inp = run_input(thread, "a long answer, slowly please")
        if forwarded is not None:
            inp["forwardedProps"] = forwarded
        s = srv.open_stream("POST", "/api/v1/agent/runs", inp)
        self.assertEqual(s.status, 200)
        s.read_events(until=lambda f: f[1]["type"] == "TEXT_MESSAGE_CONTENT")
        s.abort()
        return srv.thread_events(thread)  # until the thread is idle

    def test_forwarded_props_ask_for_it_per_request_and_the_config_for_every_request(self):
        with Server("--demo-delay-ms", "25") as srv:
            frames = self.aborted_run(srv, new_id("t"), {"cancelOnDisconnect": True})
            self.assertEqual(frames[-1][1]["type"], "RUN_FINISHED")
            self.assertEqual(frames[-1][1]["outcome"], {"type": "cancelled"})
            # Off by default: the run goes on to its answer.
            frames = self.aborted_run(srv, new_id("t"))
            self.assertEqual(frames[-1][1]["outcome"], {"type": "success"})
            self.assertEqual(squeeze(types(frames)), RUN_A)
            # A value that is not a boolean is refused before anything runs.
            inp = run_input(new_id("t"), "hi")
            inp["forwardedProps"] = {"cancelOnDisconnect": "yes"}
            st, _, _, err = srv.request("POST", "/api/v1/agent/runs", inp)
            self.assertEqual((st, err["error"]["message"]),
                             (422, "RunAgentInput: forwardedProps.cancelOnDisconnect must be a boolean"))
        with Server("--demo-delay-ms", "25", config={"cancel_on_disconnect": True}) as srv:
            frames = self.aborted_run(srv, new_id("t"))
            self.assertEqual(frames[-1][1]["outcome"], {"type": "cancelled"})
            # A request may still say no.
            frames = self.aborted_run(srv, new_id("t"), {"cancelOnDisconnect": False})
            self.assertEqual(frames[-1][1]["outcome"], {"type": "success"})
        with self.assertRaises(RuntimeError):
            Server(config={"cancel_on_disconnect": "yes"})

    def test_a_client_gone_before_its_start_is_stored_stops_the_run_too(self):
        # The stream opens only once the start is stored (with the run's first commit: the group commit within
        # flush_interval, the model's first chunk being 100 ms away). A client that sent its request and left at
        # once is gone by then: the stream opens on a closed connection, and the run is stopped all the same.
        with Server("--demo-delay-ms", "100") as srv:
            thread = new_id("t")
            inp = run_input(thread, "a long answer, slowly please")
            inp["forwardedProps"] = {"cancelOnDisconnect": True}
            body = json.dumps(inp).encode()
            sock = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            sock.sendall(("POST /api/v1/agent/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
                          "Accept: text/event-stream\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                          % (ALICE, len(body))).encode() + body)
            sock.close()
            deadline = time.monotonic() + 10
            while True:  # the thread exists once the start is stored
                st, _, _, _ = srv.request("GET", "/api/v1/agent/runs/%s/history" % thread)
                if st == 200 or time.monotonic() > deadline:
                    break
                time.sleep(0.01)
            self.assertEqual(st, 200)
            frames = srv.thread_events(thread)  # until the thread is idle
            self.assertEqual(frames[-1][1]["type"], "RUN_FINISHED")
            self.assertEqual(frames[-1][1]["outcome"], {"type": "cancelled"})
            self.assertNotIn("TEXT_MESSAGE_END", types(frames))  # stopped before its answer was whole

    def test_a_client_before_agui_1_0_reads_a_cancelled_run_as_a_plain_end(self):
        # Its RunAgentInput names no protocolVersion: its outcome schema knows no "cancelled" (nor pendingToolCallIds).
        with Server("--demo-delay-ms", "25") as srv:
            thread = new_id("t")
            inp = run_input(thread, "a long answer, slowly please")
            del inp["protocolVersion"]
            s = srv.open_stream("POST", "/api/v1/agent/runs", inp)
            self.assertEqual(s.status, 200)
            s.read_events(until=lambda f: f[1]["type"] == "TEXT_MESSAGE_CONTENT")
            st, _, _, _ = srv.request("POST", "/api/v1/agent/runs/%s/cancel" % thread)
            self.assertEqual(st, 202)
            frames = s.read_events()
            self.assertEqual(frames[-1][1]["type"], "RUN_FINISHED")
            self.assertNotIn("outcome", frames[-1][1])
            # The log keeps the 1.0 form: a 1.0 reader of the thread sees the cancellation.
            self.assertEqual(srv.thread_events(thread)[-1][1]["outcome"], {"type": "cancelled"})

    def test_a_stream_closed_after_its_run_paused_or_ended_stops_nothing(self):
        with Server(config={"cancel_on_disconnect": True}) as srv:
            thread = new_id("t")
            s = srv.open_stream("POST", "/api/v1/agent/runs", run_input(thread, "please book a room"))
            frames = s.read_events()
            s.close()
            self.assertEqual(frames[-1][1]["outcome"]["type"], "interrupt")
            interrupt = frames[-1][1]["outcome"]["interrupts"][0]
            # The pause stays: a resume answers it and the tool runs.
            s = srv.open_stream("POST", "/api/v1/agent/runs", run_input(
                thread, "please book a room", resume=[{"interruptId": interrupt["id"], "status": "resolved"}],
                messages=[]))
            rest = s.read_events()
            s.close()
            self.assertEqual(rest[-1][1]["outcome"], {"type": "success"})
            answer = "".join(f[1]["delta"] for f in rest if f[1]["type"] == "TEXT_MESSAGE_CONTENT")
            self.assertIn("booking is confirmed", answer)


class LimitsTest(unittest.TestCase):
    def test_oversize_bodies_are_413(self):
        with Server("--max-body-bytes", "4096", "--max-upload-bytes", "2048", "--max-audio-bytes", "1024") as srv:
            big = run_input(new_id("t"), "x" * 8000)
            st, _, _, err = srv.request("POST", "/api/v1/agent/runs", big)
            self.assertEqual((st, err["error"]["code"]), (413, "too_large"))
            st, _, _, err = srv.request("POST", "/api/v1/agent/uploads?threadId=" + new_id("t"), b"\0" * 3000,
                                        content_type="image/png")
            self.assertEqual((st, err["error"]["code"]), (413, "too_large"))
            # Over every limit: refused from the declared length, before the body is read; still a JSON error.
            st, hdrs, _, err = srv.request("POST", "/api/v1/agent/uploads?threadId=" + new_id("t"), b"\0" * 400000,
                                           content_type="image/png")
            self.assertEqual((st, err["error"]["code"]), (413, "too_large"))
            # The server is fine afterwards.
            self.assertEqual(srv.run(run_input(new_id("t"), "hello"))[0], 200)

    def test_run_starts_are_rate_limited_per_token(self):
        with Server("--runs-per-minute", "1", "--run-burst", "2") as srv:
            for _ in range(2):
                self.assertEqual(srv.run(run_input(new_id("t"), "hello"))[0], 200)
            st, hdrs, _, err = srv.request("POST", "/api/v1/agent/runs", run_input(new_id("t"), "hello"))
            self.assertEqual((st, err["error"]["code"]), (429, "rate_limited"))
            self.assertGreaterEqual(int(hdrs["retry-after"]), 1)
            self.assertEqual(srv.run(run_input(new_id("t"), "hello"), token=BOB)[0], 200)
            # The same token written another way (the scheme's case, more spaces) is the same bucket.
            st, _, _, err = srv.request("POST", "/api/v1/agent/runs", run_input(new_id("t"), "hello"), token=None,
                                        headers={"Authorization": "bearer   " + ALICE})
            self.assertEqual((st, err["error"]["code"]), (429, "rate_limited"))

    def test_streams_over_the_limit_are_429(self):
        with Server("--max-streams", "1", "--demo-delay-ms", "50") as srv:
            s = srv.open_stream("POST", "/api/v1/agent/runs", run_input(new_id("t"), "slow answer"))
            s.read_events(until=lambda f: f[1]["type"] == "RUN_STARTED")
            st, _, _, err = srv.request("POST", "/api/v1/agent/runs", run_input(new_id("t"), "hello"))
            self.assertEqual((st, err["error"]["code"]), (429, "too_many_streams"))
            self.assertEqual(srv.request("GET", "/api/v1/agent/threads")[0], 200)  # others still served
            s.read_events()
            s.close()
            self.assertTrue(wait_for(lambda: srv.health()["streams"] == 0))
            self.assertEqual(srv.run(run_input(new_id("t"), "hello"))[0], 200)

    def test_signed_urls_expire(self):
        with Server("--signed-url-ttl-ms", "1000") as srv:
            st, _, _, up = srv.request("POST", "/api/v1/agent/uploads?threadId=" + new_id("t"), PNG,
                                       content_type="image/png")
            self.assertEqual(st, 201)
            url = urllib.parse.urlsplit(up["url"])
            self.assertEqual(srv.request("GET", url.path + "?" + url.query, token=None)[0], 200)
            time.sleep(1.2)
            st, _, _, err = srv.request("GET", url.path + "?" + url.query, token=None)
            self.assertEqual((st, err["error"]["code"]), (401, "expired"))


class ConfigFileTest(unittest.TestCase):
    def test_the_example_config_starts_a_server_and_flags_override_it(self):
        import os
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "agentrt-server.example.json")) as f:
            config = json.load(f)
        with Server(config=config) as srv:  # --listen, --data, --token and --model flags win over the file
            self.assertEqual(srv.run(run_input(new_id("t"), "hello"))[0], 200)
            st, _, _, _ = srv.request("GET", "/api/v1/agent/threads", token="change-me-alice-token")
            self.assertEqual(st, 200)
        bad = dict(config, unknown_key=1)
        with self.assertRaises(RuntimeError):
            Server(config=bad)

    def test_an_unknown_log_level_is_refused_naming_the_levels(self):
        for args in (["--log-level", "loud"], ["--log-level", "WARN"]):
            p = subprocess.run([server_binary(), "--listen", "127.0.0.1:0", "--token", ALICE + ":alice"] + args,
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("server config: unknown log level '%s' (expected one of: debug, info, warn, error, off)"
                          % args[1], p.stderr)
        with self.assertRaises(RuntimeError):
            Server(config={"log_level": "chatty"})
        with Server("--log-level", "debug") as srv:  # a known level starts it
            self.assertEqual(srv.health()["streams"], 0)


class CorsTest(unittest.TestCase):
    def test_only_listed_origins_are_allowed_and_every_answer_varies_by_origin(self):
        with Server(config={"cors_origins": ["http://ok.example"]}) as srv:
            pre = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization"}
            st, h, _, _ = srv.request("OPTIONS", "/api/v1/agent/runs", token=None,
                                      headers=dict(pre, Origin="http://ok.example"))
            self.assertEqual((st, h["access-control-allow-origin"], h["vary"]), (204, "http://ok.example", "Origin"))
            self.assertIn("POST", h["access-control-allow-methods"])
            self.assertIn("Authorization", h["access-control-allow-headers"])
            st, h, _, _ = srv.request("GET", "/api/v1/agent/threads", headers={"Origin": "http://ok.example"})
            self.assertEqual((st, h["access-control-allow-origin"], h["vary"]), (200, "http://ok.example", "Origin"))
            self.assertIn("ETag", h["access-control-expose-headers"])
            # Another origin (a longer name that starts alike too, "null"): no grant, and still Vary.
            for origin in ("http://evil.example", "http://ok.example.evil.example", "null"):
                for method, path in (("OPTIONS", "/api/v1/agent/runs"), ("GET", "/api/v1/agent/threads")):
                    st, h, _, _ = srv.request(method, path, token=None if method == "OPTIONS" else ALICE,
                                              headers=dict(pre, Origin=origin))
                    self.assertNotIn("access-control-allow-origin", h, (origin, method))
                    self.assertEqual(h["vary"], "Origin", (origin, method))
            # An error answer carries the grant too (the page must read it).
            st, h, _, err = srv.request("GET", "/api/v1/agent/threads", token=None,
                                        headers={"Origin": "http://ok.example"})
            self.assertEqual((st, err["error"]["code"], h["access-control-allow-origin"]),
                             (401, "unauthorized", "http://ok.example"))
        with Server() as srv:  # without cors_origins: no CORS header at all
            st, h, _, _ = srv.request("GET", "/api/v1/agent/threads", headers={"Origin": "http://ok.example"})
            self.assertEqual(st, 200)
            self.assertFalse([k for k in h if k.startswith("access-control") or k == "vary"], h)


class WebRootTest(unittest.TestCase):
    """web_root: a built page's static files at / (GET, no token), typed, cached and under a content security policy;
    nothing outside the folder, nothing hidden, nothing encoded; the API unchanged."""

    def test_the_page_is_served_from_its_folder_and_nothing_else_is(self):
        import os
        import tempfile
        import shutil
        outside = tempfile.mkdtemp(prefix="agentrt-outside-")
        self.addCleanup(shutil.rmtree, outside, True)
        with open(os.path.join(outside, "secret.txt"), "w") as f:
            f.write("secret")
        root = tempfile.mkdtemp(prefix="agentrt-web-")
        self.addCleanup(shutil.rmtree, root, True)
        os.makedirs(os.path.join(root, "assets"))
        with open(os.path.join(root, "index.html"), "w") as f:
            f.write("<!doctype html><title>agentrt</title>")
        with open(os.path.join(root, "assets", "app-3f2a.js"), "w") as f:
            f.write("console.log(1)")
        with open(os.path.join(root, ".env"), "w") as f:
            f.write("TOKEN=x")
        os.symlink(os.path.join(outside, "secret.txt"), os.path.join(root, "escape.txt"))
        os.symlink(os.path.join(root, "assets", "app-3f2a.js"), os.path.join(root, "inside.js"))
        with Server("--web-root", root) as srv:
            st, h, body, _ = srv.request("GET", "/", token=None)
            self.assertEqual((st, body), (200, b"<!doctype html><title>agentrt</title>"))
            self.assertEqual(h["content-type"], "text/html; charset=utf-8")
            self.assertEqual(h["cache-control"], "no-cache")
            self.assertIn("default-src 'self'", h["content-security-policy"])
            self.assertIn("frame-ancestors 'none'", h["content-security-policy"])
            self.assertEqual(h["x-content-type-options"], "nosniff")
            st, h, body, _ = srv.request("GET", "/assets/app-3f2a.js", token=None)
            self.assertEqual((st, body, h["content-type"]), (200, b"console.log(1)", "text/javascript; charset=utf-8"))
            self.assertEqual(h["cache-control"], "public, max-age=31536000, immutable")
            st, h2, body, _ = srv.request("GET", "/assets/app-3f2a.js", token=None,
                                          headers={"If-None-Match": h["etag"]})
            self.assertEqual((st, body), (304, b""))
            self.assertEqual(srv.request("GET", "/index.html", token=None)[0], 200)
            self.assertEqual(srv.request("GET", "/inside.js", token=None)[0], 200)  # a link within the folder
            for path in ["/../secret.txt", "/assets/../../secret.txt", "/%2e%2e/secret.txt", "/escape.txt",
                         "/.env", "/assets/.env", "/missing.js", "/assets//app-3f2a.js", "/assets%2fapp-3f2a.js",
                         "/" + "a" * 600]:
                st, _, body, _ = srv.request("GET", path, token=None)
                self.assertEqual(st, 404, path)
                self.assertNotIn(b"secret", body)
                self.assertNotIn(b"TOKEN", body)
            self.assertEqual(srv.request("POST", "/", token=None)[0], 404)
            # The API keeps its rules: a token, JSON errors.
            self.assertEqual(srv.request("GET", "/api/v1/agent/threads", token=None)[0], 401)
            self.assertEqual(srv.request("GET", "/api/v1/nothing")[0], 404)
        with Server() as srv:  # no web_root: no page
            self.assertEqual(srv.request("GET", "/", token=None)[0], 404)
        with self.assertRaises(RuntimeError):
            Server("--web-root", os.path.join(root, "index.html"))  # not a folder


class FakeTranscriptionService(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible /v1/audio/transcriptions on 127.0.0.1 that records what it received."""
    received = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        FakeTranscriptionService.received.append((self.path, self.headers.get("Authorization"),
                                                  self.headers.get("Content-Type"), body))
        out = json.dumps({"text": "book a room for monday"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


class TranscriptionTest(unittest.TestCase):
    def test_multipart_audio_is_transcribed(self):
        fake = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeTranscriptionService)
        t = threading.Thread(target=fake.serve_forever, daemon=True)
        t.start()
        try:
            config = {"asr": {"type": "openai", "base_url": "http://127.0.0.1:%d/v1" % fake.server_address[1],
                              "api_key_env": "AGENTRT_TEST_ASR_KEY", "max_retries": 0},
                      "limits": {"max_audio_bytes": 100000}}
            with Server(config=config, env={"AGENTRT_TEST_ASR_KEY": "sk-test"}) as srv:
                audio = b"RIFF" + b"\0" * 200
                boundary = "----agentrt-test"
                body = (("--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n"
                         "Content-Type: audio/wav\r\n\r\n" % boundary).encode() + audio +
                        ("\r\n--%s\r\nContent-Disposition: form-data; name=\"language\"\r\n\r\nen\r\n--%s--\r\n"
                         % (boundary, boundary)).encode())
                st, _, _, out = srv.request("POST", "/api/v1/asr/transcriptions", body,
                                            content_type="multipart/form-data; boundary=" + boundary)
                self.assertEqual((st, out), (200, {"transcript": "book a room for monday"}))
                self.assertEqual(len(FakeTranscriptionService.received), 1)
                path, auth, ctype, sent = FakeTranscriptionService.received[0]
                self.assertEqual(path, "/v1/audio/transcriptions")
                self.assertEqual(auth, "Bearer sk-test")
                self.assertTrue(ctype.startswith("multipart/form-data"))
                self.assertIn(audio, sent)
                self.assertIn(b"en", sent)
                # Too large, and not audio.
                st, _, _, err = srv.request("POST", "/api/v1/asr/transcriptions", b"\0" * 200001,
                                            content_type="audio/wav")
                self.assertEqual((st, err["error"]["code"]), (413, "too_large"))
                st, _, _, err = srv.request("POST", "/api/v1/asr/transcriptions", b"hello", content_type="text/html")
                self.assertEqual(st, 422, err)
                self.assertEqual(len(FakeTranscriptionService.received), 1)
        finally:
            fake.shutdown()
            fake.server_close()


if __name__ == "__main__":
    unittest.main()
