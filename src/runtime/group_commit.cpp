#include "runtime/group_commit.hpp"

#include <algorithm>
#include "util/thread_name.hpp"

namespace agentrt {
inline namespace v1 {

GroupCommit::GroupCommit(std::chrono::milliseconds flush_interval)
    : interval_(flush_interval), thread_([this] { loop(); }) {}

GroupCommit::~GroupCommit() { stop(); }

void GroupCommit::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void GroupCommit::drop_expired() {
  live_.erase(std::remove_if(live_.begin(), live_.end(), [](const auto& w) { return w.expired(); }), live_.end());
}

void GroupCommit::watch(const std::shared_ptr<RunEmitter>& em) {
  std::lock_guard<std::mutex> lock(mutex_);
  drop_expired();
  live_.push_back(em);
  // Only a flusher idle for a while sleeps without a deadline; otherwise it looks at the list on its next
  // tick, long before anything this emitter stages is due (flush_interval).
  if (sleeping_) cv_.notify_one();
}

void GroupCommit::loop() {
  name_this_thread("agentrt-commit");
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    drop_expired();
    if (stop_) return;
    if (live_.empty()) {
      // Nothing runs: after a second of that, sleep until a run registers its emitter (no wake-ups while
      // idle). Between runs that follow each other closely it keeps ticking instead, so that starting a
      // run costs no wake-up of this thread (a context switch on the run's path).
      if (std::chrono::steady_clock::now() - busy_at_ >= std::chrono::seconds(1)) {
        sleeping_ = true;
        cv_.wait(lock, [&] { return stop_ || !live_.empty(); });
        sleeping_ = false;
        continue;
      }
    } else {
      busy_at_ = std::chrono::steady_clock::now();
    }
    if (cv_.wait_for(lock, interval_ / 2 + std::chrono::milliseconds(1), [&] { return stop_; })) return;
    // The emitters are asked what they hold with this lock released: an emitter's own lock is held through its
    // commit (a checkpoint's fsyncs, milliseconds), and watch() (every run's start) must not wait behind that.
    std::vector<std::shared_ptr<RunEmitter>> live;
    live.reserve(live_.size());
    for (const auto& w : live_)
      if (auto em = w.lock()) live.push_back(std::move(em));
    lock.unlock();
    const auto now = std::chrono::steady_clock::now();
    // flush_in_background() is noexcept: a failure stays with the emitter and its run.
    for (auto& em : live)
      if (em->has_pending() && now - em->pending_since() >= interval_) em->flush_in_background();
    live.clear();
    lock.lock();
  }
}

}  // namespace v1
}  // namespace agentrt
