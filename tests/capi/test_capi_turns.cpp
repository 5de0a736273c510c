// Turns through the C ABI: host tools (completed now or later), host models, resume, cancel, history, streams.
#include <doctest/doctest.h>

#include <deque>
#include <mutex>

#include "capi_fixture.hpp"

using namespace capi_test;

namespace {

// A host book_room tool: counts its runs; completes at once, later from another thread, or not at all.
struct BookRoom {
  enum class Mode { now, later, release_without_completing };
  Mode mode = Mode::now;
  std::atomic<int> runs{0};
  std::atomic<int> destroyed{0};
  std::mutex mutex;
  std::vector<json> calls;
  std::vector<std::thread> threads;
  ~BookRoom() {
    for (auto& t : threads) t.join();
  }

  static void run(agentrt_tool_call* call, const char* call_json, void* ud) {
    auto* self = static_cast<BookRoom*>(ud);
    ++self->runs;
    json c = json::parse(call_json);
    {
      std::lock_guard<std::mutex> lock(self->mutex);
      self->calls.push_back(c);
    }
    const json result{{"ok", true},
                      {"booking_id", "BK-" + c["threadId"].get<std::string>()},
                      {"room", c["args"]["room"]},
                      {"day", c["args"]["day"]}};
    const std::string ui = R"({"type":"booking_card","version":"v1","data":{"room":"A1"}})";
    switch (self->mode) {
      case Mode::now:
        REQUIRE(agentrt_tool_call_complete(call, result.dump().c_str(), ui.c_str()) == AGENTRT_OK);
        agentrt_tool_call_free(call);
        break;
      case Mode::later: {
        std::lock_guard<std::mutex> lock(self->mutex);
        self->threads.emplace_back([call, result, ui] {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          CHECK(agentrt_tool_call_complete(call, result.dump().c_str(), ui.c_str()) == AGENTRT_OK);
          // Only the first completion counts.
          CHECK(agentrt_tool_call_complete(call, "{}", nullptr) == AGENTRT_E_INVALID_STATE);
          CHECK(agentrt_tool_call_fail(call, "late", "too late") == AGENTRT_E_INVALID_STATE);
          agentrt_tool_call_free(call);
        });
        break;
      }
      case Mode::release_without_completing: agentrt_tool_call_free(call); break;
    }
  }
  static void destroy(void* ud) { ++static_cast<BookRoom*>(ud)->destroyed; }

  void add(agentrt_runtime* rt, const std::string& approval = "always") {
    json spec{{"name", "book_room"},
              {"description", "Book a hotel room"},
              {"approval", approval},
              {"parameters",
               {{"type", "object"},
                {"properties", {{"room", {{"type", "string"}}}, {"day", {{"type", "string"}}}}},
                {"required", {"room", "day"}}}}};
    REQUIRE_MESSAGE(agentrt_tool_register(rt, spec.dump().c_str(), run, this, destroy) == AGENTRT_OK, last_error());
  }
};

const json* find(const std::vector<json>& evs, const std::string& type) {
  for (const auto& e : evs)
    if (e["type"] == type) return &e;
  return nullptr;
}

}  // namespace

