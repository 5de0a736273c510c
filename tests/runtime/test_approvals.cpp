#include <doctest/doctest.h>

#include <thread>

#include "support/runtime_fixture.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {

TurnRecord pause_booking(Harness& h, const std::string& thread) {
  auto handle = h.start(thread, "book a room");
  auto t = h.wait(handle.turn_id);
  REQUIRE(t.status == TurnStatus::waiting_approval);
  return t;
}

std::string interrupt_id(const TurnRecord& t, size_t i = 0) { return t.interrupts.at(i).at("id").get<std::string>(); }

ModelResult two_calls_script(const ModelRequest& req) {
  if (req.stage != "execution") return text_result("x");
  size_t n = tool_results_since_last_user(req);
  if (n == 0) {
    ModelResult r;
    r.tool_calls.push_back({"call_a", "book_room", R"({"room":"A1","day":"mon"})"});
    r.tool_calls.push_back({"call_b", "book_room", R"({"room":"B2","day":"tue"})"});
    return r;
  }
  return text_result("both answered");
}

}  // namespace

TEST_CASE("a rejected call is not executed and the model sees the person's reason") {
  Harness h;
  h.add_book_room();
  auto t = pause_booking(h, "t-rej");
  Decision d{interrupt_id(t), Decision::Action::reject, std::nullopt, "too expensive"};
  h.rt->resume(t.id, t.approval_request_id, {d});
  auto done = h.wait(t.id);
  CHECK(done.status == TurnStatus::completed);
  CHECK(h.tool_runs == 0);
  auto evs = h.events("t-rej", 2);
  check_agui(evs);
  const json* res = find_event(evs, "TOOL_CALL_RESULT");
  REQUIRE(res);
  CHECK((*res)["metadata"]["tool_agent_output"]["status"] == "rejected");
  CHECK((*res)["metadata"]["tool_agent_output"]["error"]["code"] == "rejected");
  auto hist = h.rt->history("t-rej");
  REQUIRE(hist.size() == 4);
  CHECK(hist[2].role == Role::tool);
  CHECK(hist[3].content.find("too expensive") != std::string::npos);
  auto ledger = h.store->ledger(t.id);
  REQUIRE(ledger.size() == 1);
  CHECK(ledger[0].status == LedgerStatus::rejected);
}

