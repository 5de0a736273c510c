// External jobs through the C ABI: a host tool answers "started job J" (agentrt_tool_call_start_job), the host
// finishes J later from another thread (agentrt_job_complete / _fail / _cancel), and the outcome reaches the
// thread's history and its event stream. Confirmation interrupts, the cancel hook, expiry, deltaMessages.
#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "capi_fixture.hpp"

using namespace capi_test;

namespace {

// The model: a user message starting with "render" (or "costly") calls that tool once, with the id
// call_<number of user messages>; after its result (or for anything else) a final text "answer".
void job_model(agentrt_model_call* c, const char* request, void*) {
  const json req = json::parse(request);
  json result{{"text", "answer"}};
  if (req["stage"] == "execution") {
    const json& msgs = req["messages"];
    int users = 0;
    bool answered = false;
    std::string text;
    for (const auto& m : msgs) {
      if (m["role"] == "user") {
        ++users;
        answered = false;
        text = m["content"].is_string() ? m["content"].get<std::string>() : std::string();
      } else if (m["role"] == "tool") {
        answered = true;
      }
    }
    const bool costly = text.rfind("costly", 0) == 0;
    if (!answered && (costly || text.rfind("render", 0) == 0))
      result = json{{"toolCalls",
                     {{{"id", "call_" + std::to_string(users)},
                       {"name", costly ? "costly_render" : "render"},
                       {"arguments", R"({"scene":"beach"})"}}}}};
  } else {
    result = json{{"text", "ok"}};
  }
  CHECK(agentrt_model_call_finish(c, result.dump().c_str()) == AGENTRT_OK);
  agentrt_model_call_free(c);
}

// A host tool whose behaviour the test sets; it records every call JSON and frees the call after `behaviour`.
struct JobTool {
  std::mutex mutex;
  std::vector<json> calls;
  std::function<void(agentrt_tool_call*, const json&)> behaviour;

  static void run(agentrt_tool_call* call, const char* call_json, void* ud) {
    auto* self = static_cast<JobTool*>(ud);
    json c = json::parse(call_json);
    {
      std::lock_guard<std::mutex> lock(self->mutex);
      self->calls.push_back(c);
    }
    self->behaviour(call, c);
    agentrt_tool_call_free(call);
  }
  std::vector<json> seen() {
    std::lock_guard<std::mutex> lock(mutex);
    return calls;
  }
  void add(agentrt_runtime* rt, const std::string& name) {
    json spec{{"name", name},
              {"description", "Render a scene (a long job)"},
              {"parameters", {{"type", "object"}, {"properties", {{"scene", {{"type", "string"}}}}}}}};
    REQUIRE_MESSAGE(agentrt_tool_register(rt, spec.dump().c_str(), run, this, nullptr) == AGENTRT_OK, last_error());
  }
};

// Starts a job with `job_json` (and checks it was accepted).
std::function<void(agentrt_tool_call*, const json&)> start_with(const std::string& job_json) {
  return [job_json](agentrt_tool_call* call, const json&) {
    CHECK_MESSAGE(agentrt_tool_call_start_job(call, job_json.c_str()) == AGENTRT_OK, last_error());
  };
}

// A cancel hook that records what it is told, and on which thread.
struct HookRecorder {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<json> jobs;
  std::vector<std::thread::id> threads;
  std::atomic<int> destroyed{0};
  static void call(const char* job_json, void* ud) {
    auto* self = static_cast<HookRecorder*>(ud);
    {
      std::lock_guard<std::mutex> lock(self->mutex);
      self->jobs.push_back(json::parse(job_json));
      self->threads.push_back(std::this_thread::get_id());
    }
    self->cv.notify_all();
  }
  static void destroy(void* ud) { ++static_cast<HookRecorder*>(ud)->destroyed; }
  size_t count() {
    std::lock_guard<std::mutex> lock(mutex);
    return jobs.size();
  }
  // A hook called from the sweeper runs after the job's record is committed: wait for it.
  size_t wait_for(size_t n) {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait_for(lock, std::chrono::milliseconds(kLongWaitMs), [&] { return jobs.size() >= n; });
    return jobs.size();
  }
};

json call_json(int32_t (*fn)(char**, agentrt_runtime*, const char*), agentrt_runtime* rt, const std::string& arg) {
  char* out = nullptr;
  REQUIRE_MESSAGE(fn(&out, rt, arg.c_str()) == AGENTRT_OK, last_error());
  return json::parse(take(out));
}

json job_get(agentrt_runtime* rt, const std::string& id) { return call_json(agentrt_job_get, rt, id); }

// Waits until the job's outcome is in history (its delivery commits events on the job's thread).
json wait_delivered(agentrt_runtime* rt, const std::string& id) {
  json j = job_get(rt, id);
  const bool delivered = wait_on_thread(rt, j["threadId"].get<std::string>(), [&] {
    j = job_get(rt, id);
    return j["delivered"] == true;
  });
  REQUIRE_MESSAGE(delivered, "job " << id << " was not delivered");
  return j;
}

// The status is `code` and the message names the function and contains `needle`.
void check_error(int32_t rc, int32_t code, const char* function, const std::string& needle) {
  CHECK_MESSAGE(rc == code, function << " returned " << rc << " (" << agentrt_status_name(rc) << "): " << last_error());
  const std::string msg = last_error();
  CHECK_MESSAGE(msg.rfind(std::string(function) + ": ", 0) == 0, "message: " << msg);
  CHECK_MESSAGE(msg.find(needle) != std::string::npos, "message: " << msg << "\nexpected to contain: " << needle);
}

std::vector<json> job_notes(const json& history) {
  std::vector<json> out;
  for (const auto& m : history)
    if (m.contains("metadata") && m["metadata"].is_object() && m["metadata"].contains("job_id")) out.push_back(m);
  return out;
}

const json* find(const std::vector<json>& evs, const std::string& type) {
  for (const auto& e : evs)
    if (e["type"] == type) return &e;
  return nullptr;
}

}  // namespace

