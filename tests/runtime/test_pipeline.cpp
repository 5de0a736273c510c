#include <doctest/doctest.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "agentrt/config.hpp"
#include "runtime/context_builder.hpp"
#include "support/runtime_fixture.hpp"

using namespace agentrt;
using namespace agentrt::testing;

TEST_CASE("a subscriber from any sequence number gets the replay, then the live tail, each event once") {
  Harness h(
      [](const ModelRequest& req) {
        if (req.stage == "intent") return text_result("x");
        return text_result(std::string(60, 'z'));
      },
      {}, ScriptedModelOptions{3, std::chrono::milliseconds(2), true});
  auto first = h.rt->run_turn(turn_input("t-sub", user_message("one")));
  REQUIRE(first.status == TurnStatus::completed);
  auto all1 = h.events("t-sub");
  const int64_t n1 = static_cast<int64_t>(all1.size());
  // Subscribe mid-history, then start a second turn while subscribed.
  auto sub = h.rt->subscribe("t-sub", 5);
  auto second = h.start("t-sub", "two");
  std::vector<StoredEvent> got;
  int ends = 0;
  while (ends < 2) {
    auto e = sub->next(kLongWait);
    REQUIRE(e);
    got.push_back(*e);
    auto t = json::parse(e->json)["type"];
    if (t == "RUN_FINISHED" || t == "RUN_ERROR") ++ends;
  }
  h.wait(second.turn_id);
  REQUIRE(got.size() > static_cast<size_t>(n1 - 5));
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i].seq == static_cast<int64_t>(6 + i));
  CHECK(json::parse(got[n1 - 5].json)["type"] == "RUN_STARTED");
  CHECK(json::parse(got[n1 - 5].json)["runId"] == second.run_id);
  // Nothing more: the next pull times out.
  CHECK_FALSE(sub->next(std::chrono::milliseconds(50)));
  sub->close();
  CHECK(sub->closed());
  CHECK_FALSE(sub->next(std::chrono::milliseconds(10)));
}

TEST_CASE("token deltas are group-committed: a long streamed answer costs few transactions") {
  Harness h(
      [](const ModelRequest& req) {
        if (req.stage == "intent") return text_result("x");
        return text_result(std::string(400, 'y'));
      },
      {}, ScriptedModelOptions{2, std::chrono::milliseconds(0), true});
  const int64_t before = h.store->write_transactions();
  auto t = h.rt->run_turn(turn_input("t-gc", user_message("talk")));
  REQUIRE(t.status == TurnStatus::completed);
  const int64_t txns = h.store->write_transactions() - before;
  auto evs = h.events("t-gc");
  int deltas = 0;
  for (const auto& e : evs) deltas += e["type"] == "TEXT_MESSAGE_CONTENT";
  CHECK(deltas == 200);
  CHECK(txns <= 4);  // the start, the end, and at most a couple of timed group commits
  check_agui(evs);
}

TEST_CASE("the context keeps system prompt and new input, then the newest history that fits, tool calls whole") {
  std::vector<MessageRecord> hist;
  auto add = [&](Role role, std::string text, std::string turn, std::vector<ToolCall> calls = {},
                 std::string tcid = {}) {
    Message m;
    m.id = "m" + std::to_string(hist.size());
    m.role = role;
    m.content = std::move(text);
    m.has_content = !m.content.empty();
    m.tool_calls = std::move(calls);
    m.tool_call_id = std::move(tcid);
    hist.push_back(MessageRecord{"t", static_cast<int64_t>(hist.size()), std::move(turn), "r", m});
  };
  add(Role::user, std::string(500, 'a'), "old1");
  add(Role::assistant, std::string(500, 'b'), "old1");
  add(Role::user, "q2", "old2");
  add(Role::assistant, "", "old2", {ToolCall{"c1", "f", "{}"}});
  add(Role::tool, std::string(300, 'r'), "old2", {}, "c1");
  add(Role::assistant, "a2", "old2");
  add(Role::user, "the new question", "now");
  ContextInput in;
  in.system_prompt = "SYS";
  in.turn_id = "now";
  in.budget_chars = 600;
  auto ctx = build_context(in, hist, {});
  // system + the tool group and answer of turn old2 fit; turn old1 does not.
  REQUIRE(ctx.size() == 6);
  CHECK(ctx[0].role == Role::system);
  CHECK(ctx[0].content == "SYS");
  CHECK(ctx[1].content == "q2");
  CHECK(ctx[2].tool_calls.size() == 1);
  CHECK(ctx[3].role == Role::tool);
  CHECK(ctx[5].content == "the new question");
  in.budget_chars = 200;  // the tool result alone would fit, but never without its call
  ctx = build_context(in, hist, {});
  REQUIRE(ctx.size() == 3);
  CHECK(ctx[1].content == "a2");
  CHECK(ctx[2].content == "the new question");
  in.budget_chars = 10;  // the new input always goes
  ctx = build_context(in, hist, {});
  REQUIRE(ctx.size() == 2);
  CHECK(ctx[1].content == "the new question");
}

