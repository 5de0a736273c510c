// Test support: a Runtime on a fresh SQLite file with a scripted model, and helpers to read its streams.
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "agentrt/runtime.hpp"
#include "agentrt/scripted_model.hpp"
#include "store/sqlite_store.hpp"
#include "support/agui_verifier.hpp"
#include "support/condition.hpp"
#include "support/replay.hpp"

namespace agentrt::testing {

// A directory removed when the test ends.
struct TempDir {
  std::filesystem::path path;
  // `base`: where to make it (default: the system's temporary directory).
  explicit TempDir(const std::filesystem::path& base = std::filesystem::temp_directory_path()) {
    std::random_device rd;
    path = base / ("agentrt-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

inline Message user_message(std::string text) {
  Message m;
  m.role = Role::user;
  m.content = std::move(text);
  return m;
}

inline TurnInput turn_input(std::string thread, Message message, std::string user = "u1") {
  TurnInput in;
  in.thread_id = std::move(thread);
  in.user_id = std::move(user);
  in.message = std::move(message);
  return in;
}

inline RuntimeConfig test_config(std::shared_ptr<Store> store, std::shared_ptr<ModelProvider> model) {
  RuntimeConfig c;
  c.store = std::move(store);
  c.model = std::move(model);
  c.workers = 2;
  c.flush_interval = std::chrono::milliseconds(5);
  c.sweep_interval = std::chrono::milliseconds(50);
  c.instance_lease = std::chrono::milliseconds(300);
  return c;
}

// The W1-style booking script: book_room until a tool result follows the user message, then a final text
// that quotes the tool message (so tests can see what the model saw).
inline ModelResult booking_script(const ModelRequest& req) {
  if (req.stage == "intent") return text_result("booking");
  if (req.stage == "organization") return text_result("organized");
  const Message* tool = last_tool_result_since_last_user(req);
  if (!tool) return tool_call_result("call_1", "book_room", R"({"room":"A1","day":"mon"})");
  return text_result("Done: " + tool->content);
}

struct Harness {
  TempDir dir;
  std::shared_ptr<SqliteStore> store;
  std::shared_ptr<Store> used_store;  // the runtime's (a test may wrap `store`)
  std::set<std::string> threads;      // started on by start(): replayed when the harness ends
  std::shared_ptr<ScriptedModel> model;
  std::unique_ptr<Runtime> rt;
  std::atomic<int> tool_runs{0};
  std::vector<json> tool_args;  // arguments each book_room execution received
  std::mutex mutex;

  explicit Harness(ModelScript script = booking_script, std::function<void(RuntimeConfig&)> tweak = {},
                   ScriptedModelOptions mopts = {}) {
    store = std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("agentrt.db")});
    model = std::make_shared<ScriptedModel>(std::move(script), mopts);
    RuntimeConfig c = test_config(store, model);
    if (tweak) tweak(c);
    used_store = c.store;
    rt = std::make_unique<Runtime>(c);
  }
  // The runtime goes first: a tool still running uses the members below it. Then every thread this harness
  // started turns on is replayed: its log, through the projector, gives its stored history byte for byte.
  ~Harness() {
    rt.reset();
    for (const auto& t : threads) {
      std::optional<std::string> diff;
      try {
        diff = replay_difference(*used_store, t);
      } catch (const std::exception& e) {
        diff = std::string("replay failed: ") + e.what();
      }
      CHECK_MESSAGE(!diff.has_value(), (diff ? *diff : std::string()));
    }
  }
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  // Registers book_room (needs approval) counting its executions.
  void add_book_room(ApprovalPolicy policy = ApprovalPolicy::always(), bool idempotent = false) {
    ToolSpec spec;
    spec.name = "book_room";
    spec.description = "Book a hotel room";
    spec.parameters = json::parse(R"({"type":"object","properties":{"room":{"type":"string"},
      "day":{"type":"string","enum":["mon","tue","wed"]}},"required":["room","day"],"additionalProperties":false})");
    spec.approval = std::move(policy);
    spec.idempotent = idempotent;
    spec.handler = sync_tool([this](const ToolCallContext& c) {
      ++tool_runs;
      {
        std::lock_guard<std::mutex> lock(mutex);
        tool_args.push_back(c.args);
      }
      ToolResult r;
      r.result =
          json{{"ok", true}, {"booking_id", "BK-" + c.thread_id}, {"room", c.args["room"]}, {"day", c.args["day"]}};
      r.ui = UiSchema{"booking_card", "v1", json{{"room", c.args["room"]}}, json::array()};
      return r;
    });
    rt->tools().add(std::move(spec));
  }

  TurnHandle start(const std::string& thread, const std::string& text, const std::string& client_id = {}) {
    threads.insert(thread);
    TurnInput in;
    in.thread_id = thread;
    in.user_id = "u1";
    in.message.role = Role::user;
    in.message.content = text;
    in.client_message_id = client_id;
    return rt->start_turn(in);
  }

  TurnRecord wait(const std::string& turn_id) {
    auto t = rt->wait(turn_id, kLongWait);
    REQUIRE_MESSAGE((t.status != TurnStatus::running && t.status != TurnStatus::resuming),
                    "turn did not settle: " << to_string(t.status));
    return t;
  }

  // Every event of the thread after `after`, until `runs` runs have ended (RUN_FINISHED/RUN_ERROR).
  std::vector<json> events(const std::string& thread, int runs = 1, int64_t after = 0) {
    auto sub = rt->subscribe(thread, after);
    std::vector<json> out;
    int ended = 0;
    while (ended < runs) {
      auto e = sub->next(kLongWait);
      REQUIRE_MESSAGE(e.has_value(), "no event within " << kLongWait.count() << " s after " << out.size() << " events");
      out.push_back(json::parse(e->json));
      auto t = out.back()["type"].get<std::string>();
      if (t == "RUN_FINISHED" || t == "RUN_ERROR") ++ended;
    }
    return out;
  }
};

// The code and message of what `fn` throws (ok and "" when it throws nothing).
template <class Fn>
std::pair<ErrorCode, std::string> error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return {e.code(), e.message()};
  }
  return {ErrorCode::ok, ""};
}

inline std::vector<std::string> types_of(const std::vector<json>& evs) {
  std::vector<std::string> out;
  for (const auto& e : evs) out.push_back(e["type"].get<std::string>());
  return out;
}

inline void check_agui(const std::vector<json>& evs) {
  auto v = verify_agui_stream(evs);
  CHECK_MESSAGE(!v.has_value(), (v ? *v : std::string()));
}

inline const json* find_event(const std::vector<json>& evs, const std::string& type, size_t nth = 0) {
  for (const auto& e : evs)
    if (e["type"] == type && nth-- == 0) return &e;
  return nullptr;
}

// Waits until `done()` holds, looking again each time an event is committed on `thread` (what tests wait
// for — an expiry, a recovery, a job's delivery — commits events on the thread, also when the sweeper or
// another runtime on the store does it): no sleeping, no polling. False if nothing happens for kLongWait.
inline bool wait_on_thread(Runtime& rt, const std::string& thread, const std::function<bool()>& done) {
  const auto t = rt.thread(thread);
  const int64_t after = t ? t->last_seq : 0;  // read first: whatever commits after done() has a later seq
  if (done()) return true;
  auto sub = rt.subscribe(thread, after);
  while (sub->next(kLongWait))
    if (done()) return true;
  return done();
}

}  // namespace agentrt::testing
