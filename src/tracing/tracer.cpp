#include "tracing/tracer.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "agentrt/error.hpp"

namespace agentrt {
inline namespace v1 {
namespace trace {

Tracer::Tracer(TracingConfig config, Log log) : cfg_(std::move(config)) {
  if (!(cfg_.sample_ratio >= 0 && cfg_.sample_ratio <= 1))
    throw Error(ErrorCode::invalid_argument,
                fmt::format("tracing: sample_ratio must be from 0 to 1, not {}", cfg_.sample_ratio));
  if (cfg_.max_queue_spans < 1 || cfg_.max_batch_spans < 1)
    throw Error(ErrorCode::invalid_argument, "tracing: max_queue_spans and max_batch_spans must be positive");
  if (cfg_.export_interval.count() <= 0 || cfg_.export_timeout.count() <= 0)
    throw Error(ErrorCode::invalid_argument, "tracing: export_interval and export_timeout must be positive");
  if (!cfg_.otlp_endpoint.empty()) exporter_ = std::make_unique<SpanExporter>(cfg_, std::move(log));
}

Tracer::~Tracer() { shutdown(); }

Span Tracer::start(std::string_view operation, std::string_view target, SpanKind kind,
                   const std::optional<SpanContext>& parent, int64_t start_ns) {
  if (!exporter_) return Span{};
  const bool child = parent && parent->valid();
  SpanContext ctx;
  ctx.trace_id = child ? parent->trace_id : new_trace_id();
  ctx.span_id = new_span_id();
  ctx.sampled = child ? parent->sampled : sample_trace(ctx.trace_id, cfg_.sample_ratio);
  return open(operation, target, kind, ctx, child ? parent->span_id : std::array<uint8_t, 8>{}, start_ns);
}

Span Tracer::reopen(std::string_view name, SpanKind kind, const SpanContext& context,
                    const std::array<uint8_t, 8>& parent_span_id, int64_t start_ns) {
  if (!exporter_ || !context.valid()) return Span{};
  return open(name, {}, kind, context, parent_span_id, start_ns);
}

Span Tracer::open(std::string_view operation, std::string_view target, SpanKind kind, const SpanContext& context,
                  const std::array<uint8_t, 8>& parent_span_id, int64_t start_ns) {
  Span s;
  s.tracer_ = this;
  s.ctx_ = context;
  if (!s.ctx_.sampled) return s;
  s.data_ = new_span_data();
  s.data_->context = s.ctx_;
  s.data_->parent_span_id = parent_span_id;
  s.data_->name.assign(operation);
  if (!target.empty()) s.data_->name.append(" ").append(target);
  s.data_->kind = kind;
  s.data_->start_ns = start_ns ? start_ns : now_ns();
  s.data_->attributes.reserve(1024);  // what the runtime's spans carry, in one allocation (kept when pooled)
  return s;
}

void Tracer::hold(const std::string& key, Span span) {
  if (!span.recording() && !span.context().valid()) return;
  std::lock_guard<std::mutex> lock(held_mutex_);
  held_[key] = {++held_order_, std::move(span)};
  if (held_.size() <= kMaxHeld) return;
  auto oldest = std::min_element(held_.begin(), held_.end(),
                                 [](const auto& a, const auto& b) { return a.second.first < b.second.first; });
  oldest->second.second.discard();
  held_.erase(oldest);
}

Span Tracer::take(const std::string& key) {
  std::lock_guard<std::mutex> lock(held_mutex_);
  auto it = held_.find(key);
  if (it == held_.end()) return Span{};
  Span s = std::move(it->second.second);
  held_.erase(it);
  return s;
}

void Tracer::shutdown() {
  {
    std::lock_guard<std::mutex> lock(held_mutex_);
    for (auto& [key, entry] : held_) entry.second.discard();
    held_.clear();
  }
  if (exporter_) exporter_->stop();
}

ExportStats Tracer::stats() const { return exporter_ ? exporter_->stats() : ExportStats{}; }

void Tracer::submit(const SpanData& span) {
  if (exporter_) exporter_->enqueue(span);
}

}  // namespace trace
}  // namespace v1
}  // namespace agentrt
