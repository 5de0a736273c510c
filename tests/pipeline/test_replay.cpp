// The projector: history messages are derived from events, and replaying a thread's stored log rebuilds its
// stored history byte for byte. (Every Harness and JobHarness also replays each thread it used when it ends,
// so every runtime test's flow is replayed: golden paths, approvals, jobs, cancels, expiry, crashes.)
#include <doctest/doctest.h>

#include "agentrt/records.hpp"
#include "pipeline/projector.hpp"
#include "support/replay.hpp"
#include "support/runtime_fixture.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {

Event with_facts(Event e, json facts) {
  e.metadata = json::object();
  e.metadata["agentrt"] = std::move(facts);
  return e;
}

}  // namespace

TEST_CASE("the projector derives each message from the events that carry it") {
  Projector p("t1");
  Message user;
  user.id = "m-user";
  user.role = Role::user;
  user.content = "hi";
  auto u = p.apply("run1", with_facts(events::run_started("t1", "run1"), {{"turnId", "turn1"}, {"message", user}}));
  REQUIRE(u.has_value());
  CHECK(u->turn_id == "turn1");
  CHECK(u->run_id == "run1");
  CHECK(to_json_string(u->message) == to_json_string(user));

  // Streamed text and a tool call; the last end says the message is complete and which calls it holds.
  CHECK_FALSE(p.apply("run1", events::text_start("m-a")));
  CHECK_FALSE(p.apply("run1", events::text_content("m-a", "Let me ")));
  CHECK_FALSE(p.apply("run1", events::text_content("m-a", "look.")));
  CHECK_FALSE(p.apply("run1", events::text_end("m-a")));
  CHECK_FALSE(p.apply("run1", events::tool_call_start("c1", "search", "m-a")));
  CHECK_FALSE(p.apply("run1", events::tool_call_args("c1", "{\"q\":")));
  CHECK_FALSE(p.apply("run1", events::tool_call_args("c1", "1}")));
  CHECK_FALSE(p.apply("run1", events::tool_call_start("c2", "search", "m-a")));  // dropped by the final answer
  CHECK_FALSE(p.apply("run1", events::tool_call_end("c2")));
  auto a = p.apply("run1", with_facts(events::tool_call_end("c1"), {{"message", {{"toolCalls", {"c1"}}}}}));
  REQUIRE(a.has_value());
  CHECK(a->turn_id == "turn1");
  CHECK(a->message.role == Role::assistant);
  CHECK(a->message.content == "Let me look.");
  REQUIRE(a->message.tool_calls.size() == 1);
  CHECK(a->message.tool_calls[0].id == "c1");
  CHECK(a->message.tool_calls[0].arguments == "{\"q\":1}");
  CHECK(a->message.metadata.is_null());

  // A call whose final form differs from what was streamed: the completion restates its name and arguments.
  CHECK_FALSE(p.apply("run1", events::tool_call_start("c9", "serch", "m-b")));
  CHECK_FALSE(p.apply("run1", events::tool_call_args("c9", "{\"q\"")));
  auto restated = p.apply(
      "run1",
      with_facts(events::tool_call_end("c9"),
                 {{"message", {{"toolCalls", {{{"id", "c9"}, {"name", "search"}, {"arguments", "{\"q\":2}"}}}}}}}));
  REQUIRE(restated.has_value());
  CHECK(restated->message.id == "m-b");
  REQUIRE(restated->message.tool_calls.size() == 1);
  CHECK(restated->message.tool_calls[0].name == "search");
  CHECK(restated->message.tool_calls[0].arguments == "{\"q\":2}");

  // A tool message: content from the event, metadata and error from metadata.agentrt.
  Event result = events::tool_call_result("m-t", "c1", "no hits", json{{"tool_agent_output", {{"status", "failed"}}}});
  result.metadata["agentrt"] = {{"error", "nothing found"}, {"metadata", {{"tool_name", "search"}}}};
  auto t = p.apply("run1", result);
  REQUIRE(t.has_value());
  CHECK(t->message.role == Role::tool);
  CHECK(t->message.content == "no hits");
  CHECK(t->message.tool_call_id == "c1");
  CHECK(t->message.error == "nothing found");
  CHECK(t->message.metadata == json{{"tool_name", "search"}});

  // The final answer: the model's text where it differs from the stream; the end's own metadata kept.
  CHECK_FALSE(p.apply("run1", events::text_start("m-f")));
  CHECK_FALSE(p.apply("run1", events::text_content("m-f", "Sorry")));
  Event end = events::text_end("m-f", json{{"worker_agent_output", {{"answer", "Sorry, no."}}}});
  end.metadata["agentrt"] = {{"message", {{"content", "Sorry, no."}}}};
  auto f = p.apply("run1", end);
  REQUIRE(f.has_value());
  CHECK(f->message.content == "Sorry, no.");
  CHECK(f->message.metadata == json{{"worker_agent_output", {{"answer", "Sorry, no."}}}});

  // A run that continues an earlier one: its turn was named by the earlier RUN_STARTED.
  auto err = p.apply("run1", with_facts(events::run_error("the model is down", "model"), {{"messageId", "m-e"}}));
  REQUIRE(err.has_value());
  CHECK(err->turn_id == "turn1");
  CHECK(err->message.role == Role::system);
  CHECK(err->message.content == "ERROR model: the model is down");
  // Events without the runtime's facts make no message: an end without completion, an expiry's RUN_ERROR.
  CHECK_FALSE(p.apply("run2", events::run_error("approval request expired", "approval_expired")));
  CHECK_FALSE(p.apply("run2", events::text_end("m-x")));
}

