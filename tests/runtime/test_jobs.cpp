// External jobs: a tool answers "started job J", the host finishes J later (any thread, any process), and
// the outcome reaches history and the thread's stream. Confirmation interrupts, cancel, expiry, restart.
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <thread>

#include "agentrt/records.hpp"
#include "store/document_layout.hpp"
#include "store/fs_object_store.hpp"
#include "support/runtime_fixture.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {

// The model: "render" (or "costly") calls that tool once; after its result, a final text naming what it
// read. Every request is kept, so tests see what the model saw.
struct JobScript {
  std::shared_ptr<std::mutex> mutex = std::make_shared<std::mutex>();
  std::shared_ptr<std::vector<ModelRequest>> requests = std::make_shared<std::vector<ModelRequest>>();

  ModelResult operator()(const ModelRequest& req) const {
    {
      std::lock_guard<std::mutex> lock(*mutex);
      requests->push_back(req);
    }
    if (req.stage != "execution") return text_result("ok");
    const Message* user = last_user_message(req);
    const std::string text = user ? user->content : std::string();
    const bool wants_tool = text.rfind("render", 0) == 0 || text.rfind("costly", 0) == 0;
    if (wants_tool && tool_results_since_last_user(req) == 0)
      return tool_call_result("call_r", text.rfind("costly", 0) == 0 ? "costly_render" : "render",
                              R"({"scene":"beach"})");
    std::string notes;
    for (const auto& m : req.messages)
      if (m.role == Role::system && m.content.rfind("Job ", 0) == 0) notes += "[" + m.content + "]";
    return text_result("answer" + notes);
  }
  std::vector<ModelRequest> all() const {
    std::lock_guard<std::mutex> lock(*mutex);
    return *requests;
  }
};

struct JobHarness {
  TempDir dir;
  std::shared_ptr<SqliteStore> store;
  JobScript script;
  std::shared_ptr<Store> used_store;
  std::set<std::string> threads;  // started on by start(): replayed when the harness ends
  std::unique_ptr<Runtime> rt;
  std::atomic<int> render_calls{0}, costly_calls{0}, confirmed_calls{0};
  std::mutex mutex;
  std::vector<std::string> job_ids;  // ToolCallContext::job_id of each call
  std::vector<JobRecord> hooked;     // what the cancel hook saw
  std::condition_variable hooked_cv;
  std::function<void(const ToolCallContext&, ToolCompletion)> render_behaviour;  // default: start_job

  explicit JobHarness(std::function<void(RuntimeConfig&)> tweak = {}, std::shared_ptr<Store> use_store = nullptr) {
    store = std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("agentrt.db")});
    RuntimeConfig c = test_config(use_store ? use_store : store, std::make_shared<ScriptedModel>(script));
    c.job_cancel_hook = [this](const JobRecord& j) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        hooked.push_back(j);
      }
      hooked_cv.notify_all();
    };
    if (tweak) tweak(c);
    used_store = c.store;
    rt = std::make_unique<Runtime>(c);
    add_tools(*rt);
  }
  // The runtime goes first: its sweeper may be calling the cancel hook, which uses the members below it.
  // Then each thread's log, replayed through the projector, must give its stored history byte for byte.
  ~JobHarness() {
    rt.reset();
    for (const auto& t : threads) {
      auto diff = replay_difference(*used_store, t);
      CHECK_MESSAGE(!diff.has_value(), (diff ? *diff : std::string()));
    }
  }
  JobHarness(const JobHarness&) = delete;
  JobHarness& operator=(const JobHarness&) = delete;

  void add_tools(Runtime& r) {
    ToolSpec render;
    render.name = "render";
    render.parameters = json::parse(R"({"type":"object","properties":{"scene":{"type":"string"}}})");
    render.handler = [this](const ToolCallContext& call, ToolCompletion done) {
      ++render_calls;
      {
        std::lock_guard<std::mutex> lock(mutex);
        job_ids.push_back(call.job_id);
      }
      if (render_behaviour) return render_behaviour(call, done);
      JobStart js;
      js.message = "rendering " + call.args.value("scene", "");
      js.metadata = {{"external_id", "ext-" + call.job_id}};
      done.start_job(js);
    };
    r.tools().add(render);
    ToolSpec costly;
    costly.name = "costly_render";
    costly.parameters = render.parameters;
    costly.handler = [this](const ToolCallContext& call, ToolCompletion done) {
      ++costly_calls;
      {
        std::lock_guard<std::mutex> lock(mutex);
        job_ids.push_back(call.job_id);
      }
      JobStart js;
      if (call.job_confirmed) {
        ++confirmed_calls;
        js.message = "started after confirmation";
      } else {
        js.confirm = true;
        js.confirm_message = "Rendering costs 3 credits. Go ahead?";
        js.metadata = {{"cost", 3}};
      }
      done.start_job(js);
    };
    r.tools().add(costly);
  }

  TurnHandle start(const std::string& thread, const std::string& text) {
    threads.insert(thread);
    return rt->start_turn(turn_input(thread, user_message(text)));
  }
  TurnRecord wait(const std::string& turn_id) {
    auto t = rt->wait(turn_id, kLongWait);
    REQUIRE(t.status != TurnStatus::running);
    REQUIRE(t.status != TurnStatus::resuming);
    return t;
  }
  // Waits until the job's outcome is in history.
  // The hook runs after the job's record is committed (a reader may see the job ended first): wait for it.
  size_t wait_hooked(size_t n) {
    std::unique_lock<std::mutex> lock(mutex);
    hooked_cv.wait_for(lock, kLongWait, [&] { return hooked.size() >= n; });
    return hooked.size();
  }
  // A delivery commits the job's row with its run's events: look again at each event of its thread.
  JobRecord wait_delivered(const std::string& job_id) {
    auto j = rt->job(job_id);
    REQUIRE(j.has_value());
    const bool delivered = wait_on_thread(*rt, j->thread_id, [&] {
      j = rt->job(job_id);
      return j && j->delivered;
    });
    REQUIRE_MESSAGE(delivered, "job " << job_id << " was not delivered");
    return *j;
  }
  // The thread's events as clients see them (events_page: the log's own records left out), after `after`.
  std::vector<json> all_events(const std::string& thread, int64_t after = 0) {
    std::vector<json> out;
    for (;;) {
      auto page = rt->events_page(thread, "u1", after, kMaxEventsPage);
      if (page.empty()) return out;
      for (const auto& e : page) out.push_back(json::parse(e.json));
      after = page.back().seq;
    }
  }
  std::vector<StoredEvent> stored_events(const std::string& thread) {
    return rt->config().store->events_after(thread, 0, 100000);
  }
};