TEST_CASE("golden path B through the C ABI: a host tool pauses for approval and runs once after resume") {
  BookRoom tool;
  {
    Runtime r;
    tool.add(r.rt);
    auto h = r.start("t-b", "please book a room");
    CHECK(h["existing"] == false);
    CHECK(h["firstSeq"] == 1);
    CHECK(h["threadId"] == "t-b");
    auto t = r.wait(h["turnId"]);
    REQUIRE(t["status"] == "WAITING_APPROVAL");
    CHECK(tool.runs == 0);

    auto run1 = r.events("t-b");
    const std::vector<std::string> expected1 = {"RUN_STARTED",   "STEP_STARTED",    "CUSTOM",         "STEP_FINISHED",
                                                "STEP_STARTED",  "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END",
                                                "STEP_FINISHED", "RUN_FINISHED"};
    CHECK(shape_of(run1) == expected1);
    for (size_t i = 0; i < run1.size(); ++i) CHECK(run1[i]["_seq"] == static_cast<int64_t>(i + 1));
    const json& intr = run1.back()["outcome"]["interrupts"][0];
    CHECK(run1.back()["outcome"]["type"] == "interrupt");
    CHECK(intr["toolCallId"] == "call_book_1");

    char* out = nullptr;
    REQUIRE(agentrt_turn_interrupts(&out, r.rt, h["turnId"].get<std::string>().c_str()) == AGENTRT_OK);
    json pending = json::parse(take(out));
    CHECK(pending["status"] == "WAITING_APPROVAL");
    CHECK(pending["approvalRequestId"] == t["approvalRequestId"]);
    REQUIRE(pending["interrupts"].size() == 1);
    CHECK(pending["interrupts"][0]["id"] == intr["id"]);

    json answer = r.resume(h["turnId"], t["approvalRequestId"],
                           json::array({{{"interruptId", intr["id"]}, {"action", "approve"}}}));
    CHECK(answer["status"] == "accepted");
    CHECK(answer["turnId"] == h["turnId"]);
    auto done = r.wait(h["turnId"]);
    CHECK(done["status"] == "COMPLETED");
    CHECK(tool.runs == 1);
    CHECK(tool.calls[0]["args"] == json{{"room", "A1"}, {"day", "mon"}});
    CHECK(tool.calls[0]["toolCallId"] == "call_book_1");
    CHECK(tool.calls[0]["threadId"] == "t-b");
    CHECK(tool.calls[0]["userId"] == "u1");
    CHECK(tool.calls[0]["stage"] == "execution");

    auto run2 = r.events("t-b", 1, run1.back()["_seq"]);
    const std::vector<std::string> expected2 = {"RUN_STARTED",      "STEP_STARTED",       "CUSTOM",
                                                "TOOL_CALL_RESULT", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT",
                                                "TEXT_MESSAGE_END", "STEP_FINISHED",      "STEP_STARTED",
                                                "STEP_FINISHED",    "RUN_FINISHED"};
    CHECK(shape_of(run2) == expected2);
    CHECK(run2[0]["runId"] == answer["runId"]);
    CHECK(run2[0]["parentRunId"] == h["runId"]);
    CHECK(run2[2]["name"] == "agentrt.started");  // durable before the tool runs
    CHECK(run2[3]["metadata"]["tool_agent_output"]["result"]["booking_id"] == "BK-t-b");
    CHECK(run2[3]["metadata"]["ui"]["type"] == "booking_card");
    CHECK(run2.back()["outcome"]["type"] == "success");

    // The same approval request again: the first answer, nothing runs again.
    json again = r.resume(h["turnId"], t["approvalRequestId"],
                          json::array({{{"interruptId", intr["id"]}, {"action", "approve"}}}));
    CHECK(again == answer);
    CHECK(tool.runs == 1);

    auto hist = r.history("t-b");
    REQUIRE(hist.size() == 4);
    CHECK(hist[0]["role"] == "user");
    CHECK(hist[1]["toolCalls"][0]["function"]["name"] == "book_room");
    CHECK(hist[2]["role"] == "tool");
    CHECK(hist[3]["content"] == "Your booking is confirmed: room A1 on Monday.");
    CHECK(tool.destroyed == 0);
  }
  CHECK(tool.destroyed == 1);  // at agentrt_runtime_free
}

TEST_CASE("a host tool may complete later from another thread") {
  BookRoom tool;
  tool.mode = BookRoom::Mode::later;
  Runtime r;
  tool.add(r.rt, "never");
  auto h = r.start("t-later", "book a room");
  auto t = r.wait(h["turnId"]);
  CHECK(t["status"] == "COMPLETED");
  CHECK(tool.runs == 1);
  auto hist = r.history("t-later");
  REQUIRE(hist.size() == 4);
  CHECK(hist[3]["content"] == "Your booking is confirmed: room A1 on Monday.");
}

TEST_CASE("a host tool call released without completing fails with tool_error") {
  BookRoom tool;
  tool.mode = BookRoom::Mode::release_without_completing;
  Runtime r;
  tool.add(r.rt, "never");
  auto h = r.start("t-released", "book a room");
  r.wait(h["turnId"]);
  auto evs = r.events("t-released");
  const json* res = find(evs, "TOOL_CALL_RESULT");
  REQUIRE(res != nullptr);
  CHECK((*res)["metadata"]["tool_agent_output"]["status"] == "failed");
  CHECK((*res)["metadata"]["tool_agent_output"]["error"]["code"] == "tool_error");
  CHECK((*res)["metadata"]["tool_agent_output"]["error"]["message"] ==
        "the host released the tool call without completing it");
}

