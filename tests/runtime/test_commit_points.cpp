// Where the runtime commits, and that fewer commits keep the durability rules: what a call returns is
// committed, a non-idempotent tool is committed `started` before it runs, a tool result not committed yet
// when the process dies leaves the call `interrupted` (never run again), and a start that cannot be
// committed stores nothing.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <future>
#include <thread>

#include "support/condition.hpp"
#include "support/forwarding_store.hpp"
#include "support/runtime_fixture.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {

// The store as another process sees it: a second connection on the same file.
std::shared_ptr<SqliteStore> other_connection(const std::string& path) {
  return std::make_shared<SqliteStore>(SqliteStoreOptions{path});
}

ToolSpec counting_book_room(std::atomic<int>& runs, bool idempotent = false) {
  ToolSpec spec;
  spec.name = "book_room";
  spec.approval = ApprovalPolicy::always();
  spec.idempotent = idempotent;
  spec.handler = sync_tool([&runs](const ToolCallContext& c) {
    ++runs;
    return ToolResult{json{{"ok", true}, {"booking_id", "BK-" + c.thread_id}}, std::nullopt, nullptr};
  });
  return spec;
}

RuntimeConfig quiet_config(std::shared_ptr<Store> store, std::shared_ptr<ModelProvider> model) {
  RuntimeConfig c = test_config(std::move(store), std::move(model));
  c.stages.intent.call_model = false;
  c.stages.organization.call_model = false;
  c.sweep_interval = std::chrono::milliseconds(60000);  // no heartbeat commits in the counts
  c.flush_interval = std::chrono::milliseconds(60000);  // no timed group commits either
  return c;
}

}  // namespace

TEST_CASE("run_turn and resume_turn: what they return is committed, in three commits for an approval loop") {
  TempDir dir;
  const std::string path = dir.file("db.sqlite");
  auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{path});
  std::atomic<int> runs{0};
  Runtime rt(quiet_config(store, std::make_shared<ScriptedModel>(booking_script)));
  rt.tools().add(counting_book_room(runs));

  const int64_t tx0 = store->write_transactions();
  auto paused = rt.run_turn(turn_input("t-cp", user_message("book a room")));
  REQUIRE(paused.status == TurnStatus::waiting_approval);
  CHECK(store->write_transactions() - tx0 == 1);  // the start rides on the pause's commit
  {
    auto other = other_connection(path);
    auto t = other->get_turn(paused.id);
    REQUIRE(t);
    CHECK(t->status == TurnStatus::waiting_approval);
    CHECK(t->approval_request_id == paused.approval_request_id);
    // The record returned is the row: its version and the store's times too.
    CHECK(paused.version == t->version);
    CHECK(paused.created_at == t->created_at);
    CHECK(paused.updated_at == t->updated_at);
    CHECK(paused.updated_at > 0);
    auto msgs = other->messages("t-cp");
    REQUIRE(msgs.size() == 2);
    CHECK(msgs[0].message.role == Role::user);
    CHECK(msgs[1].message.tool_calls.size() == 1);
    auto ledger = other->ledger(paused.id);
    REQUIRE(ledger.size() == 1);
    CHECK(ledger[0].status == LedgerStatus::requested);
    auto evs = other->events_after("t-cp", 0, 100);
    REQUIRE(!evs.empty());
    CHECK(json::parse(evs.front().json)["type"] == "RUN_STARTED");
    CHECK(json::parse(evs.back().json)["type"] == "RUN_FINISHED");
  }

  const int64_t tx1 = store->write_transactions();
  auto done = rt.resume_turn(paused.id, paused.approval_request_id,
                             {Decision{paused.interrupts[0]["id"], Decision::Action::approve, {}, ""}});
  REQUIRE(done.status == TurnStatus::completed);
  CHECK(runs == 1);
  // The decision with the `started` record (before the tool ran), then the end with the result.
  CHECK(store->write_transactions() - tx1 == 2);
  auto other = other_connection(path);
  CHECK(other->get_turn(paused.id)->status == TurnStatus::completed);
  CHECK(done.version == other->get_turn(paused.id)->version);
  CHECK(done.created_at == other->get_turn(paused.id)->created_at);
  CHECK(done.updated_at == other->get_turn(paused.id)->updated_at);
  CHECK(done.updated_at >= paused.updated_at);
  CHECK(other->get_approval(paused.approval_request_id).has_value());
  CHECK(other->ledger(paused.id).at(0).status == LedgerStatus::finished);
  CHECK(other->messages("t-cp").size() == 4);
  // The AG-UI stream of both runs is well formed.
  std::vector<json> evs;
  for (const auto& e : other->events_after("t-cp", 0, 1000)) evs.push_back(json::parse(e.json));
  check_agui(evs);
}