namespace {

// Every field of a message the model is sent, as text (two requests are the same when these are).
std::string model_view(const Message& m) {
  json parts = json::array();
  for (const auto& p : m.parts) parts.push_back(json(p));
  json calls = json::array();
  for (const auto& c : m.tool_calls) calls.push_back({c.id, c.name, c.arguments});
  return json{m.id,   to_string(m.role), m.content,         parts,     m.has_content, calls, m.tool_call_id,
              m.name, m.error,           m.encrypted_value, m.metadata}
      .dump();
}

}  // namespace

TEST_CASE("the context written over a request's old messages is the context made afresh, field for field") {
  std::vector<MessageRecord> hist;
  auto add = [&](Message m, std::string turn) {
    m.id = "m" + std::to_string(hist.size());
    hist.push_back(MessageRecord{"t", static_cast<int64_t>(hist.size()), std::move(turn), "r", std::move(m)});
  };
  Message user;
  user.role = Role::user;
  user.parts = {
      ContentPart::make_text("look at this"),
      ContentPart{"image", "", PartSource{"url", "https://x/i.png", "image/png", ""}, "p1", json{{"ref", "img_1"}}}};
  user.content = "";
  user.metadata = json{{"client", "web"}};
  add(user, "old");
  Message call;
  call.role = Role::assistant;
  call.has_content = false;
  call.tool_calls = {ToolCall{"c1", "lookup", R"({"q":"x"})"}};
  call.encrypted_value = "sig-1";
  add(call, "old");
  Message result;
  result.role = Role::tool;
  result.tool_call_id = "c1";
  result.name = "lookup";
  result.content = "summary of c1";
  result.error = "partial";
  result.metadata = json{{"media", json::array({json{{"type", "image"}, {"storage_path", "p"}}})},
                         {"tool_name", "lookup"},
                         {"run_id", "r"}};
  add(result, "old");
  Message note;
  note.role = Role::tool;
  note.tool_call_id = "c1";
  note.content = "job J finished";
  note.parts = {ContentPart::make_text("a part a note loses")};
  note.metadata = json{{"job_id", "J"}};
  add(note, "now");
  Message question;
  question.role = Role::user;
  question.content = "and now?";
  add(question, "now");
  Message now_call = call;
  now_call.tool_calls = {ToolCall{"c2", "lookup", "{}"}};
  now_call.encrypted_value.clear();
  add(now_call, "now");
  Message now_result = result;
  now_result.tool_call_id = "c2";
  now_result.content = "summary of c2";
  add(now_result, "now");
  const std::map<std::string, std::string> full{{"c2", "the whole result of c2"}};

  ContextInput in;
  in.system_prompt = "SYS";
  in.system_notes = {"note one", "note two"};
  in.turn_id = "now";
  for (size_t budget : {size_t{10}, size_t{200}, size_t{100000}}) {
    CAPTURE(budget);
    in.budget_chars = budget;
    const auto fresh = build_context(in, hist, full);
    // A request's messages from before: longer and shorter lists, every field of every message set.
    for (size_t junk_count : {size_t{0}, size_t{2}, fresh.size(), fresh.size() + 3}) {
      CAPTURE(junk_count);
      std::vector<Message> out;
      for (size_t k = 0; k < junk_count; ++k) {
        Message j = hist[k % hist.size()].message;
        j.id = "junk" + std::to_string(k);
        j.role = Role::assistant;
        j.content = std::string(40, 'j');
        j.parts = user.parts;
        j.has_content = false;
        j.tool_calls = call.tool_calls;
        j.tool_call_id = "junk";
        j.name = "junk";
        j.error = "junk";
        j.encrypted_value = "junk";
        j.metadata = json{{"junk", true}};
        out.push_back(std::move(j));
      }
      build_context(in, hist, full, out);
      REQUIRE(out.size() == fresh.size());
      for (size_t k = 0; k < out.size(); ++k) CHECK(model_view(out[k]) == model_view(fresh[k]));
    }
  }
  // What the model reads: the system prompt with its notes, a job note as a system message without its parts, a
  // current tool result in full (without the summary's parts), an older one as it is.
  in.budget_chars = 100000;
  const auto all = build_context(in, hist, full);
  REQUIRE(all.size() == 8);
  CHECK(all[0].content == "SYS\n\nnote one\n\nnote two");
  CHECK(all[3].content == "summary of c1");
  CHECK(all[3].metadata == json{{"media", result.metadata["media"]}, {"tool_name", "lookup"}});
  CHECK(all[4].role == Role::system);
  CHECK(all[4].parts.empty());
  CHECK(all[4].metadata.is_null());
  CHECK(all[7].content == "the whole result of c2");
  CHECK(all[1].metadata.is_null());
}