std::vector<Message> job_notes(const std::vector<Message>& history) {
  std::vector<Message> out;
  for (const auto& m : history)
    if (m.metadata.is_object() && m.metadata.contains("job_id")) out.push_back(m);
  return out;
}

const json* job_event(const std::vector<json>& evs, size_t nth = 0) {
  for (const auto& e : evs)
    if (e["type"] == "CUSTOM" && e["name"] == "agentrt.job" && nth-- == 0) return &e;
  return nullptr;
}

}  // namespace

TEST_CASE("job lifecycle: started -> running -> succeeded -> in history -> the next turn's model reads it") {
  JobHarness h;
  auto t1 = h.start("t-job", "render the beach");
  auto rec = h.wait(t1.turn_id);
  REQUIRE(rec.status == TurnStatus::completed);  // the turn did not wait for the job
  CHECK(h.render_calls == 1);

  auto jobs = h.rt->jobs("t-job");
  REQUIRE(jobs.size() == 1);
  JobRecord job = jobs[0];
  CHECK(job.id == h.job_ids.at(0));
  CHECK(job.id.rfind("job_", 0) == 0);
  CHECK(job.status == JobStatus::running);
  CHECK(job.thread_id == "t-job");
  CHECK(job.turn_id == t1.turn_id);
  CHECK(job.run_id == t1.run_id);
  CHECK(job.tool_call_id == "call_r");
  CHECK(job.tool_name == "render");
  CHECK(job.user_id == "u1");
  CHECK(job.message == "rendering beach");
  CHECK(job.metadata["external_id"] == "ext-" + job.id);
  CHECK(job.expires_at > job.created_at);
  CHECK_FALSE(job.delivered);

  // The turn's run: the tool result says the job runs, a CUSTOM agentrt.job event announces it.
  auto evs = h.all_events("t-job");
  const json* custom = job_event(evs);
  REQUIRE(custom);
  CHECK((*custom)["name"] == "agentrt.job");
  CHECK((*custom)["value"]["id"] == job.id);
  CHECK((*custom)["value"]["status"] == "running");
  const json* result = find_event(evs, "TOOL_CALL_RESULT");
  REQUIRE(result);
  CHECK((*result)["content"].get<std::string>().find("Started job " + job.id) != std::string::npos);
  CHECK((*result)["metadata"]["tool_agent_output"]["result"]["jobId"] == job.id);
  CHECK((*result)["metadata"]["tool_agent_output"]["result"]["status"] == "running");

  // Progress is a record of the log's own: CUSTOM agentrt.job stored without a run, which no client is shown.
  const size_t shown_before = h.all_events("t-job").size();
  const size_t stored_before = h.stored_events("t-job").size();
  auto live = h.rt->subscribe("t-job", h.rt->thread("t-job")->last_seq);  // follows the live tail from here
  auto p = h.rt->update_job(job.id, JobProgress{std::nullopt, 0.5, std::string("frame 20/40")});
  CHECK(p.progress == doctest::Approx(0.5));
  CHECK(p.message == "frame 20/40");
  CHECK(p.version == job.version + 1);
  auto stored = h.stored_events("t-job");
  REQUIRE(stored.size() == stored_before + 1);
  const StoredEvent own = stored.back();
  CHECK(own.run_id.empty());
  const json own_json = json::parse(own.json);
  CHECK(own_json["type"] == "CUSTOM");
  CHECK(own_json["name"] == "agentrt.job");
  CHECK(own_json["value"] == job_to_json(p));  // the record as committed, version and times included
  CHECK(job_to_json(*h.rt->job(job.id)) == job_to_json(p));
  CHECK(h.all_events("t-job").size() == shown_before);
  CHECK(h.all_events("t-job", own.seq - 1).empty());

  // Completed from another thread.
  const int64_t seq_before = h.rt->thread("t-job")->last_seq;
  JobRecord done;
  std::thread host([&] {
    done = h.rt->complete_job(job.id,
                              JobResult{json{{"url", "https://cdn.example/beach.png"}},
                                        json::array({{{"key", "renders/beach.png"}, {"mimeType", "image/png"}}}), ""});
  });
  host.join();
  CHECK(done.status == JobStatus::succeeded);
  CHECK(done.delivered);  // the thread was idle: one commit with its delivery
  CHECK(done.progress == doctest::Approx(1.0));
  CHECK(done.finished_at >= job.created_at);

  // The delivery is a run of its own: RUN_STARTED, TOOL_CALL_RESULT, CUSTOM, RUN_FINISHED. A subscriber from
  // before the progress record, live or replaying, is shown the delivery next.
  std::vector<json> delivery = h.all_events("t-job", seq_before);
  auto replayed = h.rt->subscribe("t-job", own.seq - 1);  // reads the record from the store, and skips it
  for (Subscription* sub : {live.get(), replayed.get()}) {
    auto first = sub->next(std::chrono::seconds(30));
    REQUIRE(first);
    CHECK(first->seq == own.seq + 1);
    CHECK(json::parse(first->json)["type"] == "RUN_STARTED");
  }
  CHECK(types_of(delivery) == std::vector<std::string>{"RUN_STARTED", "TOOL_CALL_RESULT", "CUSTOM", "RUN_FINISHED"});
  CHECK(delivery[1]["toolCallId"] == "call_r");
  CHECK(delivery[1]["content"].get<std::string>().find("beach.png") != std::string::npos);
  CHECK(delivery[2]["name"] == "agentrt.job");
  CHECK(delivery[2]["value"]["status"] == "succeeded");
  CHECK(delivery[2]["value"]["result"]["url"] == "https://cdn.example/beach.png");
  CHECK(delivery[2]["value"]["assets"][0]["key"] == "renders/beach.png");
  CHECK(delivery[3]["outcome"]["type"] == "success");
  check_agui(h.all_events("t-job"));  // the whole thread stream is a valid sequence of runs

  // History: a tool-result style message answering the call, with the result and the asset references.
  auto hist = h.rt->history("t-job");
  auto notes = job_notes(hist);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].role == Role::tool);
  CHECK(notes[0].tool_call_id == "call_r");
  CHECK(notes[0].metadata["job_status"] == "succeeded");
  CHECK(notes[0].metadata["assets"][0]["mimeType"] == "image/png");
  CHECK(notes[0].content.find("succeeded") != std::string::npos);
  CHECK(notes[0].content.find("renders/beach.png") != std::string::npos);
  CHECK(hist.back().id == notes[0].id);

  // The next turn's model sees it (as a system note: one tool result per call is all a model takes).
  auto t2 = h.start("t-job", "what came of it?");
  h.wait(t2.turn_id);
  auto reqs = h.script.all();
  const ModelRequest& last = reqs.back();
  bool seen = false;
  for (const auto& m : last.messages)
    if (m.role == Role::system && m.content.find("Job " + job.id + " (render) succeeded") != std::string::npos)
      seen = true;
  CHECK(seen);
  for (const auto& m : last.messages) CHECK_FALSE((m.role == Role::tool && m.content.rfind("Job ", 0) == 0));
  auto final_hist = h.rt->history("t-job");
  CHECK(final_hist.back().content.find("beach.png") != std::string::npos);
  // Ended jobs refuse further changes.
  CHECK_THROWS_AS(h.rt->complete_job(job.id, JobResult{}), Error);
  try {
    h.rt->fail_job(job.id, "x", "y");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_state);
  }
  CHECK(h.rt->job(job.id)->status == JobStatus::succeeded);
  CHECK(h.hooked.empty());
}

