// Hostile input at the runtime's entry points: the nesting limit (a 200,000-deep text, one level over the
// limit, and one at it), max_input_bytes over the whole stored message, and the part and message counts.
#include <doctest/doctest.h>

#include <string>

#include "agentrt/config.hpp"
#include "agentrt/json_limits.hpp"
#include "support/runtime_fixture.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {

constexpr size_t kHuge = 200000;

// `depth` nested arrays: "[[...]]" (depth 0: "0").
std::string nested_text(size_t depth) {
  if (depth == 0) return "0";
  return std::string(depth, '[') + std::string(depth, ']');
}

// The same as a value (nlohmann's parser and destructor do not recurse; copying it would).
json nested(size_t depth) { return json::parse(nested_text(depth)); }

// {"deep": nested(depth - 1)}: an object of the given depth.
json deep_object(size_t depth) {
  json o = json::object();
  o["deep"] = nested(depth - 1);
  return o;
}

// A RunAgentInput whose user message's metadata is an object `metadata_depth` deep: the whole input is
// 3 + metadata_depth deep (input, messages, message, metadata).
std::string agui_text(const std::string& metadata_text) {
  return R"({"threadId":"t1","runId":"r1","state":{},"tools":[],"context":[],"forwardedProps":{},"messages":[)"
         R"({"id":"m0","role":"assistant","content":"earlier"},)"
         R"({"id":"m1","role":"user","content":"hi","metadata":{"deep":)" +
         metadata_text + "}}]}";
}

ModelResult answer_ok(const ModelRequest&) { return text_result("ok"); }

}  // namespace

TEST_CASE("turn_input_from_agui refuses a RunAgentInput nested deeper than the limit before copying it") {
  // metadata {"deep": nested(k)} is 1 + k deep; the input 4 + k.
  const json at_limit = json::parse(agui_text(nested_text(kDefaultMaxJsonDepth - 4)));
  CHECK(json_depth(at_limit) == 64);
  TurnInput t = turn_input_from_agui(at_limit, "u1");
  CHECK(t.message.id == "m1");
  CHECK(json_depth(t.message.metadata) == 61);

  const json over = json::parse(agui_text(nested_text(kDefaultMaxJsonDepth - 3)));
  auto e = error_of([&] { turn_input_from_agui(over, "u1"); });
  CHECK(e.first == ErrorCode::invalid_argument);
  CHECK(e.second == "RunAgentInput is nested deeper than 64 levels");

  const json huge = json::parse(agui_text(nested_text(kHuge)));
  e = error_of([&] { turn_input_from_agui(huge, "u1"); });
  CHECK(e.first == ErrorCode::invalid_argument);
  CHECK(e.second == "RunAgentInput is nested deeper than 64 levels");

  // A tighter limit of the caller's.
  e = error_of([&] { turn_input_from_agui(at_limit, "u1", InputLimits{10, 64, 4096}); });
  CHECK(e.second == "RunAgentInput is nested deeper than 10 levels");
}

TEST_CASE("decisions_from_agui_resume and decision from_json refuse deep input, and take it at the limit") {
  // [{interruptId, status, payload: {editedArgs: X}}]: 3 + depth(X).
  auto resume_text = [](size_t args_depth) {
    return R"([{"interruptId":"i1","status":"resolved","payload":{"editedArgs":{"room":)" +
           nested_text(args_depth - 1) + "}}}]";
  };
  auto ok = decisions_from_agui_resume(json::parse(resume_text(61)));
  REQUIRE(ok.size() == 1);
  CHECK(ok[0].action == Decision::Action::approve);
  CHECK(json_depth(*ok[0].edited_args) == 61);
  auto e = error_of([&] { decisions_from_agui_resume(json::parse(resume_text(62))); });
  CHECK(e.first == ErrorCode::invalid_argument);
  CHECK(e.second == "resume is nested deeper than 64 levels");
  e = error_of([&] { decisions_from_agui_resume(json::parse(resume_text(kHuge))); });
  CHECK(e.second == "resume is nested deeper than 64 levels");

  // {interruptId, action, editedArgs: X}: 1 + depth(X).
  auto decision = [](size_t args_depth) {
    json d = json::parse(R"({"interruptId":"i1","action":"approve"})");
    d["editedArgs"] = deep_object(args_depth);
    return d;
  };
  CHECK(decision(63).get<Decision>().interrupt_id == "i1");
  e = error_of([&] { (void)decision(64).get<Decision>(); });
  CHECK(e.first == ErrorCode::invalid_argument);
  CHECK(e.second == "decision is nested deeper than 64 levels");
  e = error_of([&] { (void)decision(kHuge).get<Decision>(); });
  CHECK(e.second == "decision is nested deeper than 64 levels");

  // Malformed entries are refused with invalid_argument, not a type error of the JSON library.
  e = error_of([] { decisions_from_agui_resume(json::parse(R"([{"interruptId":"i","status":7}])")); });
  CHECK(e.first == ErrorCode::invalid_argument);
  e = error_of([] {
    decisions_from_agui_resume(json::parse(R"([{"interruptId":"i","status":"resolved","payload":{"approved":1}}])"));
  });
  CHECK(e.first == ErrorCode::invalid_argument);
  CHECK(e.second == "resume payload: approved must be a boolean");
}

