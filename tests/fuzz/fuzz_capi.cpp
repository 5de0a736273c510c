// The C ABI's JSON entry points (capi/), on runtimes with the scripted demo model in a scratch directory:
// the first byte picks the entry point, the rest is its JSON argument (for a tool's answer: result_json, a
// newline, ui_json). Every call returns a status with a last error, never crashes; whatever a host tool
// answers, its turn completes and its thread's history reads back.
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "agentrt.h"
#include "fuzz_support.hpp"

namespace {

using json = nlohmann::json;

[[noreturn]] void broken(const std::string& what) { agentrt_fuzz::broken("capi", what); }

std::string take(char* s) {
  std::string out = s ? s : "";
  agentrt_free(s);
  return out;
}

// Every failure leaves a message.
int32_t checked(int32_t rc, const char* fn) {
  if (rc != AGENTRT_OK && !*agentrt_last_error()) broken(std::string(fn) + " failed without a last error");
  if (rc == AGENTRT_OK && *agentrt_last_error()) broken(std::string(fn) + " succeeded with a last error");
  return rc;
}

json base_config(const std::string& dir) {
  return json{{"data_dir", dir},        {"model", {{"type", "demo"}}}, {"workers", 2},
              {"flush_interval_ms", 1}, {"sweep_interval_ms", 50},     {"instance_lease_ms", 1000}};
}

// The runtimes' folder: a static of its own, so that a normal exit removes it (the World below is never destroyed).
const agentrt_fuzz::ScratchDir& scratch() {
  static agentrt_fuzz::ScratchDir dir("capi");
  return dir;
}

class World {
 public:
  World() : dir_(scratch()) {
    json tool_cfg = base_config(dir_.file("tool"));
    if (checked(agentrt_runtime_open(&tool_rt_, tool_cfg.dump().c_str()), "open") != AGENTRT_OK)
      broken(agentrt_last_error());
    // The demo model calls book_room for "book ..."; this one hands its calls to the input being run.
    if (agentrt_tool_register(tool_rt_, R"({"name":"book_room","approval":"never"})", &World::on_call, this, nullptr) !=
        AGENTRT_OK)
      broken(agentrt_last_error());
    json wait_cfg = base_config(dir_.file("wait"));
    wait_cfg["demo_tools"] = true;  // book_room needs approval there: turns wait for a resume
    if (agentrt_runtime_open(&wait_rt_, wait_cfg.dump().c_str()) != AGENTRT_OK) broken(agentrt_last_error());
  }
  // The runtimes live until the process exits (libFuzzer never returns from its loop).

  agentrt_runtime* tool_rt() { return tool_rt_; }
  agentrt_runtime* wait_rt() { return wait_rt_; }
  const agentrt_fuzz::ScratchDir& dir() const { return dir_; }
  std::string fresh_thread(const char* prefix) { return std::string(prefix) + "-" + std::to_string(++threads_); }

  // Starts "book a room" on a new thread of the tool runtime and returns the host tool's call handle.
  std::pair<std::string, agentrt_tool_call*> book() {
    const std::string thread = fresh_thread("fz-tool");
    const json in{{"threadId", thread}, {"userId", "u1"}, {"message", {{"role", "user"}, {"content", "book a room"}}}};
    char* out = nullptr;
    if (agentrt_turn_start(&out, tool_rt_, in.dump().c_str()) != AGENTRT_OK) broken(agentrt_last_error());
    const std::string turn = json::parse(take(out))["turnId"];
    std::unique_lock<std::mutex> lock(mutex_);
    if (!cv_.wait_for(lock, std::chrono::seconds(20), [&] { return !calls_.empty(); }))
      broken("the host tool was not called within 20 s");
    agentrt_tool_call* call = calls_.front();
    calls_.pop_front();
    return {turn, call};
  }

  // The turn's status once it has settled.
  std::string settle(agentrt_runtime* rt, const std::string& turn) {
    char* out = nullptr;
    if (agentrt_turn_wait(&out, rt, turn.c_str(), 20000) != AGENTRT_OK)
      broken("turn " + turn + " did not settle: " + agentrt_last_error());
    return json::parse(take(out))["status"];
  }

  // A turn waiting for approval on the wait runtime (a new one once the last was answered).
  std::pair<std::string, std::string> waiting() {
    if (!waiting_turn_.empty()) {
      char* out = nullptr;
      if (agentrt_turn_get(&out, wait_rt_, waiting_turn_.c_str()) != AGENTRT_OK) broken(agentrt_last_error());
      if (json::parse(take(out))["status"] == "WAITING_APPROVAL") return {waiting_turn_, approval_};
      settle(wait_rt_, waiting_turn_);
    }
    for (;;) {
      const json in{{"threadId", fresh_thread("fz-wait")},
                    {"userId", "u1"},
                    {"message", {{"role", "user"}, {"content", "book a room"}}}};
      char* out = nullptr;
      if (agentrt_turn_start(&out, wait_rt_, in.dump().c_str()) != AGENTRT_OK) continue;  // the input took it
      waiting_turn_ = json::parse(take(out))["turnId"];
      if (settle(wait_rt_, waiting_turn_) != "WAITING_APPROVAL") broken("the demo booking did not wait");
      char* t = nullptr;
      agentrt_turn_get(&t, wait_rt_, waiting_turn_.c_str());
      approval_ = json::parse(take(t))["approvalRequestId"];
      return {waiting_turn_, approval_};
    }
  }

