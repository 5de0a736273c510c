// Runtimes on PostgreSQL: two Runtimes (as two processes would be: each with its own PostgresStore, its own
// connections) on one database, a turn paused on one and resumed on the other.
#include <doctest/doctest.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "store/postgres/postgres_store.hpp"
#include "support/postgres_database.hpp"
#include "support/runtime_fixture.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {

// A Runtime on its own PostgresStore of `db`, with book_room (always needs approval) counting into `runs`.
std::unique_ptr<Runtime> runtime_on(const PgDatabase& db, std::shared_ptr<PostgresStore>& store,
                                    std::atomic<int>& runs) {
  store = std::make_shared<PostgresStore>(db.options(4));
  RuntimeConfig c = test_config(store, std::make_shared<ScriptedModel>(booking_script));
  // Each runtime takes the other for dead after this long without a heartbeat: long enough never to happen on a
  // loaded machine (this test is not about takeover).
  c.instance_lease = std::chrono::seconds(30);
  auto rt = std::make_unique<Runtime>(c);
  ToolSpec spec;
  spec.name = "book_room";
  spec.parameters = json::parse(R"({"type":"object","properties":{"room":{"type":"string"}}})");
  spec.approval = ApprovalPolicy::always();
  spec.handler = sync_tool([&runs](const ToolCallContext& call) {
    ++runs;
    return ToolResult{json{{"ok", true}, {"room", call.args.value("room", "")}}, std::nullopt, nullptr};
  });
  rt->tools().add(spec);
  return rt;
}

}  // namespace

TEST_CASE("postgres: a turn paused on one Runtime is resumed on another on the same database; the tool runs once") {
  PgDatabase db;
  std::atomic<int> runs{0};
  std::shared_ptr<PostgresStore> store_a, store_b;
  auto a = runtime_on(db, store_a, runs);
  auto b = runtime_on(db, store_b, runs);

  auto h = a->start_turn(turn_input("t-pg", user_message("book a room")));
  auto follow = a->subscribe("t-pg", h.first_seq - 1);  // a client following the thread on A
  auto paused = a->wait(h.turn_id, kLongWait);
  REQUIRE(paused.status == TurnStatus::waiting_approval);
  CHECK(runs == 0);

  // B finds the paused turn in the database and resumes it; the continuation runs on B's workers.
  auto on_b = b->turn(h.turn_id);
  REQUIRE(on_b);
  REQUIRE(on_b->status == TurnStatus::waiting_approval);
  const std::vector<Decision> approve{Decision{on_b->interrupts[0]["id"], Decision::Action::approve, std::nullopt, ""}};
  json answer = b->resume(h.turn_id, on_b->approval_request_id, approve);
  CHECK(answer["status"] == "accepted");
  auto done = b->wait(h.turn_id, kLongWait);
  CHECK(done.status == TurnStatus::completed);
  CHECK(runs == 1);

  // The same approval again, on A: the first answer, nothing runs.
  json again = a->resume(h.turn_id, on_b->approval_request_id, approve);
  CHECK(again == answer);
  CHECK(runs == 1);

  // A's subscriber sees B's run as B commits it (A's sweeper learns of B's commits by notification), in order,
  // none twice: both runs, ending with the resumed run's RUN_FINISHED.
  std::vector<StoredEvent> seen;
  int run_finished = 0;
  while (run_finished < 2) {
    auto e = follow->next(kLongWait);
    REQUIRE_MESSAGE(e, "A's subscriber stopped after " << seen.size() << " events");
    if (!seen.empty()) CHECK(e->seq == seen.back().seq + 1);
    if (json::parse(e->json)["type"] == "RUN_FINISHED") ++run_finished;
    seen.push_back(std::move(*e));
  }
  CHECK(seen.front().seq == h.first_seq);
  CHECK(seen.back().seq == a->thread("t-pg")->last_seq);
  std::vector<json> stream;
  for (const auto& e : seen) stream.push_back(json::parse(e.json));
  auto violation = verify_agui_stream(stream);
  CHECK_MESSAGE(!violation, (violation ? *violation : std::string()));

  // Both runtimes read the same history; replaying the log rebuilds it byte for byte.
  auto history_a = a->history("t-pg");
  auto history_b = b->history("t-pg");
  REQUIRE(history_a.size() == 4);  // user, assistant (tool call), tool result, answer
  REQUIRE(history_b.size() == history_a.size());
  for (size_t i = 0; i < history_a.size(); ++i) CHECK(to_json_string(history_a[i]) == to_json_string(history_b[i]));
  CHECK(history_a[2].role == Role::tool);
  auto ledger = store_a->ledger(h.turn_id);
  REQUIRE(ledger.size() == 1);
  CHECK(ledger[0].status == LedgerStatus::finished);
  follow.reset();  // a subscription ends before its runtime
  b.reset();
  a.reset();
  auto diff = replay_difference(*store_a, "t-pg");
  CHECK_MESSAGE(!diff, (diff ? *diff : std::string()));
}