TEST_CASE("approve with edited arguments runs the tool with the edits, and invalid edits are refused") {
  Harness h;
  h.add_book_room();
  auto t = pause_booking(h, "t-edit");
  Decision bad{interrupt_id(t), Decision::Action::approve, json{{"room", "B2"}, {"day", "someday"}}, ""};
  try {
    h.rt->resume(t.id, t.approval_request_id, {bad});
    FAIL("invalid edited arguments were accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    CHECK(std::string(e.what()).find("/day") != std::string::npos);
  }
  CHECK(h.rt->turn(t.id)->status == TurnStatus::waiting_approval);
  Decision good{interrupt_id(t), Decision::Action::approve, json{{"room", "B2"}, {"day", "tue"}}, ""};
  h.rt->resume(t.id, t.approval_request_id, {good});
  CHECK(h.wait(t.id).status == TurnStatus::completed);
  REQUIRE(h.tool_runs == 1);
  CHECK(h.tool_args[0] == json{{"room", "B2"}, {"day", "tue"}});
  auto ledger = h.store->ledger(t.id);
  CHECK(json::parse(ledger[0].arguments) == json{{"room", "B2"}, {"day", "tue"}});
  CHECK(ledger[0].decision["editedArgs"]["room"] == "B2");
}

TEST_CASE("two calls needing approval pause together and a resume must answer both") {
  Harness h(two_calls_script);
  h.add_book_room();
  auto handle = h.start("t-par", "book two rooms");
  auto t = h.wait(handle.turn_id);
  REQUIRE(t.status == TurnStatus::waiting_approval);
  REQUIRE(t.interrupts.size() == 2);
  auto run1 = h.events("t-par");
  check_agui(run1);
  CHECK(run1.back()["outcome"]["interrupts"].size() == 2);

  try {
    h.rt->resume(t.id, t.approval_request_id, {Decision{interrupt_id(t, 0), Decision::Action::approve, {}, ""}});
    FAIL("a partial resume was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    CHECK(std::string(e.what()).find("has no decision") != std::string::npos);
  }
  try {
    h.rt->resume(t.id, t.approval_request_id,
                 {Decision{"int_nope", Decision::Action::approve, {}, ""},
                  Decision{interrupt_id(t, 0), Decision::Action::approve, {}, ""}});
    FAIL("an unknown interrupt was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
  }
  h.rt->resume(t.id, t.approval_request_id,
               {Decision{interrupt_id(t, 0), Decision::Action::approve, {}, ""},
                Decision{"call_b", Decision::Action::reject, {}, "no"}});  // a tool call id works too
  CHECK(h.wait(t.id).status == TurnStatus::completed);
  CHECK(h.tool_runs == 1);
  CHECK(h.tool_args.at(0)["room"] == "A1");
  auto evs = h.events("t-par", 2);
  check_agui(evs);
  std::vector<json> run2(evs.begin() + static_cast<long>(run1.size()), evs.end());
  int results = 0;
  for (const auto& e : run2) {
    CHECK(e["type"] != "TOOL_CALL_START");
    if (e["type"] == "TOOL_CALL_RESULT") ++results;
  }
  CHECK(results == 2);
  auto hist = h.rt->history("t-par");
  REQUIRE(hist.size() == 5);  // user, assistant(2 calls), tool, tool, answer
  CHECK(hist[1].tool_calls.size() == 2);
}

TEST_CASE("a second resume with the same approval id returns the first answer and runs nothing") {
  Harness h;
  h.add_book_room();
  auto t = pause_booking(h, "t-dup");
  Decision d{interrupt_id(t), Decision::Action::approve, std::nullopt, ""};
  json a1 = h.rt->resume(t.id, t.approval_request_id, {d});
  h.wait(t.id);
  json a2 = h.rt->resume(t.id, t.approval_request_id, {d});
  CHECK(a1 == a2);
  // Even with different decisions, the first answer stands.
  json a3 = h.rt->resume(t.id, t.approval_request_id, {Decision{interrupt_id(t), Decision::Action::reject, {}, "x"}});
  CHECK(a3 == a1);
  CHECK(h.wait(t.id).status == TurnStatus::completed);
  CHECK(h.tool_runs == 1);
}

TEST_CASE("concurrent resumes of one turn execute the tool at most once and all get the same answer") {
  for (int round = 0; round < 5; ++round) {
    Harness h;
    h.add_book_room();
    auto t = pause_booking(h, "t-conc");
    Decision d{interrupt_id(t), Decision::Action::approve, std::nullopt, ""};
    std::vector<std::thread> threads;
    std::vector<json> answers(8);
    std::atomic<int> errors{0};
    for (int i = 0; i < 8; ++i)
      threads.emplace_back([&, i] {
        try {
          answers[i] = h.rt->resume(t.id, t.approval_request_id, {d});
        } catch (const Error&) {
          ++errors;
        }
      });
    for (auto& th : threads) th.join();
    CHECK(errors == 0);
    for (const auto& a : answers) CHECK(a == answers[0]);
    CHECK(h.wait(t.id).status == TurnStatus::completed);
    CHECK(h.tool_runs == 1);
  }
}

TEST_CASE("resuming a turn that is not waiting is a clear error") {
  Harness h;
  h.add_book_room();
  auto t = pause_booking(h, "t-notwait");
  h.rt->resume(t.id, t.approval_request_id, {Decision{interrupt_id(t), Decision::Action::approve, {}, ""}});
  h.wait(t.id);
  try {
    h.rt->resume(t.id, "apr_other", {});
    FAIL("resume of a completed turn was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_state);
    CHECK(std::string(e.what()).find("COMPLETED") != std::string::npos);
  }
  try {
    h.rt->resume("turn_unknown", "apr_x", {});
    FAIL("resume of an unknown turn was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::not_found);
  }
}

TEST_CASE("an approval past its deadline expires: the turn is EXPIRED, distinct from a rejection") {
  Harness h(booking_script, [](RuntimeConfig& c) {
    c.approval_timeout = std::chrono::milliseconds(100);
    c.sweep_interval = std::chrono::milliseconds(20);
  });
  h.add_book_room();
  auto handle = h.start("t-exp", "book a room");
  // The paused run, then the sweeper's expiry run: its end is committed with the EXPIRED turn. (The deadline
  // is short: the turn may have expired before anything reads it WAITING_APPROVAL; its first run says it
  // paused.)
  auto evs = h.events("t-exp", 2);
  const json* paused = find_event(evs, "RUN_FINISHED");
  REQUIRE(paused);
  REQUIRE((*paused)["outcome"]["type"] == "interrupt");
  const std::string interrupt = (*paused)["outcome"]["interrupts"][0]["id"];
  auto t = *h.rt->turn(handle.turn_id);
  REQUIRE(t.status == TurnStatus::expired);
  try {
    h.rt->resume(t.id, t.approval_request_id, {Decision{interrupt, Decision::Action::approve, {}, ""}});
    FAIL("resume after expiry was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::expired);
  }
  CHECK(h.tool_runs == 0);
  check_agui(evs);
  CHECK(evs.back()["type"] == "RUN_ERROR");
  CHECK(evs.back()["code"] == "approval_expired");
  const json* res = find_event(evs, "TOOL_CALL_RESULT");
  REQUIRE(res);
  CHECK((*res)["metadata"]["tool_agent_output"]["status"] == "expired");
  CHECK(h.store->ledger(t.id)[0].status == LedgerStatus::expired);
  // The thread is free again and its history is well formed (the call has its result).
  auto hist = h.rt->history("t-exp");
  REQUIRE(hist.size() == 3);
  CHECK(hist[2].role == Role::tool);
  const int64_t seen = h.rt->thread("t-exp")->last_seq;
  h.start("t-exp", "hello");
  auto next = h.events("t-exp", 1, seen);
  CHECK(next.back()["outcome"]["type"] == "interrupt");  // the script books again
}

TEST_CASE("a second start while a turn is active is a conflict; the same client message id returns the turn") {
  Harness h;
  h.add_book_room();
  auto first = h.start("t-one", "book a room", "cm-1");
  h.wait(first.turn_id);
  try {
    h.start("t-one", "another", "cm-2");
    FAIL("a second active turn was started");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::conflict);
  }
  auto again = h.start("t-one", "book a room", "cm-1");
  CHECK(again.existing);
  CHECK(again.turn_id == first.turn_id);
  CHECK(h.model->calls() == 2);
}

TEST_CASE("an approval predicate asks only for the calls it matches") {
  Harness h([](const ModelRequest& req) -> ModelResult {
    if (req.stage != "execution") return text_result("x");
    if (tool_results_since_last_user(req) == 0) {
      ModelResult r;
      r.tool_calls.push_back({"c_cheap", "book_room", R"({"room":"A1","day":"mon"})"});
      r.tool_calls.push_back({"c_suite", "book_room", R"({"room":"SUITE","day":"tue"})"});
      return r;
    }
    return text_result("done");
  });
  h.add_book_room(ApprovalPolicy::when([](const json& args) { return args.value("room", "") == "SUITE"; }));
  auto t = h.rt->run_turn(turn_input("t-pred", user_message("book")));
  REQUIRE(t.status == TurnStatus::waiting_approval);
  REQUIRE(t.interrupts.size() == 1);
  CHECK(t.interrupts[0]["toolCallId"] == "c_suite");
  CHECK(h.tool_runs == 1);  // the cheap room ran without asking
  auto done = h.rt->resume_turn(t.id, t.approval_request_id, {Decision{"c_suite", Decision::Action::approve, {}, ""}});
  CHECK(done.status == TurnStatus::completed);
  CHECK(h.tool_runs == 2);
}

TEST_CASE("the facade's reads for hosts: a turn's tool calls, the answered approval, the last turn, events pages") {
  Harness h;
  h.add_book_room();
  CHECK_FALSE(h.rt->last_turn("t-reads").has_value());
  auto t = pause_booking(h, "t-reads");
  auto calls = h.rt->tool_calls(t.id);
  REQUIRE(calls.size() == 1);
  CHECK(calls[0].tool_call_id == "call_1");
  CHECK(calls[0].tool_name == "book_room");
  CHECK(json::parse(calls[0].arguments) == json{{"room", "A1"}, {"day", "mon"}});
  CHECK(calls[0].status == LedgerStatus::requested);
  CHECK_FALSE(h.rt->approval(t.approval_request_id).has_value());  // not answered yet

  Decision d{interrupt_id(t), Decision::Action::approve, std::nullopt, ""};
  const json answer = h.rt->resume(t.id, t.approval_request_id, {d}, "run-reads-2");
  CHECK(answer == json{{"status", "accepted"},
                       {"turnId", t.id},
                       {"threadId", "t-reads"},
                       {"runId", "run-reads-2"},
                       {"approvalRequestId", t.approval_request_id}});
  CHECK(h.wait(t.id).status == TurnStatus::completed);
  auto approval = h.rt->approval(t.approval_request_id);
  REQUIRE(approval.has_value());
  CHECK(approval->turn_id == t.id);
  CHECK(approval->thread_id == "t-reads");
  CHECK(approval->answer == answer);
  CHECK(h.rt->tool_calls(t.id).at(0).status == LedgerStatus::finished);
  CHECK(h.rt->last_turn("t-reads")->id == t.id);
  CHECK(h.rt->tool_calls("turn_unknown").empty());
  CHECK_FALSE(h.rt->approval("apr_unknown").has_value());

  // The page is the log as a subscription reads it; only the owner reads it.
  const auto evs = h.events("t-reads", 2);
  const auto page = h.rt->events_page("t-reads", "u1", 0, kMaxEventsPage);
  REQUIRE(page.size() == evs.size());
  for (size_t i = 0; i < page.size(); ++i) {
    CHECK(page[i].seq == static_cast<int64_t>(i) + 1);
    CHECK(json::parse(page[i].json) == evs[i]);
  }
  CHECK(h.rt->events_page("t-reads", "u1", 3, 2).front().seq == 4);
  CHECK(h.rt->events_page("t-reads", "u1", 3, 2).size() == 2);
  CHECK_THROWS_WITH_AS(h.rt->events_page("t-reads", "u2", 0, 10), "thread t-reads not found", Error);
  CHECK_THROWS_WITH_AS(h.rt->events_page("t-reads", "u1", 0, 0), "an events page holds 1 to 1000 events, not 0", Error);
  CHECK_THROWS_WITH_AS(h.rt->events_page("t-reads", "u1", -1, 10), "after_seq must not be negative, not -1", Error);
}