TEST_CASE("replaying the stored log rebuilds the stored history, and a row written beside the log is found") {
  Harness h([](const ModelRequest& req) -> ModelResult {
    const Message* u = last_user_message(req);
    if (u && u->content == "fail") throw Error(ErrorCode::model, "the model is down");
    return booking_script(req);
  });
  h.add_book_room();
  // A paused turn, approved; a failed turn; a turn rejected.
  auto a = h.start("t-replay", "book a room");
  auto paused = h.wait(a.turn_id);
  REQUIRE(paused.status == TurnStatus::waiting_approval);
  h.rt->resume(a.turn_id, paused.approval_request_id,
               {Decision{paused.interrupts[0]["id"].get<std::string>(), Decision::Action::approve, std::nullopt, ""}});
  CHECK(h.wait(a.turn_id).status == TurnStatus::completed);
  auto b = h.start("t-replay", "fail");
  CHECK(h.wait(b.turn_id).status == TurnStatus::failed);
  auto c = h.start("t-replay", "book another");
  auto paused_c = h.wait(c.turn_id);
  REQUIRE(paused_c.status == TurnStatus::waiting_approval);
  h.rt->resume(
      c.turn_id, paused_c.approval_request_id,
      {Decision{paused_c.interrupts[0]["id"].get<std::string>(), Decision::Action::reject, std::nullopt, "not today"}});
  CHECK(h.wait(c.turn_id).status == TurnStatus::completed);
  const auto stored = h.store->messages("t-replay");
  // user, the call, its result, the answer; user, ERROR; user, the call, its rejection, the answer.
  std::vector<Role> roles;
  for (const auto& r : stored) roles.push_back(r.message.role);
  const std::vector<Role> expected = {Role::user,   Role::assistant, Role::tool,      Role::assistant, Role::user,
                                      Role::system, Role::user,      Role::assistant, Role::tool,      Role::assistant};
  CHECK(roles == expected);
  auto diff = replay_difference(*h.store, "t-replay");
  CHECK_MESSAGE(!diff.has_value(), (diff ? *diff : std::string()));

  // A message that no event carries: the replay no longer matches (the check can fail).
  CommitBatch rogue;
  rogue.thread_id = "t-other";
  ThreadRecord th;
  th.id = "t-other";
  th.user_id = "u1";
  rogue.create_thread = th;
  Message m;
  m.id = "m-rogue";
  m.role = Role::assistant;
  m.content = "written beside the log";
  rogue.messages.push_back(MessageRecord{"t-other", 0, "", "", m});
  h.store->commit(rogue);
  auto found = replay_difference(*h.store, "t-other");
  REQUIRE(found.has_value());
  CHECK(found->find("m-rogue") != std::string::npos);
}

