// SpanExporter: the background thread that encodes finished spans as OTLP/HTTP JSON and POSTs them to the collector.
// A run's thread packs a span into the queue's bytes as it ends (span_record: the SpanData stays with that thread for
// its next span); the export thread takes the queue's bytes a batch at a time, unpacks each span into a SpanData of its
// own, encodes and sends it. It never blocks its callers: enqueue() drops (and counts) a span when the queue is full,
// and an export that fails (connection refused, timeout, an error status) drops its batch with a rate-limited log
// line; 429 and 503 are tried once more.
// Thread-safe: enqueue() and stats() from any thread; stop() once, from the owner, which joins the thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

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

  // Queues a copy of a finished span; false (and counted) when the queue is full or the exporter has stopped.
  bool enqueue(const SpanData& span) noexcept;
  // Sends every span queued before the call now, without waiting for export_interval, and waits until the
  // collector has answered for each (exported, or dropped and counted) or `timeout` passed; true when it did.
  bool flush(std::chrono::milliseconds timeout);
  // Sends what is queued within config.export_timeout (the rest is dropped and counted), then joins the thread.
  // Idempotent.
  void stop();
  ExportStats stats() const;

 private:
  void run();
  // POSTs one request before `deadline`; true when the collector took it.
  bool post(const std::string& body, std::chrono::steady_clock::time_point deadline);
  // Ends body_ and sends it: its `spans` are then exported or dropped, and counted. Called without mutex_.
  void send_body(size_t spans);
  void dropped(size_t n, std::string_view why);

  const TracingConfig cfg_;
  const Log log_;
  net::HttpClient http_;

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  const std::string prefix_;   // otlp_prefix(service_name)
  const size_t chunk_;         // queued spans that wake the export thread
  std::string pending_;        // under mutex_: spans ended, not taken (packed, oldest first)
  size_t pending_count_ = 0;   // under mutex_: how many spans pending_ holds
  size_t carried_ = 0;         // under mutex_: spans in the request the thread is building (a full one goes at once)
  bool flush_wanted_ = false;  // under mutex_: send pending_ without waiting
  std::chrono::steady_clock::time_point oldest_pending_;  // under mutex_: when pending_ last stopped being empty
  bool stopping_ = false;                                 // under mutex_
  std::chrono::steady_clock::time_point stop_deadline_;   // under mutex_, once stopping_
  ExportStats stats_;                                     // under mutex_
  uint64_t accepted_ = 0;                                 // under mutex_: spans ever queued
  uint64_t settled_ = 0;                                  // under mutex_: of those, exported or dropped
  std::condition_variable settled_cv_;                    // settled_ grew
  std::chrono::steady_clock::time_point last_log_{};      // the export thread's
  uint64_t unlogged_drops_ = 0;                           // the export thread's
  std::string last_failure_;                              // the export thread's: why the last post failed
  std::string body_;                                      // the export thread's: the request being sent
  std::thread thread_;
};

}  // namespace trace
}  // namespace v1
}  // namespace agentrt