TEST_CASE("start_turn's handle and resume's 'accepted' are committed when the calls return") {
  TempDir dir;
  const std::string path = dir.file("db.sqlite");
  auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{path});
  std::atomic<int> runs{0};
  Condition release;
  // The model holds the run after the tool until released, so nothing later can have committed for it.
  auto script = [&](const ModelRequest& req) {
    if (tool_results_since_last_user(req) > 0) release.wait();
    return booking_script(req);
  };
  Runtime rt(quiet_config(store, std::make_shared<ScriptedModel>(script)));
  rt.tools().add(counting_book_room(runs));
  TurnInput in = turn_input("t-async", user_message("book a room"));
  auto h = rt.start_turn(in);
  REQUIRE(other_connection(path)->get_turn(h.turn_id).has_value());
  auto t = rt.wait(h.turn_id, kLongWait);
  REQUIRE(t.status == TurnStatus::waiting_approval);
  auto answer =
      rt.resume(t.id, t.approval_request_id, {Decision{t.interrupts[0]["id"], Decision::Action::approve, {}, ""}});
  CHECK(answer["status"] == "accepted");
  {
    auto other = other_connection(path);
    auto a = other->get_approval(t.approval_request_id);
    REQUIRE(a);
    CHECK(a->answer == answer);
    CHECK(other->get_turn(t.id)->status != TurnStatus::waiting_approval);
  }
  release.notify();
  CHECK(rt.wait(t.id, kLongWait).status == TurnStatus::completed);
  CHECK(runs == 1);
}

// What start_turn_async's callback was told: how often, the last handle and error.
struct Told {
  Condition calls;
  std::mutex mutex;
  int count = 0;
  TurnHandle handle;
  std::exception_ptr error;
  Runtime::Started callback() {
    return [this](const TurnHandle& h, std::exception_ptr e) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        ++count;
        handle = h;
        error = e;
      }
      calls.notify();
    };
  }
  int told() {
    std::lock_guard<std::mutex> lock(mutex);
    return count;
  }
};

ErrorCode code_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    return err.code();
  } catch (...) {
    return ErrorCode::internal;
  }
}

// What `call` threw (ok when it returned: every use expects an error).
template <class F>
ErrorCode code_thrown_by(F&& call) {
  try {
    call();
  } catch (...) {
    return code_of(std::current_exception());
  }
  return ErrorCode::ok;
}