TEST_CASE("the projector derives the tool ledger from the events that carry it, through the ledger's table") {
  Projector p("t1");
  p.apply("run1", with_facts(events::run_started("t1", "run1"), {{"turnId", "turn1"}}));
  p.apply("run1", events::step_started("execution"));
  p.apply("run1", events::tool_call_start("c1", "book", "m-a"));
  p.apply("run1", events::tool_call_args("c1", "{\"room\":\"A1\"}"));
  p.apply("run1", events::tool_call_start("c2", "lookup", "m-a"));
  p.apply("run1", events::tool_call_start("c3", "nope", "m-a"));
  json listed =
      json::array({{{"id", "c1"}, {"tool", "approve"}}, {{"id", "c2"}, {"tool", "run"}, {"idempotent", true}}, "c3"});
  CHECK(p.apply("run1", with_facts(events::tool_call_end("c3"), {{"message", {{"toolCalls", listed}}}})));
  auto entries = p.take_ledger_changes();
  REQUIRE(entries.size() == 3);
  CHECK(entries[0].tool_call_id == "c1");
  CHECK(entries[0].turn_id == "turn1");
  CHECK(entries[0].run_id == "run1");
  CHECK(entries[0].stage == "execution");
  CHECK(entries[0].ordinal == 0);
  CHECK(entries[0].arguments == "{\"room\":\"A1\"}");
  CHECK(entries[0].status == LedgerStatus::requested);
  CHECK(entries[0].needs_approval);
  CHECK(entries[1].status == LedgerStatus::approved);
  CHECK(entries[1].idempotent);
  CHECK(entries[1].ordinal == 1);
  CHECK(entries[2].status == LedgerStatus::requested);  // refused before it could run: its result says why
  CHECK_FALSE(entries[2].needs_approval);
  CHECK(p.take_ledger_changes().empty());  // each change is handed over once

  // started, then the outcome from TOOL_CALL_RESULT's tool_agent_output.
  p.apply("run1", events::custom("agentrt.started", {{"toolCallIds", {"c2"}}}));
  auto started = p.take_ledger_changes();
  REQUIRE(started.size() == 1);
  CHECK(started[0].status == LedgerStatus::started);
  json out = {{"tool_call_id", "c2"}, {"tool_name", "lookup"}, {"status", "succeeded"}, {"result", 1}};
  p.apply("run1", events::tool_call_result("m-t", "c2", "one", json{{"tool_agent_output", out}}));
  auto finished = p.take_ledger_changes();
  REQUIRE(finished.size() == 1);
  CHECK(finished[0].status == LedgerStatus::finished);
  CHECK(json::parse(finished[0].output) == out);
  // The table refuses what cannot happen: a finished call started again.
  CHECK_THROWS_AS(p.apply("run1", events::custom("agentrt.started", {{"toolCallIds", {"c2"}}})), Error);

  // The pause names each call's interrupt; the resumed run's start carries the decision and the approval.
  Event paused = events::run_finished(
      "t1", "run1",
      {{"type", "interrupt"}, {"interrupts", {{{"id", "int_c1"}, {"reason", "tool_call"}, {"toolCallId", "c1"}}}}});
  p.apply("run1", paused);
  auto waiting = p.take_ledger_changes();
  REQUIRE(waiting.size() == 1);
  CHECK(waiting[0].interrupt_id == "int_c1");
  json decisions = json::array({{{"interruptId", "int_c1"}, {"action", "approve"}, {"editedArgs", {{"room", "B2"}}}}});
  json decision = {{"approvalRequestId", "apr_1"},
                   {"decisions", decisions},
                   {"calls", {{"c1", {{"action", "approve"}, {"editedArgs", {{"room", "B2"}}}}}}}};
  p.apply("run2", with_facts(events::run_started("t1", "run2", "run1"), {{"turnId", "turn1"}, {"decision", decision}}));
  auto decided = p.take_ledger_changes();
  REQUIRE(decided.size() == 1);
  CHECK(decided[0].status == LedgerStatus::approved);
  CHECK(decided[0].arguments == "{\"room\":\"B2\"}");
  CHECK(decided[0].decision == json{{"action", "approve"}, {"editedArgs", {{"room", "B2"}}}});
  auto approval = p.take_approval();
  REQUIRE(approval.has_value());
  CHECK(approval->approval_request_id == "apr_1");
  CHECK(approval->turn_id == "turn1");
  CHECK(approval->decisions == decisions);
  CHECK(approval->answer == resume_answer_to_json("turn1", "t1", "run2", "apr_1"));
  CHECK_FALSE(p.take_approval().has_value());
  // A second decision for the same call is refused by the table (approved -> approved is no move).
  CHECK_THROWS_AS(p.apply("run3", with_facts(events::run_started("t1", "run3", "run2"),
                                             {{"turnId", "turn1"}, {"decision", decision}})),
                  Error);
  CHECK(p.ledger("turn1").size() == 3);
}