TEST_CASE("a host tool starts a job; the host completes it from another thread; history and the stream show it") {
  JobTool render;
  std::vector<std::pair<int32_t, std::string>> codes;  // what the tool's calls returned, in order
  render.behaviour = [&](agentrt_tool_call* call, const json&) {
    auto note = [&](int32_t rc) { codes.emplace_back(rc, last_error()); };
    note(agentrt_tool_call_start_job(call, R"({"colour":"red"})"));  // refused: the call stays open
    note(agentrt_tool_call_start_job(call, R"({"message":"rendering beach","metadata":{"external_id":"ext-1"}})"));
    note(agentrt_tool_call_start_job(call, nullptr));       // the call has ended
    note(agentrt_tool_call_complete(call, "{}", nullptr));  // so has any other answer
  };
  HookRecorder hook;
  Runtime r(job_model, nullptr);
  render.add(r.rt, "render");
  REQUIRE(agentrt_runtime_set_job_cancel_hook(r.rt, HookRecorder::call, &hook, HookRecorder::destroy) == AGENTRT_OK);

  auto h = r.start("t-job", "render the beach");
  auto turn = r.wait(h["turnId"]);
  REQUIRE(turn["status"] == "COMPLETED");  // the turn did not wait for the job
  REQUIRE(codes.size() == 4);
  CHECK(codes[0].first == AGENTRT_E_INVALID_ARGUMENT);
  CHECK(codes[0].second.find("agentrt_tool_call_start_job: job_json: unknown key 'colour'") == 0);
  CHECK(codes[1].first == AGENTRT_OK);
  CHECK(codes[2].first == AGENTRT_E_INVALID_STATE);
  CHECK(codes[2].second ==
        "agentrt_tool_call_start_job: the tool call has already ended (completed, failed, timed "
        "out or cancelled)");
  CHECK(codes[3].first == AGENTRT_E_INVALID_STATE);

  auto calls = render.seen();
  REQUIRE(calls.size() == 1);
  const std::string id = calls[0]["jobId"];
  CHECK(id.rfind("job_", 0) == 0);
  CHECK(calls[0]["jobConfirmed"] == false);
  CHECK(calls[0]["toolCallId"] == "call_1");

  // The record, through both readers.
  json jobs = call_json(agentrt_jobs_list, r.rt, "t-job");
  REQUIRE(jobs.is_array());
  REQUIRE(jobs.size() == 1);
  json job = jobs[0];
  CHECK(job == job_get(r.rt, id));
  CHECK(job["id"] == id);
  CHECK(job["status"] == "running");
  CHECK(job["threadId"] == "t-job");
  CHECK(job["turnId"] == h["turnId"]);
  CHECK(job["runId"] == h["runId"]);
  CHECK(job["toolCallId"] == "call_1");
  CHECK(job["toolName"] == "render");
  CHECK(job["userId"] == "u1");
  CHECK(job["message"] == "rendering beach");
  CHECK(job["metadata"] == json{{"external_id", "ext-1"}});
  CHECK(job["progress"] == 0);
  CHECK(job["delivered"] == false);
  CHECK(job["expiresAt"].get<int64_t>() > job["createdAt"].get<int64_t>());
  CHECK_FALSE(job.contains("result"));
  CHECK_FALSE(job.contains("confirmation"));

  // The turn's run: the tool result says the job runs, a CUSTOM agentrt.job event announces it.
  auto run1 = r.events("t-job");
  const json* result = find(run1, "TOOL_CALL_RESULT");
  REQUIRE(result != nullptr);
  CHECK((*result)["content"].get<std::string>().find("Started job " + id) != std::string::npos);
  CHECK((*result)["metadata"]["tool_agent_output"]["result"] ==
        json{{"jobId", id}, {"status", "running"}, {"message", "rendering beach"}});
  bool announced = false;
  for (const auto& e : run1)
    if (e["type"] == "CUSTOM" && e["name"] == "agentrt.job") {
      announced = true;
      CHECK(e["value"]["id"] == id);
      CHECK(e["value"]["status"] == "running");
    }
  CHECK(announced);

  // Progress: recorded as a record of the log's own (it takes a sequence number), nothing streamed.
  char* out = nullptr;
  REQUIRE(agentrt_job_update(&out, r.rt, id.c_str(), R"({"progress":0.5,"message":"frame 20/40"})") == AGENTRT_OK);
  json progressed = json::parse(take(out));
  CHECK(progressed["progress"] == 0.5);
  CHECK(progressed["message"] == "frame 20/40");
  CHECK(progressed["status"] == "running");
  CHECK(progressed["version"] == job["version"].get<int64_t>() + 1);

  // Completed from another thread.
  const int64_t after = run1.back()["_seq"];
  int32_t rc = 1;
  std::string done_text;
  std::thread host([&] {
    char* o = nullptr;
    rc = agentrt_job_complete(
        &o, r.rt, id.c_str(),
        R"({"result":{"url":"https://cdn.example/beach.png"},"assets":[{"key":"renders/beach.png","mimeType":"image/png"}],"message":"done"})");
    done_text = take(o);
  });
  host.join();
  REQUIRE(rc == AGENTRT_OK);
  json done = json::parse(done_text);
  CHECK(done["status"] == "succeeded");
  CHECK(done["delivered"] == true);  // the thread was idle: delivered with the same commit
  CHECK(done["progress"] == 1);
  CHECK(done["message"] == "done");
  CHECK(done["result"] == json{{"url", "https://cdn.example/beach.png"}});
  CHECK(done["assets"] == json::array({{{"key", "renders/beach.png"}, {"mimeType", "image/png"}}}));
  CHECK(done["finishedAt"].get<int64_t>() >= job["createdAt"].get<int64_t>());
  CHECK(job_get(r.rt, id) == done);

  // The delivery is a run of its own, pulled through agentrt_events_next.
  auto delivery = r.events("t-job", 1, after);
  CHECK(types_of(delivery) == std::vector<std::string>{"RUN_STARTED", "TOOL_CALL_RESULT", "CUSTOM", "RUN_FINISHED"});
  CHECK(delivery[1]["toolCallId"] == "call_1");
  CHECK(delivery[1]["content"].get<std::string>().find("beach.png") != std::string::npos);
  CHECK(delivery[2]["name"] == "agentrt.job");
  CHECK(delivery[2]["value"]["id"] == id);
  CHECK(delivery[2]["value"]["status"] == "succeeded");
  CHECK(delivery[2]["value"]["result"]["url"] == "https://cdn.example/beach.png");
  CHECK(delivery[3]["outcome"]["type"] == "success");
  CHECK(delivery[0]["_seq"] == after + 2);  // after + 1: the progress record, which no stream shows

  // History: a tool message answering the call, last.
  auto hist = r.history("t-job");
  auto notes = job_notes(hist);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0]["id"] == hist.back()["id"]);
  CHECK(notes[0]["role"] == "tool");
  CHECK(notes[0]["toolCallId"] == "call_1");
  CHECK(notes[0]["metadata"]["job_id"] == id);
  CHECK(notes[0]["metadata"]["job_status"] == "succeeded");
  CHECK(notes[0]["metadata"]["assets"][0]["mimeType"] == "image/png");
  CHECK(notes[0]["content"].get<std::string>().rfind("Job " + id + " (render) succeeded", 0) == 0);

  // An ended job refuses further changes; the hook was never called (nothing was cancelled).
  check_error(agentrt_job_complete(&out, r.rt, id.c_str(), R"({"result":null})"), AGENTRT_E_INVALID_STATE,
              "agentrt_job_complete", "has already succeeded");
  check_error(agentrt_job_fail(&out, r.rt, id.c_str(), "x", "y"), AGENTRT_E_INVALID_STATE, "agentrt_job_fail",
              "has already succeeded");
  check_error(agentrt_job_update(&out, r.rt, id.c_str(), R"({"progress":0.9})"), AGENTRT_E_INVALID_STATE,
              "agentrt_job_update", "has already succeeded");
  check_error(agentrt_job_cancel(&out, r.rt, id.c_str(), nullptr), AGENTRT_E_INVALID_STATE, "agentrt_job_cancel",
              "has already succeeded");
  CHECK(out == nullptr);
  CHECK(job_notes(r.history("t-job")).size() == 1);
  CHECK(hook.count() == 0);
}

