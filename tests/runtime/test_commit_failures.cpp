// A commit that fails belongs to the run whose batch it was: that run ends with RUN_ERROR {code:"storage"}, no
// later batch of it commits past the lost one, subscribers see no event that is not durable and no gap, and
// a call whose result was in the lost batch keeps its real outcome. Faults come from the fault VFS.
#include <doctest/doctest.h>

#include <sqlite3.h>
#include <sys/stat.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>

#include "agentrt/config.hpp"
#include "store/sqlite_store.hpp"
#include "support/fault_vfs.hpp"
#include "support/runtime_fixture.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {

// A model whose execution stage streams numbered text deltas, each only once the test releases it (or the
// run is cancelled), so the test knows which deltas a group commit holds.
class GatedModel final : public ModelProvider {
 public:
  explicit GatedModel(int deltas) : deltas_(deltas) {}
  ModelResult complete(const ModelRequest& req, ModelStreamSink& sink, const CancelToken& cancel) override {
    if (req.stage != "execution") return text_result("intent");
    std::string text;
    for (int i = 1; i <= deltas_; ++i) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        while (released_ < i && !cancel.cancelled()) cv_.wait_for(lock, std::chrono::milliseconds(2));
      }
      if (cancel.cancelled()) throw Error(ErrorCode::cancelled, "cancelled");
      const std::string d = "d" + std::to_string(i) + " ";
      sink.on_text(d);
      text += d;
    }
    return text_result(text);
  }
  std::string name() const override { return "gated"; }
  void release(int upto) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      released_ = upto;
    }
    cv_.notify_all();
  }

 private:
  int deltas_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int released_ = 0;
};

struct FaultyRuntime {
  TempDir dir;
  std::shared_ptr<SqliteStore> store;
  std::shared_ptr<ModelProvider> model;
  std::unique_ptr<Runtime> rt;
  FaultyRuntime(std::shared_ptr<ModelProvider> m, int retries, std::function<void(RuntimeConfig&)> tweak = {})
      : model(std::move(m)) {
    FaultVfs::instance().reset();
    SqliteStoreOptions o{dir.file("agentrt.db")};
    o.vfs = FaultVfs::kName;
    store = std::make_shared<SqliteStore>(o);
    RuntimeConfig c = test_config(store, model);
    c.commit_retries = retries;
    c.commit_retry_backoff = std::chrono::milliseconds(1);
    if (tweak) tweak(c);
    rt = std::make_unique<Runtime>(c);
  }
  ~FaultyRuntime() {
    rt.reset();
    FaultVfs::instance().reset();
  }
};

// Reads the thread's events until `pred` holds for the last one (10 s at most).
std::vector<json> read_until(Subscription& sub, std::vector<json>& got, const std::function<bool(const json&)>& pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    auto e = sub.next(std::chrono::milliseconds(100));
    if (!e) continue;
    json j = json::parse(e->json);
    j["__seq"] = e->seq;
    got.push_back(j);
    if (pred(j)) return got;
  }
  FAIL("the awaited event did not come within 10 s");
  return got;
}

void check_log_is(Store& store, const std::string& thread, const std::vector<json>& shown) {
  auto log = store.events_after(thread, 0, 10000);
  REQUIRE(log.size() == shown.size());
  std::vector<json> events;
  for (size_t i = 0; i < log.size(); ++i) {
    CHECK(log[i].seq == static_cast<int64_t>(i) + 1);
    CHECK(shown[i]["__seq"] == log[i].seq);
    json j = shown[i];
    j.erase("__seq");
    CHECK(json::parse(log[i].json) == j);
    events.push_back(std::move(j));
  }
  check_agui(events);
}

bool is_type(const json& e, const char* t) { return e["type"] == t; }

}  // namespace

TEST_CASE("a failed group commit ends the streaming run with RUN_ERROR storage; nothing after it commits") {
  auto model = std::make_shared<GatedModel>(5);
  FaultyRuntime f(model, 0);
  auto sub = f.rt->subscribe("t-gc", 0);
  auto h = f.rt->start_turn(turn_input("t-gc", user_message("stream")));
  std::vector<json> shown;
  model->release(1);
  read_until(*sub, shown, [](const json& e) { return is_type(e, "TEXT_MESSAGE_CONTENT"); });  // d1 committed
  FaultVfs::instance().fail_nth(IoKind::write, 1, SQLITE_FULL);  // the next group commit's write fails
  model->release(5);
  read_until(*sub, shown, [](const json& e) { return is_type(e, "RUN_ERROR"); });
  CHECK(FaultVfs::instance().fault_fired());
  const json& end = shown.back();
  CHECK(end["code"] == "storage");
  CHECK(end["message"] == "storage failed: the run could not be saved and was stopped");
  // d1 is the only delta shown: the batch holding d2.. was lost and nothing of the run committed past it.
  int contents = 0;
  for (const auto& e : shown)
    if (is_type(e, "TEXT_MESSAGE_CONTENT")) {
      ++contents;
      CHECK(e["delta"] == "d1 ");
    }
  CHECK(contents == 1);
  auto t = f.rt->wait(h.turn_id, std::chrono::seconds(10));
  CHECK(t.status == TurnStatus::failed);
  check_log_is(*f.store, "t-gc", shown);
  // History: the user message and the ERROR note; no half-written answer.
  auto hist = f.rt->history("t-gc");
  REQUIRE(hist.size() == 2);
  CHECK(hist[0].role == Role::user);
  CHECK(hist[1].role == Role::system);
  CHECK(hist[1].content == "ERROR storage: storage failed: the run could not be saved and was stopped");
}