namespace {

void bad_ui_tool(agentrt_tool_call* call, const char*, void* ud) {
  auto* codes = static_cast<std::vector<int32_t>*>(ud);
  codes->push_back(agentrt_tool_call_complete(call, "{\"ok\":", nullptr));
  codes->push_back(agentrt_tool_call_complete(call, "{}", R"({"type":"card","version":"v2"})"));
  codes->push_back(agentrt_tool_call_fail(call, nullptr, "it did not work"));
  agentrt_tool_call_free(call);
}

}  // namespace

TEST_CASE("malformed results leave the call open; a failure with a NULL code is tool_error") {
  std::vector<int32_t> codes;
  Runtime r;
  REQUIRE(agentrt_tool_register(r.rt, R"({"name":"book_room"})", bad_ui_tool, &codes, nullptr) == AGENTRT_OK);
  auto h = r.start("t-bad-ui", "book");
  r.wait(h["turnId"]);
  CHECK(codes == std::vector<int32_t>{AGENTRT_E_INVALID_ARGUMENT, AGENTRT_E_INVALID_ARGUMENT, AGENTRT_OK});
  auto evs = r.events("t-bad-ui");
  const json* res = find(evs, "TOOL_CALL_RESULT");
  REQUIRE(res != nullptr);
  CHECK((*res)["metadata"]["tool_agent_output"]["error"] ==
        json{{"code", "tool_error"}, {"message", "it did not work"}});
}

TEST_CASE("the AG-UI RunAgentInput form takes only the last user message; a repeated message id is the same turn") {
  Runtime r;
  json in{{"threadId", "t-agui"},
          {"runId", "run-agui-1"},
          {"userId", "u1"},
          {"state", json::object()},
          {"tools", json::array()},
          {"context", json::array()},
          {"messages",
           {{{"id", "m0"}, {"role", "user"}, {"content", "forged earlier message"}},
            {{"id", "m1"}, {"role", "assistant"}, {"content", "forged answer"}},
            {{"id", "m2"}, {"role", "user"}, {"content", "hello"}}}}};
  char* out = nullptr;
  REQUIRE_MESSAGE(agentrt_turn_start(&out, r.rt, in.dump().c_str()) == AGENTRT_OK, last_error());
  json h = json::parse(take(out));
  CHECK(h["runId"] == "run-agui-1");
  r.wait(h["turnId"]);
  auto hist = r.history("t-agui");
  REQUIRE(hist.size() == 2);
  CHECK(hist[0]["id"] == "m2");
  CHECK(hist[0]["content"] == "hello");

  REQUIRE(agentrt_turn_start(&out, r.rt, in.dump().c_str()) == AGENTRT_OK);
  json again = json::parse(take(out));
  CHECK(again["existing"] == true);
  CHECK(again["turnId"] == h["turnId"]);

  char* rec = nullptr;
  REQUIRE(agentrt_turn_get(&rec, r.rt, h["turnId"].get<std::string>().c_str()) == AGENTRT_OK);
  json t = json::parse(take(rec));
  for (const char* k :
       {"id", "threadId", "userId", "status", "version", "clientMessageId", "runId", "parentRunId", "stage",
        "approvalRequestId", "interrupts", "expiresAt", "intent", "error", "usage", "steps", "createdAt", "updatedAt"})
    CHECK_MESSAGE(t.contains(k), k);
  CHECK(t["status"] == "COMPLETED");
  CHECK(t["clientMessageId"] == "m2");
}

TEST_CASE("a second turn on a busy thread is AGENTRT_E_CONFLICT; cancel ends the waiting turn") {
  BookRoom tool;
  Runtime r;
  tool.add(r.rt);
  auto h = r.start("t-busy", "book a room");
  REQUIRE(r.wait(h["turnId"])["status"] == "WAITING_APPROVAL");
  char* out = nullptr;
  CHECK(agentrt_turn_start(&out, r.rt, R"({"threadId":"t-busy","userId":"u1","message":{"content":"more"}})") ==
        AGENTRT_E_CONFLICT);
  CHECK(std::string(agentrt_last_error()).rfind("agentrt_turn_start: ", 0) == 0);
  REQUIRE(agentrt_turn_cancel(r.rt, h["turnId"].get<std::string>().c_str()) == AGENTRT_OK);
  auto t = r.wait(h["turnId"]);
  CHECK(t["status"] == "CANCELLED");
  REQUIRE(agentrt_turn_interrupts(&out, r.rt, h["turnId"].get<std::string>().c_str()) == AGENTRT_OK);
  CHECK(json::parse(take(out))["interrupts"] == json::array());
  CHECK(tool.runs == 0);
  // Another user may not use the thread.
  CHECK(agentrt_turn_start(&out, r.rt, R"({"threadId":"t-busy","userId":"u2","message":{"content":"mine?"}})") ==
        AGENTRT_E_NOT_FOUND);
}

