// The exception firewall: an exception thrown inside any entry point (or inside the core, or by host code the
// core calls) comes out as a status code and a message, never as an exception.
#include <doctest/doctest.h>

#include <fstream>
#include <functional>
#include <mutex>
#include <new>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "agentrt/error.hpp"
#include "capi_fixture.hpp"
#include "firewall.hpp"

using namespace capi_test;

namespace {

enum class Throw { runtime_error, agentrt_error, bad_alloc, json_error, non_standard };
std::atomic<Throw> g_throw{Throw::runtime_error};
std::mutex g_mutex;
std::set<std::string> g_reached;

void throwing_hook(const char* function) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_reached.insert(function);
  }
  switch (g_throw.load()) {
    case Throw::runtime_error: throw std::runtime_error("boom");
    case Throw::agentrt_error: throw agentrt::Error(agentrt::ErrorCode::conflict, "lost the race");
    case Throw::bad_alloc: throw std::bad_alloc();
    case Throw::json_error: {
      json j = json::parse("{nope");
      (void)j;
      break;
    }
    case Throw::non_standard: throw 42;
  }
}

// Resets the hook even when a check fails.
struct HookGuard {
  HookGuard() { agentrt::capi::set_fault_hook(throwing_hook); }
  ~HookGuard() { agentrt::capi::set_fault_hook(nullptr); }
};

// The functions agentrt.h declares.
std::set<std::string> header_functions() {
  std::ifstream in(AGENTRT_CAPI_HEADER);
  REQUIRE(in);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::set<std::string> out;
  std::regex decl(R"(AGENTRT_API\s+[^;(]*?\b(agentrt_\w+)\s*\()");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), decl); it != std::sregex_iterator(); ++it)
    out.insert((*it)[1]);
  return out;
}

void dummy_tool(agentrt_tool_call*, const char*, void*) {}
void dummy_model(agentrt_model_call*, const char*, void*) {}
void dummy_job_hook(const char*, void*) {}

