// Runtimes on PostgreSQL: two Runtimes (as two processes would be: each with its own PostgresStore, its own
// connections) on one database, a turn paused on one and resumed on the other.
#include <doctest/doctest.h>

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
    return ToolResult{json{{"ok", true}, {"room", call.args.value("room", "")}}, std::nullopt};
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