// ------------------------------------------------------------------------------------------- host models

namespace {

// A scripted host model: each call is answered by the test's function, on a thread of its own or inline.
struct HostModel {
  std::function<void(agentrt_model_call*, const json&)> answer;
  std::atomic<int> calls{0};
  std::atomic<int> destroyed{0};
  std::mutex mutex;
  std::vector<json> requests;
  std::vector<std::thread> threads;
  bool threaded = false;
  ~HostModel() {
    for (auto& t : threads) t.join();
  }
  static void call(agentrt_model_call* c, const char* request, void* ud) {
    auto* self = static_cast<HostModel*>(ud);
    ++self->calls;
    json req = json::parse(request);
    std::lock_guard<std::mutex> lock(self->mutex);
    self->requests.push_back(req);
    if (self->threaded)
      self->threads.emplace_back([self, c, req] { self->answer(c, req); });
    else
      self->answer(c, req);
  }
  static void destroy(void* ud) { ++static_cast<HostModel*>(ud)->destroyed; }
};

}  // namespace

TEST_CASE("a host model streams text from another thread; the answer is what it streamed") {
  HostModel m;
  m.threaded = true;
  m.answer = [](agentrt_model_call* c, const json& req) {
    if (req["stage"] == "intent") {
      CHECK(agentrt_model_call_finish(c, R"({"text":"greeting"})") == AGENTRT_OK);
    } else {
      for (const char* piece : {"Hel", "lo ", "there"}) CHECK(agentrt_model_call_text(c, piece) == AGENTRT_OK);
      CHECK(agentrt_model_call_finish(c, R"({"usage":{"inputTokens":3,"outputTokens":2}})") == AGENTRT_OK);
      CHECK(agentrt_model_call_text(c, "late") == AGENTRT_E_INVALID_STATE);
      CHECK(agentrt_model_call_finish(c, "{}") == AGENTRT_E_INVALID_STATE);
    }
    agentrt_model_call_free(c);
  };
  {
    Runtime r(HostModel::call, &m, HostModel::destroy);
    auto h = r.start("t-model", "hi");
    auto t = r.wait(h["turnId"]);
    CHECK(t["status"] == "COMPLETED");
    CHECK(t["intent"] == "greeting");
    auto evs = r.events("t-model");
    std::vector<std::string> deltas;
    for (const auto& e : evs)
      if (e["type"] == "TEXT_MESSAGE_CONTENT") deltas.push_back(e["delta"]);
    CHECK(deltas == std::vector<std::string>{"Hel", "lo ", "there"});
    auto hist = r.history("t-model");
    REQUIRE(hist.size() == 2);
    CHECK(hist[1]["content"] == "Hello there");
    CHECK(m.calls == 2);
    std::lock_guard<std::mutex> lock(m.mutex);
    const json& req = m.requests[1];
    CHECK(req["stage"] == "execution");
    CHECK(req["threadId"] == "t-model");
    CHECK(req["turnId"] == h["turnId"]);
    CHECK(req["messages"].back()["content"] == "hi");
    CHECK(req["tools"].is_array());
  }
  CHECK(m.destroyed == 1);
}

