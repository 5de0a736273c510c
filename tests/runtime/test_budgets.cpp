// Hard budgets: each limit is hit exactly at its boundary, the turn that would pass one ends with RUN_ERROR
// budget_exceeded and an ERROR message, nothing half-written; thread and user budgets see what other turns
// committed, across a restart and across two runtimes on one store; spend is reported per run, turn, thread, user.
#include <doctest/doctest.h>

#include <atomic>

#include "support/runtime_fixture.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {

// Execution calls book_room `calls` times, one per answer, then answers; every answer reports usage of model "m1"
// (10 input tokens, 4 output tokens).
ModelScript counting_script(int calls) {
  return [calls](const ModelRequest& req) {
    ModelResult r;
    if (req.stage != "execution") {
      r = text_result("intent");
    } else if (static_cast<int>(tool_results_since_last_user(req)) < calls) {
      r = tool_call_result("", "book_room", R"({"room":"A1","day":"mon"})");
    } else {
      r = text_result("done");
    }
    TokenUsage u;
    u.provider = "test";
    u.model = "m1";
    u.input_tokens = 10;
    u.output_tokens = 4;
    u.total_tokens = 14;
    r.usage = u;
    return r;
  };
}

struct Budgeted {
  Harness h;
  Budgeted(int calls, Budgets b, ModelPrices prices = {})
      : h(counting_script(calls), [&](RuntimeConfig& c) {
          c.budgets = b;
          c.prices = prices;
        }) {
    h.add_book_room(ApprovalPolicy::never());
  }
  TurnRecord run(const std::string& thread) { return h.wait(h.start(thread, "book").turn_id); }
};

std::string run_error_code(Harness& h, const std::string& thread, int runs) {
  auto evs = h.events(thread, runs);
  const json& last = evs.back();
  return last["type"] == "RUN_ERROR" ? last["code"].get<std::string>() : std::string();
}

}  // namespace

TEST_CASE("turn.model_calls: the limit's last call is made, the one after it is not") {
  // One tool call: intent, the call, the answer = 3 model calls.
  Budgets at;
  at.turn.model_calls = 3;
  Budgeted ok(1, at);
  CHECK(ok.run("t-mc").status == TurnStatus::completed);
  CHECK(ok.h.model->calls() == 3);

  Budgets below;
  below.turn.model_calls = 2;
  Budgeted b(1, below);
  auto t = b.run("t-mc2");
  CHECK(t.status == TurnStatus::failed);
  CHECK(b.h.model->calls() == 2);
  CHECK(b.h.tool_runs == 1);
  auto evs = b.h.events("t-mc2");
  check_agui(evs);
  REQUIRE(evs.back()["type"] == "RUN_ERROR");
  CHECK(evs.back()["code"] == "budget_exceeded");
  CHECK(evs.back()["message"] == "budget exceeded: turn.model_calls is 2, and this would make 3 model calls");
  auto hist = b.h.rt->history("t-mc2");
  REQUIRE(!hist.empty());
  CHECK(hist.back().role == Role::system);
  CHECK(hist.back().content ==
        "ERROR budget_exceeded: budget exceeded: turn.model_calls is 2, and this would make 3 model calls");
  CHECK(t.steps == 2);
}

TEST_CASE("turn.tool_calls: a batch that would pass the limit runs none of its calls, and each gets an outcome") {
  Budgets at;
  at.turn.tool_calls = 3;
  Budgeted ok(3, at);
  CHECK(ok.run("t-tc").status == TurnStatus::completed);
  CHECK(ok.h.tool_runs == 3);

  Budgets below;
  below.turn.tool_calls = 2;
  Budgeted b(3, below);
  auto t = b.run("t-tc2");
  CHECK(t.status == TurnStatus::failed);
  CHECK(b.h.tool_runs == 2);
  CHECK(run_error_code(b.h, "t-tc2", 1) == "budget_exceeded");
  auto ledger = b.h.store->ledger(t.id);
  REQUIRE(ledger.size() == 3);
  int finished = 0, failed = 0;
  for (const auto& l : ledger) {
    finished += l.status == LedgerStatus::finished;
    failed += l.status == LedgerStatus::failed;  // never started: closed by the run's end
  }
  CHECK(finished == 2);
  CHECK(failed == 1);
  CHECK(b.h.rt->turn_spend(t.id).tool_calls == 3);
}