TEST_CASE("a failed job reaches history with its code and message; a NULL code is job_failed") {
  JobTool render;
  render.behaviour = start_with(R"({"status":"queued"})");
  Runtime r(job_model, nullptr);
  render.add(r.rt, "render");
  r.wait(r.start("t-fail", "render a")["turnId"]);
  r.wait(r.start("t-fail", "render b")["turnId"]);
  auto calls = render.seen();
  REQUIRE(calls.size() == 2);
  const std::string a = calls[0]["jobId"], b = calls[1]["jobId"];
  CHECK(a != b);
  json jobs = call_json(agentrt_jobs_list, r.rt, "t-fail");
  REQUIRE(jobs.size() == 2);
  CHECK(jobs[0]["id"] == a);  // creation order
  CHECK(jobs[1]["id"] == b);
  CHECK(jobs[0]["status"] == "queued");

  char* out = nullptr;
  // A queued job may become running, not the reverse.
  REQUIRE(agentrt_job_update(&out, r.rt, a.c_str(), R"({"status":"running"})") == AGENTRT_OK);
  CHECK(json::parse(take(out))["status"] == "running");
  check_error(agentrt_job_update(&out, r.rt, a.c_str(), R"({"status":"queued"})"), AGENTRT_E_INVALID_STATE,
              "agentrt_job_update", "cannot go back to queued");

  REQUIRE(agentrt_job_fail(&out, r.rt, a.c_str(), "render_crashed", "the GPU fell over") == AGENTRT_OK);
  json failed = json::parse(take(out));
  CHECK(failed["status"] == "failed");
  CHECK(failed["error"] == json{{"code", "render_crashed"}, {"message", "the GPU fell over"}});
  CHECK(failed["delivered"] == true);
  REQUIRE(agentrt_job_fail(&out, r.rt, b.c_str(), nullptr, nullptr) == AGENTRT_OK);
  CHECK(json::parse(take(out))["error"] == json{{"code", "job_failed"}, {"message", ""}});

  auto notes = job_notes(r.history("t-fail"));
  REQUIRE(notes.size() == 2);
  CHECK(notes[0]["content"] == "Job " + a + " (render) failed: render_crashed: the GPU fell over");
  CHECK(notes[0]["toolCallId"] == "call_1");
  CHECK(notes[0]["metadata"]["error_code"] == "render_crashed");
  CHECK(notes[1]["content"] == "Job " + b + " (render) failed: job_failed: ");
  CHECK(notes[1]["toolCallId"] == "call_2");
  check_error(agentrt_job_complete(&out, r.rt, a.c_str(), R"({"result":1})"), AGENTRT_E_INVALID_STATE,
              "agentrt_job_complete", "has already failed");
}

