"""External jobs through the Python binding: a Python tool answers with call.start_job(), the host completes the
job from another thread, the outcome reaches history and the event stream; cancel with the hook, expiry,
confirmation interrupts, deltaMessages. Run: python3 -m unittest discover -s tests"""
import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import agentrt  # noqa: E402
from runtime_case import RuntimeCase  # noqa: E402


def job_model(request, stream):
    """A user message starting with "render" (or "costly") calls that tool once, with the id call_<number of user
    messages>; after its result (or for anything else) the answer is "answer"."""
    if request["stage"] != "execution":
        return "ok"
    users, answered, text = 0, False, ""
    for m in request["messages"]:
        if m["role"] == "user":
            users += 1
            answered = False
            text = m["content"] if isinstance(m["content"], str) else ""
        elif m["role"] == "tool":
            answered = True
    if not answered and text.startswith(("render", "costly")):
        name = "costly_render" if text.startswith("costly") else "render"
        return {"toolCalls": [{"id": f"call_{users}", "name": name, "arguments": '{"scene":"beach"}'}]}
    return "answer"


def job_notes(history):
    return [m for m in history if isinstance(m.get("metadata"), dict) and "job_id" in m["metadata"]]


class JobCase(RuntimeCase):
    def runtime(self, **extra):
        return agentrt.Runtime(self.config(**extra), model=job_model)

    def wait_delivered(self, rt, job_id):
        """Until the job's outcome is in history: its delivery commits events on the job's thread, so look again
        at each event (no polling); fails if nothing comes for a minute."""
        job = rt.job(job_id)
        with rt.events(job["threadId"]) as stream:
            while not job["delivered"]:
                if stream.next(timeout=60) is None:
                    self.fail(f"job {job_id} was not delivered")
                job = rt.job(job_id)
        return job


