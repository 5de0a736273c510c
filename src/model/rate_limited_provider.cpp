// Client-side pacing of a model provider (see model_config.hpp).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>

#include "agentrt/error.hpp"
#include "agentrt/model_config.hpp"

namespace agentrt {
inline namespace v1 {
namespace {

using Clock = std::chrono::steady_clock;

// A request's input in tokens, estimated before it is sent (about four bytes a token).
int64_t estimated_tokens(const ModelRequest& r) {
  size_t bytes = 0;
  for (const auto& m : r.messages) {
    bytes += m.content.size() + 8;
    for (const auto& p : m.parts) bytes += p.text.size() + (p.source ? 1024 : 0);
    for (const auto& c : m.tool_calls) bytes += c.name.size() + c.arguments.size();
  }
  for (const auto& t : r.tools) bytes += t.name.size() + t.description.size() + t.parameters.dump().size();
  return static_cast<int64_t>(bytes / 4 + 1);
}

// Two token buckets (requests, tokens), each holding at most a minute's allowance and refilled continuously,
// and a first-come-first-served line of the calls waiting for them. Thread-safe (one mutex).
class RateLimitedProvider final : public ModelProvider {
 public:
  RateLimitedProvider(std::shared_ptr<ModelProvider> inner, RateLimit limit)
      : inner_(std::move(inner)),
        limit_(limit),
        requests_(static_cast<double>(limit.requests_per_minute)),
        tokens_(static_cast<double>(limit.tokens_per_minute)),
        refilled_(Clock::now()) {
    if (!inner_) throw Error(ErrorCode::invalid_argument, "a rate-limited provider needs a provider");
    if (limit.requests_per_minute < 0 || limit.tokens_per_minute < 0)
      throw Error(ErrorCode::invalid_argument, "rate limits must not be negative");
  }

  std::string name() const override { return inner_->name(); }

  ModelResult complete(const ModelRequest& request, ModelStreamSink& sink, const CancelToken& cancel) override {
    const int64_t estimate = limit_.tokens_per_minute > 0 ? estimated_tokens(request) : 0;
    acquire(estimate, cancel);
    ModelResult result = inner_->complete(request, sink, cancel);
    if (limit_.tokens_per_minute > 0 && result.usage) {
      const int64_t used = result.usage->input_tokens + result.usage->output_tokens;
      std::lock_guard<std::mutex> lock(mutex_);
      tokens_ -= static_cast<double>(used - std::min(estimate, limit_.tokens_per_minute));
    }
    return result;
  }

 private:
  void refill(Clock::time_point now) {
    const double minutes = std::chrono::duration<double>(now - refilled_).count() / 60.0;
    refilled_ = now;
    if (limit_.requests_per_minute > 0)
      requests_ = std::min<double>(limit_.requests_per_minute, requests_ + minutes * limit_.requests_per_minute);
    if (limit_.tokens_per_minute > 0)
      tokens_ = std::min<double>(limit_.tokens_per_minute, tokens_ + minutes * limit_.tokens_per_minute);
  }

  // How long until both buckets hold what a call needs (zero when they do).
  Clock::duration shortfall(double tokens) const {
    double minutes = 0;
    if (limit_.requests_per_minute > 0 && requests_ < 1)
      minutes = std::max(minutes, (1 - requests_) / static_cast<double>(limit_.requests_per_minute));
    if (limit_.tokens_per_minute > 0 && tokens_ < tokens)
      minutes = std::max(minutes, (tokens - tokens_) / static_cast<double>(limit_.tokens_per_minute));
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(minutes * 60.0));
  }

  void acquire(int64_t estimate, const CancelToken& cancel) {
    if (limit_.requests_per_minute == 0 && limit_.tokens_per_minute == 0) return;
    // A call larger than a minute's allowance waits for a full bucket, not forever.
    const double need = static_cast<double>(std::min(estimate, limit_.tokens_per_minute));
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t ticket = next_ticket_++;
    line_.push_back(ticket);
    auto leave = [&] {
      line_.erase(std::find(line_.begin(), line_.end(), ticket));
      turn_.notify_all();
    };
    for (;;) {
      if (cancel.cancelled()) {
        leave();
        throw Error(ErrorCode::cancelled, "the model call was cancelled while it waited for the rate limit");
      }
      if (line_.front() != ticket) {
        turn_.wait_for(lock, std::chrono::milliseconds(50));  // woken when the line moves; the wait bounds a cancel
        continue;
      }
      refill(Clock::now());
      const auto wait = shortfall(need);
      if (wait <= Clock::duration::zero()) {
        if (limit_.requests_per_minute > 0) requests_ -= 1;
        if (limit_.tokens_per_minute > 0) tokens_ -= need;
        leave();
        return;
      }
      lock.unlock();
      cancel.wait_for(wait + std::chrono::milliseconds(1));  // wakes at once on a cancel
      lock.lock();
    }
  }

  std::shared_ptr<ModelProvider> inner_;
  const RateLimit limit_;
  std::mutex mutex_;
  std::condition_variable turn_;
  std::deque<uint64_t> line_;  // tickets of the waiting calls, first come first
  uint64_t next_ticket_ = 0;
  double requests_, tokens_;  // what the buckets hold now (tokens may be below zero after a large answer)
  Clock::time_point refilled_;
};

}  // namespace

std::shared_ptr<ModelProvider> make_rate_limited_provider(std::shared_ptr<ModelProvider> provider, RateLimit limit) {
  return std::make_shared<RateLimitedProvider>(std::move(provider), limit);
}

}  // namespace v1
}  // namespace agentrt