TEST_CASE("token and cost limits stop the next call once reached, and an unpriced model cannot pass a cost limit") {
  SUBCASE("output tokens: 4 per call, limit 8: two calls, the third is refused") {
    Budgets b;
    b.turn.output_tokens = 8;
    Budgeted r(3, b);
    CHECK(r.run("t-out").status == TurnStatus::failed);
    CHECK(r.h.model->calls() == 2);
    CHECK(run_error_code(r.h, "t-out", 1) == "budget_exceeded");
  }
  SUBCASE("input tokens: 10 per call, limit 31: four calls") {
    Budgets b;
    b.turn.input_tokens = 31;
    Budgeted r(5, b);
    CHECK(r.run("t-in").status == TurnStatus::failed);
    CHECK(r.h.model->calls() == 4);
  }
  SUBCASE("cost: 10 input tokens at 1 per token and 4 output at 0.5: 12 a call; limit 36 allows three calls") {
    Budgets b;
    b.turn.cost = 36;
    ModelPrices p{{"m1", ModelPrice{1e6, 5e5, -1}}};
    Budgeted r(5, b, p);
    auto t = r.run("t-cost");
    CHECK(t.status == TurnStatus::failed);
    CHECK(r.h.model->calls() == 3);
    auto evs = r.h.events("t-cost");
    CHECK(evs.back()["message"] == "budget exceeded: turn.cost is 36, and 36 is spent");
    const json& spend = evs.back()["metadata"]["agentrt"]["spend"];
    CHECK(spend ==
          json{{"modelCalls", 3}, {"toolCalls", 2}, {"inputTokens", 30}, {"outputTokens", 12}, {"cost", 36.0}});
    CHECK(r.h.rt->turn_spend(t.id).cost == doctest::Approx(36.0));
  }
  SUBCASE("a cost limit with a model that has no price") {
    Budgets b;
    b.turn.cost = 1000;
    Budgeted r(5, b, ModelPrices{{"other", ModelPrice{1, 1, -1}}});
    CHECK(r.run("t-unpriced").status == TurnStatus::failed);
    CHECK(r.h.model->calls() == 1);
    auto evs = r.h.events("t-unpriced");
    CHECK(evs.back()["message"] ==
          "budget exceeded: turn.cost is 1000, and the cost of model 'm1' is unknown (it has no entry in prices)");
  }
}

TEST_CASE("a thread budget counts the thread's committed turns, also after a restart") {
  Budgets b;
  b.thread.model_calls = 5;  // a turn without tools makes 2 calls (intent, answer)
  Budgeted r(0, b);
  CHECK(r.run("t-th").status == TurnStatus::completed);
  CHECK(r.run("t-th").status == TurnStatus::completed);
  auto third = r.run("t-th");
  CHECK(third.status == TurnStatus::failed);
  CHECK(third.steps == 1);  // its intent call is the fifth; the answer would be the sixth
  CHECK(r.run("t-other").status == TurnStatus::completed);  // another thread has its own budget

  // A new runtime on the same store sees the same spend.
  r.h.rt.reset();
  r.h.rt = std::make_unique<Runtime>([&] {
    RuntimeConfig c = test_config(r.h.store, r.h.model);
    c.budgets = b;
    return c;
  }());
  auto after = r.h.wait(r.h.start("t-th", "again").turn_id);
  CHECK(after.status == TurnStatus::failed);
  CHECK(after.steps == 0);
  CHECK(r.h.rt->thread_spend("t-th").model_calls == 5);
  CHECK(r.h.rt->user_spend("u1").model_calls == 7);
}

