// StreamQueue: the frames of one open event stream on their way from the feeds' threads to its connection,
// bounded by HttpLimits::stream_buffer_bytes.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "http_server.hpp"

namespace agentrt::server {

class HttpConnection;

// ": keep-alive\n\n": the comment a stream writes during silence and last when the server stops.
const SharedChunk& keepalive_chunk();

// The writing end of a stream (EventStreamWriter) and the queue its connection writes from. A push over the
// bound drops the stream (its connection closes). Thread-safe: push()/finish() from any thread, take() on the
// connection's strand.
class StreamQueue final : public EventStreamWriter {
 public:
  StreamQueue(std::weak_ptr<HttpConnection> c, size_t limit) : conn_(std::move(c)), limit_(limit) {}

  using EventStreamWriter::push;
  bool push(const SharedChunk* chunks, size_t n) override;
  void finish(bool keepalive) override;
  bool ended() const override;
  bool has_room() override;

  // After a write: true once when has_room() said false and there is room again.
  bool drained();
  // On the strand: takes what is queued (up to a write's worth); `last`: the stream is finished and nothing is left
  // after what is taken (its last chunk goes in the same write).
  std::vector<SharedChunk> take(bool& last);
  bool idle() const;
  void mark_ended();

 private:
  void schedule();

  std::weak_ptr<HttpConnection> conn_;
  const size_t limit_;
  mutable std::mutex mutex_;
  std::deque<SharedChunk> queue_;
  size_t queued_bytes_ = 0;
  bool ended_ = false;
  bool finishing_ = false;
  bool scheduled_ = false;
  bool want_drain_ = false;
};

}  // namespace agentrt::server
