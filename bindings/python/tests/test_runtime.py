"""The Python binding against libagentrt (AGENTRT_LIBRARY): golden path B with a Python tool, a Python model,
a tool that raises, a duplicate resume, errors, schemas and streams. Run: python3 -m unittest discover -s tests"""
import asyncio
import math
import os
import sys
import threading
import time
import typing
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import agentrt  # noqa: E402
from agentrt import _capi  # noqa: E402
from runtime_case import RuntimeCase  # noqa: E402

RUN1 = ["RUN_STARTED", "STEP_STARTED", "CUSTOM", "STEP_FINISHED", "STEP_STARTED", "TOOL_CALL_START",
        "TOOL_CALL_ARGS", "TOOL_CALL_END", "STEP_FINISHED", "RUN_FINISHED"]
RUN2 = ["RUN_STARTED", "STEP_STARTED", "CUSTOM", "TOOL_CALL_RESULT", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END", "STEP_FINISHED", "STEP_STARTED", "STEP_FINISHED", "RUN_FINISHED"]


def shape(events):
    """Event types with runs of streamed deltas collapsed (chunking is the model's business)."""
    out = []
    for e in events:
        if out and out[-1] == e.type and e.type in ("TEXT_MESSAGE_CONTENT", "TOOL_CALL_ARGS"):
            continue
        out.append(e.type)
    return out


class GoldenPathB(RuntimeCase):
    def test_a_python_tool_pauses_for_approval_and_runs_once_after_resume(self):
        calls = []
        with agentrt.Runtime(self.config()) as rt:
            @rt.tool(approval="always")
            def book_room(room: str, day: typing.Literal["mon", "tue", "wed"], call: agentrt.ToolCall) -> dict:
                """Book a hotel room for a day."""
                calls.append((room, day, call.thread_id, call.tool_call_id))
                return agentrt.ToolResult({"ok": True, "booking_id": "BK-" + call.thread_id, "room": room, "day": day},
                                          ui={"type": "booking_card", "version": "v1", "data": {"room": room}})

            h = rt.start_turn("t-py-b", "please book a room", user_id="u1")
            self.assertFalse(h.existing)
            self.assertEqual(h.first_seq, 1)
            turn = rt.wait(h.turn_id)
            self.assertEqual(turn["status"], "WAITING_APPROVAL")
            self.assertEqual(calls, [])

            run1 = list(rt.events("t-py-b", runs=1, timeout=10))
            self.assertEqual(shape(run1), RUN1)
            self.assertEqual([e.seq for e in run1], list(range(1, len(run1) + 1)))
            interrupt = run1[-1]["outcome"]["interrupts"][0]
            self.assertEqual(interrupt["toolCallId"], "call_book_1")

            pending = rt.interrupts(h.turn_id)
            self.assertEqual(pending["approvalRequestId"], turn["approvalRequestId"])
            answer = rt.resume(h.turn_id, turn["approvalRequestId"],
                               [{"interruptId": interrupt["id"], "action": "approve"}])
            self.assertEqual(answer["status"], "accepted")
            self.assertEqual(rt.wait(h.turn_id)["status"], "COMPLETED")
            self.assertEqual(calls, [("A1", "mon", "t-py-b", "call_book_1")])

            run2 = list(rt.events("t-py-b", after_seq=run1[-1].seq, runs=1, timeout=10))
            self.assertEqual(shape(run2), RUN2)
            self.assertEqual(run2[0]["parentRunId"], h.run_id)
            self.assertEqual(run2[2]["name"], "agentrt.started")  # durable before the tool runs
            result = run2[3]
            self.assertEqual(result["metadata"]["tool_agent_output"]["result"]["booking_id"], "BK-t-py-b")
            self.assertEqual(result["metadata"]["ui"]["type"], "booking_card")

            history = rt.history("t-py-b")
            self.assertEqual([m["role"] for m in history], ["user", "assistant", "tool", "assistant"])
            self.assertEqual(history[3]["content"], "Your booking is confirmed: room A1 on Monday.")

    def test_a_duplicate_resume_returns_the_first_answer_and_runs_nothing(self):
        runs = []
        with agentrt.Runtime(self.config()) as rt:
            @rt.tool(approval=True)
            def book_room(room: str, day: str):
                runs.append(room)
                return {"ok": True, "booking_id": "BK-1", "room": room, "day": day}

            h = rt.start_turn("t-py-dup", "book it", user_id="u1")
            turn = rt.wait(h.turn_id)
            decisions = [{"interruptId": i["id"], "action": "approve"} for i in turn["interrupts"]]
            first = rt.resume(h.turn_id, turn["approvalRequestId"], decisions)
            second = rt.resume(h.turn_id, turn["approvalRequestId"], decisions)
            self.assertEqual(first, second)
            self.assertEqual(rt.wait(h.turn_id)["status"], "COMPLETED")
            third = rt.resume(h.turn_id, turn["approvalRequestId"], decisions)
            self.assertEqual(third, first)
            self.assertEqual(runs, ["A1"])
            with self.assertRaises(agentrt.InvalidState) as ctx:
                rt.resume(h.turn_id, "apr_another", decisions)
            self.assertEqual(ctx.exception.code, _capi.E_INVALID_STATE)
            self.assertEqual(ctx.exception.status, "invalid_state")
            self.assertIn("not waiting for approval", str(ctx.exception))


    def test_approve_all_answers_every_open_interrupt_and_says_when_none_waits(self):
        ran = []
        with agentrt.Runtime(self.config()) as rt:
            @rt.tool(approval="always")
            def book_room(room: str, day: str) -> dict:
                """Book a room."""
                ran.append(room)
                return {"ok": True}

            h = rt.start_turn("t-py-all", "please book a room", user_id="u1")
            self.assertEqual(rt.wait(h.turn_id)["status"], "WAITING_APPROVAL")
            self.assertEqual(rt.approve_all(h.turn_id)["status"], "accepted")
            self.assertEqual(rt.wait(h.turn_id)["status"], "COMPLETED")
            self.assertEqual(ran, ["A1"])
            with self.assertRaises(agentrt.InvalidState) as none:
                rt.approve_all(h.turn_id)
            self.assertEqual(str(none.exception),
                             f"approve_all: turn {h.turn_id} is COMPLETED, not waiting for approval")
            self.assertEqual(ran, ["A1"])


class Context(RuntimeCase):
    def test_a_runs_context_reaches_the_model_and_a_bad_one_is_refused(self):
        with agentrt.Runtime(self.config()) as rt:
            h = rt.start_turn("t-py-ctx", "what context?", user_id="u1",
                              context=[{"description": "theme", "value": "dark"}])
            self.assertEqual(rt.wait(h.turn_id)["status"], "COMPLETED")
            self.assertEqual(rt.history("t-py-ctx")[-1]["content"],
                             "The application told me, for this run:\n- theme: dark")
            with self.assertRaises(agentrt.InvalidArgument) as e:
                rt.start_turn("t-py-ctx2", "hi", user_id="u1", context=[{"description": "theme"}])
            self.assertEqual(e.exception.status, "invalid_argument")
            self.assertIn("context[0]: 'value' must be a string", str(e.exception))


class SharedState(RuntimeCase):
    def test_a_tool_reads_the_state_and_changes_it_with_a_delta(self):
        with agentrt.Runtime(self.config()) as rt:
            seen = []

            @rt.tool
            def book_room(room: str, day: str, call: agentrt.ToolCall):
                seen.append(call.state)
                return agentrt.ToolResult({"ok": True},
                                          state_delta=[{"op": "add", "path": "/booked", "value": room}])

            self.assertIsNone(rt.thread_state("t-py-state"))
            h = rt.start_turn("t-py-state", "please book a room", user_id="u1", state={"theme": "dark"})
            self.assertEqual(rt.wait(h.turn_id)["status"], "COMPLETED")  # the tool needs no approval
            self.assertEqual(seen, [{"theme": "dark"}])
            self.assertEqual(rt.thread_state("t-py-state"), {"theme": "dark", "booked": "A1"})
            types = [e.type for e in rt.events("t-py-state", runs=1, timeout=10)]
            self.assertEqual(types[1], "STATE_SNAPSHOT")
            self.assertEqual(types[types.index("STATE_DELTA") + 1], "TOOL_CALL_RESULT")


class ClientTools(RuntimeCase):
    THEME = {"name": "change_theme", "description": "Change the theme",
             "parameters": {"type": "object", "properties": {"theme": {"type": "string"}}, "required": ["theme"]}}

    def test_the_caller_runs_a_client_tool_and_answers_its_call(self):
        with agentrt.Runtime(self.config()) as rt:
            h = rt.start_turn("t-py-ct", "please use change_theme", user_id="u1", client_tools=[self.THEME])
            turn = rt.wait(h.turn_id)
            self.assertEqual(turn["status"], "WAITING_CLIENT")
            events = list(rt.events("t-py-ct", runs=1, timeout=10))
            call = next(e for e in events if e.type == "TOOL_CALL_START")
            self.assertEqual(call["toolCallName"], "change_theme")
            self.assertEqual(events[-1]["outcome"], {"type": "success", "pendingToolCallIds": [call["toolCallId"]]})
            with self.assertRaises(agentrt.InvalidArgument):
                rt.resume(h.turn_id, turn["approvalRequestId"], answers=[{"toolCallId": "forged", "content": "x"}])
            accepted = rt.resume(h.turn_id, turn["approvalRequestId"],
                                 answers=[{"toolCallId": call["toolCallId"], "content": '{"ok": true}', "id": "tm-py"}])
            self.assertEqual(accepted["status"], "accepted")
            self.assertEqual(rt.wait(h.turn_id)["status"], "COMPLETED")
            history = rt.history("t-py-ct")
            self.assertEqual([m["role"] for m in history], ["user", "assistant", "tool", "assistant"])
            self.assertEqual(history[2]["id"], "tm-py")
            self.assertEqual(history[-1]["content"], 'The tool answered: {"ok":true}')


class Tools(RuntimeCase):
    def test_a_tool_that_raises_fails_the_call_with_its_message(self):
        with agentrt.Runtime(self.config()) as rt:
            @rt.tool
            def book_room(room: str, day: str):
                raise ValueError(f"no rooms left in {room}")

            h = rt.start_turn("t-py-raise", "book a room", user_id="u1")
            self.assertEqual(rt.wait(h.turn_id)["status"], "COMPLETED")
            events = list(rt.events("t-py-raise", runs=1, timeout=10))
            result = next(e for e in events if e.type == "TOOL_CALL_RESULT")
            output = result["metadata"]["tool_agent_output"]
            self.assertEqual(output["status"], "failed")
            self.assertEqual(output["error"], {"code": "tool_error", "message": "ValueError: no rooms left in A1"})
            self.assertIn("I did not book the room", rt.history("t-py-raise")[-1]["content"])

    def test_an_async_tool_runs_to_completion(self):
        with agentrt.Runtime(self.config()) as rt:
            @rt.tool(name="book_room")
            async def book(room: str, day: str):
                await asyncio.sleep(0.01)
                return {"ok": True, "booking_id": "BK-async", "room": room, "day": day}

            h = rt.start_turn("t-py-async", "book", user_id="u1")
            self.assertEqual(rt.wait(h.turn_id)["status"], "COMPLETED")
            self.assertEqual(rt.history("t-py-async")[-1]["content"], "Your booking is confirmed: room A1 on Monday.")

    def test_a_duplicate_tool_name_is_a_conflict_and_unregister_removes_it(self):
        with agentrt.Runtime(self.config(demo_tools=True)) as rt:
            with self.assertRaises(agentrt.Conflict):
                rt.tool(lambda: None, name="book_room", parameters={"type": "object"})
            rt.unregister_tool("book_room")
            with self.assertRaises(agentrt.NotFound):
                rt.unregister_tool("book_room")

    def test_the_schema_comes_from_the_type_hints_and_the_docstring(self):
        def book(room: typing.Annotated[str, "Room name"], nights: int, day: typing.Literal["mon", "tue"] = "mon",
                 notes: typing.Optional[str] = None, tags: typing.List[str] = (), call: agentrt.ToolCall = None):
            """Book a room.

            Longer text that is not part of the description."""

        schema = agentrt.schema_for_function(book, (agentrt.ToolCall,))
        self.assertEqual(schema, {
            "type": "object",
            "properties": {
                "room": {"type": "string", "description": "Room name"},
                "nights": {"type": "integer"},
                "day": {"enum": ["mon", "tue"], "type": "string", "default": "mon"},
                "notes": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["room", "nights"],
            "additionalProperties": False,
        })
        self.assertEqual(agentrt.schema.description_of(book), "Book a room.")
        with self.assertRaises(TypeError):
            agentrt.schema_for_type(object)
        # Containers say what they hold: a dict's members, a set's uniqueness, a tuple's length.
        self.assertEqual(agentrt.schema_for_type(dict[str, int]),
                         {"type": "object", "additionalProperties": {"type": "integer"}})
        self.assertEqual(agentrt.schema_for_type(typing.Dict[str, typing.List[float]]),
                         {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "number"}}})
        self.assertEqual(agentrt.schema_for_type(dict), {"type": "object"})
        self.assertEqual(agentrt.schema_for_type(set[str]), {"type": "array", "items": {"type": "string"},
                                                              "uniqueItems": True})
        self.assertEqual(agentrt.schema_for_type(tuple[int, ...]), {"type": "array", "items": {"type": "integer"}})
        self.assertEqual(agentrt.schema_for_type(tuple[int, int]),
                         {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2})
        self.assertEqual(agentrt.schema_for_type(tuple[int, str]), {"type": "array", "minItems": 2, "maxItems": 2})
        with self.assertRaises(TypeError) as keys:
            agentrt.schema_for_type(dict[int, str])
        self.assertIn("a JSON object's keys are strings", str(keys.exception))


