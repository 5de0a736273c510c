#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "support/condition.hpp"
#include "support/runtime_fixture.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {
// Streams the first words of its answer, then holds the rest until the call is cancelled: the cancel lands
// mid-answer however slow the machine is.
class StallingModel final : public ModelProvider {
 public:
  ModelResult complete(const ModelRequest& req, ModelStreamSink& sink, const CancelToken& cancel) override {
    if (req.stage != "execution") return text_result("x");
    sink.on_text("the first words");
    if (cancel.wait_for(kLongWait)) throw Error(ErrorCode::cancelled, "model call cancelled");
    return text_result("the first words, and the rest");
  }
  std::string name() const override { return "stalling"; }
};
// What a process that died mid-turn leaves in the store: the turn (owned by a dead runtime), the user message,
// the assistant's book_room call, the run's first events, and the call's ledger entry in `call_status`.
LedgerEntry commit_crashed_turn(Store& store, const std::string& thread, const std::string& turn_id, TurnStatus status,
                                const std::string& first_run, const std::string& current_run, Event last_event,
                                LedgerStatus call_status) {
  CommitBatch b;
  b.thread_id = thread;
  b.create_thread = ThreadRecord{thread, "u1", "", false, 0, 0, 0};
  TurnRecord t;
  t.id = turn_id;
  t.thread_id = thread;
  t.user_id = "u1";
  t.status = status;
  t.run_id = current_run;
  t.parent_run_id = current_run == first_run ? "" : first_run;
  t.stage = "execution";
  t.owner = "rt_dead";
  b.turn = t;
  Message user = user_message("book");
  user.id = "m1";
  Message asst;
  asst.id = "m2";
  asst.role = Role::assistant;
  asst.has_content = false;
  asst.tool_calls = {ToolCall{"c1", "book_room", R"({"room":"A1","day":"mon"})"}};
  b.messages = {MessageRecord{thread, 0, turn_id, first_run, user}, MessageRecord{thread, 0, turn_id, first_run, asst}};
  b.events = {StoredEvent{0, first_run, to_json_string(events::run_started(thread, first_run))},
              StoredEvent{0, first_run, to_json_string(last_event)}};
  LedgerEntry l;
  l.tool_call_id = "c1";
  l.turn_id = turn_id;
  l.thread_id = thread;
  l.run_id = first_run;
  l.tool_name = "book_room";
  l.stage = "execution";
  l.arguments = R"({"room":"A1","day":"mon"})";
  l.status = call_status;
  b.ledger = {l};
  store.commit(b);
  return l;
}
}  // namespace

TEST_CASE("cancel stops a streaming model: the run ends cancelled and no half answer is stored") {
  Harness h(booking_script, [](RuntimeConfig& c) { c.model = std::make_shared<StallingModel>(); });
  auto a = h.start("t-cancel", "talk");
  auto sub = h.rt->subscribe("t-cancel", 0);
  // Wait until the answer is streaming.
  for (;;) {
    auto e = sub->next(kLongWait);
    REQUIRE(e);
    if (json::parse(e->json)["type"] == "TEXT_MESSAGE_CONTENT") break;
  }
  auto t0 = std::chrono::steady_clock::now();
  h.rt->cancel(a.turn_id);
  auto t = h.wait(a.turn_id);
  auto took = std::chrono::steady_clock::now() - t0;
  CHECK(t.status == TurnStatus::cancelled);
  CHECK(took < kLongWait / 2);  // the cancel ended the model call, not the model
  auto evs = h.events("t-cancel");
  check_agui(evs);
  CHECK(evs.back()["type"] == "RUN_FINISHED");
  CHECK(evs.back()["outcome"] == json{{"type", "cancelled"}});
  auto hist = h.rt->history("t-cancel");
  REQUIRE(hist.size() == 1);  // the user message only
  CHECK(hist[0].role == Role::user);
  // Cancelling a finished turn is a no-op.
  h.rt->cancel(a.turn_id);
  CHECK(h.rt->turn(a.turn_id)->status == TurnStatus::cancelled);
}