TEST_CASE(
    "postgres: a process killed inside a tool: a live runtime fails its turn within the lease, the call "
    "interrupted, never re-run") {
  PgDatabase db;
  // Both runtimes sweep often with a short lease.
  auto config_on = [&db](std::shared_ptr<PostgresStore>& store) {
    store = std::make_shared<PostgresStore>(db.options(2));
    RuntimeConfig c = test_config(store, std::make_shared<ScriptedModel>(booking_script));
    c.sweep_interval = std::chrono::milliseconds(100);
    c.instance_lease = std::chrono::milliseconds(1500);
    return c;
  };
  // B is up first, on the same database.
  std::shared_ptr<PostgresStore> store_b;
  std::atomic<int> runs_b{0};
  Runtime b(config_on(store_b));
  ToolSpec counted;
  counted.name = "book_room";
  counted.handler = sync_tool([&](const ToolCallContext&) {
    ++runs_b;
    return ToolResult{json{{"ok", true}}, std::nullopt, nullptr};
  });
  b.tools().add(counted);

  // A (another process) starts a turn whose non-idempotent tool never returns, and is killed inside it.
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) try {
      close(ready[0]);
      std::shared_ptr<PostgresStore> store;
      Runtime rt(config_on(store));
      ToolSpec spec;
      spec.name = "book_room";
      spec.handler = [&](const ToolCallContext&, ToolCompletion) {
        char x = 1;
        (void)!write(ready[1], &x, 1);
        pause();  // never completes: the parent kills us here
      };
      rt.tools().add(spec);
      rt.start_turn(turn_input("t-killed", user_message("book a room")));
      pause();
      _exit(0);
    } catch (const std::exception& e) {
      fprintf(stderr, "child: %s\n", e.what());
      _exit(5);
    }
  close(ready[1]);
  char x = 0;
  REQUIRE(read(ready[0], &x, 1) == 1);  // the call is `started` (committed before the tool runs)
  close(ready[0]);
  auto running = store_b->last_turn("t-killed");
  REQUIRE(running);
  CHECK(running->status == TurnStatus::running);
  REQUIRE(store_b->ledger(running->id).size() == 1);
  CHECK(store_b->ledger(running->id)[0].status == LedgerStatus::started);
  auto follow = b.subscribe("t-killed", 0);  // a client following the thread on B
  const auto killed_at = std::chrono::steady_clock::now();
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);

  // B's sweeper finds A's lease run out and fails the turn; wait() wakes at that commit.
  CHECK(b.wait(running->id, kLongWait).status == TurnStatus::failed);
  const auto took = std::chrono::steady_clock::now() - killed_at;
  MESSAGE("takeover after kill -9: ", std::chrono::duration_cast<std::chrono::milliseconds>(took).count(),
          " ms (lease 1500 ms)");
  CHECK(took < std::chrono::seconds(10));
  CHECK(store_b->ledger(running->id).at(0).status == LedgerStatus::interrupted);
  CHECK(runs_b == 0);  // never re-run, on any process
  // B's follower sees the RUN_ERROR B committed for A's run.
  bool saw_error = false;
  while (auto e = follow->next(kLongWait)) {
    if (e->json.find("\"RUN_ERROR\"") != std::string::npos) {
      saw_error = true;
      break;
    }
  }
  CHECK(saw_error);
}