TEST_CASE("Message and content part from_json refuse deep values before copying them") {
  auto message = [](size_t metadata_depth) {
    json m = json::parse(R"({"id":"m1","role":"user","content":[{"type":"text","text":"hi"}]})");
    m["metadata"] = deep_object(metadata_depth);
    return m;
  };
  Message ok = message(63).get<Message>();
  CHECK(json_depth(ok.metadata) == 63);
  auto e = error_of([&] { (void)message(64).get<Message>(); });
  CHECK(e.first == ErrorCode::invalid_argument);
  CHECK(e.second == "message is nested deeper than 64 levels");
  e = error_of([&] { (void)message(kHuge).get<Message>(); });
  CHECK(e.second == "message is nested deeper than 64 levels");
  // The limit is the caller's with message_from_json.
  CHECK(json_depth(message_from_json(message(100), 101).metadata) == 100);
  e = error_of([&] { (void)message_from_json(message(100), 100); });
  CHECK(e.second == "message is nested deeper than 100 levels");

  json part = json::parse(R"({"type":"text","text":"hi"})");
  part["metadata"] = deep_object(kHuge);
  e = error_of([&] { (void)part.get<ContentPart>(); });
  CHECK(e.first == ErrorCode::invalid_argument);
  CHECK(e.second == "content part is nested deeper than 64 levels");
  part["metadata"] = deep_object(63);
  CHECK(json_depth(part.get<ContentPart>().metadata) == 63);
}

TEST_CASE("start_turn refuses a message nested deeper than max_json_depth, and runs one at the limit") {
  Harness h(answer_ok);
  auto input = [](const std::string& thread, size_t metadata_depth) {
    TurnInput in = turn_input(thread, user_message("hi"));
    in.message.metadata = deep_object(metadata_depth);  // the message is 1 + metadata_depth deep
    return in;
  };
  auto e = error_of([&] { h.rt->start_turn(input("t-deep", kHuge)); });
  CHECK(e.first == ErrorCode::invalid_argument);
  CHECK(e.second == "the input message is nested deeper than 64 levels");
  e = error_of([&] { h.rt->start_turn(input("t-deep", 64)); });
  CHECK(e.second == "the input message is nested deeper than 64 levels");
  // A part's metadata: {content: [{metadata: X}]} is 3 + depth(X).
  TurnInput parts = turn_input("t-deep", user_message(""));
  parts.message.parts.push_back(ContentPart::make_text("hi"));
  parts.message.parts.back().metadata = deep_object(62);
  e = error_of([&] { h.rt->start_turn(parts); });
  CHECK(e.second == "the input message is nested deeper than 64 levels");
  CHECK_FALSE(h.rt->thread("t-deep").has_value());  // nothing was stored

  auto handle = h.rt->start_turn(input("t-deep", 63));
  CHECK(h.wait(handle.turn_id).status == TurnStatus::completed);
  auto hist = h.rt->history("t-deep");
  REQUIRE(hist.size() == 2);
  CHECK(json_depth(hist[0].metadata) == 63);  // stored and read back whole
  parts.message.parts.back().metadata = deep_object(61);
  parts.thread_id = "t-deep-parts";
  CHECK(h.wait(h.rt->start_turn(parts).turn_id).status == TurnStatus::completed);
}