class Models(RuntimeCase):
    def test_a_python_model_streams_text_and_calls_a_tool(self):
        requests = []

        def model(request, stream):
            requests.append(request)
            if request["stage"] == "intent":
                return "booking"
            if request["messages"][-1]["role"] == "tool":
                for piece in ("Booked ", "room ", "B2."):
                    stream.text(piece)
                return None  # the answer is what was streamed
            with self.assertRaises(agentrt.InvalidArgument):  # not call 0 again (2**32 cut to 32 bits)
                stream.tool_call_start(2**32, "call_py_0", "book_room")
            stream.tool_call_start(0, "call_py_1", "book_room")
            stream.tool_call_args(0, '{"room":"B2",')
            stream.tool_call_args(0, '"day":"tue"}')
            return {"usage": {"inputTokens": 10, "outputTokens": 4}}

        booked = []
        with agentrt.Runtime(self.config(), model=model) as rt:
            @rt.tool
            def book_room(room: str, day: str):
                booked.append((room, day))
                return {"ok": True}

            h = rt.start_turn("t-py-model", "book B2 on tuesday", user_id="u1")
            turn = rt.wait(h.turn_id)
            self.assertEqual(turn["status"], "COMPLETED")
            self.assertEqual(turn["intent"], "booking")
            self.assertEqual(booked, [("B2", "tue")])
            events = list(rt.events("t-py-model", runs=1, timeout=10))
            deltas = [e["delta"] for e in events if e.type == "TEXT_MESSAGE_CONTENT"]
            self.assertEqual(deltas, ["Booked ", "room ", "B2."])
            self.assertEqual(rt.history("t-py-model")[-1]["content"], "Booked room B2.")
        self.assertEqual([r["stage"] for r in requests], ["intent", "execution", "execution"])
        self.assertEqual(requests[1]["tools"][0]["name"], "book_room")
        self.assertEqual(requests[1]["threadId"], "t-py-model")

    def test_a_model_that_raises_fails_the_turn(self):
        def model(request, stream):
            raise ConnectionError("the model server is down")

        with agentrt.Runtime(self.config(), model=model) as rt:
            h = rt.start_turn("t-py-model-fail", "hi", user_id="u1")
            turn = rt.wait(h.turn_id)
            self.assertEqual(turn["status"], "FAILED")
            self.assertIn("ConnectionError: the model server is down", turn["error"])
            events = list(rt.events("t-py-model-fail", runs=1, timeout=10))
            self.assertEqual(events[-1].type, "RUN_ERROR")

    def test_a_cancelled_turn_makes_the_model_stream_raise_cancelled(self):
        seen = {}
        streaming = threading.Event()  # the model has streamed text
        raised = threading.Event()

        def model(request, stream):
            try:
                for _ in range(6000):  # a minute of text, unless cancelled
                    stream.text(".")
                    streaming.set()
                    time.sleep(0.01)
            except agentrt.Cancelled as e:
                seen["cancelled"] = e.code
                raised.set()
                raise

        with agentrt.Runtime(self.config(), model=model) as rt:
            h = rt.start_turn("t-py-model-cancel", "hi", user_id="u1")
            self.assertTrue(streaming.wait(60))
            rt.cancel(h.turn_id)
            self.assertEqual(rt.wait(h.turn_id)["status"], "CANCELLED")
            self.assertTrue(raised.wait(60))
        self.assertEqual(seen.get("cancelled"), _capi.E_CANCELLED)