TEST_CASE("a job row written beside the log is found by the replay") {
  JobHarness h;
  auto t = h.start("t-jobrow", "render the beach");
  REQUIRE(h.wait(t.turn_id).status == TurnStatus::completed);
  auto diff = replay_difference(*h.used_store, "t-jobrow");
  CHECK_MESSAGE(!diff.has_value(), (diff ? *diff : std::string()));
  auto jobs = h.rt->jobs("t-jobrow");
  REQUIRE(jobs.size() == 1);

  CommitBatch rogue;  // a write no event carries
  rogue.thread_id = "t-jobrow";
  JobRecord changed = jobs[0];
  changed.progress = 0.75;
  rogue.jobs.push_back(JobWrite{changed, jobs[0].version});
  h.used_store->commit(rogue);
  auto found = replay_difference(*h.used_store, "t-jobrow");
  REQUIRE(found.has_value());
  CHECK(found->find("job 0 of 1 stored / 1 replayed differs") != std::string::npos);
  CHECK(found->find("\"progress\":0.75") != std::string::npos);
  // The log says it again (a progress record of its own), so the harness's replay at its end passes.
  h.rt->update_job(jobs[0].id, JobProgress{std::nullopt, 0.75, std::nullopt});
  diff = replay_difference(*h.used_store, "t-jobrow");
  CHECK_MESSAGE(!diff.has_value(), (diff ? *diff : std::string()));
}