// Every guarded entry point, called with arguments it would otherwise accept or refuse: the hook throws first.
// A void function reports through the last error only, so it returns 1 here.
std::vector<std::pair<std::string, std::function<int32_t()>>> entry_points() {
  char* s = nullptr;
  int64_t seq = 0;
  agentrt_runtime* rt = nullptr;
  agentrt_events* ev = nullptr;
  return {
      {"agentrt_runtime_open", [=]() mutable { return agentrt_runtime_open(&rt, "{}"); }},
      {"agentrt_runtime_open_with_model",
       [=]() mutable { return agentrt_runtime_open_with_model(&rt, "{}", dummy_model, nullptr, nullptr); }},
      {"agentrt_runtime_free", [] { return agentrt_runtime_free(nullptr), 1; }},
      {"agentrt_tool_register",
       [] { return agentrt_tool_register(nullptr, R"({"name":"x"})", dummy_tool, nullptr, nullptr); }},
      {"agentrt_tool_unregister", [] { return agentrt_tool_unregister(nullptr, "x"); }},
      {"agentrt_tool_call_complete", [] { return agentrt_tool_call_complete(nullptr, "{}", nullptr); }},
      {"agentrt_tool_call_state_delta", [] { return agentrt_tool_call_state_delta(nullptr, "[]"); }},
      {"agentrt_tool_call_fail", [] { return agentrt_tool_call_fail(nullptr, "c", "m"); }},
      {"agentrt_tool_call_start_job", [] { return agentrt_tool_call_start_job(nullptr, "{}"); }},
      {"agentrt_tool_call_free", [] { return agentrt_tool_call_free(nullptr), 1; }},
      {"agentrt_model_call_text", [] { return agentrt_model_call_text(nullptr, "d"); }},
      {"agentrt_model_call_reasoning", [] { return agentrt_model_call_reasoning(nullptr, "d"); }},
      {"agentrt_model_call_tool_call_start", [] { return agentrt_model_call_tool_call_start(nullptr, 0, "i", "n"); }},
      {"agentrt_model_call_tool_call_args", [] { return agentrt_model_call_tool_call_args(nullptr, 0, "d"); }},
      {"agentrt_model_call_finish", [] { return agentrt_model_call_finish(nullptr, "{}"); }},
      {"agentrt_model_call_fail", [] { return agentrt_model_call_fail(nullptr, AGENTRT_E_MODEL, "m"); }},
      {"agentrt_model_call_free", [] { return agentrt_model_call_free(nullptr), 1; }},
      {"agentrt_turn_start", [=]() mutable { return agentrt_turn_start(&s, nullptr, "{}"); }},
      {"agentrt_turn_resume", [=]() mutable { return agentrt_turn_resume(&s, nullptr, "t", "a", "[]"); }},
      {"agentrt_turn_cancel", [] { return agentrt_turn_cancel(nullptr, "t"); }},
      {"agentrt_turn_get", [=]() mutable { return agentrt_turn_get(&s, nullptr, "t"); }},
      {"agentrt_turn_wait", [=]() mutable { return agentrt_turn_wait(&s, nullptr, "t", 0); }},
      {"agentrt_turn_interrupts", [=]() mutable { return agentrt_turn_interrupts(&s, nullptr, "t"); }},
      {"agentrt_turn_messages", [=]() mutable { return agentrt_turn_messages(&s, nullptr, "t"); }},
      {"agentrt_thread_history", [=]() mutable { return agentrt_thread_history(&s, nullptr, "t"); }},
      {"agentrt_thread_state", [=]() mutable { return agentrt_thread_state(&s, nullptr, "t"); }},
      {"agentrt_threads_list", [=]() mutable { return agentrt_threads_list(&s, nullptr, "u"); }},
      {"agentrt_thread_delete", [] { return agentrt_thread_delete(nullptr, "t", "u"); }},
      {"agentrt_mcp_servers", [=]() mutable { return agentrt_mcp_servers(&s, nullptr); }},
      {"agentrt_mcp_tools", [=]() mutable { return agentrt_mcp_tools(&s, nullptr); }},
      {"agentrt_spend", [=]() mutable { return agentrt_spend(&s, nullptr, "user", "u"); }},
      {"agentrt_flush_traces", [] { return agentrt_flush_traces(nullptr, 0); }},
      {"agentrt_mcp_tool_approve", [=]() mutable { return agentrt_mcp_tool_approve(&s, nullptr, "x__y"); }},
      {"agentrt_upload_create",
       [=]() mutable { return agentrt_upload_create(&s, nullptr, "u", "t", "x", 1, "text/plain"); }},
      {"agentrt_job_get", [=]() mutable { return agentrt_job_get(&s, nullptr, "j"); }},
      {"agentrt_jobs_list", [=]() mutable { return agentrt_jobs_list(&s, nullptr, "t"); }},
      {"agentrt_job_update", [=]() mutable { return agentrt_job_update(&s, nullptr, "j", "{}"); }},
      {"agentrt_job_complete", [=]() mutable { return agentrt_job_complete(&s, nullptr, "j", "{}"); }},
      {"agentrt_job_fail", [=]() mutable { return agentrt_job_fail(&s, nullptr, "j", "c", "m"); }},
      {"agentrt_job_cancel", [=]() mutable { return agentrt_job_cancel(&s, nullptr, "j", "r"); }},
      {"agentrt_runtime_set_job_cancel_hook",
       [] { return agentrt_runtime_set_job_cancel_hook(nullptr, dummy_job_hook, nullptr, nullptr); }},
      {"agentrt_events_open", [=]() mutable { return agentrt_events_open(&ev, nullptr, "t", 0); }},
      {"agentrt_events_page", [=]() mutable { return agentrt_events_page(&s, nullptr, "t", "u", 0, 1); }},
      {"agentrt_events_next", [=]() mutable { return agentrt_events_next(&s, &seq, nullptr, 0); }},
      {"agentrt_events_close", [] { return agentrt_events_close(nullptr); }},
      {"agentrt_events_free", [] { return agentrt_events_free(nullptr), 1; }},
      {"agentrt_transcribe", [=]() mutable { return agentrt_transcribe(&s, nullptr, "a", 1, "audio/wav", nullptr); }},
  };
}

// Functions that run no code that can throw (they return constants or call free()), so they have no firewall.
const std::set<std::string> kTrivial = {"agentrt_version", "agentrt_abi_version", "agentrt_last_error",
                                        "agentrt_status_name", "agentrt_free"};

}  // namespace