class Errors(RuntimeCase):
    def test_values_json_cannot_carry_are_refused_by_name(self):
        with agentrt.Runtime(self.config()) as rt:
            with self.assertRaises(agentrt.InvalidArgument) as nan:
                rt.update_job("job_any", progress=math.nan)  # refused before the library looks the job up
            self.assertTrue(str(nan.exception).startswith("a value JSON cannot carry: "), str(nan.exception))

            @rt.tool(approval="never")
            def measure(x: int = 0) -> dict:
                """Measures."""
                return {"value": math.inf}

            h = rt.start_turn("t-py-nan", "use measure", user_id="u1")
            self.assertEqual(rt.wait(h.turn_id)["status"], "COMPLETED")
            tool = [m for m in rt.history("t-py-nan") if m["role"] == "tool"]
            self.assertEqual(len(tool), 1)
            self.assertIn("a value JSON cannot carry", tool[0].get("error", "") + tool[0]["content"])

    def test_timeouts_take_inf_as_no_deadline_and_refuse_nan(self):
        with agentrt.Runtime(self.config()) as rt:
            h = rt.start_turn("t-py-inf", "hello", user_id="u1")
            self.assertEqual(rt.wait(h.turn_id, timeout=math.inf)["status"], "COMPLETED")
            events = list(rt.events("t-py-inf", runs=1, timeout=math.inf))
            self.assertEqual(events[-1].type, "RUN_FINISHED")
            stream = rt.events("t-py-inf")
            self.assertEqual(stream.next(timeout=math.inf).type, "RUN_STARTED")  # an int32_t's longest wait
            self.assertEqual(stream.next(timeout=1e10).seq, events[1].seq)
            for call in (lambda: stream.next(timeout=math.nan), lambda: rt.wait(h.turn_id, timeout=math.nan),
                         lambda: rt.flush_traces(timeout=math.nan)):
                with self.assertRaises(agentrt.InvalidArgument) as nan:
                    call()
                self.assertEqual(str(nan.exception), "a timeout is a number of seconds, not NaN")
            self.assertTrue(rt.flush_traces(timeout=math.inf))
            stream.close()

    def test_the_config_takes_an_s3_object_store_and_refuses_its_bad_values(self):
        os.environ["AGENTRT_PY_TEST_S3_KEY"] = "AKIDEXAMPLE"
        os.environ["AGENTRT_PY_TEST_S3_SECRET"] = "secret"
        s3 = {"type": "s3", "endpoint": "http://127.0.0.1:9", "bucket": "agentrt-test", "path_style": True,
              "access_key_env": "AGENTRT_PY_TEST_S3_KEY", "secret_key_env": "AGENTRT_PY_TEST_S3_SECRET"}
        with agentrt.Runtime(self.config(objects=s3)):
            pass  # opening makes no request
        with self.assertRaises(agentrt.InvalidArgument) as ctx:
            agentrt.Runtime(self.config(objects=dict(s3, secret_key_env="AGENTRT_PY_TEST_UNSET")))
        self.assertIn("config: objects: environment variable AGENTRT_PY_TEST_UNSET (S3 secret key) is not set",
                      str(ctx.exception))
        with self.assertRaises(agentrt.InvalidArgument):
            agentrt.Runtime(self.config(objects=dict(s3, url_signing="cdn")))

    def test_status_codes_map_to_exception_classes_with_the_library_message(self):
        with self.assertRaises(agentrt.InvalidArgument) as ctx:
            agentrt.Runtime(self.config(colour="blue"))
        self.assertIsInstance(ctx.exception, ValueError)
        self.assertIn("agentrt_runtime_open: config: unknown key 'colour'", str(ctx.exception))
        with agentrt.Runtime(self.config(demo_tools=True)) as rt:
            with self.assertRaises(agentrt.NotFound) as nf:
                rt.turn("turn_nope")
            self.assertEqual(str(nf.exception), "agentrt_turn_get: turn turn_nope not found")
            with self.assertRaises(agentrt.Unsupported):
                rt.transcribe(b"RIFF0000WAVE", "audio/wav", language="en")
            with self.assertRaises(agentrt.InvalidArgument):
                rt.start_turn("bad thread!", "hi", user_id="u1")
            h = rt.start_turn("t-py-busy", "book", user_id="u1")
            self.assertEqual(rt.wait(h.turn_id)["status"], "WAITING_APPROVAL")  # book_room needs approval
            with self.assertRaises(agentrt.Conflict):
                rt.start_turn("t-py-busy", "again", user_id="u1")
            rt.cancel(h.turn_id)
        with self.assertRaises(agentrt.InvalidState):
            rt.history("t-py-busy")  # closed

    def test_the_abi_version_is_checked(self):
        self.assertEqual(agentrt.ABI_VERSION, _capi.lib.agentrt_abi_version())
        with self.assertRaises(ImportError):
            _capi.check_abi(agentrt.ABI_VERSION + 1, agentrt.ABI_VERSION)
        self.assertRegex(agentrt.version(), r"^\d+\.\d+\.\d+$")