TEST_CASE("cancel calls the hook exactly once with the cancelled record; each hook's user data is destroyed once") {
  JobTool render;
  render.behaviour = start_with("");
  HookRecorder replaced, hook, removed, last;
  {
    Runtime r(job_model, nullptr);
    render.add(r.rt, "render");
    REQUIRE(agentrt_runtime_set_job_cancel_hook(r.rt, HookRecorder::call, &replaced, HookRecorder::destroy) ==
            AGENTRT_OK);
    REQUIRE(agentrt_runtime_set_job_cancel_hook(r.rt, HookRecorder::call, &hook, HookRecorder::destroy) == AGENTRT_OK);
    CHECK(replaced.destroyed == 1);  // at the replacement
    CHECK(hook.destroyed == 0);
    r.wait(r.start("t-cancel", "render y")["turnId"]);
    const std::string id = render.seen().at(0)["jobId"];
    const int64_t after = r.events("t-cancel").back()["_seq"];

    char* out = nullptr;
    REQUIRE(agentrt_job_cancel(&out, r.rt, id.c_str(), "the user changed their mind") == AGENTRT_OK);
    json cancelled = json::parse(take(out));
    CHECK(cancelled["status"] == "cancelled");
    CHECK(cancelled["error"] == json{{"code", "cancelled"}, {"message", "the user changed their mind"}});
    CHECK(cancelled["delivered"] == true);
    {
      std::lock_guard<std::mutex> lock(hook.mutex);
      REQUIRE(hook.jobs.size() == 1);
      CHECK(hook.jobs[0] == cancelled);  // the cancelled record, on the cancelling thread
      CHECK(hook.threads[0] == std::this_thread::get_id());
    }
    CHECK(replaced.count() == 0);

    // Again: the same record, no second hook call, no second history entry.
    REQUIRE(agentrt_job_cancel(&out, r.rt, id.c_str(), nullptr) == AGENTRT_OK);
    CHECK(json::parse(take(out)) == cancelled);
    CHECK(hook.count() == 1);
    auto notes = job_notes(r.history("t-cancel"));
    REQUIRE(notes.size() == 1);
    CHECK(notes[0]["content"] == "Job " + id + " (render) was cancelled: the user changed their mind");
    auto delivery = r.events("t-cancel", 1, after);
    CHECK(types_of(delivery) == std::vector<std::string>{"RUN_STARTED", "TOOL_CALL_RESULT", "CUSTOM", "RUN_FINISHED"});
    CHECK(delivery[2]["value"]["status"] == "cancelled");

    // A NULL hook removes the hook (destroying it) and destroys its own user data at once.
    REQUIRE(agentrt_runtime_set_job_cancel_hook(r.rt, nullptr, &removed, HookRecorder::destroy) == AGENTRT_OK);
    CHECK(hook.destroyed == 1);
    CHECK(removed.destroyed == 1);
    r.wait(r.start("t-cancel", "render z")["turnId"]);
    const std::string second = render.seen().at(1)["jobId"];
    REQUIRE(agentrt_job_cancel(&out, r.rt, second.c_str(), nullptr) == AGENTRT_OK);
    json c2 = json::parse(take(out));
    CHECK(c2["error"] == json{{"code", "cancelled"}, {"message", "cancelled by the host"}});
    CHECK(hook.count() == 1);  // no hook any more

    // A failed registration destroys its user data before returning.
    HookRecorder refused;
    check_error(agentrt_runtime_set_job_cancel_hook(nullptr, HookRecorder::call, &refused, HookRecorder::destroy),
                AGENTRT_E_INVALID_ARGUMENT, "agentrt_runtime_set_job_cancel_hook", "rt is NULL");
    CHECK(refused.destroyed == 1);

    REQUIRE(agentrt_runtime_set_job_cancel_hook(r.rt, HookRecorder::call, &last, HookRecorder::destroy) == AGENTRT_OK);
    CHECK(last.destroyed == 0);
  }
  CHECK(last.destroyed == 1);  // at agentrt_runtime_free
  CHECK(replaced.destroyed == 1);
  CHECK(hook.destroyed == 1);
  CHECK(removed.destroyed == 1);
  CHECK(last.count() == 0);
}

