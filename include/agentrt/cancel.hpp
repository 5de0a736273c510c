// CancelToken: a shared flag that a run, a model stream or an HTTP transfer polls or waits on.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

namespace agentrt {
inline namespace v1 {

// Thread-safe: cancel() from any thread; waiters wake at once.
class CancelToken {
 public:
  CancelToken() : state_(std::make_shared<State>()) {}
  void cancel() const {
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      state_->cancelled.store(true, std::memory_order_release);
    }
    state_->cv.notify_all();
  }
  bool cancelled() const noexcept { return state_->cancelled.load(std::memory_order_acquire); }
  // Sleeps up to `d`; returns true when cancelled (early or not).
  template <class Rep, class Period>
  bool wait_for(std::chrono::duration<Rep, Period> d) const {
    std::unique_lock<std::mutex> lock(state_->mutex);
    return state_->cv.wait_for(lock, d, [&] { return state_->cancelled.load(); });
  }

 private:
  struct State {
    std::atomic<bool> cancelled{false};
    std::mutex mutex;
    std::condition_variable cv;
  };
  std::shared_ptr<State> state_;
};

}  // namespace v1
}  // namespace agentrt