TEST_CASE("job failure and bad host input") {
  JobHarness h;
  h.wait(h.start("t-fail", "render x").turn_id);
  const std::string id = h.job_ids.at(0);
  auto code = [&](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::ok;
  };
  CHECK(code([&] {
          h.rt->update_job(id, JobProgress{std::nullopt, 1.5, std::nullopt});
        }) == ErrorCode::invalid_argument);
  CHECK(code([&] {
          h.rt->update_job(id, JobProgress{JobStatus::succeeded, std::nullopt, std::nullopt});
        }) == ErrorCode::invalid_argument);
  CHECK(code([&] {
          h.rt->update_job(id, JobProgress{JobStatus::queued, std::nullopt, std::nullopt});
        }) == ErrorCode::invalid_state);
  CHECK(code([&] { h.rt->complete_job(id, JobResult{json(1), json::object(), ""}); }) == ErrorCode::invalid_argument);
  CHECK(code([&] {
          h.rt->complete_job(id, JobResult{json(std::string(2 << 20, 'x')), json::array(), ""});
        }) == ErrorCode::too_large);
  CHECK(code([&] { h.rt->complete_job("job_nope", JobResult{}); }) == ErrorCode::not_found);
  CHECK(code([&] { h.rt->cancel_job(""); }) == ErrorCode::invalid_argument);
  CHECK_FALSE(h.rt->job("job_nope").has_value());
  CHECK(h.rt->job(id)->status == JobStatus::running);  // nothing above changed it

  auto failed = h.rt->fail_job(id, "render_crashed", "the GPU fell over");
  CHECK(failed.status == JobStatus::failed);
  CHECK(failed.error_code == "render_crashed");
  CHECK(failed.delivered);
  auto notes = job_notes(h.rt->history("t-fail"));
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].content == "Job " + id + " (render) failed: render_crashed: the GPU fell over");
  CHECK(notes[0].error == "the GPU fell over");
  CHECK(notes[0].metadata["error_code"] == "render_crashed");
  CHECK(code([&] { h.rt->complete_job(id, JobResult{}); }) == ErrorCode::invalid_state);
  CHECK(job_notes(h.rt->history("t-fail")).size() == 1);
  check_agui(h.all_events("t-fail"));
}

TEST_CASE("job cancel calls the host's hook once and records it in history") {
  JobHarness h;
  h.wait(h.start("t-cancel", "render y").turn_id);
  const std::string id = h.job_ids.at(0);
  auto c = h.rt->cancel_job(id, "the user changed their mind");
  CHECK(c.status == JobStatus::cancelled);
  CHECK(c.error_code == "cancelled");
  CHECK(c.error_message == "the user changed their mind");
  REQUIRE(h.hooked.size() == 1);
  CHECK(h.hooked[0].id == id);
  CHECK(h.hooked[0].status == JobStatus::cancelled);
  // Again: harmless, no second hook call, no second history entry.
  auto again = h.rt->cancel_job(id);
  CHECK(again.status == JobStatus::cancelled);
  CHECK(again.version == c.version);
  CHECK(h.hooked.size() == 1);
  auto notes = job_notes(h.rt->history("t-cancel"));
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].content == "Job " + id + " (render) was cancelled: the user changed their mind");
  auto evs = h.all_events("t-cancel");
  CHECK(evs.back()["type"] == "RUN_FINISHED");
  CHECK(evs[evs.size() - 2]["value"]["status"] == "cancelled");
}

TEST_CASE("a job that outlives its timeout fails with a timeout reason, in history, and the hook is called") {
  JobHarness h([](RuntimeConfig& c) { c.job_timeout = std::chrono::milliseconds(150); });
  h.wait(h.start("t-exp", "render z").turn_id);
  const std::string id = h.job_ids.at(0);
  auto j = h.wait_delivered(id);  // the sweeper (every 50 ms) fails it
  CHECK(j.status == JobStatus::failed);
  CHECK(j.error_code == "timeout");
  CHECK(j.error_message.find("did not finish within 150 ms") != std::string::npos);
  CHECK(j.finished_at >= j.expires_at);
  REQUIRE(h.wait_hooked(1) == 1);
  CHECK(h.hooked[0].status == JobStatus::failed);
  auto notes = job_notes(h.rt->history("t-exp"));
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].content.find("failed: timeout") != std::string::npos);
  // A late completion is refused.
  CHECK_THROWS_AS(h.rt->complete_job(id, JobResult{}), Error);
}