TEST_CASE("the context's budget counts the system text as sent and a current tool result at its full size") {
  std::vector<MessageRecord> hist;
  auto add = [&](Role role, std::string text, std::string turn, std::string tcid = {}) {
    Message m;
    m.id = "m" + std::to_string(hist.size());
    m.role = role;
    m.content = std::move(text);
    m.tool_call_id = std::move(tcid);
    if (role == Role::assistant && !m.tool_call_id.empty()) {
      m.tool_calls = {ToolCall{m.tool_call_id, "f", "{}"}};
      m.tool_call_id.clear();
    }
    hist.push_back(MessageRecord{"t", static_cast<int64_t>(hist.size()), std::move(turn), "r", m});
  };
  add(Role::user, std::string(10, 'x'), "old");  // 16 + 10 = 26
  add(Role::user, "q", "now");                   // 17
  ContextInput in;
  in.system_notes = {"N1", "N2"};  // no prompt: "N1\n\nN2", 16 + 6 = 22
  in.turn_id = "now";
  in.budget_chars = 22 + 17 + 26;
  CHECK(build_context(in, hist, {}).size() == 3);  // the old message fits exactly
  in.budget_chars -= 1;
  CHECK(build_context(in, hist, {}).size() == 2);

  // A current tool result counts as the model reads it: in full.
  add(Role::assistant, "", "now", "c1");  // 16 + 1 + 2 + 2 = 21
  add(Role::tool, "s", "now", "c1");      // 16 + 1 as stored, 16 + 30 in full
  const std::map<std::string, std::string> full{{"c1", std::string(30, 'r')}};
  in.budget_chars = 22 + 17 + 21 + 46 + 26;
  auto ctx = build_context(in, hist, full);
  REQUIRE(ctx.size() == 5);
  CHECK(ctx[4].content == std::string(30, 'r'));
  in.budget_chars -= 1;
  CHECK(build_context(in, hist, full).size() == 4);
}

TEST_CASE("the host's log sink gets records; usage is summed per run and per turn; reasoning is streamed") {
  std::vector<std::string> logs;
  std::mutex m;
  Harness h(
      [](const ModelRequest& req) {
        ModelResult r = text_result(req.stage == "intent" ? "x" : "answer");
        r.reasoning = req.stage == "intent" ? "" : "thinking it over";
        r.usage = TokenUsage{"scripted", "s1", 10, 5, 15, 2, 0, 0};
        return r;
      },
      [&](RuntimeConfig& c) {
        c.log_level = LogLevel::debug;
        c.log = [&](LogLevel, std::string_view comp, std::string_view msg) {
          std::lock_guard<std::mutex> lock(m);
          logs.push_back(std::string(comp) + ": " + std::string(msg));
        };
        c.objects = nullptr;
      });
  auto t = h.rt->run_turn(turn_input("t-use", user_message("hi")));
  REQUIRE(t.status == TurnStatus::completed);
  REQUIRE(t.usage.size() == 1);
  CHECK(t.usage[0]["inputTokens"] == 20);
  CHECK(t.usage[0]["outputTokens"] == 10);
  CHECK(t.usage[0]["reasoningTokens"] == 4);
  auto evs = h.events("t-use");
  check_agui(evs);
  CHECK(evs.back()["usage"][0]["totalTokens"] == 30);
  const json* r = find_event(evs, "REASONING_MESSAGE_CONTENT");
  REQUIRE(r);
  CHECK((*r)["delta"] == "thinking it over");
  // A cancel on a finished turn, a sweep: nothing to log as an error.
  h.rt->sweep();
  for (const auto& l : logs) CHECK(l.find("error") == std::string::npos);
}

