#include "tracing/span_exporter.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "tracing/otlp_json.hpp"
#include "tracing/span_record.hpp"
#include "util/thread_name.hpp"

namespace agentrt {
inline namespace v1 {
namespace trace {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// At most one log line about dropped spans this often (the count since the last one is in it).
constexpr milliseconds kLogEvery{30'000};
// Queued spans that wake the export thread (fewer when a request holds fewer).
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

bool SpanExporter::enqueue(const SpanData& span) noexcept {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || pending_count_ >= cfg_.max_queue_spans) {
      ++stats_.dropped_full;
      return false;
    }
    const size_t before = pending_.size();
    try {
      pack_span(span, pending_);
    } catch (...) {  // out of memory: the span is dropped, the queue left as it was
      pending_.resize(before);
      ++stats_.dropped_full;
      return false;
    }
    if (pending_count_++ == 0) oldest_pending_ = Clock::now();
    ++accepted_;
    // A round's worth queued, or enough to fill the request being built (which would else wait for its interval).
    wake = pending_count_ == chunk_ || pending_count_ + carried_ == cfg_.max_batch_spans;
  }
  if (wake) cv_.notify_one();
  return true;
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
  name_this_thread("agentrt-spans");
  std::string taken;               // the queue's bytes this round took (their capacity goes back to the queue)
  SpanData span;                   // each taken span in turn, unpacked
  size_t in_body = 0;              // spans encoded into body_, not sent yet
  Clock::time_point body_since{};  // when the first of them was queued
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    // export_interval from the oldest span not sent: the first in the request being built, else the first queued.
    const Clock::time_point oldest =
        in_body > 0 ? body_since : (pending_count_ == 0 ? Clock::time_point{} : oldest_pending_);
    auto wait = cfg_.export_interval;
    if (oldest != Clock::time_point{})
      wait = std::max(milliseconds(0),
                      cfg_.export_interval - std::chrono::duration_cast<milliseconds>(Clock::now() - oldest));
    carried_ = in_body;
    cv_.wait_for(lock, wait, [&] {
      return stopping_ || flush_wanted_ || pending_count_ >= chunk_ || pending_count_ + in_body >= cfg_.max_batch_spans;
    });
    taken.clear();
    taken.swap(pending_);
    const size_t n = pending_count_;
    pending_count_ = 0;
    const bool flushing = stopping_ || flush_wanted_;
    const Clock::time_point queued_since = oldest_pending_;
    lock.unlock();
    // Requests of max_batch_spans: a full one goes at once, the rest of the round's spans start the next.
    for (size_t i = 0, at = 0; i < n; ++i) {
      if (in_body == 0) {
        body_.assign(prefix_);
        body_since = queued_since;
      } else {
        body_ += ',';
      }
      at += unpack_span(std::string_view(taken).substr(at), span);
      append_span_json(body_, span);
      if (++in_body >= cfg_.max_batch_spans) {
        send_body(in_body);
        in_body = 0;
      }
    }
    if (in_body > 0 && (flushing || Clock::now() - body_since >= cfg_.export_interval)) {
      send_body(in_body);
      in_body = 0;
    }
    lock.lock();
    if (stopping_ && Clock::now() >= stop_deadline_) {
      // Out of time: what is left is dropped (counted) so that the runtime's destruction stays bounded.
      const size_t left = pending_count_ + in_body;
      stats_.dropped_failed += left;
      unlogged_drops_ += left;
      settled_ += left;
      pending_.clear();
      pending_count_ = 0;
      in_body = 0;
    }
    settled_cv_.notify_all();
    if (pending_count_ == 0 && in_body == 0) {
      flush_wanted_ = false;
      if (stopping_) return;
    }
  }
}

void SpanExporter::send_body(size_t spans) {
  Clock::time_point deadline;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    deadline = stopping_ ? stop_deadline_ : Clock::now() + cfg_.export_timeout;
  }
  body_ += kOtlpSuffix;
  bool ok = false;
  if (Clock::now() < deadline)
    ok = post(body_, deadline);
  else
    last_failure_ = "the export timed out";
  if (!ok) dropped(spans, last_failure_);
  std::lock_guard<std::mutex> lock(mutex_);
  if (ok) {
    stats_.exported += spans;
  } else {
    stats_.dropped_failed += spans;
    ++stats_.failed_requests;
  }
  settled_ += spans;
  settled_cv_.notify_all();
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
