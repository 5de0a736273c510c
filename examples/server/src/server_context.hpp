// ServerContext: what agentrt-server's route groups share — the config, the runtime, tokens, the run rate
// limiter, stream slots, the event feeds and the work pools, the turns to let settle at shutdown, the log.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>

#include "agentrt/log.hpp"
#include "agentrt/openai.hpp"
#include "agentrt/runtime.hpp"
#include "api_call.hpp"
#include "demo_jobs.hpp"  // examples/cli: the opt-in render_preview demo job tool (--demo-jobs)
#include "event_feeds.hpp"
#include "recent_turns.hpp"
#include "run_rate_limiter.hpp"
#include "server_config.hpp"
#include "stream_slots.hpp"
#include "token_table.hpp"
#include "work_pool.hpp"

namespace agentrt::server {

// Owned by AgentServer, which sets every part before the first request and keeps it until the last has ended.
// Thread-safe: each part is (with its own lock), and the context itself changes nothing once serving.
struct ServerContext {
  explicit ServerContext(ServerConfig c)
      : cfg(std::move(c)),
        limiter(cfg.limits.runs_per_minute, cfg.limits.run_burst),
        stream_slots(cfg.limits.max_streams, cfg.limits.max_streams_per_user),
        log_threshold(cfg.log_level) {}

  ServerConfig cfg;
  std::string objects_base_url;
  std::unique_ptr<TokenTable> tokens;
  std::unique_ptr<Runtime> rt;
  std::shared_ptr<examples::DemoJobs> demo_jobs;  // --demo-jobs: render_preview jobs finished by this process
  std::shared_ptr<Transcriber> transcriber;
  RunRateLimiter limiter;
  StreamSlots stream_slots;
  RecentTurns recent_turns;
  LogLevel log_threshold;

  // Declared in this order so that they go in the other: the work pool first (its queued jobs still see the
  // feeds and the runtime), then the feeds, then (above) the runtime.
  std::unique_ptr<EventFeeds> feeds;
  std::unique_ptr<WorkPool> feed_pool;  // feed pumps only: never behind a request that waits for the store's lock
  std::unique_ptr<WorkPool> pool;       // requests, idle checks, object pieces
  // post_work against close_work: posts share it (the runtime's workers post at once, and a poster that held a
  // lock of its own across the pool's wake-up would stall the others), close_work takes it alone.
  std::shared_mutex work_mutex;
  bool work_closed = false;  // under work_mutex

  void log(LogLevel level, std::string_view message) const;

  // Names the call's thread: the client's id and the runtime's (the user's namespace); 422 for a bad id.
  void name_thread(ApiCall& c, const std::string& client_id) const;
  // The caller's thread; a deleted one and an unknown one are 404 (another user's cannot be named).
  ThreadRecord own_thread(ApiCall& c, const std::string& client_id) const;
  // The caller's thread, or no thread yet (a new one may be started under that id).
  void usable_thread(ApiCall& c, const std::string& client_id) const;
  // The same for a call whose thread is named already (name_thread).
  void check_usable(const ApiCall& c) const;
  // One run start or resume of the call's token, or 429 rate_limited with Retry-After.
  void rate_limit(const ApiCall& c);
  // Hands a job to the work pool from a runtime callback (a streamed start's answer), or drops it once close_work()
  // was called: the pool goes before the runtime, whose callbacks may come until it is gone.
  void post_work(std::function<void()> job);
  void close_work();
  // Answers the call with what a handler threw: an ApiError as it says, an agentrt Error by its code (5xx
  // without internals, which go to the log), anything else 422 (JSON) or 500.
  void answer_failure(ApiCall& c, std::exception_ptr failure) const;
};

}  // namespace agentrt::server