TEST_CASE("max_json_depth is the runtime's: a tighter limit refuses what the default takes") {
  Harness h(answer_ok, [](RuntimeConfig& c) { c.max_json_depth = 8; });
  TurnInput in = turn_input("t-tight", user_message("hi"));
  in.message.metadata = deep_object(8);
  auto e = error_of([&] { h.rt->start_turn(in); });
  CHECK(e.first == ErrorCode::invalid_argument);
  CHECK(e.second == "the input message is nested deeper than 8 levels");
  in.message.metadata = deep_object(7);
  CHECK(h.wait(h.rt->start_turn(in).turn_id).status == TurnStatus::completed);

  TempDir dir;
  auto bad = [&](int64_t v) {
    return error_of([&] { runtime_config_from_json({{"data_dir", dir.path.string()}, {"max_json_depth", v}}); });
  };
  CHECK(bad(0).second == "config: 'max_json_depth' must be between 1 and 256, not 0");
  CHECK(bad(257).second == "config: 'max_json_depth' must be between 1 and 256, not 257");
  RuntimeConfig c = runtime_config_from_json(
      {{"data_dir", dir.path.string()}, {"max_json_depth", 256}, {"max_input_parts", 3}, {"max_input_messages", 5}});
  CHECK(c.max_json_depth == 256);
  CHECK(c.max_input_parts == 3);
  CHECK(c.max_input_messages == 5);
  auto limits = input_limits(c);
  CHECK(limits.max_json_depth == 256);
  CHECK(limits.max_input_parts == 3);
  CHECK(limits.max_input_messages == 5);
  CHECK(error_of([&] {
          runtime_config_from_json({{"data_dir", dir.path.string()}, {"max_input_parts", 0}});
        }).second == "config: 'max_input_parts' must be between 1 and 100000, not 0");
}

TEST_CASE("a config nested deeper than the limit is refused before anything is read from it") {
  TempDir dir;
  json cfg = json::object();
  cfg["data_dir"] = dir.file("never-created");
  cfg["stages"] = deep_object(kHuge);
  auto e = error_of([&] { runtime_config_from_json(cfg); });
  CHECK(e.first == ErrorCode::invalid_argument);
  CHECK(e.second == "config is nested deeper than 64 levels");
  CHECK_FALSE(std::filesystem::exists(dir.file("never-created")));
  // At the limit (stage params are passed to the model as they are): taken.
  cfg["stages"] = json::parse(R"({"execution":{"params":{}}})");
  cfg["stages"]["execution"]["params"]["deep"] = nested(kDefaultMaxJsonDepth - 4);
  CHECK(json_depth(cfg) == 64);
  RuntimeConfig c = runtime_config_from_json(cfg);
  CHECK(json_depth(c.stages.execution.params) == 61);
}

TEST_CASE("max_input_bytes counts the whole message as stored, metadata included") {
  Harness h(answer_ok, [](RuntimeConfig& c) { c.max_input_bytes = 200; });
  auto input = [](const std::string& thread, size_t pad) {
    TurnInput in = turn_input(thread, user_message("hi"));
    in.client_message_id = "m-size";
    in.message.metadata = json{{"pad", std::string(pad, 'x')}};
    return in;
  };
  // {"id":"m-size","role":"user","content":"hi","metadata":{"pad":"<pad>"}} is 66 + pad bytes.
  const std::string shape = R"({"id":"m-size","role":"user","content":"hi","metadata":{"pad":""}})";
  REQUIRE(shape.size() == 66);
  auto e = error_of([&] { h.rt->start_turn(input("t-size", 135)); });
  CHECK(e.first == ErrorCode::too_large);
  CHECK(e.second == "the input message is 201 bytes; the limit is 200");
  CHECK(h.wait(h.rt->start_turn(input("t-size", 134)).turn_id).status == TurnStatus::completed);

  // The reviewer's case: 1.9 MB of part metadata under the default 1 MiB limit.
  Harness d(answer_ok);
  TurnInput big = turn_input("t-big", user_message(""));
  big.message.parts.push_back(ContentPart::make_text("hi"));
  big.message.parts.back().metadata = json{{"blob", std::string(1900000, 'a')}};
  e = error_of([&] { d.rt->start_turn(big); });
  CHECK(e.first == ErrorCode::too_large);
  // {"id":"msg_<22 digits>","role":"user","content":[{"type":"text","text":"hi","metadata":{"blob":"<1900000>"}}]}
  CHECK(e.second == "the input message is 1900112 bytes; the limit is 1048576");
  CHECK_FALSE(d.rt->thread("t-big").has_value());

  // Inline data is not part of the stored message (it becomes an upload, checked against the attachment
  // limits): without an object store it fails for that reason, not for its size.
  TurnInput inline_data = turn_input("t-data", user_message(""));
  ContentPart image;
  image.type = "image";
  image.source = PartSource{"data", std::string(4000, 'A'), "image/png", ""};
  inline_data.message.parts.push_back(image);
  e = error_of([&] { h.rt->start_turn(inline_data); });
  CHECK(e.first == ErrorCode::unsupported);
}