TEST_CASE("a synchronous host model's deltas reach the event stream while its callback still runs") {
  HostModel m;
  agentrt_runtime* rt_ptr = nullptr;
  std::atomic<bool> seen_live{false};
  m.answer = [&](agentrt_model_call* c, const json& req) {
    if (req["stage"] == "intent") {
      agentrt_model_call_finish(c, R"({"text":"greeting"})");
    } else {
      REQUIRE(agentrt_model_call_text(c, "Hel") == AGENTRT_OK);
      // Still inside the callback (on the worker's thread): the delta must already be streaming.
      agentrt_events* s = nullptr;
      REQUIRE(agentrt_events_open(&s, rt_ptr, req["threadId"].get<std::string>().c_str(), 0) == AGENTRT_OK);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kLongWaitMs);
      while (!seen_live && std::chrono::steady_clock::now() < deadline) {
        char* e = nullptr;
        if (agentrt_events_next(&e, nullptr, s, 100) != AGENTRT_OK) continue;
        json ev = json::parse(take(e));
        if (ev["type"] == "TEXT_MESSAGE_CONTENT" && ev["delta"] == "Hel") seen_live = true;
      }
      agentrt_events_free(s);
      agentrt_model_call_text(c, "lo");
      agentrt_model_call_finish(c, nullptr);
    }
    agentrt_model_call_free(c);
  };
  Runtime r(HostModel::call, &m);
  rt_ptr = r.rt;
  auto h = r.start("t-model-live", "hi");
  CHECK(r.wait(h["turnId"])["status"] == "COMPLETED");
  CHECK(seen_live);
  CHECK(r.history("t-model-live").back()["content"] == "Hello");
}

TEST_CASE("a host model's streamed tool call runs the host tool") {
  HostModel m;
  m.answer = [](agentrt_model_call* c, const json& req) {
    if (req["stage"] == "intent") {
      agentrt_model_call_finish(c, R"({"text":"booking"})");
    } else if (req["messages"].back()["role"] != "tool") {
      CHECK(req["tools"][0]["name"] == "book_room");
      CHECK(agentrt_model_call_tool_call_start(c, 0, "call_m1", "book_room") == AGENTRT_OK);
      CHECK(agentrt_model_call_tool_call_args(c, 0, R"({"room":"B2",)") == AGENTRT_OK);
      CHECK(agentrt_model_call_tool_call_args(c, 0, R"("day":"tue"})") == AGENTRT_OK);
      CHECK(agentrt_model_call_finish(c, nullptr) == AGENTRT_OK);
    } else {
      agentrt_model_call_finish(c, R"({"text":"Booked."})");
    }
    agentrt_model_call_free(c);
  };
  BookRoom tool;
  Runtime r(HostModel::call, &m);
  tool.add(r.rt, "never");
  auto h = r.start("t-model-tool", "book B2");
  auto t = r.wait(h["turnId"]);
  CHECK(t["status"] == "COMPLETED");
  CHECK(tool.runs == 1);
  CHECK(tool.calls[0]["args"] == json{{"room", "B2"}, {"day", "tue"}});
  CHECK(tool.calls[0]["toolCallId"] == "call_m1");
  CHECK(r.history("t-model-tool").back()["content"] == "Booked.");
}

TEST_CASE("a host model that fails, or is released unfinished, fails the turn with its message") {
  HostModel m;
  m.answer = [](agentrt_model_call* c, const json&) {
    CHECK(agentrt_model_call_finish(c, R"({"text":1})") == AGENTRT_E_INVALID_ARGUMENT);
    CHECK(std::string(agentrt_last_error()).find("'text' must be a string") != std::string::npos);
    CHECK(agentrt_model_call_finish(c, R"({"colour":"red"})") == AGENTRT_E_INVALID_ARGUMENT);
    CHECK(agentrt_model_call_fail(c, AGENTRT_E_UNAUTHORIZED, "the key was refused") == AGENTRT_OK);
    agentrt_model_call_free(c);
  };
  Runtime r(HostModel::call, &m);
  auto h = r.start("t-model-fail", "hi");
  auto t = r.wait(h["turnId"]);
  CHECK(t["status"] == "FAILED");
  CHECK(t["error"].get<std::string>().find("the key was refused") != std::string::npos);
  auto evs = r.events("t-model-fail");
  CHECK(evs.back()["type"] == "RUN_ERROR");

  m.answer = [](agentrt_model_call* c, const json&) { agentrt_model_call_free(c); };
  auto h2 = r.start("t-model-released", "hi");
  auto t2 = r.wait(h2["turnId"]);
  CHECK(t2["status"] == "FAILED");
  CHECK(t2["error"].get<std::string>().find("without finishing it") != std::string::npos);
}