class Streams(RuntimeCase):
    def test_an_idle_stream_times_out_and_close_from_another_thread_stops_iteration(self):
        with agentrt.Runtime(self.config()) as rt:
            with rt.events("t-py-idle", timeout=0.1) as s:
                t0 = time.monotonic()
                with self.assertRaises(agentrt.Timeout):
                    next(s)
                self.assertGreaterEqual(time.monotonic() - t0, 0.09)
            s = rt.events("t-py-idle")
            threading.Timer(0.1, s.close).start()
            self.assertEqual(list(s), [])

    def test_closing_the_runtime_ends_open_streams(self):
        rt = agentrt.Runtime(self.config())
        s = rt.events("t-py-idle")
        threading.Timer(0.1, rt.close).start()
        self.assertEqual(list(s), [])
        s.close()

    def test_an_agui_run_input_takes_only_the_last_user_message(self):
        with agentrt.Runtime(self.config()) as rt:
            h = rt.start_run({"threadId": "t-py-agui", "runId": "run-py-1", "state": {}, "tools": [], "context": [],
                              "messages": [{"id": "m0", "role": "user", "content": "forged"},
                                           {"id": "m1", "role": "user", "content": "hello"}]}, user_id="u1")
            self.assertEqual(h.run_id, "run-py-1")
            rt.wait(h.turn_id)
            history = rt.history("t-py-agui")
            self.assertEqual([m["id"] for m in history][:1], ["m1"])
            self.assertEqual(len(history), 2)



PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


class Spend(RuntimeCase):
    def test_spend_reports_turn_thread_and_user_and_a_thread_budget_ends_a_turn(self):
        with agentrt.Runtime(self.config(budgets={"thread": {"model_calls": 3}})) as rt:
            first = rt.start_turn("t-py-spend", "hello", user_id="u1")
            self.assertEqual(rt.wait(first.turn_id)["status"], "COMPLETED")
            refused = rt.wait(rt.start_turn("t-py-spend", "again", user_id="u1").turn_id)
            self.assertEqual(refused["status"], "FAILED")
            self.assertEqual(rt.spend("turn", first.turn_id),
                             {"modelCalls": 2, "toolCalls": 0, "inputTokens": 0, "outputTokens": 0, "cost": 0.0,
                              "usage": []})
            self.assertEqual(rt.spend("thread", "t-py-spend")["modelCalls"], 3)
            self.assertEqual(rt.spend("user", "u1")["modelCalls"], 3)
            with self.assertRaises(agentrt.InvalidArgument):
                rt.spend("team", "x")
            with self.assertRaises(agentrt.NotFound):
                rt.spend("turn", "turn-unknown")


class Tracing(RuntimeCase):
    def test_a_host_traceparent_is_the_run_spans_parent(self):
        import http.server
        import json as jsonlib

        spans = []
        got = threading.Event()

        class Collector(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = jsonlib.loads(self.rfile.read(int(self.headers["Content-Length"])))
                for rs in body["resourceSpans"]:
                    for ss in rs["scopeSpans"]:
                        spans.extend(ss["spans"])
                got.set()  # before the answer: the exporter's flush returns as soon as the answer reaches it
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        server = http.server.HTTPServer(("127.0.0.1", 0), Collector)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)  # cleanups run last first: shutdown, then close
        self.addCleanup(server.shutdown)
        trace_id, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
        # Nothing leaves before a flush: the spans are there when flush_traces returns.
        tracing = {"otlp_endpoint": "http://127.0.0.1:%d/v1/traces" % server.server_port, "export_interval_ms": 600000}
        with agentrt.Runtime(self.config(tracing=tracing)) as rt:
            h = rt.start_turn("t-py-trace", "hello", user_id="u1", traceparent="00-%s-%s-01" % (trace_id, parent))
            self.assertEqual(rt.wait(h.turn_id)["status"], "COMPLETED")
            self.assertFalse(got.is_set())
            self.assertTrue(rt.flush_traces())
            self.assertTrue(got.is_set())
            with self.assertRaises(agentrt.InvalidArgument):
                rt.flush_traces(-1)
        with agentrt.Runtime(self.config()) as off:
            self.assertTrue(off.flush_traces(0))
        runs = [s for s in spans if s["name"].startswith("invoke_agent")]
        self.assertEqual(len(runs), 1)
        self.assertEqual((runs[0]["traceId"], runs[0]["parentSpanId"]), (trace_id, parent))
        chats = [s for s in spans if s["name"].startswith("chat")]
        self.assertEqual({c["parentSpanId"] for c in chats}, {runs[0]["spanId"]})


