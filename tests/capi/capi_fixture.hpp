// Test support for the C ABI suites: temp dirs, owned strings, and a runtime opened through agentrt.h.
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agentrt.h"
#include "support/condition.hpp"

namespace capi_test {

using json = nlohmann::json;
using agentrt::testing::Condition;

// How long a pull or a wait may take before the test fails: never reached on a loaded machine, it only turns
// a hang into a failure.
inline constexpr int32_t kLongWaitMs = 60000;

// A directory removed when the test ends.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::random_device rd;
    path = std::filesystem::temp_directory_path() / ("agentrt-capi-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// Takes ownership of a library string: copies it and frees it with agentrt_free.
inline std::string take(char* s) {
  std::string out = s ? s : "";
  agentrt_free(s);
  return out;
}

inline std::string last_error() { return agentrt_last_error(); }

// A fast test config on a temp dir (demo model unless the test says otherwise).
inline json test_config(const TempDir& dir, json model = json{{"type", "demo"}}) {
  return json{{"data_dir", dir.path.string()}, {"model", std::move(model)}, {"workers", 2},
              {"flush_interval_ms", 5},        {"sweep_interval_ms", 50},   {"instance_lease_ms", 300}};
}

// An open runtime, freed at scope exit.
struct Runtime {
  TempDir dir;
  agentrt_runtime* rt = nullptr;
  explicit Runtime(json config = json()) {
    if (config.is_null()) config = test_config(dir);
    REQUIRE_MESSAGE(agentrt_runtime_open(&rt, config.dump().c_str()) == AGENTRT_OK, last_error());
  }
  // A host model; `extra` config keys are merged into the test config.
  Runtime(agentrt_model_cb model, void* user_data, agentrt_destroy_cb destroy = nullptr,
          const json& extra = json::object()) {
    json config = test_config(dir);
    config.update(extra);
    REQUIRE_MESSAGE(
        agentrt_runtime_open_with_model(&rt, config.dump().c_str(), model, user_data, destroy) == AGENTRT_OK,
        last_error());
  }
  ~Runtime() { agentrt_runtime_free(rt); }
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  json start(const std::string& thread, const std::string& text, const std::string& client_id = {}) {
    json in{{"threadId", thread}, {"userId", "u1"}, {"message", {{"role", "user"}, {"content", text}}}};
    if (!client_id.empty()) in["clientMessageId"] = client_id;
    char* out = nullptr;
    REQUIRE_MESSAGE(agentrt_turn_start(&out, rt, in.dump().c_str()) == AGENTRT_OK, last_error());
    return json::parse(take(out));
  }

  json wait(const std::string& turn_id) {
    char* out = nullptr;
    REQUIRE_MESSAGE(agentrt_turn_wait(&out, rt, turn_id.c_str(), kLongWaitMs) == AGENTRT_OK, last_error());
    return json::parse(take(out));
  }

  json resume(const std::string& turn_id, const std::string& approval, const json& decisions) {
    char* out = nullptr;
    REQUIRE_MESSAGE(
        agentrt_turn_resume(&out, rt, turn_id.c_str(), approval.c_str(), decisions.dump().c_str()) == AGENTRT_OK,
        last_error());
    return json::parse(take(out));
  }

  json history(const std::string& thread) {
    char* out = nullptr;
    REQUIRE_MESSAGE(agentrt_thread_history(&out, rt, thread.c_str()) == AGENTRT_OK, last_error());
    return json::parse(take(out));
  }

  // Every event of the thread after `after` until `runs` runs have ended; each event gets "_seq".
  std::vector<json> events(const std::string& thread, int runs = 1, int64_t after = 0) {
    agentrt_events* s = nullptr;
    REQUIRE_MESSAGE(agentrt_events_open(&s, rt, thread.c_str(), after) == AGENTRT_OK, last_error());
    std::vector<json> out;
    int ended = 0;
    while (ended < runs) {
      char* e = nullptr;
      int64_t seq = 0;
      int32_t rc = agentrt_events_next(&e, &seq, s, kLongWaitMs);
      if (rc != AGENTRT_OK) {
        agentrt_events_free(s);
        FAIL("no event within " << kLongWaitMs / 1000 << " s after " << out.size() << " events: " << last_error());
      }
      out.push_back(json::parse(take(e)));
      out.back()["_seq"] = seq;
      const std::string t = out.back()["type"];
      if (t == "RUN_FINISHED" || t == "RUN_ERROR") ++ended;
    }
    agentrt_events_free(s);
    return out;
  }
};

// Waits until `done()` holds, looking again each time an event is committed on `thread` (an expiry, a job's
// delivery — what the tests wait for commits events): no sleeping, no polling. False if nothing happens for
// kLongWaitMs.
inline bool wait_on_thread(agentrt_runtime* rt, const std::string& thread, const std::function<bool()>& done) {
  if (done()) return true;
  agentrt_events* s = nullptr;
  REQUIRE_MESSAGE(agentrt_events_open(&s, rt, thread.c_str(), 0) == AGENTRT_OK, last_error());
  bool ok = false;
  for (;;) {
    char* e = nullptr;
    const int32_t rc = agentrt_events_next(&e, nullptr, s, kLongWaitMs);
    agentrt_free(e);
    if (rc != AGENTRT_OK || (ok = done())) break;
  }
  agentrt_events_free(s);
  return ok || done();
}

inline std::vector<std::string> types_of(const std::vector<json>& evs) {
  std::vector<std::string> out;
  for (const auto& e : evs) out.push_back(e["type"].get<std::string>());
  return out;
}

// The types with runs of the same streamed delta type collapsed (chunking is the model's business).
inline std::vector<std::string> shape_of(const std::vector<json>& evs) {
  std::vector<std::string> out;
  for (const auto& e : evs) {
    std::string t = e["type"];
    if (!out.empty() && out.back() == t && (t == "TEXT_MESSAGE_CONTENT" || t == "TOOL_CALL_ARGS")) continue;
    out.push_back(t);
  }
  return out;
}

}  // namespace capi_test
