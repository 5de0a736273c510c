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
// Spans the export thread takes at a time (fewer when a request holds fewer).
constexpr size_t kChunk = 64;
// Before the one retry of a 429/503.
constexpr milliseconds kRetryPause{100};

}  // namespace

SpanExporter::SpanExporter(TracingConfig config, Log log)
    : cfg_(std::move(config)),
      log_(std::move(log)),
      http_(net::HttpClient::Options{2, "agentrt/0.1"}),
      prefix_(otlp_prefix(cfg_.service_name)),
      chunk_(std::min<size_t>(kChunk, cfg_.max_batch_spans)) {
  thread_ = std::thread([this] { run(); });
}

SpanExporter::~SpanExporter() { stop(); }

bool SpanExporter::enqueue(std::unique_ptr<SpanData>& span) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || pending_.size() >= cfg_.max_queue_spans) {
      ++stats_.dropped_full;
      return false;
    }
    if (pending_.empty()) oldest_pending_ = Clock::now();
    pending_.push_back(std::move(span));
    ++accepted_;
    wake = pending_.size() == chunk_;
  }
  if (wake) cv_.notify_one();
  return true;
}

void SpanExporter::take_spent(std::vector<std::unique_ptr<SpanData>>& into, size_t max) {
  std::lock_guard<std::mutex> lock(mutex_);
  while (max-- > 0 && !spent_.empty()) {
    into.push_back(std::move(spent_.back()));
    spent_.pop_back();
  }
}

bool SpanExporter::flush(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t target = accepted_;
  if (settled_ >= target) return true;
  flush_wanted_ = true;
  cv_.notify_one();
  return settled_cv_.wait_for(lock, timeout, [&] { return settled_ >= target; });
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
  // Spent spans kept for the run threads; beyond, they are freed here.
  const size_t keep_spent = std::min(cfg_.max_queue_spans, 4 * chunk_);
  std::vector<std::unique_ptr<SpanData>> chunk;
  size_t in_body = 0;              // spans encoded into body_, not sent yet
  Clock::time_point body_since{};  // when the first of them was encoded
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    // export_interval from the oldest span not sent: the first in the request being built, else the first queued.
    const Clock::time_point oldest =
        in_body > 0 ? body_since : (pending_.empty() ? Clock::time_point{} : oldest_pending_);
    auto wait = cfg_.export_interval;
    if (oldest != Clock::time_point{})
      wait = std::max(milliseconds(0),
                      cfg_.export_interval - std::chrono::duration_cast<milliseconds>(Clock::now() - oldest));
    cv_.wait_for(lock, wait, [&] { return stopping_ || flush_wanted_ || pending_.size() >= chunk_; });
    // Spans come out a chunk at a time, however large the request they go in: they go back to the run threads
    // soon, and few are ever in flight (a run touches less memory that is not in its caches).
    const size_t n = std::min(pending_.size(), cfg_.max_batch_spans - in_body);
    chunk.assign(std::make_move_iterator(pending_.begin()), std::make_move_iterator(pending_.begin() + n));
    pending_.erase(pending_.begin(), pending_.begin() + n);
    const bool flushing = stopping_ || flush_wanted_;
    const Clock::time_point queued_since = oldest_pending_;
    lock.unlock();
    if (!chunk.empty() && in_body == 0) {
      body_.assign(prefix_);
      body_since = queued_since;
    }
    for (const auto& span : chunk) {
      if (in_body++ > 0) body_ += ',';
      append_span_json(body_, *span);
    }
    const bool due = in_body > 0 &&
                     (in_body >= cfg_.max_batch_spans || flushing || Clock::now() - body_since >= cfg_.export_interval);
    lock.lock();
    for (auto& span : chunk)
      if (spent_.size() < keep_spent) spent_.push_back(std::move(span));
    chunk.clear();  // what was not kept is freed here
    if (due) {
      const auto deadline = stopping_ ? stop_deadline_ : Clock::now() + cfg_.export_timeout;
      lock.unlock();
      body_ += kOtlpSuffix;
      bool ok = false;
      if (Clock::now() < deadline)
        ok = post(body_, deadline);
      else
        last_failure_ = "the export timed out";
      if (!ok) dropped(in_body, last_failure_);
      lock.lock();
      if (ok) {
        stats_.exported += in_body;
      } else {
        stats_.dropped_failed += in_body;
        ++stats_.failed_requests;
      }
      settled_ += in_body;
      in_body = 0;
    }
    if (stopping_ && Clock::now() >= stop_deadline_) {
      // Out of time: what is left is dropped (counted) so that the runtime's destruction stays bounded.
      const size_t left = pending_.size() + in_body;
      stats_.dropped_failed += left;
      unlogged_drops_ += left;
      settled_ += left;
      pending_.clear();
      in_body = 0;
    }
    settled_cv_.notify_all();
    if (pending_.empty() && in_body == 0) {
      flush_wanted_ = false;
      if (stopping_) return;
    }
  }
}

bool SpanExporter::post(const std::string& body, Clock::time_point deadline) {
  net::HttpRequest req;
  req.method = "POST";
  req.url = cfg_.otlp_endpoint;
  req.headers.emplace_back("Content-Type", "application/json");
  for (const auto& [k, v] : cfg_.headers) req.headers.emplace_back(k, v);
  req.body_view = body;
  req.max_body_bytes = 1 << 20;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      last_failure_ = "the export timed out";
      break;
    }
    req.request_timeout = left;
    req.connect_timeout = left;
    req.idle_timeout = left;
    try {
      const net::HttpResponse resp = http_.send(req);
      if (resp.status >= 200 && resp.status < 300) return true;
      last_failure_ = fmt::format("the collector answered HTTP {}", resp.status);
      if ((resp.status != 429 && resp.status != 503) || attempt > 0) break;
      // Once more after a short pause, unless the runtime is stopping meanwhile.
      std::unique_lock<std::mutex> lock(mutex_);
      if (cv_.wait_for(lock, kRetryPause, [&] { return stopping_; }) && Clock::now() >= stop_deadline_) break;
    } catch (const std::exception& e) {
      last_failure_ = e.what();
      break;
    }
  }
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
