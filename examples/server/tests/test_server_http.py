"""HTTP tests of agentrt-server: every endpoint, every error status, ownership, reconnect, disconnect, limits."""

import http.server
import json
import threading
import time
import unittest
import urllib.parse

from server_harness import (ALICE, BOB, Server, new_id, run_input, squeeze, types, wait_for)

RUN_A = ["RUN_STARTED", "STEP_STARTED", "CUSTOM", "STEP_FINISHED", "STEP_STARTED", "TEXT_MESSAGE_START",
         "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "STEP_FINISHED", "STEP_STARTED", "STEP_FINISHED", "RUN_FINISHED"]
RUN_B1 = ["RUN_STARTED", "STEP_STARTED", "CUSTOM", "STEP_FINISHED", "STEP_STARTED", "TOOL_CALL_START",
          "TOOL_CALL_ARGS", "TOOL_CALL_END", "STEP_FINISHED", "RUN_FINISHED"]
RUN_B2 = ["RUN_STARTED", "STEP_STARTED", "TOOL_CALL_RESULT", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT",
          "TEXT_MESSAGE_END", "STEP_FINISHED", "STEP_STARTED", "STEP_FINISHED", "RUN_FINISHED"]
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


def error_code(parsed):
    return parsed["error"]["code"] if parsed and "error" in parsed else None


class ServerTest(unittest.TestCase):
    """One server for the tests that don't need special flags."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

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
        result = frames[2][1]
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
        self.assertNotIn(thread, [t["id"] for t in self.srv.request("GET", "/api/v1/agent/threads", token=BOB)[3]
                                  ["threads"]])
        self.assertError(self.srv.request("DELETE", "/api/v1/agent/threads/" + thread, token=BOB), 404)
        st, _, _, deleted = self.srv.request("DELETE", "/api/v1/agent/threads/" + thread)
        self.assertEqual((st, deleted), (200, {"id": thread, "deleted": True}))
        self.assertNotIn(thread, [t["id"] for t in self.srv.request("GET", "/api/v1/agent/threads")[3]["threads"]])
        self.assertError(self.srv.request("GET", "/api/v1/agent/runs/%s/history" % thread), 404)
        self.assertError(self.srv.request("DELETE", "/api/v1/agent/threads/" + thread), 404)
        self.assertError(self.srv.request("POST", "/api/v1/agent/runs", run_input(thread, "back?")), 404)

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
                             ("POST", "/api/v1/asr/transcriptions")]:
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
        self.assertError(self.srv.request("POST", "/api/v1/agent/runs", run_input(thread, "mine now"), token=BOB), 404)
        self.assertError(self.srv.request("POST", "/api/v1/agent/uploads?threadId=" + thread, PNG, token=BOB,
                                          content_type="image/png"), 404)
        # ... and alice's thread is untouched.
        self.assertEqual(self.srv.request("GET", "/api/v1/agent/runs/%s/history" % thread)[0], 200)

    def test_unknown_endpoint_is_a_json_404(self):
        self.assertError(self.srv.request("GET", "/api/v1/nothing/here"), 404, "not_found")

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


class SlowServerTest(unittest.TestCase):
    """The demo model pauses before each streamed chunk: runs last long enough to interrupt them."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--demo-delay-ms", "25")

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

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


class LimitsTest(unittest.TestCase):
    def test_oversize_bodies_are_413(self):
        with Server("--max-body-bytes", "4096", "--max-upload-bytes", "2048", "--max-audio-bytes", "1024") as srv:
            big = run_input(new_id("t"), "x" * 8000)
            st, _, _, err = srv.request("POST", "/api/v1/agent/runs", big)
            self.assertEqual((st, err["error"]["code"]), (413, "too_large"))
            st, _, _, err = srv.request("POST", "/api/v1/agent/uploads?threadId=" + new_id("t"), b"\0" * 3000,
                                        content_type="image/png")
            self.assertEqual((st, err["error"]["code"]), (413, "too_large"))
            # Over every limit: httplib refuses it while reading; still a JSON error.
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