TEST_CASE("cancel of a turn waiting for approval ends it cancelled without running the tool") {
  Harness h;
  h.add_book_room();
  auto a = h.start("t-cw", "book a room");
  auto t = h.wait(a.turn_id);
  REQUIRE(t.status == TurnStatus::waiting_approval);
  h.rt->cancel(a.turn_id);
  CHECK(h.rt->turn(a.turn_id)->status == TurnStatus::cancelled);
  CHECK(h.tool_runs == 0);
  auto evs = h.events("t-cw", 2);
  check_agui(evs);
  CHECK(evs.back()["outcome"]["type"] == "cancelled");
  try {
    h.rt->resume(a.turn_id, t.approval_request_id, {Decision{"int_call_1", Decision::Action::approve, {}, ""}});
    FAIL("resume after cancel accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_state);
  }
}

TEST_CASE("cancel while an async tool runs ends the run cancelled and records the call interrupted") {
  Harness h([](const ModelRequest& req) -> ModelResult {
    if (req.stage == "intent") return text_result("x");
    if (tool_results_since_last_user(req) == 0) return tool_call_result("c1", "hang", R"({"n":1})");
    return text_result("never");
  });
  std::vector<ToolCompletion> kept;
  std::vector<json> abandoned;  // what on_abandon was told, once per call
  Condition started;
  ToolSpec hang;
  hang.name = "hang";
  hang.handler = [&](const ToolCallContext&, ToolCompletion c) { started.update([&] { kept.push_back(c); }); };
  hang.on_abandon = [&](const ToolCallContext& call, std::string_view reason) {
    started.update([&] { abandoned.push_back({call.tool_call_id, call.args, std::string(reason)}); });
  };
  h.rt->tools().add(hang);
  auto a = h.start("t-ct", "go");
  REQUIRE(started.wait_until([&] { return !kept.empty(); }));
  h.rt->cancel(a.turn_id);
  CHECK(h.wait(a.turn_id).status == TurnStatus::cancelled);
  auto ledger = h.store->ledger(a.turn_id);
  REQUIRE(ledger.size() == 1);
  CHECK(ledger[0].status == LedgerStatus::interrupted);
  // The tool is told it was abandoned, with its call's arguments, once.
  CHECK(started.wait_until([&] { return !abandoned.empty(); }));
  started.update([&] { CHECK(abandoned == std::vector<json>{json{"c1", json{{"n", 1}}, "cancelled"}}); });
  check_agui(h.events("t-ct"));
}

TEST_CASE("a turn waiting for approval survives a restart and is resumed by a new Runtime") {
  TempDir dir;
  std::atomic<int> runs{0};
  auto make = [&](std::shared_ptr<SqliteStore>& store) {
    store = std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("db.sqlite")});
    auto rt = std::make_unique<Runtime>(test_config(store, std::make_shared<ScriptedModel>(booking_script)));
    ToolSpec spec;
    spec.name = "book_room";
    spec.approval = ApprovalPolicy::always();
    spec.handler = sync_tool([&](const ToolCallContext&) {
      ++runs;
      return ToolResult{json{{"ok", true}}, std::nullopt, nullptr};
    });
    rt->tools().add(spec);
    return rt;
  };
  std::string turn_id, apr;
  {
    std::shared_ptr<SqliteStore> store;
    auto rt = make(store);
    TurnInput in;
    in.thread_id = "t-restart";
    in.user_id = "u1";
    in.message.content = "book a room";
    turn_id = rt->start_turn(in).turn_id;
    auto t = rt->wait(turn_id, kLongWait);
    REQUIRE(t.status == TurnStatus::waiting_approval);
    apr = t.approval_request_id;
  }
  std::shared_ptr<SqliteStore> store;
  auto rt = make(store);
  auto t = rt->turn(turn_id);
  REQUIRE(t->status == TurnStatus::waiting_approval);
  rt->resume(turn_id, apr, {Decision{t->interrupts[0]["id"], Decision::Action::approve, {}, ""}});
  CHECK(rt->wait(turn_id, kLongWait).status == TurnStatus::completed);
  CHECK(runs == 1);
  CHECK(rt->history("t-restart").size() == 4);
}