TEST_CASE("start_turn_async: a short turn is one commit, and the callback is told once, after its start is durable") {
  TempDir dir;
  const std::string path = dir.file("db.sqlite");
  auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{path});
  Told told;
  Runtime rt(
      quiet_config(store, std::make_shared<ScriptedModel>([](const ModelRequest&) { return text_result("hi"); })));
  // Told when the start commits: the run's end, here (no pause, no tool, no timed group commit before it).
  rt.start_turn(turn_input("t-warm", user_message("hello")));  // the thread's first turn: its own commits
  REQUIRE(rt.wait(rt.last_turn("t-warm")->id, kLongWait).status == TurnStatus::completed);
  const int64_t tx0 = store->write_transactions();
  TurnInput in = turn_input("t-warm", user_message("again"));
  in.run_id = "run-async-1";
  const TurnHandle ids = rt.start_turn_async(in, told.callback());
  REQUIRE(told.calls.wait());
  TurnHandle h;
  {
    std::lock_guard<std::mutex> lock(told.mutex);
    REQUIRE_FALSE(told.error);
    h = told.handle;
  }
  CHECK(h.turn_id == ids.turn_id);
  CHECK(ids.first_seq == 0);
  CHECK(h.thread_id == "t-warm");
  CHECK(h.run_id == "run-async-1");
  CHECK_FALSE(h.existing);
  // Durable when told: another connection reads the turn, and the run's RUN_STARTED at first_seq.
  {
    auto other = other_connection(path);
    REQUIRE(other->get_turn(h.turn_id).has_value());
    auto evs = other->events_after("t-warm", h.first_seq - 1, 1);
    REQUIRE(evs.size() == 1);
    CHECK(evs[0].seq == h.first_seq);
    CHECK(evs[0].run_id == "run-async-1");
    CHECK(evs[0].json.find("\"RUN_STARTED\"") != std::string::npos);
  }
  CHECK(rt.wait(h.turn_id, kLongWait).status == TurnStatus::completed);
  CHECK(store->write_transactions() - tx0 == 1);  // start and end in one commit
  CHECK(told.told() == 1);
  auto msgs = store->messages("t-warm");
  REQUIRE(msgs.size() == 4);
  CHECK(msgs[2].message.content == "again");
  CHECK(msgs[3].message.content == "hi");
}

TEST_CASE("start_turn_async: wait() on the returned ids waits for the start to be stored, then for the turn") {
  TempDir dir;
  auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("db.sqlite")});
  Condition in_model, release, waiting;
  auto script = [&](const ModelRequest&) {
    in_model.notify();
    release.wait();
    return text_result("hi");
  };
  Told told;
  Runtime rt(quiet_config(store, std::make_shared<ScriptedModel>(script)));  // no timed commit: the end stores all
  const TurnHandle ids = rt.start_turn_async(turn_input("t-wait", user_message("hello")), told.callback());
  REQUIRE(in_model.wait());
  CHECK_FALSE(store->get_turn(ids.turn_id).has_value());  // the start is not stored yet
  // A timeout that passes first says so: the turn exists, unlike a refused start's (not_found).
  CHECK(code_thrown_by([&] { rt.wait(ids.turn_id, std::chrono::milliseconds(0)); }) == ErrorCode::timeout);
  std::promise<TurnRecord> waited;
  std::thread waiter([&] {
    try {
      waiting.notify();
      waited.set_value(rt.wait(ids.turn_id, kLongWait));
    } catch (...) {
      waited.set_exception(std::current_exception());
    }
  });
  REQUIRE(waiting.wait());
  release.notify();
  waiter.join();
  const TurnRecord t = waited.get_future().get();  // throws not_found when wait() did not wait
  CHECK(t.status == TurnStatus::completed);
  CHECK(told.told() == 1);
  CHECK(code_thrown_by([&] { rt.wait("turn_never_started", std::chrono::milliseconds(0)); }) ==
        ErrorCode::not_found);  // no run, no row
}