TEST_CASE("the parts of an input message and the messages of a RunAgentInput are limited") {
  Harness h(answer_ok);
  auto with_parts = [](const std::string& thread, size_t n) {
    TurnInput in = turn_input(thread, user_message(""));
    for (size_t i = 0; i < n; ++i) in.message.parts.push_back(ContentPart::make_text("p" + std::to_string(i)));
    return in;
  };
  auto e = error_of([&] { h.rt->start_turn(with_parts("t-parts", 65)); });
  CHECK(e.first == ErrorCode::too_large);
  CHECK(e.second == "the input message has 65 content parts; the limit is 64");
  CHECK(h.wait(h.rt->start_turn(with_parts("t-parts", 64)).turn_id).status == TurnStatus::completed);
  CHECK(h.rt->history("t-parts")[0].parts.size() == 64);

  auto agui = [](size_t messages, size_t parts) {
    json in = json::parse(R"({"threadId":"t1","runId":"r1","messages":[]})");
    for (size_t i = 0; i + 1 < messages; ++i)
      in["messages"].push_back(json{{"id", "a" + std::to_string(i)}, {"role", "assistant"}, {"content", "x"}});
    json content = json::array();
    for (size_t i = 0; i < parts; ++i) content.push_back(json{{"type", "text"}, {"text", "p"}});
    in["messages"].push_back(json{{"id", "u"}, {"role", "user"}, {"content", content}});
    return in;
  };
  const InputLimits tight{64, 2, 3};
  CHECK(turn_input_from_agui(agui(3, 2), "u1", tight).message.parts.size() == 2);
  e = error_of([&] { turn_input_from_agui(agui(4, 2), "u1", tight); });
  CHECK(e.first == ErrorCode::too_large);
  CHECK(e.second == "RunAgentInput: 4 messages; the limit is 3");
  e = error_of([&] { turn_input_from_agui(agui(3, 3), "u1", tight); });
  CHECK(e.first == ErrorCode::too_large);
  CHECK(e.second == "the user message has 3 content parts; the limit is 2");
  // The defaults: 4096 messages, 64 parts.
  CHECK(turn_input_from_agui(agui(4096, 1), "u1").message.id == "u");
  e = error_of([&] { turn_input_from_agui(agui(4097, 1), "u1"); });
  CHECK(e.second == "RunAgentInput: 4097 messages; the limit is 4096");
}

