#!/usr/bin/env python3
"""Tests of the `agentrt` command-line host, driven through stdin and a pseudo-terminal.

Usage: cli_test.py --agentrt PATH/TO/agentrt --source REPO_ROOT [unittest arguments]

Every test works in its own temporary data folder (removed afterwards) on the offline demo model: a
message containing "book" leads to a book_room call with {"room":"A1","day":"mon"} that needs approval.
"""
import argparse
import json
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

AGENTRT = ""
SOURCE = ""

DIRECT_ANSWER = ('You said: "hello". I am the offline demo model: ask me to book a room to see a tool call '
                 'that needs your approval, what context I was given, or to use a tool by its name '
                 '("use change_theme").')
BOOKED_ANSWER = "Your booking is confirmed: room A1 on Monday."
TOOL_LINE = '[tool] book_room {"room":"A1","day":"mon"}'
APPROVAL_LINE = '[approval needed] book_room {"room":"A1","day":"mon"}'


def approved_booking_lines(thread):
    """What the human view shows after book_room is approved on `thread`, down to the answer."""
    return ['[approved] book_room {"room":"A1","day":"mon"}',
            "[result] Booked room A1 on mon",
            "[card] booking_confirmation v1: booking_id=BK-%s, day=mon, room=A1 (actions: Cancel booking)" % thread,
            BOOKED_ANSWER]