TEST_CASE("postgres: a job started on one runtime and completed through two others at once is delivered once") {
  PgDatabase db;
  auto script = [](const ModelRequest& req) {
    if (tool_results_since_last_user(req) < 1) return tool_call_result("call_r", "render", R"({"scene":"beach"})");
    return text_result("rendering");
  };
  std::vector<std::shared_ptr<PostgresStore>> stores;
  std::vector<std::unique_ptr<Runtime>> rts;
  for (int i = 0; i < 3; ++i) {
    stores.push_back(std::make_shared<PostgresStore>(db.options(2)));
    RuntimeConfig c = test_config(stores.back(), std::make_shared<ScriptedModel>(script));
    c.instance_lease = std::chrono::seconds(30);
    c.stages.intent.call_model = false;  // the script's one tool call is the execution stage's
    c.stages.organization.call_model = false;
    rts.push_back(std::make_unique<Runtime>(c));
    ToolSpec render;
    render.name = "render";
    render.parameters = json::parse(R"({"type":"object","properties":{"scene":{"type":"string"}}})");
    render.handler = [](const ToolCallContext&, ToolCompletion done) {
      JobStart js;
      js.message = "rendering";
      done.start_job(js);
    };
    rts.back()->tools().add(render);
  }
  auto h = rts[0]->start_turn(turn_input("t-job", user_message("render the beach")));
  REQUIRE(rts[0]->wait(h.turn_id, kLongWait).status == TurnStatus::completed);
  auto jobs = stores[2]->thread_jobs("t-job");
  REQUIRE(jobs.size() == 1);
  REQUIRE(jobs[0].status == JobStatus::running);

  // B and C complete it at the same time (as two processes told by the same external system would).
  std::vector<std::string> outcomes(2);
  std::vector<std::thread> completers;
  for (int i = 1; i <= 2; ++i)
    completers.emplace_back([&, i] {
      try {
        auto r =
            rts[static_cast<size_t>(i)]->complete_job(jobs[0].id, JobResult{json{{"url", "u"}}, json::array(), ""});
        outcomes[static_cast<size_t>(i - 1)] = std::string(to_string(r.status));
      } catch (const Error& e) {
        outcomes[static_cast<size_t>(i - 1)] = "error " + std::string(to_string(e.code()));
      }
    });
  for (auto& t : completers) t.join();
  CAPTURE(outcomes[0]);
  CAPTURE(outcomes[1]);
  CHECK(std::count(outcomes.begin(), outcomes.end(), "succeeded") == 1);  // the other finds it finished
  for (const auto& o : outcomes) CHECK((o == "succeeded" || o == "error conflict" || o == "error invalid_state"));
  for (auto& rt : rts) rt->sweep();  // every runtime's delivery pass, after the fact
  auto events = stores[1]->events_after("t-job", 0, 1000);
  int deliveries = 0, succeeded = 0;
  for (const auto& e : events) {
    const json j = json::parse(e.json);
    if (j["type"] == "TOOL_CALL_RESULT" && j["toolCallId"] == "call_r" &&
        j["content"].get<std::string>().find("succeeded") != std::string::npos)
      ++deliveries;
    if (j["type"] == "CUSTOM" && j["name"] == "agentrt.job" && j["value"]["status"] == "succeeded") ++succeeded;
  }
  CHECK(deliveries == 1);
  CHECK(succeeded == 1);
  auto done = stores[0]->get_job(jobs[0].id);
  REQUIRE(done);
  CHECK(done->status == JobStatus::succeeded);
  CHECK(done->delivered);
}