TEST_CASE("a tool result or ui card nested too deep becomes a failed result invalid_result, and the turn goes on") {
  Harness h([](const ModelRequest& req) -> ModelResult {
    if (req.stage == "intent") return text_result("x");
    if (tool_results_since_last_user(req) == 0) {
      const std::string& which = last_user_message(req)->content;
      return tool_call_result("c1", "deep", json{{"which", which}}.dump());
    }
    return text_result("went on");
  });
  ToolSpec spec;
  spec.name = "deep";
  spec.parameters = json::parse(R"({"type":"object","properties":{"which":{"type":"string"}}})");
  spec.handler = sync_tool([](const ToolCallContext& c) {
    const std::string which = c.args["which"];
    ToolResult r;
    r.result = json::object();
    if (which == "result-huge") r.result = nested(kHuge);
    if (which == "result-over") r.result = nested(65);
    if (which == "result-at") r.result = nested(64);
    if (which == "ui-over") r.ui = UiSchema{"card", "v1", deep_object(64), json::array()};
    if (which == "ui-at") r.ui = UiSchema{"card", "v1", deep_object(63), json::array()};
    return r;
  });
  h.rt->tools().add(spec);
  auto run = [&](const std::string& which) {
    auto handle = h.start("t-" + which, which);
    CHECK(h.wait(handle.turn_id).status == TurnStatus::completed);
    auto evs = h.events("t-" + which);
    check_agui(evs);
    const json* result = find_event(evs, "TOOL_CALL_RESULT");
    REQUIRE(result != nullptr);
    return (*result)["metadata"]["tool_agent_output"];
  };
  for (const char* which : {"result-huge", "result-over"}) {
    json out = run(which);
    CHECK(out["status"] == "failed");
    CHECK(out["error"]["code"] == "invalid_result");
    CHECK(out["error"]["message"] == "the tool's result is nested deeper than 64 levels");
  }
  json over = run("ui-over");
  CHECK(over["error"]["code"] == "invalid_result");
  CHECK(over["error"]["message"] == "the tool's ui card is nested deeper than 64 levels");
  json at = run("result-at");
  CHECK(at["status"] == "succeeded");
  CHECK(json_depth(at["result"]) == 64);
  CHECK(run("ui-at")["status"] == "succeeded");
  // The model saw the failure (a failed tool message) and answered.
  auto hist = h.rt->history("t-result-over");
  REQUIRE(hist.size() == 4);
  CHECK(hist[2].role == Role::tool);
  CHECK(hist[2].content == "deep failed: the tool's result is nested deeper than 64 levels");
  CHECK(hist[3].content == "went on");
}

TEST_CASE("model tool-call arguments nested too deep are a failed result invalid_arguments the model sees") {
  std::vector<std::string> seen;
  std::mutex m;
  Harness h([&](const ModelRequest& req) -> ModelResult {
    if (req.stage == "intent") return text_result("x");
    if (tool_results_since_last_user(req) == 0) {
      const std::string& which = last_user_message(req)->content;
      const size_t depth = which == "huge" ? kHuge : which == "over" ? 64 : 63;
      return tool_call_result("c1", "book_room", R"({"day":"mon","room":)" + nested_text(depth) + "}");
    }
    std::lock_guard<std::mutex> lock(m);
    for (const auto& msg : req.messages)
      if (msg.role == Role::tool) seen.push_back(msg.content);
    return text_result("sorry");
  });
  h.add_book_room(ApprovalPolicy::never());
  for (const char* which : {"huge", "over", "at"}) {
    auto handle = h.start(std::string("t-args-") + which, which);
    CHECK(h.wait(handle.turn_id).status == TurnStatus::completed);
    auto evs = h.events(std::string("t-args-") + which);
    check_agui(evs);
    const json* result = find_event(evs, "TOOL_CALL_RESULT");
    REQUIRE(result != nullptr);
    const json& out = (*result)["metadata"]["tool_agent_output"];
    CHECK(out["status"] == "failed");
    CHECK(out["error"]["code"] == "invalid_arguments");
    if (std::string(which) == "at")  // parsed (64 levels), then refused by the schema: room is no string
      CHECK(out["error"]["message"] ==
            "invalid arguments for book_room: /room: Value type not permitted by 'type' constraint.");
    else
      CHECK(out["error"]["message"] == "the arguments of book_room are nested deeper than 64 levels");
  }
  CHECK(h.tool_runs == 0);
  REQUIRE(seen.size() == 3);
  CHECK(seen[0].find("nested deeper than 64 levels") != std::string::npos);
}

