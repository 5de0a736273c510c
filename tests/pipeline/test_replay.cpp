// The projector: history messages are derived from events, and replaying a thread's stored log rebuilds its
// stored history byte for byte. (Every Harness and JobHarness also replays each thread it used when it ends,
// so every runtime test's flow is replayed: golden paths, approvals, jobs, cancels, expiry, crashes.)
#include <doctest/doctest.h>

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
