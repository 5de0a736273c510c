#include "tracing/span_exporter.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "tracing/otlp_json.hpp"

namespace agentrt {
inline namespace v1 {
namespace trace {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// At most one log line about dropped spans this often (the count since the last one is in it).
constexpr milliseconds kLogEvery{30'000};
// Before the one retry of a 429/503.
constexpr milliseconds kRetryPause{100};

}  // namespace

SpanExporter::SpanExporter(TracingConfig config, Log log)
    : cfg_(std::move(config)), log_(std::move(log)), http_(net::HttpClient::Options{2, "agentrt/0.1"}) {
  thread_ = std::thread([this] { run(); });
}

SpanExporter::~SpanExporter() { stop(); }

bool SpanExporter::enqueue(std::unique_ptr<SpanData> span) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || queue_.size() >= cfg_.max_queue_spans) {
      ++stats_.dropped_full;
      return false;
    }
    queue_.push_back(std::move(span));
    wake = queue_.size() >= cfg_.max_batch_spans;
  }
  if (wake) cv_.notify_one();
  return true;
}

void SpanExporter::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stopping_) {
      stopping_ = true;
      stop_deadline_ = Clock::now() + cfg_.export_timeout;
    }
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

ExportStats SpanExporter::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void SpanExporter::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait_for(lock, cfg_.export_interval, [&] { return stopping_ || queue_.size() >= cfg_.max_batch_spans; });
    if (queue_.empty()) {
      if (stopping_) return;
      continue;
    }
    Batch batch;
    const size_t n = std::min(queue_.size(), cfg_.max_batch_spans);
    batch.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    const auto deadline = stopping_ ? stop_deadline_ : Clock::now() + cfg_.export_timeout;
    lock.unlock();
    const bool ok = Clock::now() < deadline && post(batch, deadline);
    lock.lock();
    if (ok) {
      stats_.exported += batch.size();
    } else {
      stats_.dropped_failed += batch.size();
      ++stats_.failed_requests;
    }
    if (stopping_ && Clock::now() >= stop_deadline_) {
      // Out of time: what is left is dropped (counted) so that the runtime's destruction stays bounded.
      stats_.dropped_failed += queue_.size();
      if (!queue_.empty()) unlogged_drops_ += queue_.size();
      queue_.clear();
    }
  }
}

bool SpanExporter::post(const Batch& batch, Clock::time_point deadline) {
  net::HttpRequest req;
  req.method = "POST";
  req.url = cfg_.otlp_endpoint;
  req.headers.emplace_back("Content-Type", "application/json");
  for (const auto& [k, v] : cfg_.headers) req.headers.emplace_back(k, v);
  req.body = otlp_json(batch, cfg_.service_name);
  req.max_body_bytes = 1 << 20;
  std::string why;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      why = "the export timed out";
      break;
    }
    req.request_timeout = left;
    req.connect_timeout = left;
    req.idle_timeout = left;
    try {
      const net::HttpResponse resp = http_.send(req);
      if (resp.status >= 200 && resp.status < 300) return true;
      why = fmt::format("the collector answered HTTP {}", resp.status);
      if ((resp.status != 429 && resp.status != 503) || attempt > 0) break;
      // Once more after a short pause, unless the runtime is stopping meanwhile.
      std::unique_lock<std::mutex> lock(mutex_);
      if (cv_.wait_for(lock, kRetryPause, [&] { return stopping_; }) && Clock::now() >= stop_deadline_) break;
    } catch (const std::exception& e) {
      why = e.what();
      break;
    }
  }
  dropped(batch.size(), why);
  return false;
}

void SpanExporter::dropped(size_t n, std::string_view why) {
  unlogged_drops_ += n;
  const auto now = Clock::now();
  if (last_log_ != Clock::time_point{} && now - last_log_ < kLogEvery) return;
  last_log_ = now;
  if (log_)
    log_(LogLevel::warn,
         fmt::format("{} span(s) dropped: could not export them to the collector: {}", unlogged_drops_, why));
  unlogged_drops_ = 0;
}

}  // namespace trace
}  // namespace v1
}  // namespace agentrt