TEST_CASE(
    "stage policies: tools are offered per stage, and an organization stage that calls the model writes the answer") {
  std::vector<std::pair<std::string, size_t>> offered;
  std::mutex m;
  Harness h(
      [&](const ModelRequest& req) {
        {
          std::lock_guard<std::mutex> lock(m);
          offered.emplace_back(req.stage, req.tools.size());
        }
        if (req.stage == "intent") return text_result("wants a room");
        if (req.stage == "organization") {
          bool saw_draft = false;
          for (const auto& msg : req.messages)
            saw_draft = saw_draft || msg.content.find("draft text") != std::string::npos;
          return text_result(saw_draft ? "final from draft" : "no draft seen");
        }
        return text_result("draft text");
      },
      [](RuntimeConfig& c) { c.stages.organization.call_model = true; });
  h.add_book_room();
  auto t = h.rt->run_turn(turn_input("t-org", user_message("hello")));
  REQUIRE(t.status == TurnStatus::completed);
  REQUIRE(offered.size() == 3);
  CHECK(offered[0] == std::make_pair(std::string("intent"), size_t{0}));  // read-only by default
  CHECK(offered[1] == std::make_pair(std::string("execution"), size_t{1}));
  CHECK(offered[2] == std::make_pair(std::string("organization"), size_t{0}));
  auto hist = h.rt->history("t-org");
  REQUIRE(hist.size() == 2);  // the draft is not a second answer
  CHECK(hist[1].content == "final from draft");
  auto evs = h.events("t-org");
  check_agui(evs);
  std::string reasoning;
  for (const auto& e : evs)
    if (e["type"] == "REASONING_MESSAGE_CONTENT") reasoning += e["delta"].get<std::string>();
  CHECK(reasoning == "draft text");
}

TEST_CASE("a tool registered or removed while a turn runs is offered from its stage's next model call on") {
  // A stage's tool definitions are copied out of the registry again only when it has changed: the model must
  // still see each change at its next call, and the same tools (schemas and all) while nothing changes.
  std::vector<std::vector<std::string>> offered;  // the tool names of each execution-stage request
  std::vector<json> schemas;                      // the first tool's parameters, each request
  Harness* hp = nullptr;
  Harness h([&](const ModelRequest& req) {
    if (req.stage != "execution") return text_result("ok");
    std::vector<std::string> names;
    for (const auto& t : req.tools) names.push_back(t.name);
    offered.push_back(names);
    schemas.push_back(req.tools.empty() ? json() : req.tools[0].parameters);
    switch (offered.size()) {
      case 1: return tool_call_result("call_1", "add_tool", "{}");     // registers zeta
      case 2: return tool_call_result("call_2", "add_tool", "{}");     // changes nothing (zeta is there)
      case 3: return tool_call_result("call_3", "remove_zeta", "{}");  // removes zeta
      default: return text_result("done");
    }
  });
  hp = &h;
  auto simple = [](std::string name, std::function<void()> effect) {
    ToolSpec spec;
    spec.name = std::move(name);
    spec.description = "changes the registry";
    spec.parameters = json::parse(R"({"type":"object","properties":{"n":{"type":"integer"}}})");
    spec.approval = ApprovalPolicy::never();
    spec.handler = sync_tool([effect](const ToolCallContext&) {
      effect();
      return ToolResult{json{{"ok", true}}};
    });
    return spec;
  };
  h.rt->tools().add(simple("add_tool", [&] {
    if (hp->rt->tools().find("zeta")) return;
    ToolSpec z;
    z.name = "zeta";
    z.description = "added mid-turn";
    z.handler = sync_tool([](const ToolCallContext&) { return ToolResult{json::object()}; });
    hp->rt->tools().add(std::move(z));
  }));
  h.rt->tools().add(simple("remove_zeta", [&] { hp->rt->tools().remove("zeta"); }));
  const uint64_t before = h.rt->tools().generation();

  auto t = h.rt->run_turn(turn_input("t-gen", user_message("go")));
  REQUIRE(t.status == TurnStatus::completed);
  CHECK(h.rt->tools().generation() == before + 2);  // one add, one remove: the second add_tool changed nothing
  REQUIRE(offered.size() == 4);
  using Names = std::vector<std::string>;
  CHECK(offered[0] == Names{"add_tool", "remove_zeta"});
  CHECK(offered[1] == Names{"add_tool", "remove_zeta", "zeta"});
  CHECK(offered[2] == Names{"add_tool", "remove_zeta", "zeta"});
  CHECK(offered[3] == Names{"add_tool", "remove_zeta"});
  for (const auto& s : schemas) CHECK(s == json::parse(R"({"type":"object","properties":{"n":{"type":"integer"}}})"));
}

