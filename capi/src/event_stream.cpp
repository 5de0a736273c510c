#include "event_stream.hpp"

#include <mutex>

namespace agentrt::capi {

EventStream::Pull EventStream::next(std::chrono::milliseconds timeout, StoredEvent& out) {
  std::shared_lock lock(mutex_);
  if (closed_.load() || !sub_) return Pull::closed;
  auto e = sub_->next(timeout);
  if (e) {
    out = std::move(*e);
    return Pull::event;
  }
  return (closed_.load() || sub_->closed()) ? Pull::closed : Pull::timeout;
}

void EventStream::close() {
  closed_.store(true);
  std::shared_lock lock(mutex_);
  if (sub_) sub_->close();
}

void EventStream::detach() {
  close();
  std::unique_lock lock(mutex_);
  sub_.reset();
}

}  // namespace agentrt::capi
