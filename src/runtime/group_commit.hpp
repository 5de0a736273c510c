// Group commit: one background thread that commits what live runs stage (streamed deltas) once it has waited
// flush_interval, so a streaming run costs one transaction per interval, not one per delta. A commit failure
// stays with its emitter (its run ends with it); the flusher goes on with the others. Thread-safe: watch()
// from any thread; stop() once, from the owner.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "pipeline/run_emitter.hpp"

namespace agentrt {
inline namespace v1 {

class GroupCommit {
 public:
  explicit GroupCommit(std::chrono::milliseconds flush_interval);
  ~GroupCommit();  // stop()
  GroupCommit(const GroupCommit&) = delete;
  GroupCommit& operator=(const GroupCommit&) = delete;

  // Commits what `em` stages, in time, while `em` lives (held weakly).
  void watch(const std::shared_ptr<RunEmitter>& em);
  void stop();

 private:
  void loop();
  void drop_expired();  // under mutex_

  const std::chrono::milliseconds interval_;
  std::mutex mutex_;  // never held while an emitter's lock is taken
  std::condition_variable cv_;
  std::vector<std::weak_ptr<RunEmitter>> live_;      // under mutex_
  bool stop_ = false;                                // under mutex_
  bool sleeping_ = false;                            // in its wait without a deadline (under mutex_)
  std::chrono::steady_clock::time_point busy_at_{};  // last tick with a live emitter (flusher thread)
  std::thread thread_;
};

}  // namespace v1
}  // namespace agentrt