TEST_CASE("the JSON config opens either message layout and refuses unknown keys and bad values") {
  TempDir dir;
  {
    auto c = runtime_config_from_json(json{{"data_dir", dir.file("a")}, {"model", {{"type", "demo"}}}});
    CHECK(uses_demo_model(c));
    CHECK(c.objects != nullptr);
    Runtime rt(c);
    register_demo_tools(rt.tools());
    auto t = rt.run_turn(turn_input("t-cfg", user_message("book a room")));
    CHECK(t.status == TurnStatus::waiting_approval);
  }
  {
    auto c = runtime_config_from_json(json{{"data_dir", dir.file("b")},
                                           {"model", {{"type", "demo"}}},
                                           {"store", {{"layout", "document"}, {"document_max_bytes", 100000}}}});
    Runtime rt(c);
    register_demo_tools(rt.tools());
    auto t = rt.run_turn(turn_input("t-doc", user_message("hello")));
    CHECK(t.status == TurnStatus::completed);
    CHECK(rt.history("t-doc").size() == 2);
    CHECK_FALSE(c.objects->list("agent-conversations/").empty());
  }
  CHECK_THROWS_WITH_AS(runtime_config_from_json(json{{"data_dir", dir.file("c")}, {"wrkers", 2}}),
                       doctest::Contains("unknown key 'wrkers'"), Error);
  CHECK_THROWS_WITH_AS(runtime_config_from_json(json{{"data_dir", dir.file("c")}, {"workers", 0}}),
                       doctest::Contains("workers"), Error);
  CHECK_THROWS_AS(runtime_config_from_json(
                      json{{"data_dir", dir.file("c")}, {"store", {{"layout", "document"}}}, {"objects", nullptr}}),
                  Error);
  CHECK_THROWS_AS(runtime_config_from_json(json{{"data_dir", dir.file("c")}, {"model", {{"type", "gpt-magic"}}}}),
                  Error);
}

TEST_CASE("a subscription's ready callback says when to drain: nothing is missed without a blocking next()") {
  Harness h(
      [](const ModelRequest& req) {
        if (req.stage == "intent") return text_result("x");
        return text_result(std::string(60, 'r'));
      },
      {}, ScriptedModelOptions{3, std::chrono::milliseconds(1), true});
  auto first = h.rt->run_turn(turn_input("t-ready", user_message("one")));
  REQUIRE(first.status == TurnStatus::completed);
  const auto before = h.events("t-ready");
  std::mutex m;
  std::condition_variable cv;
  int calls = 0;
  auto sub = h.rt->subscribe("t-ready", 2);
  sub->on_ready([&] {
    std::lock_guard<std::mutex> lock(m);
    ++calls;
    cv.notify_all();
  });
  {
    std::lock_guard<std::mutex> lock(m);
    CHECK(calls == 1);  // at once: the replay may be there
  }
  auto second = h.start("t-ready", "two");
  std::vector<StoredEvent> got;
  int seen = 0;
  bool finished = false;
  while (!finished) {
    {
      std::unique_lock<std::mutex> lock(m);
      REQUIRE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return calls > seen; }));
      seen = calls;
    }
    while (auto e = sub->next(std::chrono::milliseconds(0))) {  // drain: never waits
      got.push_back(*e);
      finished = finished || (e->run_id == second.run_id && json::parse(e->json)["type"] == "RUN_FINISHED");
    }
  }
  h.wait(second.turn_id);
  REQUIRE(got.size() > before.size() - 2);
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i].seq == static_cast<int64_t>(3 + i));
  CHECK(json::parse(got[before.size() - 2].json)["type"] == "RUN_STARTED");
  CHECK(json::parse(got.back().json)["type"] == "RUN_FINISHED");
  // close() is a change too; a removed callback is never called again.
  int at_close = 0;
  {
    std::lock_guard<std::mutex> lock(m);
    at_close = calls;
  }
  sub->close();
  {
    std::lock_guard<std::mutex> lock(m);
    CHECK(calls == at_close + 1);
  }
  auto sub2 = h.rt->subscribe("t-ready", 0);
  int calls2 = 0;
  sub2->on_ready([&] { ++calls2; });
  sub2->on_ready({});
  const int after_removal = calls2;
  auto third = h.start("t-ready", "three");
  h.wait(third.turn_id);
  CHECK(after_removal == 1);
  CHECK(calls2 == 1);
}