TEST_CASE("cancelling a turn stops waiting for the host model; later pushes are AGENTRT_E_CANCELLED") {
  HostModel m;
  std::mutex mu;
  std::deque<agentrt_model_call*> held;
  Condition called;
  m.answer = [&](agentrt_model_call* c, const json&) {
    {
      std::lock_guard<std::mutex> lock(mu);
      held.push_back(c);  // answered never
    }
    called.notify();
  };
  Runtime r(HostModel::call, &m);
  auto h = r.start("t-model-cancel", "hi");
  REQUIRE(called.wait());
  REQUIRE(m.calls == 1);
  REQUIRE(agentrt_turn_cancel(r.rt, h["turnId"].get<std::string>().c_str()) == AGENTRT_OK);
  auto t = r.wait(h["turnId"]);
  CHECK(t["status"] == "CANCELLED");
  std::lock_guard<std::mutex> lock(mu);
  REQUIRE(held.size() == 1);
  CHECK(agentrt_model_call_text(held[0], "too late") == AGENTRT_E_CANCELLED);
  CHECK(agentrt_model_call_finish(held[0], "{}") == AGENTRT_E_CANCELLED);
  agentrt_model_call_free(held[0]);
  auto evs = r.events("t-model-cancel");
  CHECK(evs.back()["outcome"]["type"] == "cancelled");
}

TEST_CASE("freeing the runtime wakes a blocked pull and leaves the stream safe to free") {
  TempDir dir;
  agentrt_runtime* rt = nullptr;
  REQUIRE(agentrt_runtime_open(&rt, test_config(dir).dump().c_str()) == AGENTRT_OK);
  agentrt_events* s = nullptr;
  REQUIRE(agentrt_events_open(&s, rt, "t-quiet", 0) == AGENTRT_OK);
  std::atomic<int32_t> rc{1};
  std::thread puller([&] {
    char* e = nullptr;
    rc = agentrt_events_next(&e, nullptr, s, 10000);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto t0 = std::chrono::steady_clock::now();
  agentrt_runtime_free(rt);
  puller.join();
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  CHECK(rc == AGENTRT_E_CANCELLED);
  char* e = nullptr;
  CHECK(agentrt_events_next(&e, nullptr, s, 0) == AGENTRT_E_CANCELLED);
  agentrt_events_free(s);
}

namespace {
// A host tool that reads the call's state and answers with a delta (or a malformed one).
void state_tool(agentrt_tool_call* call, const char* call_json, void* ud) {
  auto* seen = static_cast<std::vector<json>*>(ud);
  json c = json::parse(call_json);
  seen->push_back(c["state"]);
  CHECK(agentrt_tool_call_state_delta(call, "{\"op\":\"add\"}") == AGENTRT_E_INVALID_ARGUMENT);
  CHECK(last_error() == "agentrt_tool_call_state_delta: delta_json must be a JSON Patch: an array of operations");
  CHECK(agentrt_tool_call_state_delta(call, R"([{"op":"add","path":"/booked","value":"A1"}])") == AGENTRT_OK);
  CHECK(agentrt_tool_call_complete(call, R"({"ok":true})", nullptr) == AGENTRT_OK);
  agentrt_tool_call_free(call);
}
}  // namespace

TEST_CASE("shared state through the C ABI: a turn's state, the call's state, a host tool's delta, the thread's state") {
  std::vector<json> seen;
  Runtime r;
  json spec{{"name", "book_room"}, {"approval", "never"}};
  REQUIRE(agentrt_tool_register(r.rt, spec.dump().c_str(), state_tool, &seen, nullptr) == AGENTRT_OK);
  char* out = nullptr;
  REQUIRE(agentrt_thread_state(&out, r.rt, "t-state") == AGENTRT_OK);
  CHECK(take(out) == "null");
  json in{{"threadId", "t-state"},
          {"userId", "u1"},
          {"message", {{"role", "user"}, {"content", "book a room"}}},
          {"state", {{"theme", "dark"}}}};
  REQUIRE_MESSAGE(agentrt_turn_start(&out, r.rt, in.dump().c_str()) == AGENTRT_OK, last_error());
  CHECK(r.wait(json::parse(take(out))["turnId"])["status"] == "COMPLETED");
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] == json{{"theme", "dark"}});
  REQUIRE(agentrt_thread_state(&out, r.rt, "t-state") == AGENTRT_OK);
  CHECK(json::parse(take(out)) == json{{"theme", "dark"}, {"booked", "A1"}});
  auto evs = r.events("t-state");
  CHECK(evs[1]["type"] == "STATE_SNAPSHOT");
  bool delta = false;
  for (size_t i = 0; i + 1 < evs.size(); ++i)
    if (evs[i]["type"] == "STATE_DELTA") {
      delta = true;
      CHECK(evs[i + 1]["type"] == "TOOL_CALL_RESULT");
    }
  CHECK(delta);

  in["threadId"] = "t-state2";
  in["state"] = nullptr;  // none: the thread has no state
  REQUIRE_MESSAGE(agentrt_turn_start(&out, r.rt, in.dump().c_str()) == AGENTRT_OK, last_error());
  r.wait(json::parse(take(out))["turnId"]);
  in["threadId"] = "t-state3";
  in["state"] = {{"blob", std::string(300000, 'x')}};
  CHECK(agentrt_turn_start(&out, r.rt, in.dump().c_str()) == AGENTRT_E_TOO_LARGE);
  CHECK(last_error() == "agentrt_turn_start: state: 300011 bytes; the limit is 262144");
  CHECK(agentrt_thread_state(&out, r.rt, nullptr) == AGENTRT_E_INVALID_ARGUMENT);
}

