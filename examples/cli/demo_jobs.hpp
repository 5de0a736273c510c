// DemoJobs: an opt-in, offline demonstration of external jobs for the example hosts (the CLI and the server).
// Not part of the runtime, and off unless a host asks for it (`agentrt --demo-jobs MS`, `agentrt-server
// --demo-jobs MS`).
//
// - The tool `render_preview(scene, confirm?)` answers "started job J" (ToolCompletion::start_job) and this
//   object finishes J later from its own thread, the way an external render service would report back: half
//   way a progress report (Runtime::update_job), at the end Runtime::complete_job with a result and an asset
//   reference. With `confirm:true` the job first asks the person (a "confirmation" interrupt).
// - wrap_model() puts a thin layer over the offline demo model: a message starting with "render" leads to a
//   render_preview call ("render beach"; "render beach confirm" asks first); everything else goes to the
//   demo model unchanged.
// - on_cancelled() belongs in RuntimeConfig::job_cancel_hook: a cancelled or expired job is not finished.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "agentrt/runtime.hpp"
#include "agentrt/scripted_model.hpp"

namespace agentrt::examples {

// Thread-safe.
class DemoJobs : public std::enable_shared_from_this<DemoJobs> {
 public:
  static constexpr const char* kToolName = "render_preview";

  // `duration`: how long a render takes from start to completion (> 0). `log` receives the failures of the
  // completing thread (optional).
  static std::shared_ptr<DemoJobs> create(std::chrono::milliseconds duration,
                                          std::function<void(const std::string&)> log = {});
  ~DemoJobs();
  DemoJobs(const DemoJobs&) = delete;
  DemoJobs& operator=(const DemoJobs&) = delete;

  // The runtime the jobs are reported to. Call once, after constructing the runtime, before its first turn.
  void attach(Runtime* runtime);
  // Stops the completing thread (jobs not finished yet stay running in the store, until they expire).
  // Call it before the runtime is destroyed.
  void stop();

  ToolSpec tool();
  std::shared_ptr<ModelProvider> wrap_model(std::shared_ptr<ModelProvider> demo, ScriptedModelOptions options = {});
  void on_cancelled(const JobRecord& job);

  // The jobs this object will still report on.
  size_t pending() const;

 private:
  DemoJobs(std::chrono::milliseconds duration, std::function<void(const std::string&)> log);
  void schedule(const std::string& job_id, const std::string& scene);
  void work();

  struct Pending {
    std::string scene;
    std::chrono::steady_clock::time_point started;
    bool progress_sent = false;
  };

  const std::chrono::milliseconds duration_;
  const std::function<void(const std::string&)> log_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::string, Pending> jobs_;  // by job id
  Runtime* rt_ = nullptr;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace agentrt::examples