def clean_env():
    """The environment without an OpenAI endpoint, so the demo model is used."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["TERM"] = "dumb"
    return env


class Pty:
    """A process on a pseudo-terminal: expect() what it prints, send() what a person types."""

    def __init__(self, argv, env):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child
            try:
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        self.out = b""
        self.pos = 0
        self.status = None

    def _read(self, timeout):
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return True
        try:
            data = os.read(self.fd, 4096)
        except OSError:  # EIO: the child closed the terminal
            return False
        if not data:
            return False
        self.out += data
        return True

    def expect(self, needle, timeout=20):
        """Waits for `needle` after what was already matched; returns the text before it."""
        deadline = time.monotonic() + timeout
        needle_b = needle.encode()
        while True:
            i = self.out.find(needle_b, self.pos)
            if i >= 0:
                before = self.out[self.pos:i].decode(errors="replace")
                self.pos = i + len(needle_b)
                return before
            if time.monotonic() > deadline or not self._read(0.1):
                if self.out.find(needle_b, self.pos) >= 0:
                    continue
                raise AssertionError("did not see %r; the terminal showed:\n%s" %
                                     (needle, self.out.decode(errors="replace")))

    def send(self, text):
        os.write(self.fd, text.encode())

    def wait(self, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                while self._read(0):
                    pass
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
            self._read(0.05)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        os.close(self.fd)
        raise AssertionError("the process did not exit; the terminal showed:\n" + self.out.decode(errors="replace"))

    def text(self):
        return self.out.decode(errors="replace")


class CliTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="agentrt-cli-test-")
        self.data = os.path.join(self.tmp, "data")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def cli(self, *args, stdin_text=None, timeout=60):
        """Runs `agentrt <command> --data DIR <args...>`; returns the CompletedProcess (text)."""
        argv = [AGENTRT, args[0], "--data", self.data] + list(args[1:])
        return subprocess.run(argv, input=stdin_text, stdin=None if stdin_text is not None else subprocess.DEVNULL,
                              capture_output=True, text=True, env=clean_env(), timeout=timeout)

    def history(self, thread):
        p = self.cli("history", thread, "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    def events(self, thread):
        p = self.cli("events", thread)
        self.assertEqual(p.returncode, 0, p.stderr)
        return [json.loads(line) for line in p.stdout.splitlines()]

    def chat(self, thread, *extra):
        return Pty([AGENTRT, "chat", "--data", self.data, "--thread", thread] + list(extra), clean_env())

    @staticmethod
    def streamed_text(events):
        return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")

    def assert_one_tool_message(self, messages, status_error, content):
        tools = [m for m in messages if m["role"] == "tool"]
        self.assertEqual(len(tools), 1, messages)
        self.assertEqual(tools[0]["content"], content)
        self.assertEqual(tools[0]["metadata"]["tool_name"], "book_room")
        if status_error is None:
            self.assertNotIn("error", tools[0])
            self.assertEqual(tools[0]["metadata"]["ui"]["type"], "booking_confirmation")
        else:
            self.assertIn(status_error, tools[0]["error"])
        return tools[0]

    # ------------------------------------------------------------------------------------ run (one turn)

    def test_run_direct_answer_prints_the_streamed_answer_and_exits_0(self):
        p = self.cli("run", "--thread", "t1", "--message", "hello")
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, DIRECT_ANSWER + "\n", ""))
        messages = self.history("t1")
        self.assertEqual([m["role"] for m in messages], ["user", "assistant"])
        self.assertEqual(messages[1]["content"], DIRECT_ANSWER)

    def test_run_json_prints_one_agui_event_a_line(self):
        p = self.cli("run", "--thread", "t1", "--message", "hello", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        events = [json.loads(line) for line in p.stdout.splitlines()]
        types = [e["type"] for e in events]
        self.assertEqual(types[0], "RUN_STARTED")
        self.assertEqual(events[0]["threadId"], "t1")
        self.assertEqual(types[-1], "RUN_FINISHED")
        self.assertEqual(events[-1]["outcome"], {"type": "success"})
        self.assertEqual([e["stepName"] for e in events if e["type"] == "STEP_STARTED"],
                         ["intent", "execution", "organization"])
        self.assertGreater(types.count("TEXT_MESSAGE_CONTENT"), 1)  # streamed in pieces
        self.assertEqual(self.streamed_text(events), DIRECT_ANSWER)
        # Exactly as stored: the same lines as the thread's event log.
        self.assertEqual(events, self.events("t1"))
        # `threads --json` lists it with its last sequence number and its first user message as the title.
        listing = self.cli("threads", "--json")
        self.assertEqual(listing.returncode, 0, listing.stderr)
        self.assertEqual(json.loads(listing.stdout), [{
            "id": "t1", "title": "hello", "createdAt": json.loads(listing.stdout)[0]["createdAt"],
            "updatedAt": json.loads(listing.stdout)[0]["updatedAt"], "lastSeq": len(events)}])
        # The events of a thread are its owner's: another user's look like an unknown thread's.
        other = self.cli("events", "t1", "--user", "bob")
        self.assertEqual((other.returncode, other.stdout), (1, ""))
        self.assertIn("thread t1 not found", other.stderr)
        tail = self.cli("events", "t1", "--after", str(len(events) - 1)).stdout.splitlines()
        self.assertEqual([json.loads(line) for line in tail], [events[-1]])

    def test_run_yes_approves_and_the_tool_runs_once(self):
        p = self.cli("run", "--thread", "b1", "--message", "book a room", "--yes")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.splitlines(), [TOOL_LINE, APPROVAL_LINE] + approved_booking_lines("b1"))
        messages = self.history("b1")
        self.assertEqual([m["role"] for m in messages], ["user", "assistant", "tool", "assistant"])
        self.assertEqual(messages[1]["toolCalls"][0]["function"]["name"], "book_room")
        self.assert_one_tool_message(messages, None, "Booked room A1 on mon")
        self.assertEqual(messages[3]["content"], BOOKED_ANSWER)
        results = [e for e in self.events("b1") if e["type"] == "TOOL_CALL_RESULT"]
        self.assertEqual(len(results), 1)
        self.assertEqual(results[0]["metadata"]["tool_agent_output"]["status"], "succeeded")

    def test_run_json_yes_streams_both_runs(self):
        p = self.cli("run", "--thread", "b1", "--message", "book a room", "--yes", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        events = [json.loads(line) for line in p.stdout.splitlines()]
        finished = [e for e in events if e["type"] == "RUN_FINISHED"]
        self.assertEqual([f["outcome"]["type"] for f in finished], ["interrupt", "success"])
        started = [e for e in events if e["type"] == "RUN_STARTED"]
        self.assertEqual(len(started), 2)
        self.assertEqual(started[1]["parentRunId"], started[0]["runId"])
        self.assertEqual(self.streamed_text(events), BOOKED_ANSWER)
        self.assertEqual(events, self.events("b1"))
        self.assertNotIn("[approved]", p.stdout)  # stdout holds the events only

    def test_run_no_rejects_and_the_model_hears_the_reason(self):
        p = self.cli("run", "--thread", "n1", "--message", "book a room", "--no", "--reason", "too expensive")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("[rejected] book_room: too expensive", p.stdout)
        messages = self.history("n1")
        self.assertEqual([m["role"] for m in messages], ["user", "assistant", "tool", "assistant"])
        self.assert_one_tool_message(messages, "too expensive",
                                     "book_room failed: the person rejected this call: too expensive")
        self.assertTrue(messages[3]["content"].startswith("I did not book the room"), messages[3])
        self.assertIn("too expensive", messages[3]["content"])
        human = self.cli("history", "n1")
        self.assertIn("tool book_room [rejected]: book_room failed: the person rejected this call: too expensive",
                      human.stdout)

    # --------------------------------------------------------------------- a restart in the middle of a turn

    def test_a_turn_left_waiting_is_resumed_by_a_second_process(self):
        p = self.cli("run", "--thread", "r1", "--message", "book a room")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertEqual(p.stdout.splitlines(), [TOOL_LINE, APPROVAL_LINE])
        self.assertIn("agentrt resume r1", p.stderr)
        self.assertEqual(len(self.history("r1")), 2)  # the user message and the tool call
        human = self.cli("history", "r1")
        self.assertIn("(a turn is waiting for approval", human.stdout)
        listing = self.cli("threads")
        self.assertEqual(listing.returncode, 0)
        self.assertIn("r1", listing.stdout)
        self.assertIn("[waiting for approval]", listing.stdout)

        # One active turn per thread: another run is refused and points to `agentrt resume`.
        again = self.cli("run", "--thread", "r1", "--message", "hello")
        self.assertEqual(again.returncode, 1)
        self.assertEqual(again.stdout, "")
        self.assertIn("waiting for approval", again.stderr)
        self.assertIn("agentrt resume r1", again.stderr)

        done = self.cli("resume", "--thread", "r1", "--yes")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.splitlines(), [APPROVAL_LINE] + approved_booking_lines("r1"))
        messages = self.history("r1")
        self.assertEqual([m["role"] for m in messages], ["user", "assistant", "tool", "assistant"])
        self.assert_one_tool_message(messages, None, "Booked room A1 on mon")
        self.assertEqual(messages[3]["content"], BOOKED_ANSWER)

        # Nothing is waiting any more: a second resume is an error and runs nothing.
        twice = self.cli("resume", "r1", "--yes")
        self.assertEqual(twice.returncode, 1)
        self.assertIn("no turn waiting", twice.stderr)
        results = [e for e in self.events("r1") if e["type"] == "TOOL_CALL_RESULT"]
        self.assertEqual(len(results), 1)
        self.assertEqual(results[0]["metadata"]["tool_agent_output"]["status"], "succeeded")

    def test_resume_json_no_prints_the_continuation_events(self):
        self.assertEqual(self.cli("run", "--thread", "r2", "--message", "book it").returncode, 2)
        before = len(self.events("r2"))
        p = self.cli("resume", "r2", "--no", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        events = [json.loads(line) for line in p.stdout.splitlines()]
        self.assertEqual(events, self.events("r2")[before:])  # exactly the continuation, from the last seq
        self.assertEqual(events[0]["type"], "RUN_STARTED")
        self.assertIn("parentRunId", events[0])
        result = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
        self.assertEqual(len(result), 1)
        self.assertEqual(result[0]["metadata"]["tool_agent_output"]["status"], "rejected")
        self.assertEqual(events[-1]["outcome"], {"type": "success"})

    def test_resume_without_an_answer_on_stdin_leaves_the_turn_waiting(self):
        self.assertEqual(self.cli("run", "--thread", "r3", "--message", "book").returncode, 2)
        p = self.cli("resume", "r3")  # stdin is /dev/null: nobody answers
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("still waiting", p.stderr)
        p = self.cli("resume", "r3", stdin_text="x\nr\nnot today\n")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("Please answer a (approve), r (reject) or e (edit the arguments).", p.stdout)
        self.assert_one_tool_message(self.history("r3"), "not today",
                                     "book_room failed: the person rejected this call: not today")

    # --------------------------------------------------------------------------------------- interactive chat

    def test_chat_on_a_terminal_with_an_edit_then_history(self):
        c = self.chat("c1")
        c.expect("agentrt chat: thread c1")
        c.expect("you> ")
        c.send("book a room\n")
        c.expect(TOOL_LINE)
        c.expect(APPROVAL_LINE)
        c.expect('book_room {"room":"A1","day":"mon"}: [a]pprove / [r]eject / [e]dit? ')
        c.send("e\n")
        c.expect("New arguments as JSON (empty line: back): ")
        c.send("{not json\n")
        c.expect("That is not valid JSON; try again.")
        c.expect("New arguments as JSON (empty line: back): ")
        c.send('{"room":"B2","day":"someday"}\n')
        c.expect("book_room refuses these arguments: /day")
        c.expect("New arguments as JSON (empty line: back): ")
        c.send('{"room":"B2","day":"tue"}\n')
        c.expect('[approved] book_room {"day":"tue","room":"B2"}')
        c.expect("[result] Booked room B2 on tue")
        c.expect("[card] booking_confirmation v1: booking_id=BK-c1, day=tue, room=B2")
        c.expect("assistant> Your booking is confirmed")
        c.expect("you> ")
        c.send("hello\n")
        c.expect("assistant> " + DIRECT_ANSWER)
        c.expect("you> ")
        c.send("/quit\n")
        self.assertEqual(c.wait(), 0, c.text())

        messages = self.history("c1")
        self.assertEqual([m["role"] for m in messages], ["user", "assistant", "tool", "assistant", "user", "assistant"])
        tool = self.assert_one_tool_message(messages, None, "Booked room B2 on tue")
        self.assertEqual(tool["metadata"]["ui"]["data"]["room"], "B2")
        human = self.cli("history", "c1")
        self.assertEqual(human.returncode, 0, human.stderr)
        self.assertIn("tool book_room [succeeded]: Booked room B2 on tue [card: booking_confirmation]",
                      human.stdout.splitlines())

    def test_chat_restart_while_waiting_asks_again_in_the_next_session(self):
        c = self.chat("c2")
        c.expect("you> ")
        c.send("please book a room\n")
        c.expect("[a]pprove / [r]eject / [e]dit? ")
        c.send("\x04")  # Ctrl-D: the session ends, the turn stays waiting
        c.expect("The turn is still waiting for your approval")
        self.assertEqual(c.wait(), 2, c.text())
        self.assertEqual(len(self.history("c2")), 2)

        c = self.chat("c2")
        c.expect("2 earlier message(s) on this thread")
        c.expect("A turn from an earlier session is waiting for your approval:")
        c.expect(APPROVAL_LINE)
        c.expect("[a]pprove / [r]eject / [e]dit? ")
        c.send("r\n")
        c.expect("Reason (told to the model): ")
        c.send("wrong week\n")
        c.expect("[rejected] book_room: wrong week")
        c.expect("[result] book_room failed: the person rejected this call: wrong week")
        c.expect("assistant> I did not book the room")
        c.expect("you> ")
        c.send("/history\n")
        c.expect("tool book_room [rejected]")
        c.expect("you> ")
        c.send("\x04")
        self.assertEqual(c.wait(), 0, c.text())

        messages = self.history("c2")
        self.assertEqual([m["role"] for m in messages], ["user", "assistant", "tool", "assistant"])
        self.assert_one_tool_message(messages, "wrong week",
                                     "book_room failed: the person rejected this call: wrong week")

    def test_chat_reads_a_script_from_stdin(self):
        p = self.cli("chat", "--thread", "s1", stdin_text="hello\nbook a room\na\n/quit\n")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("assistant> " + DIRECT_ANSWER, p.stdout)
        self.assertIn("[result] Booked room A1 on mon", p.stdout)
        self.assertIn("assistant> " + BOOKED_ANSWER, p.stdout)
        self.assertEqual(len(self.history("s1")), 6)

    # --------------------------------------------------------------------------------------- jobs

    def test_run_shows_a_job_starting_and_its_outcome_then_jobs_lists_it(self):
        p = self.cli("run", "--thread", "j1", "--message", "render the beach", "--demo-jobs", "300")
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        job_id = re.search(r"\bjob_[A-Za-z0-9_-]+", p.stdout).group(0)
        self.assertEqual(lines[0], '[tool] render_preview {"scene":"the beach"}')
        # The turn: the tool's result says the job started, the job is shown running, the answer does not wait.
        turn = lines[1:4]
        self.assertIn("[job] %s (render_preview): running — rendering the beach" % job_id, turn)
        self.assertIn("[result] Started job %s (render_preview): running. rendering the beach" % job_id, turn)
        self.assertEqual(lines[3], "The render of the beach is running as a job; its result shows up in this "
                                   "conversation when it is done.")
        # The run that delivers the outcome, printed like any other: the tool result, then the job line.
        rest = "\n".join(lines[4:])
        self.assertTrue(lines[4].startswith("[result] Job %s (render_preview) succeeded" % job_id), lines)
        self.assertEqual(lines[-1], "[job] %s (render_preview) succeeded: rendered the beach "
                                    "[assets: renders/%s.png]" % (job_id, job_id))
        self.assertIn("renders/%s.png" % job_id, rest)

        listing = self.cli("jobs", "j1")
        self.assertEqual(listing.returncode, 0, listing.stderr)
        self.assertRegex(listing.stdout, r"^%s  render_preview  succeeded  100%%  \d+s ago  rendered the beach\n$"
                         % job_id)
        records = json.loads(self.cli("jobs", "j1", "--json").stdout)
        self.assertEqual([(j["id"], j["status"], j["delivered"]) for j in records], [(job_id, "succeeded", True)])
        human = self.cli("history", "j1")
        self.assertIn("tool render_preview [job succeeded]: Job %s (render_preview) succeeded" % job_id, human.stdout)
        events = self.events("j1")
        self.assertEqual([e["type"] for e in events[-4:]], ["RUN_STARTED", "TOOL_CALL_RESULT", "CUSTOM", "RUN_FINISHED"])

        # No jobs, and errors.
        self.assertEqual(self.cli("run", "--thread", "j2", "--message", "hello").returncode, 0)
        self.assertEqual(self.cli("jobs", "j2").stdout, "no jobs on thread j2\n")
        p = self.cli("jobs", "nope")
        self.assertEqual(p.returncode, 1)
        self.assertIn("thread nope not found", p.stderr)

    def test_a_job_that_asks_first_is_confirmed_or_declined(self):
        p = self.cli("run", "--thread", "j3", "--message", "render the moon confirm", "--no", "--demo-jobs", "300")
        self.assertEqual(p.returncode, 0, p.stderr)
        job_id = re.search(r"\bjob_[A-Za-z0-9_-]+", p.stdout).group(0)
        self.assertIn("[job] %s (render_preview): waiting for confirmation" % job_id, p.stdout)
        self.assertIn("[confirmation needed] render_preview: Render a preview of the moon? It takes a moment.",
                      p.stdout)
        self.assertIn("[declined] render_preview", p.stdout)
        self.assertIn("[job] %s (render_preview) declined: rejected by the user" % job_id, p.stdout)
        self.assertIn("The render did not start", p.stdout)
        self.assertIn("declined", self.cli("jobs", "j3").stdout)

        p = self.cli("run", "--thread", "j4", "--message", "render the moon confirm", "--yes", "--demo-jobs", "300")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("[confirmed] render_preview", p.stdout)
        self.assertTrue(p.stdout.splitlines()[-1].endswith("succeeded: rendered the moon [assets: renders/%s.png]"
                                                           % re.search(r"\bjob_[A-Za-z0-9_-]+", p.stdout).group(0)),
                        p.stdout)

    def test_chat_shows_a_job_outcome_that_arrives_at_the_prompt(self):
        c = self.chat("jc", "--demo-jobs", "3000")
        c.expect("you> ")
        c.send("render a castle\n")
        c.expect("(render_preview): running — rendering a castle")
        c.expect("assistant> The render of a castle is running as a job")
        c.expect("you> ")
        c.send("/jobs\n")
        c.expect("render_preview  running  ")
        c.expect("rendering a castle")
        c.expect("you> ")
        # Nothing typed: the delivery run shows up on its own, then the prompt again.
        c.expect("[result] Job job_", timeout=30)
        c.expect("(render_preview) succeeded: rendered a castle [assets: renders/job_")
        c.expect("you> ")
        c.send("/jobs\n")
        c.expect("render_preview  succeeded  100%")
        c.expect("you> ")
        c.send("/quit\n")
        self.assertEqual(c.wait(), 0, c.text())
        messages = self.history("jc")
        self.assertEqual([m["role"] for m in messages], ["user", "assistant", "tool", "assistant", "tool"])
        self.assertEqual(messages[-1]["metadata"]["job_status"], "succeeded")

    # --------------------------------------------------------------------------------------- bad input

    def test_bad_command_lines_exit_64_with_usage(self):
        cases = [
            [],
            ["frobnicate"],
            ["run", "--message", "hi"],              # no thread
            ["run", "--thread", "t"],                # no message
            ["run", "--thread", "t", "--message", "hi", "--yes", "--no"],
            ["run", "--thread", "bad id!", "--message", "hi"],
            ["threads", "--user", "a b"],            # a user id the id rule refuses
            ["history", "t", "--user", "a/b"],
            ["history"],
            ["history", "t", "--yes"],               # an option the command does not take
            ["threads", "--bogus"],
            ["events", "t", "--after", "-3"],
            ["run", "--thread"],                     # a missing value
            ["jobs"],                                # no thread
            ["jobs", "t", "--yes"],
            ["run", "--thread", "t", "--message", "hi", "--demo-jobs", "0"],
            ["chat", "--demo-jobs", "soon"],
        ]
        for args in cases:
            with self.subTest(args=args):
                p = subprocess.run([AGENTRT] + args, capture_output=True, text=True, env=clean_env(),
                                   stdin=subprocess.DEVNULL, timeout=30, cwd=self.tmp)
                self.assertEqual(p.returncode, 64, p.stderr)
                self.assertEqual(p.stdout, "")
                self.assertIn("usage: agentrt", p.stderr)
        self.assertEqual(os.listdir(self.tmp), [])  # nothing was opened (no ./agentrt-data)

    def test_a_refused_id_is_named_escaped(self):
        # The runtime's id rule and message; a control character in the id reaches the terminal escaped.
        rule = " (ids are 1-128 of A-Z a-z 0-9 _ - . : @, not starting with '.')"
        for args, said in ((["history", "t\x1b[2J"], "thread id 't\\x1b[2J' holds a character other than "
                                                      "A-Z a-z 0-9 _ - . : @" + rule),
                           (["threads", "--user", ".me"], "user id '.me' starts with '.'" + rule)):
            with self.subTest(args=args):
                p = subprocess.run([AGENTRT] + args, capture_output=True, text=True, env=clean_env(),
                                   stdin=subprocess.DEVNULL, timeout=30, cwd=self.tmp)
                self.assertEqual(p.returncode, 64, p.stderr)
                self.assertEqual(p.stderr.splitlines()[0], "agentrt: " + said)
        self.assertEqual(os.listdir(self.tmp), [])

    def test_control_characters_reach_the_terminal_written_out(self):
        # A message (and the demo model's echo of it) holding a title change, a screen clear, a carriage return and
        # a C1 CSI: shown as text, never as the bytes a terminal obeys; stored and --json unchanged.
        message = "hi \x1b]0;pwned\x07 \x1b[2J\rback \u009b2J é"
        p = self.cli("run", "--thread", "esc", "--message", message)
        self.assertEqual(p.returncode, 0, p.stderr)
        shown = "hi \\x1b]0;pwned\\x07 \\x1b[2Jback \\xc2\\x9b2J é"
        self.assertIn('You said: "%s"' % shown, p.stdout)
        q = self.cli("history", "esc")
        self.assertEqual(q.returncode, 0, q.stderr)
        self.assertEqual(q.stdout.splitlines()[0], "user: " + shown)
        for out in (p.stdout, q.stdout):
            self.assertFalse(any(c in out for c in "\x1b\x07\r\u009b"), repr(out))
        self.assertEqual(self.history("esc")[0]["content"], message)

    def test_errors_exit_1_with_a_message(self):
        p = self.cli("history", "nope")
        self.assertEqual((p.returncode, p.stdout), (1, ""))
        self.assertIn("thread nope not found", p.stderr)
        p = self.cli("resume", "nope", "--yes")
        self.assertEqual(p.returncode, 1)
        self.assertIn("not found", p.stderr)
        self.assertEqual(self.cli("run", "--thread", "done", "--message", "hi").returncode, 0)
        p = self.cli("resume", "done", "--yes")
        self.assertEqual(p.returncode, 1)
        self.assertIn("no turn waiting for approval", p.stderr)
        # Another user's thread is not visible.
        p = self.cli("history", "done", "--user", "someone-else")
        self.assertEqual(p.returncode, 1)
        bad = os.path.join(self.tmp, "bad.json")
        with open(bad, "w") as f:
            f.write('{"workers": "many"}')
        p = self.cli("threads", "--config", bad)
        self.assertEqual(p.returncode, 1)
        self.assertIn("workers", p.stderr)
        p = self.cli("threads", "--config", os.path.join(self.tmp, "missing.json"))
        self.assertEqual(p.returncode, 1)
        self.assertIn("config", p.stderr)
        # A config nested 200,000 levels deep is an error, not a stack overflow.
        deep = os.path.join(self.tmp, "deep.json")
        with open(deep, "w") as f:
            f.write('{"stages":' + "[" * 200000 + "]" * 200000 + "}")
        p = self.cli("threads", "--config", deep)
        self.assertEqual(p.returncode, 1)
        self.assertIn(deep + " is nested deeper than 64 levels", p.stderr)

    # ------------------------------------------------------------------------------------ MCP servers

    def test_mcp_tools_are_listed_with_their_sources_and_called_with_approval(self):
        server = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tests", "mcp",
                              "scripted_server.py")
        mcp = "scripted=python3 '%s'" % server
        p = self.cli("tools", "--mcp", mcp, "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        listed = json.loads(p.stdout)
        by_name = {t["name"]: t for t in listed["tools"]}
        self.assertEqual(by_name["book_room"]["source"], "host")
        self.assertEqual(by_name["scripted__echo"]["source"], "mcp:scripted")
        self.assertEqual(by_name["scripted__echo"]["approval"], "always")
        self.assertEqual(by_name["scripted__echo"]["stages"], ["execution"])
        self.assertEqual(listed["mcpServers"][0]["state"], "ready")
        self.assertEqual(listed["heldBack"][0]["name"], "scripted__dotted.name")
        p = self.cli("tools", "--mcp", mcp)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("mcp:scripted", p.stdout)
        self.assertIn("mcp server scripted: stdio ready (MCP 2025-11-25)", p.stdout)
        # A turn calls it (the demo model calls a tool the message names): approval first, then its result.
        p = self.cli("run", "--thread", "m1", "--message", "use scripted__echo", "--yes", "--mcp", mcp)
        self.assertEqual(p.returncode, 0, p.stderr)
        tools = [m for m in self.history("m1") if m["role"] == "tool"]
        self.assertEqual(len(tools), 1)
        self.assertTrue(tools[0]["content"].startswith("echo: "), tools[0])
        # A server that cannot start is said, and the rest goes on.
        p = self.cli("tools", "--mcp", "broken=/nonexistent/server")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("cannot start /nonexistent/server", p.stdout)
        for bad in (["tools", "--mcp", "noequals"], ["tools", "--mcp", "x="], ["tools", "--mcp", "x='open"]):
            with self.subTest(args=bad):
                q = self.cli(*bad)
                self.assertEqual(q.returncode, 64, q.stderr)
                self.assertIn("--mcp", q.stderr)

    def test_help_exits_0(self):
        p = subprocess.run([AGENTRT, "help"], capture_output=True, text=True, env=clean_env(), timeout=30)
        self.assertEqual(p.returncode, 0)
        self.assertIn("exit status:", p.stdout)

    # --------------------------------------------------------------------------------------- scripts/demo

    def test_demo_without_a_terminal_runs_the_scripted_demonstration(self):
        env = clean_env()
        env["AGENTRT_BIN"] = AGENTRT
        env["AGENTRT_DEMO_DATA"] = self.data
        p = subprocess.run([os.path.join(SOURCE, "scripts", "demo")], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, env=env, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn(DIRECT_ANSWER, p.stdout)
        self.assertIn("[result] Booked room A1 on mon", p.stdout)
        self.assertIn(BOOKED_ANSWER, p.stdout)
        self.assertIn("tool book_room [succeeded]: Booked room A1 on mon [card: booking_confirmation]", p.stdout)
        self.assertTrue(os.path.exists(os.path.join(self.data, "agentrt.db")))


def main():
    global AGENTRT, SOURCE
    parser = argparse.ArgumentParser()
    parser.add_argument("--agentrt", required=True)
    parser.add_argument("--source", required=True)
    args, rest = parser.parse_known_args()
    AGENTRT = os.path.abspath(args.agentrt)
    SOURCE = os.path.abspath(args.source)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