TEST_CASE("a job past its timeoutMs fails with code timeout and the hook runs on the sweeper's thread") {
  JobTool render;
  render.behaviour = start_with(R"({"timeoutMs":100})");
  HookRecorder hook;
  Runtime r(job_model, nullptr, nullptr, json{{"job_timeout_ms", 3600000}});
  render.add(r.rt, "render");
  REQUIRE(agentrt_runtime_set_job_cancel_hook(r.rt, HookRecorder::call, &hook, HookRecorder::destroy) == AGENTRT_OK);
  r.wait(r.start("t-exp", "render z")["turnId"]);
  const std::string id = render.seen().at(0)["jobId"];
  json j = wait_delivered(r.rt, id);
  CHECK(j["status"] == "failed");
  CHECK(j["error"]["code"] == "timeout");
  CHECK(j["expiresAt"].get<int64_t>() - j["createdAt"].get<int64_t>() < 1000);  // timeoutMs, not the config's hour
  hook.wait_for(1);
  std::lock_guard<std::mutex> lock(hook.mutex);
  REQUIRE(hook.jobs.size() == 1);
  CHECK(hook.jobs[0]["id"] == id);
  CHECK(hook.jobs[0]["status"] == "failed");
  CHECK(hook.jobs[0]["error"]["code"] == "timeout");
  CHECK(hook.threads[0] != std::this_thread::get_id());
  auto notes = job_notes(r.history("t-exp"));
  REQUIRE(notes.size() == 1);
  CHECK(notes[0]["content"].get<std::string>().find("failed: timeout") != std::string::npos);
}

TEST_CASE("the config's job_timeout_ms is every job's default timeout") {
  JobTool render;
  render.behaviour = start_with("{}");
  Runtime r(job_model, nullptr, nullptr, json{{"job_timeout_ms", 150}});
  render.add(r.rt, "render");
  auto wall_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const int64_t before = wall_ms();
  r.wait(r.start("t-exp-config", "render")["turnId"]);
  const int64_t after = wall_ms();
  json j = wait_delivered(r.rt, render.seen().at(0)["jobId"]);
  CHECK(j["status"] == "failed");
  CHECK(j["error"]["code"] == "timeout");
  CHECK(j["error"]["message"].get<std::string>().rfind("the job did not finish within ", 0) == 0);
  // The deadline is set when the tool answers (150 ms from then, however long the turn took), a moment before
  // the record is created.
  const int64_t deadline = j["expiresAt"].get<int64_t>();
  CHECK(deadline - 150 >= before);
  CHECK(deadline - 150 <= after);
  CHECK(deadline - j["createdAt"].get<int64_t>() <= 150);
}

