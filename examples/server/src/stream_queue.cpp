#include "stream_queue.hpp"

#include "http_connection.hpp"

namespace agentrt::server {

namespace {

// The connections whose writes a StreamPushBatch on this thread holds back.
struct HeldPumps {
  int depth = 0;
  std::vector<std::shared_ptr<HttpConnection>> connections;
};
thread_local HeldPumps t_held;

}  // namespace

StreamPushBatch::StreamPushBatch() { ++t_held.depth; }

StreamPushBatch::~StreamPushBatch() {
  if (--t_held.depth > 0 || t_held.connections.empty()) return;
  std::vector<std::shared_ptr<HttpConnection>> held;
  held.swap(t_held.connections);
  HttpConnection::pump_all(std::move(held));
}

const SharedChunk& keepalive_chunk() {
  static const SharedChunk chunk = std::make_shared<const StreamChunk>(StreamChunk{": keep-alive\n\n", 0, {}, false});
  return chunk;
}

bool StreamQueue::push(const SharedChunk* chunks, size_t n) {
  bool drop = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ended_ || finishing_) return false;
    for (size_t i = 0; i < n && !drop; ++i) {
      const size_t size = chunks[i]->bytes.size();
      if (queued_bytes_ > 0 && queued_bytes_ + size > limit_) {  // one frame always fits
        ended_ = true;
        drop = true;
      } else {
        queued_bytes_ += size;
        queue_.push_back(chunks[i]);
      }
    }
  }
  if (drop) {
    if (auto c = conn_.lock()) c->close_async();
    return false;
  }
  schedule();
  return true;
}

void StreamQueue::finish(bool keepalive) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ended_ || finishing_) return;
    if (keepalive) {
      queue_.push_back(keepalive_chunk());
      queued_bytes_ += keepalive_chunk()->bytes.size();
    }
    finishing_ = true;
  }
  schedule();
}

bool StreamQueue::ended() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ended_;
}

bool StreamQueue::has_room() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (queued_bytes_ < limit_ / 2) return true;
  want_drain_ = true;
  return false;
}

bool StreamQueue::drained() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!want_drain_ || queued_bytes_ >= limit_ / 2) return false;
  want_drain_ = false;
  return true;
}

std::vector<SharedChunk> StreamQueue::take(bool& last) {
  std::lock_guard<std::mutex> lock(mutex_);
  scheduled_ = false;
  std::vector<SharedChunk> out;
  size_t bytes = 0;
  while (!queue_.empty() && out.size() < 256 && bytes < (256u << 10)) {
    bytes += queue_.front()->bytes.size();
    out.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  queued_bytes_ -= bytes;
  last = queue_.empty() && finishing_ && !ended_;  // written with what is taken, if anything
  if (last) ended_ = true;
  return out;
}

bool StreamQueue::idle() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.empty();
}

void StreamQueue::mark_ended() {
  std::lock_guard<std::mutex> lock(mutex_);
  ended_ = true;
  queue_.clear();
  queued_bytes_ = 0;
}

void StreamQueue::schedule() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (scheduled_) return;
    scheduled_ = true;
  }
  auto c = conn_.lock();
  if (!c) return;
  if (t_held.depth > 0) {
    t_held.connections.push_back(std::move(c));
    return;
  }
  c->pump_async();
}

}  // namespace agentrt::server