TEST_CASE("JobStart::timeout overrides the runtime's job timeout") {
  JobHarness h([](RuntimeConfig& c) { c.job_timeout = std::chrono::hours(1); });
  h.render_behaviour = [](const ToolCallContext&, ToolCompletion done) {
    JobStart js;
    js.timeout = std::chrono::milliseconds(100);
    done.start_job(js);
  };
  h.wait(h.start("t-exp2", "render").turn_id);
  auto j = h.wait_delivered(h.job_ids.at(0));
  CHECK(j.error_code == "timeout");
  CHECK(j.timeout_ms == 100);
  CHECK(j.error_message.find("did not finish within 100 ms") != std::string::npos);
}

TEST_CASE("a confirmation interrupt, confirmed: the tool runs again with job_confirmed and starts the job") {
  JobHarness h;
  auto t = h.start("t-conf", "costly render");
  auto rec = h.wait(t.turn_id);
  REQUIRE(rec.status == TurnStatus::waiting_approval);
  CHECK(h.costly_calls == 1);
  REQUIRE(rec.interrupts.size() == 1);
  const json& intr = rec.interrupts[0];
  CHECK(intr["reason"] == "confirmation");
  CHECK(intr["toolCallId"] == "call_r");
  CHECK(intr["message"] == "Rendering costs 3 credits. Go ahead?");
  CHECK(intr.contains("expiresAt"));
  CHECK_FALSE(intr["responseSchema"]["properties"].contains("editedArgs"));
  const std::string job_id = intr["metadata"]["jobId"];
  CHECK(intr["metadata"]["job"]["cost"] == 3);
  auto job = h.rt->job(job_id);
  REQUIRE(job);
  CHECK(job->status == JobStatus::queued);
  CHECK(job->confirmation == JobConfirmation::pending);
  // The host cannot finish or cancel a job the person has not confirmed yet.
  CHECK_THROWS_AS(h.rt->complete_job(job_id, JobResult{}), Error);
  CHECK_THROWS_AS(h.rt->cancel_job(job_id), Error);
  // The paused run is valid AG-UI and ends with the confirmation interrupt.
  auto evs = h.all_events("t-conf");
  check_agui(evs);
  CHECK(evs.back()["outcome"]["interrupts"][0]["reason"] == "confirmation");
  CHECK_FALSE(find_event(evs, "TOOL_CALL_RESULT"));

  // Edited arguments make no sense for a confirmation.
  Decision edit{intr["id"].get<std::string>(), Decision::Action::approve, json{{"scene", "moon"}}, ""};
  try {
    h.rt->resume(t.turn_id, rec.approval_request_id, {edit});
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
  }
  // AG-UI: {interruptId, status:"resolved"}.
  auto decisions = decisions_from_agui_resume(json::array({{{"interruptId", intr["id"]}, {"status", "resolved"}}}));
  auto after = h.rt->resume_turn(t.turn_id, rec.approval_request_id, decisions);
  CHECK(after.status == TurnStatus::completed);
  CHECK(h.costly_calls == 2);
  CHECK(h.confirmed_calls == 1);
  CHECK(h.job_ids.at(1) == job_id);  // the same job id on the second call
  job = h.rt->job(job_id);
  CHECK(job->status == JobStatus::running);
  CHECK(job->confirmation == JobConfirmation::confirmed);
  CHECK(job->message == "started after confirmation");
  CHECK(job->metadata["cost"] == 3);
  CHECK(job->metadata.size() == 1);
  CHECK(job->timeout_ms == 24LL * 3600 * 1000);
  CHECK(job->expires_at > 0);
  h.rt->complete_job(job_id, JobResult{json{{"frames", 40}}, json::array(), "done"});
  auto notes = job_notes(h.rt->history("t-conf"));
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].content.find("succeeded") != std::string::npos);
  check_agui(h.all_events("t-conf"));
}

TEST_CASE("a confirmation interrupt, cancelled: the job ends cancelled and the tool does not run again") {
  JobHarness h;
  auto t = h.start("t-decline", "costly render");
  auto rec = h.wait(t.turn_id);
  REQUIRE(rec.status == TurnStatus::waiting_approval);
  const std::string job_id = rec.interrupts[0]["metadata"]["jobId"];
  auto decisions =
      decisions_from_agui_resume(json::array({{{"interruptId", rec.interrupts[0]["id"]}, {"status", "cancelled"}}}));
  auto after = h.rt->resume_turn(t.turn_id, rec.approval_request_id, decisions);
  CHECK(after.status == TurnStatus::completed);
  CHECK(h.costly_calls == 1);
  auto job = h.rt->job(job_id);
  CHECK(job->status == JobStatus::cancelled);
  CHECK(job->confirmation == JobConfirmation::declined);
  CHECK(job->error_code == "declined");
  CHECK(job->delivered);    // the call's tool result is the record
  CHECK(h.hooked.empty());  // nothing was started, nothing to stop
  auto evs = h.all_events("t-decline");
  check_agui(evs);
  std::vector<const json*> results;
  for (const auto& e : evs)
    if (e["type"] == "TOOL_CALL_RESULT") results.push_back(&e);
  REQUIRE(results.size() == 1);
  CHECK((*results[0])["metadata"]["tool_agent_output"]["error"]["code"] == "declined");
  CHECK((*results[0])["content"].get<std::string>().find("declined") != std::string::npos);
  CHECK(job_notes(h.rt->history("t-decline")).empty());
  const json* declined = job_event(evs, 1);  // the first one announced the pending job
  REQUIRE(declined);
  CHECK((*declined)["value"]["status"] == "cancelled");
  CHECK((*declined)["value"]["confirmation"] == "declined");
}