TEST_CASE("a confirmation interrupt resolved through agentrt_turn_resume runs the tool again with jobConfirmed") {
  JobTool costly;
  costly.behaviour = [](agentrt_tool_call* call, const json& c) {
    const char* answer =
        c["jobConfirmed"] == true
            ? R"({"message":"started after confirmation"})"
            : R"({"confirm":true,"confirmMessage":"Rendering costs 3 credits. Go ahead?","metadata":{"cost":3}})";
    CHECK(agentrt_tool_call_start_job(call, answer) == AGENTRT_OK);
  };
  HookRecorder hook;
  Runtime r(job_model, nullptr);
  costly.add(r.rt, "costly_render");
  REQUIRE(agentrt_runtime_set_job_cancel_hook(r.rt, HookRecorder::call, &hook, nullptr) == AGENTRT_OK);

  auto h = r.start("t-conf", "costly render");
  const std::string turn_id = h["turnId"];
  auto t = r.wait(turn_id);
  REQUIRE(t["status"] == "WAITING_APPROVAL");
  char* out = nullptr;
  REQUIRE(agentrt_turn_interrupts(&out, r.rt, turn_id.c_str()) == AGENTRT_OK);
  json pending = json::parse(take(out));
  REQUIRE(pending["interrupts"].size() == 1);
  const json intr = pending["interrupts"][0];
  CHECK(intr["reason"] == "confirmation");
  CHECK(intr["toolCallId"] == "call_1");
  CHECK(intr["message"] == "Rendering costs 3 credits. Go ahead?");
  CHECK(intr["metadata"]["job"] == json{{"cost", 3}});
  const std::string id = intr["metadata"]["jobId"];
  REQUIRE(costly.seen().size() == 1);
  CHECK(costly.seen()[0]["jobId"] == id);

  json job = job_get(r.rt, id);
  CHECK(job["status"] == "queued");
  CHECK(job["confirmation"] == "pending");
  CHECK(job["confirmMessage"] == "Rendering costs 3 credits. Go ahead?");
  // Not the host's to end before the person answered.
  check_error(agentrt_job_complete(&out, r.rt, id.c_str(), R"({"result":1})"), AGENTRT_E_INVALID_STATE,
              "agentrt_job_complete", "waits for the person's confirmation");
  check_error(agentrt_job_cancel(&out, r.rt, id.c_str(), nullptr), AGENTRT_E_INVALID_STATE, "agentrt_job_cancel",
              "waits for the person's confirmation");
  check_error(agentrt_job_update(&out, r.rt, id.c_str(), R"({"progress":0.1})"), AGENTRT_E_INVALID_STATE,
              "agentrt_job_update", "waits for the person's confirmation");

  // The AG-UI answer {interruptId, status: "resolved"}.
  json answer = r.resume(turn_id, pending["approvalRequestId"],
                         json::array({{{"interruptId", intr["id"]}, {"status", "resolved"}}}));
  CHECK(answer["status"] == "accepted");
  CHECK(r.wait(turn_id)["status"] == "COMPLETED");
  auto calls = costly.seen();
  REQUIRE(calls.size() == 2);
  CHECK(calls[1]["jobConfirmed"] == true);
  CHECK(calls[1]["jobId"] == id);
  job = job_get(r.rt, id);
  CHECK(job["status"] == "running");
  CHECK(job["confirmation"] == "confirmed");
  CHECK(job["message"] == "started after confirmation");
  CHECK(job["metadata"] == json{{"cost", 3}});

  REQUIRE(agentrt_job_complete(&out, r.rt, id.c_str(), R"({"result":{"frames":40}})") == AGENTRT_OK);
  CHECK(json::parse(take(out))["delivered"] == true);
  auto notes = job_notes(r.history("t-conf"));
  REQUIRE(notes.size() == 1);
  CHECK(notes[0]["metadata"]["job_status"] == "succeeded");
  CHECK(hook.count() == 0);
}

TEST_CASE("a confirmation interrupt cancelled through agentrt_turn_resume ends the job declined, the tool not rerun") {
  JobTool costly;
  costly.behaviour = start_with(R"({"confirm":true})");
  HookRecorder hook;
  Runtime r(job_model, nullptr);
  costly.add(r.rt, "costly_render");
  REQUIRE(agentrt_runtime_set_job_cancel_hook(r.rt, HookRecorder::call, &hook, nullptr) == AGENTRT_OK);
  auto h = r.start("t-decline", "costly render");
  auto t = r.wait(h["turnId"]);
  REQUIRE(t["status"] == "WAITING_APPROVAL");
  const json intr = t["interrupts"][0];
  CHECK(intr["message"].get<std::string>().find("Start job ") == 0);  // the default question
  const std::string id = intr["metadata"]["jobId"];
  r.resume(h["turnId"], t["approvalRequestId"], json::array({{{"interruptId", intr["id"]}, {"status", "cancelled"}}}));
  CHECK(r.wait(h["turnId"])["status"] == "COMPLETED");
  CHECK(costly.seen().size() == 1);
  json job = job_get(r.rt, id);
  CHECK(job["status"] == "cancelled");
  CHECK(job["confirmation"] == "declined");
  CHECK(job["error"]["code"] == "declined");
  CHECK(hook.count() == 0);  // nothing was started, nothing to stop
  check_error(agentrt_job_cancel(nullptr, r.rt, id.c_str(), nullptr), AGENTRT_E_INVALID_ARGUMENT, "agentrt_job_cancel",
              "out is NULL");
}