class ThreadsAndUploads(RuntimeCase):
    def test_threads_lists_the_users_threads_and_delete_thread_removes_only_your_own(self):
        with agentrt.Runtime(self.config()) as rt:
            rt.wait(rt.start_turn("t-py-a", "hello", user_id="u1").turn_id)
            rt.wait(rt.start_turn("t-py-z", "hello", user_id="u2").turn_id)
            last_seq = rt.events_page("t-py-a", "u1")[-1]["seq"]
            mine = rt.threads("u1")
            self.assertEqual([t["id"] for t in mine], ["t-py-a"])
            self.assertEqual(sorted(mine[0]), ["createdAt", "id", "lastSeq", "title", "updatedAt"])
            self.assertEqual((mine[0]["title"], mine[0]["lastSeq"]), ("", last_seq))
            self.assertEqual([t["id"] for t in rt.threads("u2")], ["t-py-z"])
            self.assertEqual(rt.threads("nobody"), [])
            with self.assertRaises(agentrt.NotFound) as nf:
                rt.delete_thread("t-py-a", "u2")
            self.assertEqual(str(nf.exception), "agentrt_thread_delete: thread t-py-a not found")
            rt.delete_thread("t-py-a", "u1")
            self.assertEqual(rt.threads("u1"), [])
            with self.assertRaises(agentrt.NotFound):
                rt.delete_thread("t-py-a", "u1")
            with self.assertRaises(agentrt.NotFound):
                rt.start_turn("t-py-a", "back?", user_id="u1")
            with self.assertRaises(agentrt.InvalidArgument):
                rt.threads("")

    def test_events_page_reads_the_log_in_pages_for_the_owner_only(self):
        with agentrt.Runtime(self.config()) as rt:
            rt.wait(rt.start_turn("t-py-p", "hello", user_id="u1").turn_id)
            streamed = list(rt.events("t-py-p", runs=1, timeout=10))
            page = rt.events_page("t-py-p", "u1")
            self.assertEqual([e["seq"] for e in page], [e.seq for e in streamed])
            self.assertEqual([e["event"]["type"] for e in page], [e.type for e in streamed])
            self.assertEqual(rt.events_page("t-py-p", "u1", after_seq=1, limit=2), page[1:3])
            self.assertEqual(rt.events_page("t-py-p", "u1", after_seq=page[-1]["seq"]), [])
            with self.assertRaises(agentrt.NotFound) as nf:
                rt.events_page("t-py-p", "u2")
            self.assertEqual(str(nf.exception), "agentrt_events_page: thread t-py-p not found")
            with self.assertRaises(agentrt.InvalidArgument) as bad:
                rt.events_page("t-py-p", "u1", limit=0)
            self.assertEqual(str(bad.exception), "agentrt_events_page: limit must be from 1 to 1000, not 0")
            # An int the C parameter cannot hold is refused, not cut to its low bits (2**32 + 2 would be a limit of
            # 2, 2**64 an after_seq of 0).
            with self.assertRaises(agentrt.InvalidArgument) as wide:
                rt.events_page("t-py-p", "u1", limit=2**32 + 2)
            self.assertEqual(str(wide.exception),
                             "agentrt_events_page: argument 6 is 4294967298, outside -2147483648..2147483647")
            with self.assertRaises(ValueError):
                rt.events_page("t-py-p", "u1", after_seq=2**64)

    def test_upload_stores_a_file_whose_part_sends_it_in_a_turn(self):
        with agentrt.Runtime(self.config()) as rt:
            up = rt.upload("u1", "t-py-up", PNG, "image/png")
            self.assertEqual(sorted(up), ["expiresAt", "id", "mimeType", "part", "ref", "size", "url"])
            self.assertEqual((up["mimeType"], up["size"]), ("image/png", len(PNG)))
            self.assertEqual(up["part"], {"type": "image",
                                          "source": {"type": "url", "value": up["url"], "mimeType": "image/png"}})
            h = rt.start_turn("t-py-up", [{"type": "text", "text": "look"}, up["part"]], user_id="u1")
            self.assertEqual(rt.wait(h.turn_id)["status"], "COMPLETED")
            self.assertEqual(rt.history("t-py-up")[0]["content"][1]["type"], "image")
            with self.assertRaises(agentrt.NotFound):
                rt.upload("u2", "t-py-up", PNG, "image/png")
            with self.assertRaises(agentrt.InvalidArgument):
                rt.upload("u1", "t-py-up", PNG, "application/x-msdownload")
        with agentrt.Runtime(self.config(objects=None)) as rt:
            with self.assertRaises(agentrt.Unsupported):
                rt.upload("u1", "t-py-up", PNG, "image/png")