class Jobs(JobCase):
    def test_a_tool_starts_a_job_and_the_host_completes_it_from_another_thread(self):
        seen, refusals = [], []
        with self.runtime() as rt:
            @rt.tool
            def render(scene: str, call: agentrt.ToolCall):
                """Render a scene (a long job)."""
                seen.append((call.job_id, call.job_confirmed, call.tool_call_id))
                try:
                    call.start_job(status="done")
                except agentrt.AgentrtError as e:
                    refusals.append((type(e), str(e)))
                started = call.start_job(message=f"rendering {scene}", metadata={"external_id": "ext-1"})
                seen.append(started)
                try:
                    call.start_job()
                except agentrt.AgentrtError as e:
                    refusals.append((type(e), str(e)))
                return "this return value is ignored"

            h = rt.start_turn("t-py-job", "render the beach", user_id="u1")
            self.assertEqual(rt.wait(h.turn_id)["status"], "COMPLETED")  # the turn did not wait for the job
            self.assertEqual(len(seen), 2)
            job_id, confirmed, call_id = seen[0]
            self.assertTrue(job_id.startswith("job_"))
            self.assertFalse(confirmed)
            self.assertEqual(call_id, "call_1")
            self.assertEqual(seen[1], job_id)  # start_job returns the job's id
            self.assertEqual([r[0] for r in refusals], [agentrt.InvalidArgument, agentrt.InvalidState])
            self.assertIn("'status' must be \"queued\" or \"running\"", refusals[0][1])
            self.assertIn("already ended", refusals[1][1])

            jobs = rt.jobs("t-py-job")
            self.assertEqual(len(jobs), 1)
            job = jobs[0]
            self.assertEqual(rt.job(job_id), job)
            self.assertIsNone(rt.job("job_nope"))
            self.assertEqual((job["id"], job["status"], job["toolCallId"], job["toolName"], job["turnId"]),
                             (job_id, "running", "call_1", "render", h.turn_id))
            self.assertEqual(job["message"], "rendering beach")
            self.assertEqual(job["metadata"], {"external_id": "ext-1"})
            self.assertFalse(job["delivered"])

            run1 = list(rt.events("t-py-job", runs=1, timeout=10))
            result = next(e for e in run1 if e.type == "TOOL_CALL_RESULT")
            self.assertEqual(result["metadata"]["tool_agent_output"]["result"],
                             {"jobId": job_id, "status": "running", "message": "rendering beach"})
            announced = [e for e in run1 if e.type == "CUSTOM" and e["name"] == "agentrt.job"]
            self.assertEqual([(e["value"]["id"], e["value"]["status"]) for e in announced], [(job_id, "running")])

            progressed = rt.update_job(job_id, progress=0.5, message="frame 20/40")
            self.assertEqual((progressed["progress"], progressed["message"]), (0.5, "frame 20/40"))
            self.assertEqual(progressed["version"], job["version"] + 1)

            done, errors = {}, []

            def host():
                try:
                    done.update(rt.complete_job(job_id, {"url": "https://cdn.example/beach.png"},
                                                assets=[{"key": "renders/beach.png", "mimeType": "image/png"}]))
                except Exception as e:  # pragma: no cover - reported below
                    errors.append(e)

            t = threading.Thread(target=host)
            t.start()
            t.join()
            self.assertEqual(errors, [])
            self.assertEqual(done["status"], "succeeded")
            self.assertTrue(done["delivered"])
            self.assertEqual(done["result"], {"url": "https://cdn.example/beach.png"})

            delivery = list(rt.events("t-py-job", after_seq=run1[-1].seq, runs=1, timeout=10))
            self.assertEqual([e.type for e in delivery], ["RUN_STARTED", "TOOL_CALL_RESULT", "CUSTOM", "RUN_FINISHED"])
            self.assertEqual(delivery[1]["toolCallId"], "call_1")
            self.assertEqual(delivery[2]["name"], "agentrt.job")
            self.assertEqual(delivery[2]["value"]["status"], "succeeded")
            self.assertEqual(delivery[2]["value"]["assets"], [{"key": "renders/beach.png", "mimeType": "image/png"}])

            history = rt.history("t-py-job")
            notes = job_notes(history)
            self.assertEqual(len(notes), 1)
            self.assertIs(notes[0], history[-1])
            self.assertEqual((notes[0]["role"], notes[0]["toolCallId"]), ("tool", "call_1"))
            self.assertEqual(notes[0]["metadata"]["job_status"], "succeeded")
            self.assertTrue(notes[0]["content"].startswith(f"Job {job_id} (render) succeeded"))

            with self.assertRaises(agentrt.InvalidState):
                rt.complete_job(job_id, 1)
            with self.assertRaises(agentrt.NotFound):
                rt.fail_job("job_nope", "x", "y")
            with self.assertRaises(agentrt.InvalidArgument):
                rt.update_job(job_id, progress=2)

    def test_a_failed_job_reaches_history_with_its_code(self):
        with self.runtime() as rt:
            @rt.tool
            def render(scene: str, call: agentrt.ToolCall):
                call.start_job(status="queued")

            rt.wait(rt.start_turn("t-py-fail", "render", user_id="u1").turn_id)
            (job,) = rt.jobs("t-py-fail")
            self.assertEqual(job["status"], "queued")
            self.assertEqual(rt.update_job(job["id"], status="running")["status"], "running")
            failed = rt.fail_job(job["id"], "render_crashed", "the GPU fell over")
            self.assertEqual(failed["error"], {"code": "render_crashed", "message": "the GPU fell over"})
            (note,) = job_notes(rt.history("t-py-fail"))
            self.assertEqual(note["content"], f"Job {job['id']} (render) failed: render_crashed: the GPU fell over")

    def test_cancel_calls_the_hook_once_with_the_cancelled_record_and_expiry_calls_it_from_the_sweeper(self):
        hooked = []
        with self.runtime() as rt:
            timeouts = [None, 100, None]  # the second job expires after 100 ms

            @rt.tool
            def render(scene: str, call: agentrt.ToolCall):
                call.start_job(timeout_ms=timeouts.pop(0))

            hook_called = threading.Condition()

            def hook(job):
                with hook_called:
                    hooked.append((job, threading.get_ident()))
                    hook_called.notify_all()

            rt.set_job_cancel_hook(hook)
            rt.wait(rt.start_turn("t-py-cancel", "render a", user_id="u1").turn_id)
            (job,) = rt.jobs("t-py-cancel")
            cancelled = rt.cancel_job(job["id"], reason="the user changed their mind")
            self.assertEqual(cancelled["status"], "cancelled")
            self.assertEqual(cancelled["error"], {"code": "cancelled", "message": "the user changed their mind"})
            self.assertEqual(hooked, [(cancelled, threading.get_ident())])  # on the cancelling thread
            self.assertEqual(rt.cancel_job(job["id"]), cancelled)  # again: unchanged, no second call
            self.assertEqual(len(hooked), 1)
            (note,) = job_notes(rt.history("t-py-cancel"))
            self.assertEqual(note["content"], f"Job {job['id']} (render) was cancelled: the user changed their mind")

            # A job past its timeout fails with code "timeout"; the sweeper's thread calls the hook.
            rt.wait(rt.start_turn("t-py-cancel", "render b", user_id="u1").turn_id)
            expiring = rt.jobs("t-py-cancel")[1]
            expired = self.wait_delivered(rt, expiring["id"])
            self.assertEqual((expired["status"], expired["error"]["code"]), ("failed", "timeout"))
            # The sweeper calls the hook after it committed the record: wait for the call.
            with hook_called:
                hook_called.wait_for(lambda: len(hooked) >= 2, timeout=60)
            self.assertEqual(len(hooked), 2)
            self.assertEqual((hooked[1][0]["id"], hooked[1][0]["status"]), (expiring["id"], "failed"))
            self.assertNotEqual(hooked[1][1], threading.get_ident())

            # Removed: no more calls.
            rt.set_job_cancel_hook(None)
            rt.wait(rt.start_turn("t-py-cancel", "render c", user_id="u1").turn_id)
            rt.cancel_job(rt.jobs("t-py-cancel")[2]["id"])
            self.assertEqual(len(hooked), 2)

    def test_a_confirmation_is_answered_through_resume_and_the_tool_runs_again_confirmed(self):
        calls = []
        with self.runtime() as rt:
            @rt.tool(name="costly_render")
            def costly(scene: str, call: agentrt.ToolCall):
                calls.append((call.job_id, call.job_confirmed))
                if call.job_confirmed:
                    call.start_job(message="started after confirmation")
                else:
                    call.start_job(confirm=True, confirm_message="Rendering costs 3 credits. Go ahead?",
                                   metadata={"cost": 3})

            h = rt.start_turn("t-py-conf", "costly render", user_id="u1")
            self.assertEqual(rt.wait(h.turn_id)["status"], "WAITING_APPROVAL")
            pending = rt.interrupts(h.turn_id)
            (interrupt,) = pending["interrupts"]
            self.assertEqual(interrupt["reason"], "confirmation")
            self.assertEqual(interrupt["message"], "Rendering costs 3 credits. Go ahead?")
            job_id = interrupt["metadata"]["jobId"]
            self.assertEqual(calls, [(job_id, False)])
            job = rt.job(job_id)
            self.assertEqual((job["status"], job["confirmation"]), ("queued", "pending"))
            with self.assertRaises(agentrt.InvalidState):
                rt.complete_job(job_id, {"too": "early"})

            answer = rt.resume(h.turn_id, pending["approvalRequestId"],
                               [{"interruptId": interrupt["id"], "status": "resolved"}])
            self.assertEqual(answer["status"], "accepted")
            self.assertEqual(rt.wait(h.turn_id)["status"], "COMPLETED")
            self.assertEqual(calls, [(job_id, False), (job_id, True)])
            job = rt.job(job_id)
            self.assertEqual((job["status"], job["confirmation"], job["message"]),
                             ("running", "confirmed", "started after confirmation"))
            self.assertEqual(job["metadata"], {"cost": 3})
            self.assertTrue(rt.complete_job(job_id, {"frames": 40})["delivered"])
            (note,) = job_notes(rt.history("t-py-conf"))
            self.assertEqual(note["metadata"]["job_status"], "succeeded")

    def test_a_repeated_start_returns_delta_messages(self):
        with self.runtime() as rt:
            first = rt.start_turn("t-py-delta", "hi", user_id="u1", client_message_id="cm-1")
            self.assertFalse(first.existing)
            self.assertNotIn("deltaMessages", first)
            rt.wait(first.turn_id)
            again = rt.start_turn("t-py-delta", "hi", user_id="u1", client_message_id="cm-1")
            self.assertTrue(again.existing)
            self.assertEqual(again.turn_id, first.turn_id)
            self.assertEqual([(m["role"], m["content"]) for m in again.delta_messages],
                             [("user", "hi"), ("assistant", "answer")])
            self.assertEqual(again["deltaMessages"], rt.turn_messages(first.turn_id))
            with self.assertRaises(agentrt.NotFound):
                rt.turn_messages("turn_nope")


if __name__ == "__main__":
    unittest.main()