TEST_CASE("a confirmation that expires fails the job with a timeout reason") {
  JobHarness h([](RuntimeConfig& c) { c.approval_timeout = std::chrono::milliseconds(100); });
  auto t = h.start("t-conf-exp", "costly render");
  // The deadline is short: the turn may have expired before anything reads it WAITING_APPROVAL. Its job is
  // the one the tool was called for.
  REQUIRE(wait_on_thread(*h.rt, "t-conf-exp", [&] { return h.rt->turn(t.turn_id)->status == TurnStatus::expired; }));
  const std::string job_id = h.job_ids.at(0);
  auto job = h.rt->job(job_id);
  CHECK(job->status == JobStatus::failed);
  CHECK(job->error_code == "timeout");
  CHECK(job->delivered);
  CHECK(h.costly_calls == 1);
}

TEST_CASE("a job finished while another run is open is delivered after that run, as its own run") {
  JobHarness h;
  h.wait(h.start("t-busy", "render a").turn_id);
  const std::string first = h.job_ids.at(0);
  // The second turn's tool finishes the first job from another thread while its own run is open.
  std::atomic<bool> finished{false};
  h.render_behaviour = [&](const ToolCallContext& call, ToolCompletion done) {
    std::thread([&, first] {
      auto j = h.rt->complete_job(first, JobResult{json{{"n", 1}}, json::array(), ""});
      CHECK_FALSE(j.delivered);  // the thread is busy: recorded, not yet in history
      finished = true;
    }).join();
    ToolResult r;
    r.result = json{{"sync", true}};
    done.complete(r);
    (void)call;
  };
  auto t2 = h.start("t-busy", "render b");
  h.wait(t2.turn_id);
  REQUIRE(finished);
  auto j = h.wait_delivered(first);
  CHECK(j.status == JobStatus::succeeded);
  auto evs = h.all_events("t-busy");
  check_agui(evs);
  // The delivery run comes after the second turn's run ended.
  size_t second_end = 0, delivery_start = 0;
  int finished_runs = 0;
  for (size_t i = 0; i < evs.size(); ++i) {
    if (evs[i]["type"] == "RUN_FINISHED" && ++finished_runs == 2) second_end = i;
    if (evs[i]["type"] == "CUSTOM" && evs[i]["value"]["status"] == "succeeded") delivery_start = i - 2;
  }
  CHECK(second_end > 0);
  CHECK(delivery_start == second_end + 1);
  CHECK(evs[delivery_start]["type"] == "RUN_STARTED");
}

TEST_CASE("a job the host finishes before the tool has answered is recorded finished and delivered") {
  JobHarness h;
  h.render_behaviour = [&](const ToolCallContext& call, ToolCompletion done) {
    std::thread([&, id = call.job_id] {
      auto j = h.rt->complete_job(id, JobResult{json{{"fast", true}}, json::array(), ""});
      CHECK(j.status == JobStatus::succeeded);
    }).join();
    done.start_job(JobStart{});
  };
  h.wait(h.start("t-fast", "render").turn_id);
  auto j = h.wait_delivered(h.job_ids.at(0));
  CHECK(j.status == JobStatus::succeeded);
  CHECK(j.result["fast"] == true);
  CHECK(job_notes(h.rt->history("t-fast")).size() == 1);
  check_agui(h.all_events("t-fast"));
}

TEST_CASE("progress the host reports before the tool has answered is written with the job") {
  JobHarness h;
  h.render_behaviour = [&](const ToolCallContext& call, ToolCompletion done) {
    std::thread([&, id = call.job_id] {
      auto j = h.rt->update_job(id, JobProgress{JobStatus::running, 0.25, std::string("warming up")});
      CHECK(j.progress == doctest::Approx(0.25));
    }).join();
    JobStart js;
    js.status = JobStatus::queued;
    js.message = "queued";
    done.start_job(js);
  };
  h.wait(h.start("t-prog", "render").turn_id);
  auto j = h.rt->job(h.job_ids.at(0));
  REQUIRE(j);
  CHECK(j->status == JobStatus::running);
  CHECK(j->progress == doctest::Approx(0.25));
  CHECK(j->message == "warming up");
  CHECK_FALSE(j->delivered);
}