if __name__ == "__main__":
    unittest.main()


class McpServers(RuntimeCase):
    SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tests", "mcp",
                          "scripted_server.py")

    def test_an_mcp_servers_tools_are_listed_and_a_call_asking_for_input_is_answered_with_a_response(self):
        servers = {"scripted": {"command": [sys.executable, self.SERVER], "approval": "never"}}
        with agentrt.Runtime(self.config(mcp_servers=servers)) as rt:
            (server,) = rt.mcp_servers()
            self.assertEqual((server["name"], server["state"], server["transport"]), ("scripted", "ready", "stdio"))
            names = {t["name"]: t for t in rt.mcp_tools()}
            self.assertTrue(names["scripted__echo"]["offered"])
            with self.assertRaises(agentrt.InvalidState):
                rt.approve_mcp_tool("scripted__echo")
            with self.assertRaises(agentrt.NotFound):
                rt.approve_mcp_tool("nope__x")
            h = rt.start_turn("t-mcp", "use scripted__ask", user_id="u1")
            turn = rt.wait(h.turn_id)
            self.assertEqual(turn["status"], "WAITING_APPROVAL")
            interrupt = turn["interrupts"][0]
            self.assertEqual(interrupt["reason"], "input_required")
            answer = rt.resume(h.turn_id, turn["approvalRequestId"],
                               [{"interruptId": interrupt["id"], "action": "approve", "response": {"colour": "blue"}}])
            self.assertEqual(rt.wait(answer["turnId"])["status"], "COMPLETED")
            tool = [m for m in rt.history("t-mcp") if m["role"] == "tool"]
            self.assertEqual(tool[0]["content"], "you chose blue")

    def test_a_runtime_without_mcp_servers_lists_none(self):
        with agentrt.Runtime(self.config()) as rt:
            self.assertEqual(rt.mcp_servers(), [])
            self.assertEqual(rt.mcp_tools(), [])