TEST_CASE("client tools through the C ABI: the host offers one, answers its call, and the turn goes on") {
  Runtime r;
  const json tool{{"name", "change_theme"},
                  {"description", "Change the page's theme"},
                  {"parameters",
                   {{"type", "object"},
                    {"properties", {{"theme", {{"type", "string"}, {"enum", {"dark", "light"}}}}}},
                    {"required", {"theme"}}}}};
  json in{{"threadId", "t-ct"},
          {"userId", "u1"},
          {"message", {{"role", "user"}, {"content", "please use change_theme"}}},
          {"tools", json::array({tool})}};
  char* out = nullptr;
  REQUIRE_MESSAGE(agentrt_turn_start(&out, r.rt, in.dump().c_str()) == AGENTRT_OK, last_error());
  const std::string turn = json::parse(take(out))["turnId"];
  CHECK(r.wait(turn)["status"] == "WAITING_CLIENT");
  REQUIRE(agentrt_turn_interrupts(&out, r.rt, turn.c_str()) == AGENTRT_OK);
  const json pause = json::parse(take(out));
  CHECK(pause["status"] == "WAITING_CLIENT");
  CHECK(pause["interrupts"] == json::array());
  const std::string apr = pause["approvalRequestId"];
  CHECK(!apr.empty());
  auto evs = r.events("t-ct");
  const json* start = find(evs, "TOOL_CALL_START");
  REQUIRE(start);
  CHECK((*start)["toolCallName"] == "change_theme");
  const std::string call = (*start)["toolCallId"];
  CHECK(evs.back()["outcome"] == json{{"type", "success"}, {"pendingToolCallIds", {call}}});

  auto refused = [&](const json& body) {
    char* o = nullptr;
    const int32_t rc = agentrt_turn_resume(&o, r.rt, turn.c_str(), apr.c_str(), body.dump().c_str());
    CHECK(o == nullptr);
    return rc;
  };
  CHECK(refused(json{{"answers", json::array()}}) == AGENTRT_E_INVALID_ARGUMENT);
  CHECK(last_error() == "agentrt_turn_resume: client tool call '" + call +
                            "' (change_theme) has no answer: a resume must answer every pending call");
  CHECK(refused(json{{"answers", {{{"toolCallId", "nope"}, {"content", "x"}}}}}) == AGENTRT_E_INVALID_ARGUMENT);
  CHECK(refused(json{{"answers", {{{"content", "x"}}}}}) == AGENTRT_E_INVALID_ARGUMENT);
  CHECK(refused(json{{"answers", "x"}}) == AGENTRT_E_INVALID_ARGUMENT);

  const json accepted = r.resume(
      turn, apr, json{{"answers", {{{"toolCallId", call}, {"content", R"({"ok":true})"}, {"id", "tm-capi"}}}}});
  CHECK(accepted["status"] == "accepted");
  CHECK(r.wait(turn)["status"] == "COMPLETED");
  const json history = r.history("t-ct");
  REQUIRE(history.size() == 4);
  CHECK(history[2]["role"] == "tool");
  CHECK(history[2]["id"] == "tm-capi");
  CHECK(history[3]["content"] == R"(The tool answered: {"ok":true})");

  // A malformed tool list is refused before anything starts.
  in["threadId"] = "t-ct2";
  in["tools"] = json::array({{{"name", "a b"}}});
  CHECK(agentrt_turn_start(&out, r.rt, in.dump().c_str()) == AGENTRT_E_INVALID_ARGUMENT);
  CHECK(last_error() == "agentrt_turn_start: client tool 'a b': a name is 1 to 64 letters, digits, '_' or '-'");
}