TEST_CASE("a tool's invalid job start fails the call") {
  JobHarness h;
  h.render_behaviour = [](const ToolCallContext&, ToolCompletion done) {
    JobStart js;
    js.status = JobStatus::succeeded;
    done.start_job(js);
  };
  h.wait(h.start("t-bad", "render").turn_id);
  CHECK(h.rt->jobs("t-bad").empty());
  auto evs = h.all_events("t-bad");
  const json* r = find_event(evs, "TOOL_CALL_RESULT");
  REQUIRE(r);
  CHECK((*r)["metadata"]["tool_agent_output"]["error"]["code"] == "invalid_job");
}

TEST_CASE("jobs survive a restart: a new runtime completes them, and delivers outcomes a dead one left") {
  TempDir dir;
  const std::string db = dir.file("jobs.db");
  std::string job_a, job_b;
  {
    JobHarness h([&](RuntimeConfig& c) { c.store = std::make_shared<SqliteStore>(SqliteStoreOptions{db}); });
    h.wait(h.start("t-r", "render a").turn_id);
    job_a = h.job_ids.at(0);
  }
  // Another "process" left job B finished but not in history (it stopped between the two commits).
  {
    auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{db});
    auto a = store->get_job(job_a);
    REQUIRE(a);
    JobRecord b = *a;
    b.id = "job_left_behind";
    b.status = JobStatus::failed;
    b.error_code = "boom";
    b.error_message = "gone";
    b.finished_at = 1;
    CommitBatch batch;
    batch.thread_id = "t-r";
    batch.jobs.push_back(JobWrite{b, -1});
    store->commit(batch);
    job_b = b.id;
  }
  JobHarness h2([&](RuntimeConfig& c) { c.store = std::make_shared<SqliteStore>(SqliteStoreOptions{db}); });
  auto b = h2.wait_delivered(job_b);  // the sweeper finds it
  CHECK(b.status == JobStatus::failed);
  auto a = h2.rt->complete_job(job_a, JobResult{json{{"after", "restart"}}, json::array(), ""});
  CHECK(a.delivered);
  auto notes = job_notes(h2.rt->history("t-r"));
  REQUIRE(notes.size() == 2);
  CHECK(notes[0].metadata["job_id"] == job_b);
  CHECK(notes[1].metadata["job_id"] == job_a);
  std::vector<json> evs;
  for (const auto& e : h2.rt->config().store->events_after("t-r", 0, 1000)) evs.push_back(json::parse(e.json));
  check_agui(evs);
}

TEST_CASE("a confirmation asked before a restart is answered after it") {
  TempDir dir;
  const std::string db = dir.file("jobs.db");
  std::string turn_id, apr, interrupt_id, job_id;
  {
    JobHarness h([&](RuntimeConfig& c) { c.store = std::make_shared<SqliteStore>(SqliteStoreOptions{db}); });
    auto t = h.start("t-rc", "costly render");
    auto rec = h.wait(t.turn_id);
    REQUIRE(rec.status == TurnStatus::waiting_approval);
    turn_id = rec.id;
    apr = rec.approval_request_id;
    interrupt_id = rec.interrupts[0]["id"];
    job_id = rec.interrupts[0]["metadata"]["jobId"];
  }
  JobHarness h2([&](RuntimeConfig& c) { c.store = std::make_shared<SqliteStore>(SqliteStoreOptions{db}); });
  CHECK(h2.rt->job(job_id)->confirmation == JobConfirmation::pending);
  auto after = h2.rt->resume_turn(turn_id, apr, {Decision{interrupt_id, Decision::Action::approve, std::nullopt, ""}});
  CHECK(after.status == TurnStatus::completed);
  CHECK(h2.costly_calls == 1);
  CHECK(h2.confirmed_calls == 1);
  CHECK(h2.job_ids.at(0) == job_id);
  auto j = h2.rt->job(job_id);
  CHECK(j->status == JobStatus::running);
  CHECK(j->confirmation == JobConfirmation::confirmed);
  h2.rt->complete_job(job_id, JobResult{json{{"ok", true}}, json::array(), ""});
  CHECK(job_notes(h2.rt->history("t-rc")).size() == 1);
}