TEST_CASE("a ledger entry written beside the log is found by the replay") {
  Harness h;
  h.add_book_room();
  auto a = h.start("t-ledger", "book a room");
  auto paused = h.wait(a.turn_id);
  REQUIRE(paused.status == TurnStatus::waiting_approval);
  h.rt->resume(a.turn_id, paused.approval_request_id,
               {Decision{paused.interrupts[0]["id"].get<std::string>(), Decision::Action::approve, std::nullopt, ""}});
  CHECK(h.wait(a.turn_id).status == TurnStatus::completed);
  auto diff = replay_difference(*h.store, "t-ledger");
  CHECK_MESSAGE(!diff.has_value(), (diff ? *diff : std::string()));
  auto ledger = h.store->ledger(a.turn_id);
  REQUIRE(ledger.size() == 1);
  CHECK(ledger[0].status == LedgerStatus::finished);
  CHECK(ledger[0].decision == json{{"action", "approve"}});
  REQUIRE(h.store->get_approval(paused.approval_request_id).has_value());

  CommitBatch rogue;
  rogue.thread_id = "t-ledger";
  LedgerEntry changed = ledger[0];
  changed.status = LedgerStatus::failed;
  rogue.ledger.push_back(changed);
  h.store->commit(rogue);
  auto found = replay_difference(*h.store, "t-ledger");
  REQUIRE(found.has_value());
  CHECK(found->find("ledger entry") != std::string::npos);
  CHECK(found->find("status:failed") != std::string::npos);
  // Put back, so the harness's own replay at its end passes.
  rogue.ledger[0] = ledger[0];
  h.store->commit(rogue);
}