TEST_CASE("start_turn_async: the callback may call the runtime; the turn's waiters wake only once it has returned") {
  // The flusher commits the start while the model still answers: the callback runs there, subscribes to the thread
  // and reads the start's events; it is held until the run has ended, and wait() on the turn returns only after.
  TempDir dir;
  auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("db.sqlite")});
  Condition in_model, release_model, in_callback, release_callback;
  auto script = [&](const ModelRequest&) {
    in_model.notify();
    release_model.wait();
    return text_result("hi");
  };
  RuntimeConfig cfg = quiet_config(store, std::make_shared<ScriptedModel>(script));
  cfg.flush_interval = std::chrono::milliseconds(5);  // the start commits during the model call
  Runtime rt(cfg);
  std::vector<std::string> seen;  // the callback's reading of the thread
  std::exception_ptr callback_error;
  std::atomic<bool> returned{false};
  const TurnHandle ids = rt.start_turn_async(
      turn_input("t-cb", user_message("hello")), [&](const TurnHandle& h, std::exception_ptr error) {
        try {
          if (error) std::rethrow_exception(error);
          auto sub = rt.subscribe(h.thread_id, h.first_seq - 1);
          sub->drain(100, [&](const StoredEvent& e) { seen.push_back(e.json.substr(0, 30)); });
        } catch (...) {
          callback_error = std::current_exception();
        }
        in_callback.notify();
        release_callback.wait();
        returned = true;
      });
  REQUIRE(in_model.wait());
  REQUIRE(in_callback.wait());  // the start is committed while the model call is under way
  REQUIRE_FALSE(callback_error);
  REQUIRE_FALSE(seen.empty());
  CHECK(seen.front().find("\"RUN_STARTED\"") != std::string::npos);
  release_model.notify();  // the run ends: its last commit, then its end, wait for the callback
  std::promise<TurnRecord> waited;
  std::thread waiter([&] {
    try {
      waited.set_value(rt.wait(ids.turn_id, kLongWait));
    } catch (...) {
      waited.set_exception(std::current_exception());
    }
  });
  auto result = waited.get_future();
  CHECK(result.wait_for(std::chrono::milliseconds(200)) == std::future_status::timeout);
  CHECK_FALSE(returned.load());
  release_callback.notify();
  waiter.join();
  CHECK(returned.load());
  CHECK(result.get().status == TurnStatus::completed);
}

TEST_CASE(
    "start_turn_async: an active turn refuses at once; a start refused at its commit is told and stores nothing") {
  TempDir dir;
  auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("db.sqlite")});
  // A store that does not see the active turn before the commit: the start gets as far as a concurrent one would.
  struct Blind final : ForwardingStore {
    using ForwardingStore::ForwardingStore;
    std::atomic<bool> blind{false};
    std::optional<TurnRecord> active_turn(std::string_view t) override {
      if (blind) return std::nullopt;
      return inner->active_turn(t);
    }
  };
  auto blind = std::make_shared<Blind>(store);
  std::atomic<int> runs{0};
  Told told;
  Runtime rt(quiet_config(blind, std::make_shared<ScriptedModel>(booking_script)));
  rt.tools().add(counting_book_room(runs));
  auto first = rt.run_turn(turn_input("t-busy", user_message("book a room")));
  REQUIRE(first.status == TurnStatus::waiting_approval);
  const auto events_before = store->events_after("t-busy", 0, 1000).size();
  CHECK(code_thrown_by([&] {
          rt.start_turn_async(turn_input("t-busy", user_message("book another")), told.callback());
        }) == ErrorCode::conflict);
  CHECK(told.told() == 0);
  blind->blind = true;
  rt.start_turn_async(turn_input("t-busy", user_message("book another")), told.callback());
  REQUIRE(told.calls.wait());
  CHECK(told.told() == 1);
  CHECK(code_of(told.error) == ErrorCode::conflict);
  blind->blind = false;
  CHECK(store->messages("t-busy").size() == 2);
  CHECK(store->events_after("t-busy", 0, 1000).size() == events_before);
  CHECK(store->active_turn("t-busy")->id == first.id);
  CHECK(runs == 0);
}

TEST_CASE("start_turn_async: a repeated message id is answered before it returns; bad input throws, never told") {
  TempDir dir;
  auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("db.sqlite")});
  Told told;
  Told bad;
  Runtime rt(
      quiet_config(store, std::make_shared<ScriptedModel>([](const ModelRequest&) { return text_result("hi"); })));
  TurnInput in = turn_input("t-rep", user_message("hello"));
  in.client_message_id = "msg-1";
  auto first = rt.run_turn(in);
  REQUIRE(first.status == TurnStatus::completed);
  const int64_t tx0 = store->write_transactions();
  rt.start_turn_async(in, told.callback());
  REQUIRE(told.told() == 1);  // before it returned
  CHECK_FALSE(told.error);
  CHECK(told.handle.existing);
  CHECK(told.handle.turn_id == first.id);
  REQUIRE(told.handle.delta_messages.size() == 2);
  CHECK(told.handle.delta_messages[1].content == "hi");
  CHECK(store->write_transactions() == tx0);

  CHECK_THROWS_AS(rt.start_turn_async(turn_input("t-rep", user_message("")), bad.callback()), Error);
  TurnInput other = turn_input("t-rep", user_message("hello"), "u2");  // another user's thread
  CHECK(code_thrown_by([&] { rt.start_turn_async(other, bad.callback()); }) == ErrorCode::not_found);
  CHECK_THROWS_AS(rt.start_turn_async(turn_input("t-new", user_message("hi")), nullptr), Error);
  CHECK(bad.told() == 0);
  CHECK_FALSE(store->get_thread("t-new").has_value());
  CHECK(store->write_transactions() == tx0);
}