TEST_CASE("a job is completed by another process sharing the store") {
  TempDir dir;
  const std::string db = dir.file("jobs.db");
  // The other process is forked first, while this one runs no thread but this one, and waits for the job's id:
  // forked while a runtime's threads run, it could inherit a lock one of them held at that moment (SQLite's
  // allocator's, say) and wait for it for ever.
  int go[2];
  REQUIRE(pipe(go) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(go[1]);
    std::string id;
    char c = 0;
    while (read(go[0], &c, 1) == 1 && c != '\n') id += c;
    if (c != '\n') _exit(4);  // the parent gave up before it had a job
    int rc = 0;
    try {
      auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{db});
      Runtime other(test_config(store, std::make_shared<ScriptedModel>(booking_script)));
      auto j = other.complete_job(id, JobResult{json{{"by", "child"}}, json::array(), ""});
      rc = j.status == JobStatus::succeeded && j.delivered ? 0 : 3;
    } catch (const std::exception& e) {
      fprintf(stderr, "child: %s\n", e.what());
      rc = 5;
    }
    _exit(rc);
  }
  close(go[0]);
  struct Child {  // whatever happens below, the child is told to go (or to give up) and reaped
    pid_t pid;
    int fd;
    int status = -1;
    void finish() {
      if (fd >= 0) close(fd);
      fd = -1;
      if (status < 0) waitpid(pid, &status, 0);
    }
    ~Child() { finish(); }
  } child{pid, go[1]};
  JobHarness h([&](RuntimeConfig& c) { c.store = std::make_shared<SqliteStore>(SqliteStoreOptions{db}); });
  h.wait(h.start("t-proc", "render p").turn_id);
  const std::string id = h.job_ids.at(0);
  // A live subscriber in this process, past everything committed so far.
  auto sub = h.rt->subscribe("t-proc", h.rt->thread("t-proc")->last_seq);
  CHECK_FALSE(sub->next(std::chrono::milliseconds(20)).has_value());  // caught up: now on the live tail
  const std::string line = id + "\n";
  REQUIRE(write(child.fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()));
  child.finish();
  const int status = child.status;
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  auto j = h.rt->job(id);
  CHECK(j->status == JobStatus::succeeded);
  CHECK(j->result["by"] == "child");
  REQUIRE(job_notes(h.rt->history("t-proc")).size() == 1);
  check_agui(h.all_events("t-proc"));
  // The subscriber gets the delivery run the other process committed (the sweeper notices it).
  std::vector<std::string> seen;
  for (int i = 0; i < 4; ++i) {
    auto e = sub->next(kLongWait);
    REQUIRE(e.has_value());
    seen.push_back(json::parse(e->json)["type"].get<std::string>());
  }
  CHECK(seen == std::vector<std::string>{"RUN_STARTED", "TOOL_CALL_RESULT", "CUSTOM", "RUN_FINISHED"});
}

TEST_CASE("jobs work the same on the conversation-document layout") {
  TempDir dir;
  FsObjectStoreOptions fo;
  fo.root = dir.file("objects");
  fo.bucket = "b";
  fo.signing_secret = "s";
  fo.public_base_url = "http://localhost/objects";
  auto objects = std::make_shared<FsObjectStore>(fo);
  DocumentLayoutOptions dopts;
  dopts.path = dir.file("docs.db");
  auto layout = std::make_unique<DocumentLayout>(objects, dopts);
  DocumentLayout& docs = *layout;
  auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("inner.db")}, std::move(layout));
  JobHarness h([&](RuntimeConfig& c) { c.objects = objects; }, store);
  h.wait(h.start("t-doc", "render d").turn_id);
  const std::string id = h.job_ids.at(0);
  auto j = h.rt->complete_job(id, JobResult{json{{"doc", true}}, json::array(), ""});
  CHECK(j.delivered);
  auto notes = job_notes(h.rt->history("t-doc"));
  REQUIRE(notes.size() == 1);
  CHECK(docs.document(*store, "t-doc")->messages == static_cast<int64_t>(h.rt->history("t-doc").size()));
}

TEST_CASE("a repeated start returns the same deltaMessages, the ERROR message of a failed turn included") {
  Harness h([](const ModelRequest& req) -> ModelResult {
    const Message* u = last_user_message(req);
    if (u && u->content == "fail") throw Error(ErrorCode::model, "the model is down");
    return text_result("hello there");
  });
  auto first = h.start("t-delta", "hi", "cm-1");
  h.wait(first.turn_id);
  CHECK(first.delta_messages.empty());
  const int64_t calls = h.model->calls();
  auto again = h.start("t-delta", "hi", "cm-1");
  CHECK(again.existing);
  CHECK(again.turn_id == first.turn_id);
  REQUIRE(again.delta_messages.size() == 2);
  CHECK(again.delta_messages[0].role == Role::user);
  CHECK(again.delta_messages[0].id == "cm-1");
  CHECK(again.delta_messages[1].content == "hello there");
  CHECK(h.model->calls() == calls);  // nothing ran again

  auto failed = h.start("t-delta", "fail", "cm-2");
  CHECK(h.wait(failed.turn_id).status == TurnStatus::failed);
  auto repeat = h.start("t-delta", "fail", "cm-2");
  REQUIRE(repeat.delta_messages.size() == 2);
  CHECK(repeat.delta_messages[1].role == Role::system);
  CHECK(repeat.delta_messages[1].content.rfind("ERROR model_error", 0) == 0);
  auto repeat2 = h.start("t-delta", "fail", "cm-2");
  CHECK(json(repeat2.delta_messages) == json(repeat.delta_messages));
  CHECK(json(h.rt->turn_messages(failed.turn_id)) == json(repeat.delta_messages));
  CHECK_THROWS_AS(h.rt->turn_messages("turn_nope"), Error);
}