TEST_CASE("the projector derives the turn's row from the events that carry it, through the turn table") {
  Projector p("t1");
  Message user;
  user.id = "m-user";
  user.role = Role::user;
  user.content = "book";
  json fresh = {{"turnId", "turn1"},
                {"message", user},
                {"turn", {{"userId", "u1"}, {"owner", "rt_a"}, {"stage", "intent"}, {"clientMessageId", "c-1"}}}};
  p.apply("run1", with_facts(events::run_started("t1", "run1"), fresh));
  auto started = p.take_turn();
  REQUIRE(started.has_value());
  CHECK(started->id == "turn1");
  CHECK(started->thread_id == "t1");
  CHECK(started->user_id == "u1");
  CHECK(started->owner == "rt_a");
  CHECK(started->client_message_id == "c-1");
  CHECK(started->status == TurnStatus::running);
  CHECK(started->run_id == "run1");
  // A stage or an intent rides with the next status change.
  p.apply("run1", events::step_started("execution"));
  p.apply("run1", events::custom("agentrt.intent", {{"text", "a booking"}}));
  CHECK_FALSE(p.take_turn().has_value());
  json interrupts = json::array({{{"id", "int_c1"},
                                  {"reason", "tool_call"},
                                  {"toolCallId", "c1"},
                                  {"metadata", {{"approvalRequestId", "apr_1"}}}}});
  Event pause = events::run_finished("t1", "run1", {{"type", "interrupt"}, {"interrupts", interrupts}});
  pause.metadata = {{"agentrt", {{"turn", {{"steps", 2}, {"expiresAt", 1234}}}}}};
  p.apply("run1", pause);
  auto paused = p.take_turn();
  REQUIRE(paused.has_value());
  CHECK(paused->status == TurnStatus::waiting_approval);
  CHECK(paused->stage == "execution");
  CHECK(paused->intent == "a booking");
  CHECK(paused->steps == 2);
  CHECK(paused->expires_at == 1234);
  CHECK(paused->approval_request_id == "apr_1");
  CHECK(paused->interrupts == interrupts);
  CHECK(paused->owner.empty());
  // The decision resumes it; its continuation runs from its first step; it completes.
  json decision = {{"approvalRequestId", "apr_1"}, {"decisions", json::array()}, {"calls", json::object()}};
  p.apply("run2", with_facts(events::run_started("t1", "run2", "run1"),
                             {{"turnId", "turn1"}, {"decision", decision}, {"turn", {{"owner", "rt_b"}}}}));
  auto resuming = p.take_turn();
  REQUIRE(resuming.has_value());
  CHECK(resuming->status == TurnStatus::resuming);
  CHECK(resuming->run_id == "run2");
  CHECK(resuming->parent_run_id == "run1");
  CHECK(resuming->owner == "rt_b");
  CHECK(resuming->interrupts == json::array());
  p.apply("run2", events::step_started("execution"));
  CHECK(p.take_turn()->status == TurnStatus::running);
  Event done = events::run_finished("t1", "run2", {{"type", "success"}});
  done.metadata = {{"agentrt", {{"turn", {{"steps", 3}}}}}};
  p.apply("run2", done);
  auto completed = p.take_turn();
  REQUIRE(completed.has_value());
  CHECK(completed->status == TurnStatus::completed);
  CHECK(completed->steps == 3);
  CHECK(completed->owner.empty());
  // The table refuses a completed turn paused again.
  CHECK_THROWS_AS(p.apply("run2", pause), Error);
}

TEST_CASE("a turn row written beside the log is found by the replay") {
  Harness h;
  auto a = h.start("t-turnrow", "hello");
  CHECK(h.wait(a.turn_id).status == TurnStatus::completed);
  auto diff = replay_difference(*h.store, "t-turnrow");
  CHECK_MESSAGE(!diff.has_value(), (diff ? *diff : std::string()));
  auto turn = *h.store->get_turn(a.turn_id);
  CommitBatch rogue;
  rogue.thread_id = "t-turnrow";
  rogue.turn = turn;
  rogue.turn->intent = "written beside the log";
  rogue.expected_version = turn.version;
  h.store->commit(rogue);
  auto found = replay_difference(*h.store, "t-turnrow");
  REQUIRE(found.has_value());
  CHECK(found->find("row") != std::string::npos);
  CHECK(found->find("written beside the log") != std::string::npos);
  CommitBatch back;
  back.thread_id = "t-turnrow";
  back.turn = turn;
  back.expected_version = turn.version + 1;
  h.store->commit(back);
}

TEST_CASE("a damaged interrupt in a stored log pauses the turn without naming a request (no exception)") {
  Projector p("t1");
  p.apply("run1",
          with_facts(events::run_started("t1", "run1"),
                     {{"turnId", "turn1"}, {"turn", {{"userId", "u1"}, {"owner", "rt_a"}, {"stage", "intent"}}}}));
  p.take_turn();
  CHECK_NOTHROW(
      p.apply("run1", events::run_finished("t1", "run1", {{"type", "interrupt"}, {"interrupts", json::array({1})}})));
  auto paused = p.take_turn();
  REQUIRE(paused.has_value());
  CHECK(paused->status == TurnStatus::waiting_approval);
  CHECK(paused->approval_request_id.empty());
}
