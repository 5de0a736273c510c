// Tracer: makes the runtime's spans (ids, parent-based sampling with the ratio applied at the root) and hands the
// finished ones to its exporter. Off (TracingConfig::otlp_endpoint empty) it makes empty spans only, at the cost of
// a branch. It also keeps the spans that outlive a run (an approval wait, a job) until they end. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "agentrt/log.hpp"
#include "agentrt/tracing.hpp"
#include "tracing/span.hpp"
#include "tracing/span_exporter.hpp"

namespace agentrt {
inline namespace v1 {
namespace trace {

class Tracer {
 public:
  using Log = std::function<void(LogLevel, std::string_view)>;
  // Starts the export thread when the config names an endpoint. Error(invalid_argument) for a config out of range.
  Tracer(TracingConfig config, Log log);
  ~Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  bool enabled() const noexcept { return exporter_ != nullptr; }
  const TracingConfig& config() const noexcept { return cfg_; }
  bool capture_content() const noexcept { return enabled() && cfg_.capture_content; }

  // A new span, child of `parent` when it is valid (its sampled flag decides), else the root of a new trace
  // (sample_ratio decides), named "`operation` `target`" (or `operation` alone when `target` is empty: the
  // conventions' names, made without a temporary string). `start_ns`: 0 = now.
  Span start(std::string_view operation, std::string_view target, SpanKind kind,
             const std::optional<SpanContext>& parent, int64_t start_ns = 0);
  // A span begun elsewhere (another process, before a restart) with these ids: ended here, it is exported as that
  // span. It records when `context` is valid and sampled.
  Span reopen(std::string_view name, SpanKind kind, const SpanContext& context,
              const std::array<uint8_t, 8>& parent_span_id, int64_t start_ns);

  // Keeps an open span under `key` until take() (at most kMaxHeld: the oldest beyond are dropped unexported).
  void hold(const std::string& key, Span span);
  // The span held under `key` (an empty one when none is).
  Span take(const std::string& key);

  // SpanExporter::flush (true at once when tracing is off).
  bool flush(std::chrono::milliseconds timeout) { return exporter_ ? exporter_->flush(timeout) : true; }
  // Sends what is queued (within export_timeout) and joins the export thread; spans ended later are dropped.
  // Held spans are dropped unexported (another process may end them). Idempotent.
  void shutdown();
  ExportStats stats() const;

  // Span::end's way in: queues a copy of the span for export (dropped and counted when the queue is full).
  void submit(const SpanData& span);

  static constexpr size_t kMaxHeld = 4096;

 private:
  // A span with these ids that records when sampled.
  Span open(std::string_view operation, std::string_view target, SpanKind kind, const SpanContext& context,
            const std::array<uint8_t, 8>& parent_span_id, int64_t start_ns);

  TracingConfig cfg_;
  std::unique_ptr<SpanExporter> exporter_;  // null when off
  mutable std::mutex held_mutex_;
  std::map<std::string, std::pair<uint64_t, Span>> held_;  // key -> (order, span), under held_mutex_
  uint64_t held_order_ = 0;                                // under held_mutex_
};

}  // namespace trace
}  // namespace v1
}  // namespace agentrt