TEST_CASE("after a crash, a running turn fails and a started tool is recorded interrupted, not run again") {
  TempDir dir;
  auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("db.sqlite")});
  // What a process that died while a tool ran leaves behind: RUNNING turn, a `started` ledger entry.
  commit_crashed_turn(*store, "t-crash", "turn_crashed", TurnStatus::running, "run_crashed", "run_crashed",
                      events::tool_call_start("c1", "book_room"), LedgerStatus::started);
  std::atomic<int> runs{0};
  auto rt = std::make_unique<Runtime>(test_config(store, std::make_shared<ScriptedModel>(booking_script)));
  ToolSpec spec;
  spec.name = "book_room";
  spec.handler = sync_tool([&](const ToolCallContext&) {
    ++runs;
    return ToolResult{json{{"ok", true}}, std::nullopt, nullptr};
  });
  rt->tools().add(spec);
  auto t = rt->turn("turn_crashed");
  CHECK(t->status == TurnStatus::failed);  // recovered by the constructor's sweep
  CHECK(runs == 0);
  auto ledger = store->ledger("turn_crashed");
  REQUIRE(ledger.size() == 1);
  CHECK(ledger[0].status == LedgerStatus::interrupted);
  auto hist = rt->history("t-crash");
  REQUIRE(hist.size() == 4);
  CHECK(hist[2].role == Role::tool);
  // It was started: it most likely ran. History says its outcome is unknown, never that it did not run.
  CHECK(hist[2].content ==
        "book_room: outcome unknown: the runtime stopped while this call was running: its outcome is unknown (it "
        "may have taken effect), and it was not repeated");
  CHECK(hist[2].content.find("not run") == std::string::npos);
  CHECK(json::parse(ledger[0].output)["error"]["code"] == "outcome_unknown");
  CHECK(hist[3].role == Role::system);
  // The whole log, replayed: the crashed run's events, then the recovery's.
  auto sub = rt->subscribe("t-crash", 0);
  std::vector<json> evs;
  const int64_t last = rt->thread("t-crash")->last_seq;
  while (static_cast<int64_t>(evs.size()) < last) {
    auto e = sub->next(kLongWait);
    REQUIRE(e);
    evs.push_back(json::parse(e->json));
  }
  REQUIRE(evs.size() >= 4);
  CHECK(evs.back()["type"] == "RUN_ERROR");
  CHECK(evs.back()["code"] == "runtime_restarted");
}

TEST_CASE("a resumed idempotent call cut off by a crash runs again, a non-idempotent one does not") {
  for (bool idempotent : {true, false}) {
    TempDir dir;
    auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("db.sqlite")});
    {
      // A resume its process did not finish: RESUMING, the approved call cut off while it ran.
      LedgerEntry l = commit_crashed_turn(*store, "t-r", "turn_r", TurnStatus::resuming, "run_1", "run_2",
                                          events::run_finished("t-r", "run_1"), LedgerStatus::started);
      l.idempotent = idempotent;
      l.needs_approval = true;
      l.interrupt_id = "int_c1";
      CommitBatch fix;
      fix.thread_id = "t-r";
      fix.ledger = {l};
      store->commit(fix);
    }
    std::atomic<int> runs{0};
    RuntimeConfig c = test_config(store, std::make_shared<ScriptedModel>(booking_script));
    ToolSpec spec;
    spec.name = "book_room";
    spec.idempotent = idempotent;
    spec.handler = sync_tool([&](const ToolCallContext&) {
      ++runs;
      return ToolResult{json{{"ok", true}}, std::nullopt, nullptr};
    });
    c.tools.push_back(spec);
    auto rt = std::make_unique<Runtime>(c);
    CHECK(rt->turn("turn_r")->status == TurnStatus::resuming);  // taken over at the first sweep, not before
    auto t = rt->wait("turn_r", kLongWait);
    CHECK(t.status == TurnStatus::completed);
    CHECK(runs == (idempotent ? 1 : 0));
    auto ledger = store->ledger("turn_r");
    CHECK(ledger[0].status == (idempotent ? LedgerStatus::finished : LedgerStatus::interrupted));
    if (!idempotent) CHECK(json::parse(ledger[0].output)["error"]["code"] == "outcome_unknown");
  }
}