TEST_CASE("job functions refuse NULL arguments, malformed JSON and bad values") {
  JobTool render;
  std::vector<std::pair<int32_t, std::string>> codes;
  render.behaviour = [&](agentrt_tool_call* call, const json&) {
    for (const char* bad : {"{", "[]", R"({"status":"done"})", R"({"status":"succeeded"})", R"({"message":1})",
                            R"({"metadata":[]})", R"({"confirm":"yes"})", R"({"confirmMessage":false})",
                            R"({"timeoutMs":0})", R"({"timeoutMs":1.5})", R"({"timeoutMs":31536000001})"}) {
      int32_t rc = agentrt_tool_call_start_job(call, bad);
      codes.emplace_back(rc, last_error());
    }
    codes.emplace_back(agentrt_tool_call_start_job(call, R"({"timeoutMs":31536000000})"), last_error());
  };
  Runtime r(job_model, nullptr);
  render.add(r.rt, "render");
  r.wait(r.start("t-bad", "render")["turnId"]);
  const std::vector<std::string> expected = {
      "job_json is not valid JSON",
      "job_json must be a JSON object",
      "job_json: 'status' must be \"queued\" or \"running\", not \"done\"",
      "job_json: 'status' must be \"queued\" or \"running\", not \"succeeded\"",
      "job_json: 'message' must be a string",
      "job_json: 'metadata' must be a JSON object",
      "job_json: 'confirm' must be a boolean",
      "job_json: 'confirmMessage' must be a string",
      "job_json: 'timeoutMs' must be an integer from 1 to 31536000000, not 0",
      "job_json: 'timeoutMs' must be an integer from 1 to 31536000000, not 1.5",
      "job_json: 'timeoutMs' must be an integer from 1 to 31536000000, not 31536000001",
  };
  REQUIRE(codes.size() == expected.size() + 1);
  for (size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    CHECK(codes[i].first == AGENTRT_E_INVALID_ARGUMENT);
    CHECK(codes[i].second.rfind("agentrt_tool_call_start_job: " + expected[i], 0) == 0);
  }
  CHECK(codes.back().first == AGENTRT_OK);  // the call stayed open through every refusal
  const std::string id = render.seen().at(0)["jobId"];
  CHECK(job_get(r.rt, id)["status"] == "running");
  check_error(agentrt_tool_call_start_job(nullptr, "{}"), AGENTRT_E_INVALID_ARGUMENT, "agentrt_tool_call_start_job",
              "call is NULL");

  char* out = reinterpret_cast<char*>(0x1);
  const char* jid = id.c_str();
  check_error(agentrt_job_get(nullptr, r.rt, jid), AGENTRT_E_INVALID_ARGUMENT, "agentrt_job_get", "out is NULL");
  check_error(agentrt_job_get(&out, nullptr, jid), AGENTRT_E_INVALID_ARGUMENT, "agentrt_job_get", "rt is NULL");
  CHECK(out == nullptr);
  check_error(agentrt_job_get(&out, r.rt, nullptr), AGENTRT_E_INVALID_ARGUMENT, "agentrt_job_get", "job_id is NULL");
  check_error(agentrt_job_get(&out, r.rt, ""), AGENTRT_E_INVALID_ARGUMENT, "agentrt_job_get", "job_id is empty");
  check_error(agentrt_job_get(&out, r.rt, "job_nope"), AGENTRT_E_NOT_FOUND, "agentrt_job_get",
              "job job_nope not found");
  check_error(agentrt_jobs_list(&out, r.rt, nullptr), AGENTRT_E_INVALID_ARGUMENT, "agentrt_jobs_list",
              "thread_id is NULL");
  check_error(agentrt_jobs_list(&out, nullptr, "t-bad"), AGENTRT_E_INVALID_ARGUMENT, "agentrt_jobs_list", "rt is NULL");
  REQUIRE(agentrt_jobs_list(&out, r.rt, "never_used") == AGENTRT_OK);
  CHECK(take(out) == "[]");

  check_error(agentrt_job_update(&out, r.rt, jid, nullptr), AGENTRT_E_INVALID_ARGUMENT, "agentrt_job_update",
              "progress_json is NULL");
  check_error(agentrt_job_update(&out, r.rt, jid, "{progress"), AGENTRT_E_INVALID_ARGUMENT, "agentrt_job_update",
              "progress_json is not valid JSON");
  check_error(agentrt_job_update(&out, r.rt, jid, R"({"percent":50})"), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_job_update", "progress_json: unknown key 'percent' (status, progress, message)");
  check_error(agentrt_job_update(&out, r.rt, jid, R"({"progress":"half"})"), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_job_update", "'progress' must be a number from 0 to 1, not \"half\"");
  check_error(agentrt_job_update(&out, r.rt, jid, R"({"progress":1.5})"), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_job_update", "progress must be a number from 0 to 1");
  check_error(agentrt_job_update(&out, r.rt, jid, R"({"status":"succeeded"})"), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_job_update", "'status' must be \"queued\" or \"running\"");
  check_error(agentrt_job_update(&out, r.rt, jid, R"({"message":7})"), AGENTRT_E_INVALID_ARGUMENT, "agentrt_job_update",
              "'message' must be a string");
  check_error(agentrt_job_update(&out, r.rt, "job_nope", "{}"), AGENTRT_E_NOT_FOUND, "agentrt_job_update",
              "job job_nope not found");
  check_error(agentrt_job_update(&out, r.rt, jid, (R"({"message":")" + std::string(5000, 'x') + "\"}").c_str()),
              AGENTRT_E_TOO_LARGE, "agentrt_job_update", "the limit is 4096");

  check_error(agentrt_job_complete(&out, r.rt, jid, nullptr), AGENTRT_E_INVALID_ARGUMENT, "agentrt_job_complete",
              "result_json is NULL");
  check_error(agentrt_job_complete(&out, r.rt, jid, "[1]"), AGENTRT_E_INVALID_ARGUMENT, "agentrt_job_complete",
              "result_json must be a JSON object");
  check_error(agentrt_job_complete(&out, r.rt, jid, "{}"), AGENTRT_E_INVALID_ARGUMENT, "agentrt_job_complete",
              "'result' is required");
  check_error(agentrt_job_complete(&out, r.rt, jid, R"({"result":1,"assets":{}})"), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_job_complete", "'assets' must be an array");
  check_error(agentrt_job_complete(&out, r.rt, jid, R"({"result":1,"url":"x"})"), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_job_complete", "unknown key 'url' (result, assets, message)");
  check_error(agentrt_job_complete(&out, r.rt, jid, (R"({"result":")" + std::string(2 << 20, 'x') + "\"}").c_str()),
              AGENTRT_E_TOO_LARGE, "agentrt_job_complete", "the limit is 1048576");
  check_error(agentrt_job_complete(&out, r.rt, nullptr, R"({"result":1})"), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_job_complete", "job_id is NULL");
  check_error(agentrt_job_fail(&out, r.rt, jid, "x", std::string(5000, 'y').c_str()), AGENTRT_E_TOO_LARGE,
              "agentrt_job_fail", "the limit is 4096");
  check_error(agentrt_job_fail(&out, nullptr, jid, "x", "y"), AGENTRT_E_INVALID_ARGUMENT, "agentrt_job_fail",
              "rt is NULL");
  check_error(agentrt_job_fail(&out, r.rt, "job_nope", "x", "y"), AGENTRT_E_NOT_FOUND, "agentrt_job_fail",
              "job job_nope not found");
  check_error(agentrt_job_cancel(&out, r.rt, "", nullptr), AGENTRT_E_INVALID_ARGUMENT, "agentrt_job_cancel",
              "job_id is empty");
  check_error(agentrt_job_cancel(&out, r.rt, "job_nope", nullptr), AGENTRT_E_NOT_FOUND, "agentrt_job_cancel",
              "job job_nope not found");
  check_error(agentrt_job_cancel(&out, r.rt, jid, std::string(5000, 'r').c_str()), AGENTRT_E_TOO_LARGE,
              "agentrt_job_cancel", "the limit is 4096");
  CHECK(out == nullptr);
  CHECK(job_get(r.rt, id)["status"] == "running");  // nothing above changed it
  CHECK(job_get(r.rt, id)["version"] == call_json(agentrt_jobs_list, r.rt, "t-bad")[0]["version"]);

  check_error(agentrt_turn_messages(nullptr, r.rt, "turn_x"), AGENTRT_E_INVALID_ARGUMENT, "agentrt_turn_messages",
              "out is NULL");
  check_error(agentrt_turn_messages(&out, nullptr, "turn_x"), AGENTRT_E_INVALID_ARGUMENT, "agentrt_turn_messages",
              "rt is NULL");
  check_error(agentrt_turn_messages(&out, r.rt, nullptr), AGENTRT_E_INVALID_ARGUMENT, "agentrt_turn_messages",
              "turn_id is NULL");
  check_error(agentrt_turn_messages(&out, r.rt, "turn_nope"), AGENTRT_E_NOT_FOUND, "agentrt_turn_messages",
              "turn turn_nope not found");
  check_error(agentrt_runtime_set_job_cancel_hook(nullptr, nullptr, nullptr, nullptr), AGENTRT_E_INVALID_ARGUMENT,
              "agentrt_runtime_set_job_cancel_hook", "rt is NULL");
  CHECK(out == nullptr);
}

TEST_CASE("a repeated start returns deltaMessages: the messages the first turn added, as agentrt_turn_messages") {
  Runtime r(job_model, nullptr);
  auto first = r.start("t-delta", "hi", "cm-1");
  CHECK(first["existing"] == false);
  CHECK_FALSE(first.contains("deltaMessages"));
  r.wait(first["turnId"]);
  auto again = r.start("t-delta", "hi", "cm-1");
  CHECK(again["existing"] == true);
  CHECK(again["turnId"] == first["turnId"]);
  // The server's shape: the first turn's status instead of a firstSeq.
  CHECK(again["status"] == "COMPLETED");
  CHECK_FALSE(again.contains("firstSeq"));
  CHECK(first["firstSeq"].get<int64_t>() > 0);
  CHECK(again["runId"] == first["runId"]);
  REQUIRE(again["deltaMessages"].is_array());
  REQUIRE(again["deltaMessages"].size() == 2);
  CHECK(again["deltaMessages"][0]["role"] == "user");
  CHECK(again["deltaMessages"][0]["id"] == "cm-1");
  CHECK(again["deltaMessages"][0]["content"] == "hi");
  CHECK(again["deltaMessages"][1]["role"] == "assistant");
  CHECK(again["deltaMessages"][1]["content"] == "answer");
  CHECK(call_json(agentrt_turn_messages, r.rt, first["turnId"]) == again["deltaMessages"]);
  CHECK(r.start("t-delta", "hi", "cm-1")["deltaMessages"] == again["deltaMessages"]);
  CHECK(r.history("t-delta") == again["deltaMessages"]);  // the thread has nothing else
}