TEST_CASE("an exception thrown inside any entry point comes out as a status and a message") {
  struct Case {
    Throw kind;
    int32_t status;
    std::string message;  // after "<function>: "
  };
  const std::vector<Case> cases = {
      {Throw::runtime_error, AGENTRT_E_INTERNAL, "internal error: boom"},
      {Throw::agentrt_error, AGENTRT_E_CONFLICT, "lost the race"},
      {Throw::bad_alloc, AGENTRT_E_INTERNAL, "out of memory"},
      {Throw::json_error, AGENTRT_E_INVALID_ARGUMENT, "invalid JSON value: "},
      {Throw::non_standard, AGENTRT_E_INTERNAL, "internal error: an unknown exception"},
  };
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_reached.clear();
  }
  HookGuard hook;
  for (const auto& c : cases) {
    g_throw = c.kind;
    for (auto& [name, call] : entry_points()) {
      CAPTURE(name);
      int32_t rc = 0;
      try {
        rc = call();
      } catch (...) {
        FAIL("an exception escaped " << name);
      }
      if (rc != 1) CHECK(rc == c.status);
      const std::string msg = last_error();
      CHECK_MESSAGE(msg.rfind(name + ": " + c.message, 0) == 0, "message: " << msg);
    }
  }
  // Every function of the header went through the firewall (or is trivial).
  std::set<std::string> expected;
  for (const auto& f : header_functions())
    if (!kTrivial.count(f)) expected.insert(f);
  std::lock_guard<std::mutex> lock(g_mutex);
  CHECK(expected.size() >= 36);
  CHECK(g_reached == expected);
}

namespace {

struct ThrowingToolState {
  std::atomic<int> calls{0};
};

// C++ host code that throws through the C callback: the core must contain it.
void throwing_tool(agentrt_tool_call* call, const char*, void* ud) {
  ++static_cast<ThrowingToolState*>(ud)->calls;
  agentrt_tool_call_free(call);  // fails the call; then the exception goes up through the worker
  throw std::runtime_error("the host tool blew up");
}

void throwing_model(agentrt_model_call* call, const char*, void*) {
  agentrt_model_call_free(call);
  throw std::logic_error("the host model blew up");
}

// A tool that starts a job, and a cancel hook that throws once it has counted the call.
void job_tool(agentrt_tool_call* call, const char*, void*) {
  agentrt_tool_call_start_job(call, nullptr);
  agentrt_tool_call_free(call);
}
void throwing_job_hook(const char*, void* ud) {
  ++*static_cast<std::atomic<int>*>(ud);
  throw std::runtime_error("the host hook blew up");
}

}  // namespace

TEST_CASE("an exception thrown by host code inside the core fails the turn's step, not the process") {
  SUBCASE("a tool") {
    Runtime r;
    ThrowingToolState st;
    REQUIRE(agentrt_tool_register(r.rt, R"({"name":"book_room","approval":"never"})", throwing_tool, &st, nullptr) ==
            AGENTRT_OK);
    auto h = r.start("t-throw", "book it");
    auto t = r.wait(h["turnId"]);
    CHECK(t["status"] == "COMPLETED");
    CHECK(st.calls == 1);
    auto evs = r.events("t-throw");
    const json* result = nullptr;
    for (const auto& e : evs)
      if (e["type"] == "TOOL_CALL_RESULT") result = &e;
    REQUIRE(result != nullptr);
    CHECK((*result)["metadata"]["tool_agent_output"]["status"] == "failed");
    CHECK((*result)["metadata"]["tool_agent_output"]["error"]["code"] == "tool_error");
  }
  SUBCASE("a job cancel hook") {
    Runtime r;
    std::atomic<int> hooked{0};
    REQUIRE(agentrt_tool_register(r.rt, R"({"name":"book_room","approval":"never"})", job_tool, nullptr, nullptr) ==
            AGENTRT_OK);
    REQUIRE(agentrt_runtime_set_job_cancel_hook(r.rt, throwing_job_hook, &hooked, nullptr) == AGENTRT_OK);
    auto h = r.start("t-throw-hook", "book it");
    REQUIRE(r.wait(h["turnId"])["status"] == "COMPLETED");
    char* out = nullptr;
    REQUIRE(agentrt_jobs_list(&out, r.rt, "t-throw-hook") == AGENTRT_OK);
    json jobs = json::parse(take(out));
    REQUIRE(jobs.size() == 1);
    int32_t rc = 1;
    try {
      rc = agentrt_job_cancel(&out, r.rt, jobs[0]["id"].get<std::string>().c_str(), "stop");
    } catch (...) {
      FAIL("an exception escaped agentrt_job_cancel");
    }
    CHECK(rc == AGENTRT_OK);  // the job is cancelled; the hook's exception was logged and dropped
    CHECK(json::parse(take(out))["status"] == "cancelled");
    CHECK(hooked == 1);
  }
  SUBCASE("a model") {
    Runtime r(throwing_model, nullptr);
    auto h = r.start("t-throw-model", "hello");
    auto t = r.wait(h["turnId"]);
    CHECK(t["status"] == "FAILED");
    CHECK(t["error"].get<std::string>().find("the host model blew up") != std::string::npos);
    auto evs = r.events("t-throw-model");
    CHECK(evs.back()["type"] == "RUN_ERROR");
  }
}