TEST_CASE(
    "postgres: a subscriber on one runtime sees another's commits as they arrive, also after its listening "
    "connection was dropped") {
  PgDatabase db;
  std::atomic<int> runs{0};
  std::shared_ptr<PostgresStore> store_a, store_b;
  auto a = runtime_on(db, store_a, runs);
  // B's sweeper looks only once a minute: what reaches its subscriber in time came through LISTEN/NOTIFY.
  store_b = std::make_shared<PostgresStore>(db.options(2));
  RuntimeConfig cb = test_config(store_b, std::make_shared<ScriptedModel>(booking_script));
  cb.sweep_interval = std::chrono::minutes(1);
  cb.instance_lease = std::chrono::minutes(5);
  Runtime b(cb);

  auto read_run = [](Subscription& sub) {
    std::vector<std::string> types;
    while (auto e = sub.next(std::chrono::seconds(20))) {
      types.push_back(json::parse(e->json)["type"].get<std::string>());
      if (types.back() == "RUN_FINISHED" || types.back() == "RUN_ERROR") break;
    }
    return types;
  };
  auto follow = b.subscribe("t-live", 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto h = a->start_turn(turn_input("t-live", user_message("book a room")));
  auto first = read_run(*follow);
  REQUIRE_FALSE(first.empty());
  CHECK(first.front() == "RUN_STARTED");
  CHECK(first.back() == "RUN_FINISHED");  // paused for approval
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));

  // B's listening connection is ended by the server; A's next run still reaches B's subscriber, in order,
  // nothing twice (the reconnection counts as a change: B reads the log from where its subscriber is).
  PGconn* admin = PQconnectdb(db.url.c_str());
  REQUIRE(PQstatus(admin) == CONNECTION_OK);
  PQclear(PQexec(admin,
                 "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname=current_database() AND "
                 "query LIKE 'LISTEN%'"));
  PQfinish(admin);
  auto t = a->turn(h.turn_id);
  REQUIRE(t);
  a->resume(h.turn_id, t->approval_request_id,
            {Decision{t->interrupts[0]["id"], Decision::Action::approve, std::nullopt, ""}});
  auto second = read_run(*follow);
  REQUIRE_FALSE(second.empty());
  CHECK(second.front() == "RUN_STARTED");
  CHECK(second.back() == "RUN_FINISHED");
  CHECK(std::count(second.begin(), second.end(), "TOOL_CALL_RESULT") == 1);
  CHECK(a->wait(h.turn_id, kLongWait).status == TurnStatus::completed);
  CHECK(runs == 1);
}

TEST_CASE("postgres: a user budget holds across two runtimes on one database, and spend sums the user's turns") {
  PgDatabase db;
  Budgets budgets;
  budgets.user.model_calls = 4;  // a turn makes 2 calls: intent and answer
  auto model = std::make_shared<ScriptedModel>([](const ModelRequest&) {
    ModelResult r = text_result("hi");
    TokenUsage u;
    u.provider = "p";
    u.model = "m";
    u.input_tokens = 7;
    u.output_tokens = 3;
    r.usage = u;
    return r;
  });
  auto runtime = [&] {
    RuntimeConfig c = test_config(std::make_shared<PostgresStore>(db.options(2)), model);
    c.instance_lease = std::chrono::seconds(30);
    c.budgets = budgets;
    c.prices = ModelPrices{{"m", ModelPrice{1e6, 2e6, -1}}};
    return std::make_unique<Runtime>(c);
  };
  auto a = runtime(), b = runtime();
  CHECK(a->wait(a->start_turn(turn_input("t-b1", user_message("x"))).turn_id, kLongWait).status ==
        TurnStatus::completed);
  CHECK(b->wait(b->start_turn(turn_input("t-b2", user_message("x"))).turn_id, kLongWait).status ==
        TurnStatus::completed);
  auto refused = a->wait(a->start_turn(turn_input("t-b3", user_message("x"))).turn_id, kLongWait);
  CHECK(refused.status == TurnStatus::failed);
  CHECK(refused.steps == 0);
  CHECK(refused.error == "budget exceeded: user.model_calls is 4, and this would make 5 model calls");
  const Spend s = b->user_spend("u1");
  CHECK(s.model_calls == 4);
  CHECK(s.input_tokens == 28);
  CHECK(s.output_tokens == 12);
  CHECK(s.cost == doctest::Approx(28 + 24));
  REQUIRE(s.usage.size() == 1);
  CHECK(s.usage[0].model == "m");
  CHECK(b->thread_spend("t-b1").model_calls == 2);
}