TEST_CASE("edited arguments, job payloads and job metadata nested too deep are refused") {
  Harness h;
  h.add_book_room();
  auto handle = h.start("t-edit", "book");
  auto t = h.wait(handle.turn_id);
  REQUIRE(t.status == TurnStatus::waiting_approval);
  Decision d{t.interrupts[0]["id"].get<std::string>(), Decision::Action::approve, deep_object(65), ""};
  auto e = error_of([&] { h.rt->resume(t.id, t.approval_request_id, {d}); });
  CHECK(e.first == ErrorCode::invalid_argument);
  CHECK(e.second == "edited arguments for book_room are nested deeper than 64 levels");
  CHECK(h.rt->turn(t.id)->status == TurnStatus::waiting_approval);  // nothing was decided
  d.edited_args = json{{"room", "B2"}, {"day", "tue"}};
  h.rt->resume(t.id, t.approval_request_id, {d});
  CHECK(h.wait(t.id).status == TurnStatus::completed);
  CHECK(h.tool_runs == 1);

  // complete_job checks its payload before it looks the job up.
  JobResult r;
  r.result = nested(kHuge);
  e = error_of([&] { h.rt->complete_job("job_none", r); });
  CHECK(e.first == ErrorCode::invalid_argument);
  CHECK(e.second == "a job's result is nested deeper than 64 levels");
  r.result = nested(64);
  r.assets = json::array({deep_object(64)});
  e = error_of([&] { h.rt->complete_job("job_none", r); });
  CHECK(e.second == "a job's asset list is nested deeper than 64 levels");
  r.assets = json::array({deep_object(63)});
  e = error_of([&] { h.rt->complete_job("job_none", r); });
  CHECK(e.first == ErrorCode::not_found);
}

TEST_CASE("a job started with metadata nested too deep fails the call with invalid_job") {
  Harness h([](const ModelRequest& req) -> ModelResult {
    if (req.stage == "intent") return text_result("x");
    if (tool_results_since_last_user(req) == 0)
      return tool_call_result("c1", "render", json{{"depth", std::stoi(last_user_message(req)->content)}}.dump());
    return text_result("done");
  });
  ToolSpec spec;
  spec.name = "render";
  spec.parameters = json::parse(R"({"type":"object","properties":{"depth":{"type":"integer"}}})");
  spec.handler = [](const ToolCallContext& c, ToolCompletion done) {
    JobStart js;
    js.metadata = deep_object(c.args["depth"].get<size_t>());
    done.start_job(std::move(js));
  };
  h.rt->tools().add(spec);
  for (int depth : {65, 64}) {
    const std::string thread = "t-job-" + std::to_string(depth);
    auto handle = h.start(thread, std::to_string(depth));
    CHECK(h.wait(handle.turn_id).status == TurnStatus::completed);
    auto evs = h.events(thread);
    const json* result = find_event(evs, "TOOL_CALL_RESULT");
    REQUIRE(result != nullptr);
    const json& out = (*result)["metadata"]["tool_agent_output"];
    if (depth == 65) {
      CHECK(out["status"] == "failed");
      CHECK(out["error"]["code"] == "invalid_job");
      CHECK(out["error"]["message"] == "a job's metadata is nested deeper than 64 levels");
      CHECK(h.rt->jobs(thread).empty());
    } else {
      CHECK(out["status"] == "succeeded");
      REQUIRE(h.rt->jobs(thread).size() == 1);
      CHECK(json_depth(h.rt->jobs(thread)[0].metadata) == 64);
    }
  }
}

TEST_CASE("an input message with no text and nothing attached is refused, however it is written") {
  Harness h(answer_ok);
  auto with_texts = [](const std::string& thread, std::vector<std::string> texts) {
    TurnInput in = turn_input(thread, user_message(""));
    for (auto& t : texts) in.message.parts.push_back(ContentPart::make_text(std::move(t)));
    return in;
  };
  for (const auto& texts :
       {std::vector<std::string>{}, std::vector<std::string>{""}, std::vector<std::string>{"", ""}}) {
    CAPTURE(texts.size());
    auto e = error_of([&] { h.rt->start_turn(with_texts("t-empty", texts)); });
    CHECK(e.first == ErrorCode::invalid_argument);
    CHECK(e.second == "the user message is empty");
  }
  CHECK_FALSE(h.store->get_thread("t-empty"));  // nothing was started
  // One text part with text is a message; so is an empty text beside it.
  CHECK(h.wait(h.rt->start_turn(with_texts("t-text", {"", "hi"})).turn_id).status == TurnStatus::completed);
}