TEST_CASE("a user budget spans the user's threads and two runtimes on one store") {
  Budgets b;
  b.user.model_calls = 4;
  Budgeted a(0, b);
  RuntimeConfig c2 = test_config(a.h.store, a.h.model);
  c2.budgets = b;
  Runtime second(c2);
  CHECK(a.run("t-u1").status == TurnStatus::completed);  // 2 calls, committed
  TurnInput in = turn_input("t-u2", user_message("hi"));
  auto t2 = second.wait(second.start_turn(in).turn_id, kLongWait);
  CHECK(t2.status == TurnStatus::completed);  // 2 more: 4
  TurnInput in3 = turn_input("t-u3", user_message("hi"));
  auto t3 = second.wait(second.start_turn(in3).turn_id, kLongWait);
  CHECK(t3.status == TurnStatus::failed);
  CHECK(t3.steps == 0);
  // Another user is not limited by u1's spend.
  TurnInput other = turn_input("t-u4", user_message("hi"), "u2");
  CHECK(second.wait(second.start_turn(other).turn_id, kLongWait).status == TurnStatus::completed);
  CHECK(second.user_spend("u1").model_calls == 4);
  CHECK(second.user_spend("u2").model_calls == 2);
}

TEST_CASE("RUN_FINISHED carries the run's spend; the facade reports turn, thread and user") {
  ModelPrices p{{"*", ModelPrice{2e6, 1e6, -1}}};  // 20 + 4 = 24 a call
  Budgeted r(1, Budgets{}, p);
  auto t = r.run("t-sp");
  REQUIRE(t.status == TurnStatus::completed);
  auto evs = r.h.events("t-sp");
  const json& spend = evs.back()["metadata"]["agentrt"]["spend"];
  CHECK(spend == json{{"modelCalls", 3}, {"toolCalls", 1}, {"inputTokens", 30}, {"outputTokens", 12}, {"cost", 72.0}});
  CHECK(evs.back()["usage"].size() == 1);  // the run's usage is the event's own
  const Spend s = r.h.rt->turn_spend(t.id);
  CHECK(s.model_calls == 3);
  CHECK(s.tool_calls == 1);
  CHECK(s.cost == doctest::Approx(72.0));
  CHECK(json(r.h.rt->thread_spend("t-sp")) == json(s));
  CHECK(json(r.h.rt->user_spend("u1")) == json(s));
  CHECK(r.h.rt->user_spend("nobody").model_calls == 0);
  CHECK_THROWS_AS(r.h.rt->turn_spend("turn-unknown"), Error);
}

TEST_CASE("budgets and prices from JSON refuse what they do not know") {
  auto b = budgets_from_json(json::parse(R"({"turn":{"model_calls":3,"cost":1.5},"user":{"tool_calls":0}})"));
  CHECK(b.turn.model_calls == 3);
  CHECK(b.turn.cost == doctest::Approx(1.5));
  CHECK(b.user.tool_calls == 0);
  CHECK(b.thread.empty());
  CHECK_THROWS_WITH_AS(budgets_from_json(json::parse(R"({"turn":{"calls":3}})")),
                       doctest::Contains("unknown key 'calls'"), Error);
  CHECK_THROWS_AS(budgets_from_json(json::parse(R"({"turn":{"model_calls":-1}})")), Error);
  CHECK_THROWS_AS(budgets_from_json(json::parse(R"({"team":{}})")), Error);
  CHECK_THROWS_AS(budgets_from_json(json::parse(R"({"turn":{"cost":"1"}})")), Error);
  auto p = prices_from_json(json::parse(R"({"gpt":{"input":2.5,"output":10,"cached_input":1.25}})"));
  CHECK(p.at("gpt").cached_input == doctest::Approx(1.25));
  CHECK_THROWS_AS(prices_from_json(json::parse(R"({"gpt":{"input":-1}})")), Error);
  CHECK_THROWS_AS(prices_from_json(json::parse(R"({"gpt":{"in":1}})")), Error);
}