TEST_CASE("a run_turn refused at its first commit stores nothing and reports the conflict") {
  TempDir dir;
  auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("db.sqlite")});
  std::atomic<int> runs{0};
  Runtime rt(quiet_config(store, std::make_shared<ScriptedModel>(booking_script)));
  rt.tools().add(counting_book_room(runs));
  auto first = rt.run_turn(turn_input("t-busy", user_message("book a room")));
  REQUIRE(first.status == TurnStatus::waiting_approval);
  const auto events_before = store->events_after("t-busy", 0, 1000).size();
  CHECK(code_thrown_by([&] { rt.run_turn(turn_input("t-busy", user_message("book another"))); }) ==
        ErrorCode::conflict);
  CHECK(store->messages("t-busy").size() == 2);
  CHECK(store->events_after("t-busy", 0, 1000).size() == events_before);
  CHECK(store->active_turn("t-busy")->id == first.id);
  CHECK(runs == 0);
}

TEST_CASE("a resume_turn whose decision loses its race at the first commit stores nothing") {
  TempDir dir;
  auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("db.sqlite")});
  std::atomic<int> runs{0};
  Runtime* runtime = nullptr;
  std::string victim;
  // A rejected call runs nothing, so the continuation's first commit is its end; the model cancels the
  // turn (as another client would) before that.
  auto script = [&](const ModelRequest& req) {
    if (tool_results_since_last_user(req) > 0 && !victim.empty()) runtime->cancel(victim);
    return booking_script(req);
  };
  Runtime rt(quiet_config(store, std::make_shared<ScriptedModel>(script)));
  runtime = &rt;
  rt.tools().add(counting_book_room(runs));
  auto t = rt.run_turn(turn_input("t-race", user_message("book a room")));
  REQUIRE(t.status == TurnStatus::waiting_approval);
  victim = t.id;
  CHECK(code_thrown_by([&] {
          rt.resume_turn(t.id, t.approval_request_id,
                         {Decision{t.interrupts[0]["id"], Decision::Action::reject, {}, ""}});
        }) == ErrorCode::invalid_state);
  CHECK(runs == 0);
  CHECK(store->get_turn(t.id)->status == TurnStatus::cancelled);
  CHECK_FALSE(store->get_approval(t.approval_request_id).has_value());
  auto hist = store->messages("t-race");
  REQUIRE(hist.size() == 3);  // user, call, the call's result from the cancel: nothing of the lost run
  CHECK(hist[2].message.role == Role::tool);
  std::vector<json> evs;
  for (const auto& e : store->events_after("t-race", 0, 1000)) evs.push_back(json::parse(e.json));
  check_agui(evs);
  CHECK(evs.back()["outcome"]["type"] == "cancelled");
}