TEST_CASE("a disk full for a while: the run ends, its failure is recorded once the disk has room, nothing is lost") {
  auto model = std::make_shared<GatedModel>(40);
  // The runtime's log says when the run has given up on storing its end: what the test waits for.
  std::mutex mutex;
  std::condition_variable cv;
  bool unrecorded = false;
  FaultyRuntime f(model, 1, [&](RuntimeConfig& c) {
    c.log = [&](LogLevel, std::string_view, std::string_view msg) {
      if (msg.find("could not be recorded yet") == std::string_view::npos) return;
      std::lock_guard<std::mutex> lock(mutex);
      unrecorded = true;
      cv.notify_all();
    };
  });
  auto sub = f.rt->subscribe("t-full", 0);
  auto h = f.rt->start_turn(turn_input("t-full", user_message("stream")));
  std::vector<json> shown;
  model->release(3);
  read_until(*sub, shown, [](const json& e) { return is_type(e, "TEXT_MESSAGE_CONTENT") && e["delta"] == "d3 "; });
  FaultVfs::instance().set_disk_full(true);
  model->release(40);
  {
    std::unique_lock<std::mutex> lock(mutex);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return unrecorded; }));
  }
  // The run has stopped but its end is not stored yet: the turn is still RUNNING, and nothing more is shown.
  CHECK(f.store->get_turn(h.turn_id)->status == TurnStatus::running);
  CHECK_FALSE(sub->next(std::chrono::milliseconds(0)).has_value());
  FaultVfs::instance().set_disk_full(false);
  // The sweeper writes the end the run could not.
  read_until(*sub, shown, [](const json& e) { return is_type(e, "RUN_ERROR"); });
  CHECK(shown.back()["code"] == "storage");
  CHECK(f.rt->wait(h.turn_id, std::chrono::seconds(10)).status == TurnStatus::failed);
  for (const auto& e : shown)
    if (is_type(e, "TEXT_MESSAGE_CONTENT")) CHECK((e["delta"] == "d1 " || e["delta"] == "d2 " || e["delta"] == "d3 "));
  check_log_is(*f.store, "t-full", shown);
}

TEST_CASE("a call whose result was in the lost batch keeps its real result; the tool ran once") {
  std::atomic<int> runs{0};
  auto model = std::make_shared<ScriptedModel>([](const ModelRequest& req) {
    if (req.stage == "intent") return text_result("x");
    if (tool_results_since_last_user(req) == 0)
      return tool_call_result("call_1", "book_room", R"({"room":"A1","day":"mon"})");
    return text_result("booked");
  });
  FaultyRuntime f(model, 0, [](RuntimeConfig& c) { c.flush_interval = std::chrono::hours(1); });
  ToolSpec spec;
  spec.name = "book_room";
  spec.approval = ApprovalPolicy::never();
  spec.handler = sync_tool([&](const ToolCallContext&) {
    ++runs;
    // Its `started` record is committed; the commit after it (with this result) fails.
    FaultVfs::instance().fail_nth(IoKind::write, 1, SQLITE_IOERR_WRITE);
    return ToolResult{json{{"ok", true}, {"booking_id", "BK-7"}}, std::nullopt, nullptr};
  });
  f.rt->tools().add(spec);
  auto t = f.rt->run_turn(turn_input("t-res", user_message("book")));
  CHECK(t.status == TurnStatus::failed);
  CHECK(runs == 1);
  auto ledger = f.store->ledger(t.id);
  REQUIRE(ledger.size() == 1);
  CHECK(ledger[0].status == LedgerStatus::finished);
  CHECK(json::parse(ledger[0].output)["result"]["booking_id"] == "BK-7");
  auto hist = f.rt->history("t-res");
  REQUIRE(hist.size() == 4);  // user, assistant tool call, its real result, the ERROR note
  CHECK(hist[2].role == Role::tool);
  CHECK(hist[2].tool_call_id == "call_1");
  CHECK(hist[2].error.empty());
  CHECK(hist[3].content.rfind("ERROR storage: ", 0) == 0);
  auto log = f.store->events_after("t-res", 0, 1000);
  std::vector<json> events;
  for (const auto& e : log) events.push_back(json::parse(e.json));
  check_agui(events);
  int results = 0;
  for (const auto& e : events) results += e["type"] == "TOOL_CALL_RESULT";
  CHECK(results == 1);
  CHECK(events.back()["type"] == "RUN_ERROR");
}