TEST_CASE("across two processes: a turn paused by one process is resumed by another, a killed one is failed") {
  TempDir dir;
  const std::string db = dir.file("db.sqlite");
  // Process 1 pauses a turn and exits without any cleanup.
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) try {
      auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{db});
      Runtime rt(test_config(store, std::make_shared<ScriptedModel>(booking_script)));
      ToolSpec spec;
      spec.name = "book_room";
      spec.approval = ApprovalPolicy::always();
      spec.handler = sync_tool([](const ToolCallContext&) {
        return ToolResult{json{{"ok", true}}, std::nullopt, nullptr};
      });
      rt.tools().add(spec);
      TurnInput in;
      in.thread_id = "t-proc";
      in.user_id = "u1";
      in.message.content = "book";
      auto h = rt.start_turn(in);
      auto t = rt.wait(h.turn_id, kLongWait);
      _exit(t.status == TurnStatus::waiting_approval ? 0 : 3);
    } catch (const std::exception& e) {
      fprintf(stderr, "child 1: %s\n", e.what());
      _exit(5);
    }
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);

  // Process 2 hangs in a non-idempotent tool and is killed.
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) try {
      close(ready[0]);
      auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{db});
      RuntimeConfig c = test_config(store, std::make_shared<ScriptedModel>(booking_script));
      Runtime rt(c);
      ToolSpec spec;
      spec.name = "book_room";
      spec.handler = [&](const ToolCallContext&, ToolCompletion) {
        char x = 1;
        (void)!write(ready[1], &x, 1);
        pause();  // never completes: the parent kills us here
      };
      rt.tools().add(spec);
      TurnInput in;
      in.thread_id = "t-killed";
      in.user_id = "u1";
      in.message.content = "book";
      rt.start_turn(in);
      pause();
      _exit(0);
    } catch (const std::exception& e) {
      fprintf(stderr, "child 2: %s\n", e.what());
      _exit(5);
    }
  close(ready[1]);
  char x = 0;
  REQUIRE(read(ready[0], &x, 1) == 1);
  close(ready[0]);
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);

  // This process takes over.
  auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{db});
  std::atomic<int> runs{0};
  RuntimeConfig c = test_config(store, std::make_shared<ScriptedModel>(booking_script));
  auto rt = std::make_unique<Runtime>(c);
  ToolSpec spec;
  spec.name = "book_room";
  spec.approval = ApprovalPolicy::always();
  spec.handler = sync_tool([&](const ToolCallContext&) {
    ++runs;
    return ToolResult{json{{"ok", true}}, std::nullopt, nullptr};
  });
  rt->tools().add(spec);

  auto paused = store->active_turn("t-proc");
  REQUIRE(paused);
  REQUIRE(paused->status == TurnStatus::waiting_approval);
  rt->resume(paused->id, paused->approval_request_id,
             {Decision{paused->interrupts[0]["id"], Decision::Action::approve, {}, ""}});
  CHECK(rt->wait(paused->id, kLongWait).status == TurnStatus::completed);
  CHECK(runs == 1);

  // The killed process's turn fails once its lease has run out; its tool is not run again.
  auto killed = store->last_turn("t-killed");
  REQUIRE(killed);
  // wait() wakes at the sweeper's recovery commit.
  CHECK(rt->wait(killed->id, kLongWait).status == TurnStatus::failed);
  CHECK(store->ledger(killed->id).at(0).status == LedgerStatus::interrupted);
  CHECK(runs == 1);
}
