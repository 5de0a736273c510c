// SpanExporter: the background thread that batches finished spans and POSTs them to the collector as OTLP/HTTP
// JSON. It never blocks its callers: enqueue() drops (and counts) a span when the queue is full, and an export that
// fails (connection refused, timeout, an error status) drops its batch with a rate-limited log line; 429 and 503
// are tried once more. Thread-safe: enqueue() and stats() from any thread; stop() once, from the owner, which joins
// the thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "agentrt/log.hpp"
#include "agentrt/tracing.hpp"
#include "net/http_client.hpp"
#include "tracing/span.hpp"

namespace agentrt {
inline namespace v1 {
namespace trace {

struct ExportStats {
  uint64_t exported = 0;         // spans the collector accepted
  uint64_t dropped_full = 0;     // spans dropped because the queue was full
  uint64_t dropped_failed = 0;   // spans of batches whose export failed (or that a stop left unsent)
  uint64_t failed_requests = 0;  // export requests that failed
};

class SpanExporter {
 public:
  using Log = std::function<void(LogLevel, std::string_view)>;
  SpanExporter(TracingConfig config, Log log);
  ~SpanExporter();
  SpanExporter(const SpanExporter&) = delete;
  SpanExporter& operator=(const SpanExporter&) = delete;

  // Queues a finished span; false (and counted) when the queue is full or the exporter has stopped.
  bool enqueue(std::unique_ptr<SpanData> span);
  // Sends what is queued within config.export_timeout (the rest is dropped and counted), then joins the thread.
  // Idempotent.
  void stop();
  ExportStats stats() const;

 private:
  using Batch = std::vector<std::unique_ptr<SpanData>>;
  void run();
  // POSTs one batch before `deadline`; true when the collector took it.
  bool post(const Batch& batch, std::chrono::steady_clock::time_point deadline);
  void dropped(size_t n, std::string_view why);

  const TracingConfig cfg_;
  const Log log_;
  net::HttpClient http_;

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<SpanData>> queue_;          // under mutex_
  bool stopping_ = false;                                // under mutex_
  std::chrono::steady_clock::time_point stop_deadline_;  // under mutex_, once stopping_
  ExportStats stats_;                                    // under mutex_
  std::chrono::steady_clock::time_point last_log_{};     // the export thread's
  uint64_t unlogged_drops_ = 0;                          // the export thread's
  std::thread thread_;
};

}  // namespace trace
}  // namespace v1
}  // namespace agentrt