TEST_CASE("run_turn whose first commit fails stores nothing and throws io; the next one works") {
  auto model = std::make_shared<ScriptedModel>([](const ModelRequest&) { return text_result("hi"); });
  FaultyRuntime f(model, 0, [](RuntimeConfig& c) { c.flush_interval = std::chrono::hours(1); });
  FaultVfs::instance().fail_nth(IoKind::write, 1, SQLITE_FULL);
  try {
    f.rt->run_turn(turn_input("t-first", user_message("hello")));
    FAIL("run_turn returned although its only commit failed");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::io);
  }
  CHECK_FALSE(f.store->get_thread("t-first").has_value());
  CHECK(f.store->events_after("t-first", 0, 10).empty());
  auto t = f.rt->run_turn(turn_input("t-first", user_message("hello")));
  CHECK(t.status == TurnStatus::completed);
  CHECK(f.store->events_after("t-first", 0, 100).front().seq == 1);
}

TEST_CASE("a start and a delete of the same thread never interleave") {
  Harness h;
  h.add_book_room();
  auto t = h.rt->run_turn(turn_input("t-del", user_message("book")));
  REQUIRE(t.status == TurnStatus::waiting_approval);
  // The store refuses to delete a thread with an active turn, and to start a turn on a deleted thread.
  try {
    h.store->soft_delete_thread("t-del");
    FAIL("deleted a thread with a waiting turn");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::conflict);
  }
  // The facade cancels the active turn first, then deletes.
  h.rt->delete_thread("t-del", "u1");
  CHECK(h.rt->turn(t.id)->status == TurnStatus::cancelled);
  CHECK(h.store->get_thread("t-del")->deleted);
  try {
    h.rt->start_turn(turn_input("t-del", user_message("again")));
    FAIL("started a turn on a deleted thread");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::not_found);
  }
  // Even a start that read the thread before the delete: its commit is refused.
  CommitBatch late;
  late.thread_id = "t-del";
  late.create_thread = ThreadRecord{"t-del", "u1", "", false, 0, 0, 0};
  TurnRecord turn;
  turn.id = "turn_late";
  turn.thread_id = "t-del";
  turn.user_id = "u1";
  late.turn = turn;
  try {
    h.store->commit(late);
    FAIL("a start committed on a deleted thread");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::conflict);
  }
  CHECK_FALSE(h.store->get_turn("turn_late").has_value());
  CHECK_THROWS_AS(h.rt->delete_thread("t-del", "u1"), Error);      // already deleted: not found
  CHECK_THROWS_AS(h.rt->delete_thread("t-unknown", "u1"), Error);  // unknown
  h.rt->run_turn(turn_input("t-other", user_message("hello")));
  CHECK_THROWS_AS(h.rt->delete_thread("t-other", "someone-else"), Error);  // another user's
  CHECK_FALSE(h.store->get_thread("t-other")->deleted);
}

TEST_CASE("concurrent deletes and starts on one thread leave no turn running on a deleted thread") {
  for (int round = 0; round < 20; ++round) {
    Harness h;
    const std::string thread = "t-race-" + std::to_string(round);
    h.rt->run_turn(turn_input(thread, user_message("hello")));
    std::thread starter([&] {
      try {
        h.rt->start_turn(turn_input(thread, user_message("again")));
      } catch (const Error&) {
      }
    });
    try {
      h.rt->delete_thread(thread, "u1");
    } catch (const Error&) {
    }
    starter.join();
    auto th = h.store->get_thread(thread);
    REQUIRE(th.has_value());
    if (th->deleted) {
      auto active = h.store->active_turn(thread);
      if (active) CHECK(h.rt->wait(active->id, std::chrono::seconds(10)).status != TurnStatus::completed);
      CHECK_FALSE(h.store->active_turn(thread).has_value());
    }
  }
}

TEST_CASE("the data directory, database, WAL, key and objects are created for their owner only") {
  TempDir dir;
  const auto data = dir.path / "data";
  const mode_t old = ::umask(022);
  {
    Runtime rt(runtime_config_from_json({{"data_dir", data.string()}, {"model", {{"type", "demo"}}}}));
    rt.run_turn(turn_input("t-perm", user_message("hello")));
    rt.upload("u1", "t-perm", "\x89PNG\r\n\x1a\n", "image/png");
    auto mode = [](const std::filesystem::path& p) {
      struct stat st {};
      REQUIRE_MESSAGE(::stat(p.c_str(), &st) == 0, p.string());
      return st.st_mode & 0777;
    };
    CHECK(mode(data) == 0700);
    CHECK(mode(data / "agentrt.db") == 0600);
    CHECK(mode(data / "agentrt.db-wal") == 0600);
    CHECK(mode(data / "agentrt.db-shm") == 0600);
    CHECK(mode(data / "signing.key") == 0600);
    CHECK(mode(data / "objects") == 0700);
    for (const auto& e : std::filesystem::recursive_directory_iterator(data / "objects"))
      CHECK_MESSAGE(mode(e.path()) == (e.is_directory() ? 0700u : 0600u), e.path().string());
  }
  ::umask(old);
}