// A process resumes the turn with resume_turn; book_room (not idempotent) runs, and the process is killed
// while the model works on the next step. `flush_ms` is the child's group-commit interval: long, the
// result is not committed yet when it dies (nothing commits before the model's step, which never ends);
// short, the flusher has committed it — the child's own subscriber sees the result (events reach
// subscribers only once committed) and tells the parent, which kills it then.
void crash_after_tool(int flush_ms, LedgerStatus expected) {
  TempDir dir;
  const std::string db = dir.file("db.sqlite");
  std::string turn_id;
  {
    auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{db});
    std::atomic<int> runs{0};
    Runtime rt(quiet_config(store, std::make_shared<ScriptedModel>(booking_script)));
    rt.tools().add(counting_book_room(runs));
    auto t = rt.run_turn(turn_input("t-die", user_message("book a room")));
    REQUIRE(t.status == TurnStatus::waiting_approval);
    turn_id = t.id;
  }
  const bool wait_for_commit = expected == LedgerStatus::finished;
  int ran[2];
  int committed[2];
  REQUIRE(pipe(ran) == 0);
  REQUIRE(pipe(committed) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) try {
      close(ran[0]);
      close(committed[0]);
      auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{db});
      auto script = [&](const ModelRequest& req) {
        if (tool_results_since_last_user(req) > 0) pause();  // killed here, after the tool
        return booking_script(req);
      };
      RuntimeConfig c = quiet_config(store, std::make_shared<ScriptedModel>(script));
      c.flush_interval = std::chrono::milliseconds(flush_ms);
      Runtime rt(c);
      ToolSpec spec;
      spec.name = "book_room";
      spec.approval = ApprovalPolicy::always();
      spec.handler = sync_tool([&](const ToolCallContext&) {
        char x = 1;
        (void)!write(ran[1], &x, 1);
        return ToolResult{json{{"ok", true}}, std::nullopt, nullptr};
      });
      rt.tools().add(spec);
      std::thread watcher;
      if (wait_for_commit)
        watcher = std::thread([&rt, after = rt.thread("t-die")->last_seq, w = committed[1]] {
          auto sub = rt.subscribe("t-die", after);
          while (auto e = sub->next(kLongWait))
            if (e->json.find("\"type\":\"TOOL_CALL_RESULT\"") != std::string::npos) {
              char y = 1;
              (void)!write(w, &y, 1);
              return;
            }
        });
      auto t = store->get_turn(turn_id);
      rt.resume_turn(t->id, t->approval_request_id,
                     {Decision{t->interrupts[0]["id"], Decision::Action::approve, {}, ""}});
      _exit(0);  // not reached: the parent kills this process in the model's next step
    } catch (const std::exception& e) {
      fprintf(stderr, "child: %s\n", e.what());
      _exit(5);
    }
  close(ran[1]);
  close(committed[1]);
  char x = 0;
  REQUIRE(read(ran[0], &x, 1) == 1);                             // the tool ran once
  if (wait_for_commit) REQUIRE(read(committed[0], &x, 1) == 1);  // its result is committed
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  close(ran[0]);
  close(committed[0]);

  auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{db});
  // As the dead process left it: the call was durable as started before it ran.
  auto left = store->ledger(turn_id);
  REQUIRE(left.size() == 1);
  CHECK(left[0].status == (expected == LedgerStatus::interrupted ? LedgerStatus::started : expected));
  CHECK(store->get_turn(turn_id)->status == TurnStatus::running);
  std::atomic<int> runs{0};
  RuntimeConfig c = quiet_config(store, std::make_shared<ScriptedModel>(booking_script));
  c.sweep_interval = std::chrono::milliseconds(50);
  c.tools.push_back(counting_book_room(runs));
  Runtime rt(c);
  // Recovered at once, or by the sweeper once the dead process's lease has passed: wait() wakes at that commit.
  CHECK(rt.wait(turn_id, kLongWait).status == TurnStatus::failed);
  CHECK(store->ledger(turn_id).at(0).status == expected);
  CHECK(runs == 0);  // never run again
  auto hist = rt.history("t-die");
  REQUIRE(hist.size() == 4);  // user, call, its one result, the error
  CHECK(hist[2].role == Role::tool);
  CHECK(hist[3].role == Role::system);
}

TEST_CASE("a crash after a tool ran, before its result was committed, leaves the call interrupted, not run again") {
  crash_after_tool(60000, LedgerStatus::interrupted);
}

TEST_CASE("a tool result waits for the run's next commit at most a group-commit interval") {
  crash_after_tool(5, LedgerStatus::finished);
}