 private:
  static void on_call(agentrt_tool_call* call, const char*, void* ud) {
    auto* self = static_cast<World*>(ud);
    {
      std::lock_guard<std::mutex> lock(self->mutex_);
      self->calls_.push_back(call);
    }
    self->cv_.notify_all();
  }

  const agentrt_fuzz::ScratchDir& dir_;
  agentrt_runtime* tool_rt_ = nullptr;
  agentrt_runtime* wait_rt_ = nullptr;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<agentrt_tool_call*> calls_;
  uint64_t threads_ = 0;
  std::string waiting_turn_, approval_;
};

World& world() {
  static World* w = new World();  // never destroyed: its runtimes outlive every input
  return *w;
}

// The answer of a host tool: the turn goes on to completion whatever it was, and its history reads back.
void answer_tool(std::string_view text, bool job) {
  World& w = world();
  auto [turn, call] = w.book();
  const std::string arg(text);
  if (job) {
    if (checked(agentrt_tool_call_start_job(call, arg.c_str()), "agentrt_tool_call_start_job") != AGENTRT_OK)
      checked(agentrt_tool_call_complete(call, "{}", nullptr), "agentrt_tool_call_complete");
  } else {
    const size_t nl = arg.find('\n');
    const std::string result = arg.substr(0, nl);
    const std::string ui = nl == std::string::npos ? std::string() : arg.substr(nl + 1);
    checked(agentrt_tool_call_complete(call, result.c_str(), nl == std::string::npos ? nullptr : ui.c_str()),
            "agentrt_tool_call_complete");
  }
  agentrt_tool_call_free(call);  // fails the call if it is still open
  const std::string status = w.settle(w.tool_rt(), turn);
  if (status != "COMPLETED") broken("a host tool's answer ended its turn " + status + ": " + arg);
  char* out = nullptr;
  char* t = nullptr;
  if (agentrt_turn_get(&t, w.tool_rt(), turn.c_str()) != AGENTRT_OK) broken(agentrt_last_error());
  const std::string thread = json::parse(take(t))["threadId"];
  if (agentrt_thread_history(&out, w.tool_rt(), thread.c_str()) != AGENTRT_OK)
    broken("the history does not read back: " + std::string(agentrt_last_error()));
  agentrt_free(out);
}

// A config from the input, its paths pointed into the scratch directory.
void open_config(std::string_view text) {
  json j = json::parse(text, nullptr, false);
  std::string cfg(text);
  if (!j.is_discarded() && j.is_object()) {
    j["data_dir"] = world().dir().file("open");
    if (auto s = j.find("store"); s != j.end() && s->is_object()) {
      if (s->contains("path")) (*s)["path"] = ":memory:";
      if (s->contains("document_index_path")) (*s)["document_index_path"] = ":memory:";
    }
    if (auto o = j.find("objects"); o != j.end() && o->is_object() && o->contains("root"))
      (*o)["root"] = world().dir().file("open-objects");
    cfg = j.dump();
  } else if (!j.is_discarded()) {
    return;  // not an object: refused before anything is opened, as the text path shows
  }
  agentrt_runtime* rt = nullptr;
  if (checked(agentrt_runtime_open(&rt, cfg.c_str()), "agentrt_runtime_open") == AGENTRT_OK) agentrt_runtime_free(rt);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  World& w = world();
  const std::string arg(agentrt_fuzz::text_of(data + 1, size - 1));
  char* out = nullptr;
  switch (data[0] % 9) {
    case 0: {
      if (checked(agentrt_turn_start(&out, w.wait_rt(), arg.c_str()), "agentrt_turn_start") == AGENTRT_OK) {
        const std::string turn = json::parse(take(out))["turnId"];
        w.settle(w.wait_rt(), turn);
      }
      break;
    }
    case 1: {
      auto [turn, approval] = w.waiting();
      if (checked(agentrt_turn_resume(&out, w.wait_rt(), turn.c_str(), approval.c_str(), arg.c_str()),
                  "agentrt_turn_resume") == AGENTRT_OK)
        agentrt_free(out);
      break;
    }
    case 2: {
      if (checked(agentrt_tool_register(
                      w.tool_rt(), arg.c_str(),
                      [](agentrt_tool_call* c, const char*, void*) {
                        agentrt_tool_call_fail(c, "fuzz", "not run");
                        agentrt_tool_call_free(c);
                      },
                      nullptr, nullptr),
                  "agentrt_tool_register") == AGENTRT_OK) {
        const std::string name = json::parse(arg)["name"];
        if (agentrt_tool_unregister(w.tool_rt(), name.c_str()) != AGENTRT_OK) broken(agentrt_last_error());
      }
      break;
    }
    case 3:
      if (checked(agentrt_job_update(&out, w.tool_rt(), "job_missing", arg.c_str()), "agentrt_job_update") ==
          AGENTRT_OK)
        broken("an unknown job was updated");
      break;
    case 4:
      if (checked(agentrt_job_complete(&out, w.tool_rt(), "job_missing", arg.c_str()), "agentrt_job_complete") ==
          AGENTRT_OK)
        broken("an unknown job was completed");
      break;
    case 5: answer_tool(arg, false); break;
    case 6: answer_tool(arg, true); break;
    case 7: open_config(arg); break;
    case 8: {
      static const char audio[] = "RIFF";
      if (checked(agentrt_transcribe(&out, w.tool_rt(), audio, 4, "audio/wav", arg.c_str()), "agentrt_transcribe") ==
          AGENTRT_OK)
        agentrt_free(out);
      break;
    }
  }
  return 0;
}
