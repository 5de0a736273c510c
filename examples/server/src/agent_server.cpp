// The one translation unit that includes httplib.h (it is slow to compile).
#include "agent_server.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <httplib.h>

#include "agentrt/attachments.hpp"
#include "agentrt/config.hpp"
#include "agentrt/error.hpp"
#include "agentrt/openai.hpp"
#include "agentrt/runtime.hpp"
#include "agentrt/scripted_model.hpp"
#include "demo_jobs.hpp"  // examples/cli: the opt-in render_preview demo job tool (--demo-jobs)

namespace agentrt::server {

namespace {

using Clock = std::chrono::steady_clock;
using httplib::Request;
using httplib::Response;

constexpr const char* kApi = "/api/v1";
constexpr const char* kObjectsPath = "/api/v1/objects";

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// An answer decided before any event: a status and a JSON error {error:{code, message}}.
struct HttpError {
  int status;
  std::string code;
  std::string message;
};

int status_for(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_argument: return 422;
    case ErrorCode::not_found: return 404;
    case ErrorCode::conflict:
    case ErrorCode::expired:
    case ErrorCode::invalid_state:
    case ErrorCode::cancelled: return 409;
    case ErrorCode::too_large: return 413;
    case ErrorCode::unauthorized: return 401;
    case ErrorCode::unsupported: return 501;
    case ErrorCode::model: return 502;
    default: return 500;
  }
}

void send_json(Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void send_error(Response& res, int status, std::string_view code, std::string_view message) {
  send_json(res, status, json{{"error", {{"code", std::string(code)}, {"message", std::string(message)}}}});
}

// Starts a connection's thread when a connection arrives and no thread is idle, up to `max_threads`; later
// connections wait for a free thread. A thread idle for a minute ends (down to kKeep), so a burst of streams
// does not pin its threads' memory; ended threads are joined on the next enqueue, the rest on shutdown.
// httplib's own pool is fixed: one large enough for every SSE stream would hold that many threads from the
// start. Thread-safe.
class ConnectionThreads final : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(size_t max_threads) : max_(max_threads) {}
  ~ConnectionThreads() override = default;

  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      reap_locked();
      jobs_.push_back(std::move(fn));
      if (jobs_.size() > idle_ && threads_.size() < max_) {
        std::thread t([this] { work(); });
        const auto id = t.get_id();
        threads_.emplace(id, std::move(t));
      }
    }
    cv_.notify_one();
  }

  void shutdown() override {
    std::map<std::thread::id, std::thread> all;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      reap_locked();
      all.swap(threads_);
    }
    cv_.notify_all();
    for (auto& [id, t] : all) t.join();
  }

 private:
  static constexpr size_t kKeep = 8;
  static constexpr std::chrono::seconds kIdle{60};

  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      ++idle_;
      const bool woke = cv_.wait_for(lock, kIdle, [&] { return stop_ || !jobs_.empty(); });
      --idle_;
      if (!woke && threads_.size() - ended_.size() > kKeep) {
        ended_.push_back(std::this_thread::get_id());  // joined by the next enqueue() or shutdown()
        return;
      }
      if (jobs_.empty()) {
        if (stop_) return;
        continue;
      }
      auto fn = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      fn();
      lock.lock();
    }
  }

  // Joins threads that have ended (they released the lock for good before being listed as ended).
  void reap_locked() {
    for (const auto& id : ended_) {
      auto it = threads_.find(id);
      if (it == threads_.end()) continue;
      it->second.join();
      threads_.erase(it);
    }
    ended_.clear();
  }

  const size_t max_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::map<std::thread::id, std::thread> threads_;
  std::vector<std::thread::id> ended_;
  size_t idle_ = 0;
  bool stop_ = false;
};

// Token buckets per bearer token: `burst` runs at once, refilled at `per_minute`. Thread-safe.
class RunRateLimiter {
 public:
  RunRateLimiter(double per_minute, int burst) : per_second_(per_minute / 60.0), burst_(burst) {}

  // 0 when the run may start (one token taken), else the whole seconds to wait.
  int64_t acquire(const std::string& key) {
    if (per_second_ <= 0) return 0;
    std::lock_guard<std::mutex> lock(mutex_);
    const auto now = Clock::now();
    auto [it, fresh] = buckets_.try_emplace(key, Bucket{static_cast<double>(burst_), now});
    Bucket& b = it->second;
    if (!fresh) {
      b.tokens = std::min<double>(burst_, b.tokens + std::chrono::duration<double>(now - b.at).count() * per_second_);
      b.at = now;
    }
    if (b.tokens >= 1.0) {
      b.tokens -= 1.0;
      return 0;
    }
    return static_cast<int64_t>((1.0 - b.tokens) / per_second_) + 1;
  }

 private:
  struct Bucket {
    double tokens;
    Clock::time_point at;
  };
  const double per_second_;
  const int burst_;
  std::mutex mutex_;
  std::unordered_map<std::string, Bucket> buckets_;
};

// httplib::Server with a listen backlog fit for bursts of connections: the library's is 5 (a compile-time
// constant of the packaged build), so a burst of clients overflows the accept queue and sees resets or 1 s
// SYN retries. Linux lets listen() be called again on a listening socket to change its backlog.
class Listener final : public httplib::Server {
 public:
  void widen_backlog(int backlog) {
    const auto fd = svr_sock_.load();
    if (fd != INVALID_SOCKET) ::listen(fd, backlog);
  }
};

// True when the Accept header prefers application/json to text/event-stream (a missing or wildcard Accept
// keeps the stream). Media ranges are compared by their q values; a range without one has q=1.
bool prefers_json(const Request& req) {
  const std::string accept = req.get_header_value("Accept");
  double json_q = -1, sse_q = -1;
  size_t pos = 0;
  while (pos <= accept.size()) {
    size_t end = accept.find(',', pos);
    if (end == std::string::npos) end = accept.size();
    std::string range = accept.substr(pos, end - pos);
    pos = end + 1;
    double q = 1;
    std::string type = range.substr(0, range.find(';'));
    for (size_t semi = range.find(';'); semi != std::string::npos; semi = range.find(';', semi + 1)) {
      std::string param = range.substr(semi + 1, range.find(';', semi + 1) - semi - 1);
      param.erase(0, param.find_first_not_of(" \t"));
      if (param.rfind("q=", 0) == 0) q = std::atof(param.c_str() + 2);
    }
    type.erase(0, type.find_first_not_of(" \t"));
    type.erase(type.find_last_not_of(" \t") + 1);
    for (auto& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (type == "application/json") json_q = std::max(json_q, q);
    if (type == "text/event-stream") sse_q = std::max(sse_q, q);
  }
  return json_q > 0 && json_q > sse_q;
}

bool is_terminal_event(const std::string& event_json) {
  if (event_json.find("\"RUN_FINISHED\"") == std::string::npos && event_json.find("\"RUN_ERROR\"") == std::string::npos)
    return false;
  json e = json::parse(event_json, nullptr, false);
  if (!e.is_object()) return false;
  const std::string type = e.value("type", "");
  return type == "RUN_FINISHED" || type == "RUN_ERROR";
}

std::string media_kind(std::string_view mime) {
  if (mime.rfind("image/", 0) == 0) return "image";
  if (mime.rfind("audio/", 0) == 0) return "audio";
  if (mime.rfind("video/", 0) == 0) return "video";
  return "document";
}

}  // namespace

// ------------------------------------------------------------------------------------------------ Impl

struct AgentServer::Impl {
  // What one SSE response streams. Lives as long as the response's content provider.
  struct Stream {
    enum class Mode {
      one_run,     // this run's events until its RUN_FINISHED / RUN_ERROR (POST /agent/runs)
      until_idle,  // the thread's events until nothing runs and everything committed was sent
      follow,      // the thread's events until the client leaves
    };
    Impl* owner = nullptr;
    std::unique_ptr<Subscription> sub;
    std::string thread_id;
    std::string run_id;  // one_run: the run
    Mode mode = Mode::one_run;
    int64_t after = 0;
    bool counted = false;  // holds one of the max_streams slots

    ~Stream() {
      if (owner) owner->release_stream(*this);
    }
  };

  ServerConfig cfg;
  std::string objects_base_url;
  std::unique_ptr<Runtime> rt;
  std::shared_ptr<examples::DemoJobs> demo_jobs;  // --demo-jobs: render_preview jobs finished by this process
  std::shared_ptr<Transcriber> transcriber;
  RunRateLimiter limiter;
  Listener svr;
  int bound_port = 0;

  std::mutex streams_mutex;
  std::set<Subscription*> open_subs;
  bool stopping = false;
  std::atomic<int> streams{0};

  LogLevel log_threshold = LogLevel::info;

  explicit Impl(ServerConfig c) : cfg(std::move(c)), limiter(cfg.limits.runs_per_minute, cfg.limits.run_burst) {
    const std::string& l = cfg.log_level;
    log_threshold = l == "debug"   ? LogLevel::debug
                    : l == "warn"  ? LogLevel::warn
                    : l == "error" ? LogLevel::error
                    : l == "off"   ? LogLevel::off
                                   : LogLevel::info;
  }

  // ------------------------------------------------------------------------------------ plumbing

  std::string user_of(const Request& req) const {
    const std::string h = req.get_header_value("Authorization");
    constexpr std::string_view bearer = "Bearer ";
    if (h.size() > bearer.size() && std::string_view(h).substr(0, bearer.size()) == bearer) {
      auto it = cfg.tokens.find(h.substr(bearer.size()));
      if (it != cfg.tokens.end()) return it->second;
      throw HttpError{401, "unauthorized", "the bearer token is not valid"};
    }
    throw HttpError{401, "unauthorized", "missing 'Authorization: Bearer <token>'"};
  }

  json parse_json_body(const Request& req) const {
    if (req.body.size() > cfg.limits.max_body_bytes)
      throw HttpError{413, "too_large",
                      fmt::format("the body is {} bytes; the limit is {}", req.body.size(), cfg.limits.max_body_bytes)};
    json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded()) throw HttpError{400, "invalid_json", "the body is not valid JSON"};
    if (!body.is_object()) throw HttpError{422, "invalid_argument", "the body must be a JSON object"};
    return body;
  }

  // The caller's thread; another user's thread, a deleted one and an unknown one are all 404.
  ThreadRecord own_thread(const std::string& user, const std::string& thread_id) {
    auto t = rt->thread(thread_id);
    if (!t || t->user_id != user || t->deleted)
      throw HttpError{404, "not_found", fmt::format("thread {} not found", thread_id.substr(0, 140))};
    return *t;
  }

  // The caller's thread, or no thread yet (a new one may be started under that id).
  void usable_thread(const std::string& user, const std::string& thread_id) {
    auto t = rt->thread(thread_id);
    if (t && (t->user_id != user || t->deleted))
      throw HttpError{404, "not_found", fmt::format("thread {} not found", thread_id.substr(0, 140))};
  }

  void rate_limit(const Request& req, Response& res) {
    const int64_t wait = limiter.acquire(req.get_header_value("Authorization"));
    if (wait > 0) {
      res.set_header("Retry-After", std::to_string(wait));
      throw HttpError{429, "rate_limited", fmt::format("too many runs started with this token; retry in {} s", wait)};
    }
  }

  // Runs a handler, turning every failure into a JSON error answer.
  template <class F>
  httplib::Server::Handler route(F f) {
    return [this, f](const Request& req, Response& res) {
      try {
        f(req, res);
      } catch (const HttpError& e) {
        if (e.status == 401) res.set_header("WWW-Authenticate", "Bearer");
        send_error(res, e.status, e.code, e.message);
      } catch (const Error& e) {
        send_error(res, status_for(e.code()), to_string(e.code()), e.message());
      } catch (const json::exception& e) {
        send_error(res, 422, "invalid_argument", e.what());
      } catch (const std::exception& e) {
        log(LogLevel::error, fmt::format("{} {}: {}", req.method, req.path, e.what()));
        send_error(res, 500, "internal", "internal error");
      }
    };
  }

  void log(LogLevel level, std::string_view message) const {
    if (log_threshold == LogLevel::off || level < log_threshold) return;
    std::cerr << fmt::format("agentrt-server [{}] {}\n", to_string(level), message) << std::flush;
  }

  // ------------------------------------------------------------------------------------ streams

  // A slot among max_streams (429 when none is free), registered so that stop() can end the stream.
  std::shared_ptr<Stream> new_stream(std::string thread_id, Stream::Mode mode) {
    int n = streams.load();
    do {
      if (n >= cfg.limits.max_streams)
        throw HttpError{429, "too_many_streams",
                        fmt::format("{} streams are open, the limit of this server; retry later", n)};
    } while (!streams.compare_exchange_weak(n, n + 1));
    auto s = std::make_shared<Stream>();
    s->counted = true;
    s->owner = this;
    s->thread_id = std::move(thread_id);
    s->mode = mode;
    return s;
  }

  void attach(Stream& s, int64_t after) {
    s.after = after;
    s.sub = rt->subscribe(s.thread_id, after);
    std::lock_guard<std::mutex> lock(streams_mutex);
    if (stopping) s.sub->close();
    open_subs.insert(s.sub.get());
  }

  void release_stream(Stream& s) {
    if (s.sub) {
      std::lock_guard<std::mutex> lock(streams_mutex);
      open_subs.erase(s.sub.get());
    }
    if (s.counted) streams.fetch_sub(1);
    s.counted = false;
  }

  // Nothing runs on the thread and every committed event up to `delivered` was sent.
  bool thread_idle(const std::string& thread_id, int64_t delivered) {
    auto t = rt->thread(thread_id);
    if (!t) return true;
    if (t->last_seq > delivered) return false;
    auto a = rt->active_turn(thread_id);
    return !a || (a->status != TurnStatus::running && a->status != TurnStatus::resuming);
  }

  // Answers 200 text/event-stream and writes the stream's events as `id: <seq>` + `data: <json>` frames (LF
  // only), with ": keep-alive" comments during silence. A client that goes away makes a write fail: the
  // provider ends, the subscription closes, and the turn goes on untouched.
  void serve_stream(Response& res, std::shared_ptr<Stream> st) {
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    // Exactly "text/event-stream": httplib never compresses that type (compression would buffer events).
    res.set_chunked_content_provider("text/event-stream", [this, st](size_t, httplib::DataSink& sink) {
      const auto keepalive = cfg.limits.keepalive;
      auto last_write = Clock::now();
      int64_t delivered = st->after;
      auto write = [&](const std::string& frame) {
        if (!sink.write(frame.data(), frame.size())) return false;
        last_write = Clock::now();
        return true;
      };
      bool done = st->mode == Stream::Mode::until_idle && thread_idle(st->thread_id, delivered);
      while (!done) {
        auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(keepalive - (Clock::now() - last_write));
        if (st->mode == Stream::Mode::until_idle) wait = std::min(wait, std::chrono::milliseconds(1000));
        auto ev = st->sub->next(std::max(wait, std::chrono::milliseconds(1)));
        if (!ev) {
          if (st->sub->closed()) break;  // the server is stopping
          if (Clock::now() - last_write >= keepalive && !write(": keep-alive\n\n")) return false;
          if (st->mode == Stream::Mode::until_idle) done = thread_idle(st->thread_id, delivered);
          continue;
        }
        delivered = ev->seq;
        if (st->mode == Stream::Mode::one_run && ev->run_id != st->run_id) continue;
        if (!write(fmt::format("id: {}\ndata: {}\n\n", ev->seq, ev->json))) return false;  // client gone
        if (is_terminal_event(ev->json)) {
          if (st->mode == Stream::Mode::one_run)
            done = true;
          else if (st->mode == Stream::Mode::until_idle)
            done = thread_idle(st->thread_id, delivered);
        }
      }
      sink.done();
      return true;
    });
  }

  // ------------------------------------------------------------------------------------ handlers

  // POST /agent/runs: AG-UI RunAgentInput in, this run's events out. With `Accept: application/json` (preferred
  // to text/event-stream) a start is answered in JSON instead of a stream: a repeated message id with the turn
  // it already started and the messages that turn added (200, existing:true), a new one with the started
  // turn's ids (202, existing:false) to follow on /events.
  void post_run(const Request& req, Response& res) {
    const std::string user = user_of(req);
    json in = parse_json_body(req);
    for (const char* k : {"threadId", "runId"})
      if (!in.contains(k) || !in[k].is_string())
        throw HttpError{422, "invalid_argument", fmt::format("RunAgentInput: '{}' must be a string", k)};
    const std::string thread_id = in["threadId"].get<std::string>();
    const std::string run_id = in["runId"].get<std::string>();
    usable_thread(user, thread_id);
    const json resume = in.value("resume", json());
    if (!resume.is_null() && !resume.is_array())
      throw HttpError{422, "invalid_argument", "RunAgentInput: 'resume' must be an array"};
    if (resume.is_array() && !resume.empty()) {
      auto st = new_stream(thread_id, Stream::Mode::one_run);
      st->run_id = run_id;
      resume_run(req, res, *st, resume);
      serve_stream(res, std::move(st));
      return;
    }
    if (prefers_json(req)) {
      const TurnHandle h = start_run(req, res, thread_id, user, in);
      json out = {{"threadId", h.thread_id}, {"turnId", h.turn_id}, {"runId", h.run_id}, {"existing", h.existing}};
      if (!h.existing) {
        out["firstSeq"] = h.first_seq;
        send_json(res, 202, out);
        return;
      }
      if (auto t = rt->turn(h.turn_id)) out["status"] = std::string(to_string(t->status));
      json delta = json::array();
      for (const auto& m : h.delta_messages) delta.push_back(m);
      out["deltaMessages"] = std::move(delta);
      send_json(res, 200, out);
      return;
    }
    auto st = new_stream(thread_id, Stream::Mode::one_run);  // a free stream slot before anything starts
    st->run_id = run_id;
    std::string message_id;
    const TurnHandle h = start_run(req, res, thread_id, user, in, &message_id);
    if (h.existing && h.run_id != run_id)
      throw HttpError{409, "already_answered",
                      fmt::format("message {} was already answered by run {}; send a new user message (or ask "
                                  "with 'Accept: application/json' for the messages of that turn)",
                                  message_id, h.run_id)};
    // A repeat replays its run from the start (only that run's events: one_run filters by run id).
    attach(*st, h.existing ? 0 : std::max<int64_t>(0, h.first_seq - 1));
    serve_stream(res, std::move(st));
  }

  TurnHandle start_run(const Request& req, Response& res, const std::string& thread_id, const std::string& user,
                       const json& in, std::string* message_id = nullptr) {
    // Media parts are the runtime's business: it accepts only this server's own signed upload URLs (and
    // upload ids, inline data) for the same user and thread, stores them as bucket/path, and never fetches.
    TurnInput input = turn_input_from_agui(in, user);
    if (message_id) *message_id = input.client_message_id;
    rate_limit(req, res);
    try {
      return rt->start_turn(input);  // a repeated message id answers with its turn (existing), even while paused
    } catch (const Error& e) {
      auto active = e.code() == ErrorCode::conflict ? rt->active_turn(thread_id) : std::nullopt;
      if (!active || active->status != TurnStatus::waiting_approval) throw;
      std::string ids;
      for (const auto& i : active->interrupts) ids += (ids.empty() ? "" : ", ") + i.value("id", std::string());
      throw HttpError{409, "pending_interrupts",
                      fmt::format("thread {} has {} pending interrupt(s) not addressed by resume: {}", thread_id,
                                  active->interrupts.size(), ids)};
    }
  }

  // Ownership was checked by the caller (post_run).
  void resume_run(const Request& req, Response& res, Stream& st, const json& resume) {
    auto decisions = decisions_from_agui_resume(resume);
    std::string turn_id;
    std::string approval_id;
    bool replay = false;
    auto active = rt->active_turn(st.thread_id);
    if (active && active->status == TurnStatus::waiting_approval) {
      turn_id = active->id;
      approval_id = active->approval_request_id;
    } else {
      // The same request again (a retry after the first was accepted): answer with the first run.
      auto last = rt->store().last_turn(st.thread_id);
      if (last && !last->approval_request_id.empty())
        if (auto prior = rt->store().get_approval(last->approval_request_id);
            prior && prior->answer.value("runId", "") == st.run_id) {
          turn_id = last->id;
          approval_id = last->approval_request_id;
          replay = true;
        }
      if (!replay)
        throw HttpError{409, "no_pending_interrupts",
                        fmt::format("thread {} has no interrupt waiting for an answer", st.thread_id)};
    }
    if (!replay) rate_limit(req, res);
    const int64_t before = replay ? 0 : rt->thread(st.thread_id)->last_seq;
    json answer = rt->resume(turn_id, approval_id, decisions, st.run_id);
    if (answer.value("runId", "") != st.run_id)
      throw HttpError{409, "already_resumed",
                      fmt::format("the interrupts were already answered by run {}", answer.value("runId", ""))};
    attach(st, before);
  }

  // GET /agent/runs/{threadId}/events: replay after Last-Event-ID (or ?after=), then the live tail.
  void get_events(const Request& req, Response& res) {
    const std::string user = user_of(req);
    const std::string thread_id = req.matches[1];
    own_thread(user, thread_id);
    std::string cursor = req.get_header_value("Last-Event-ID");
    if (cursor.empty() && req.has_param("after")) cursor = req.get_param_value("after");
    int64_t after = 0;
    if (!cursor.empty()) {
      size_t used = 0;
      try {
        after = std::stoll(cursor, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != cursor.size() || after < 0)
        throw HttpError{400, "invalid_cursor", "Last-Event-ID / after must be a non-negative event sequence number"};
    }
    const std::string follow = req.get_param_value("follow");
    auto st =
        new_stream(thread_id, follow == "1" || follow == "true" ? Stream::Mode::follow : Stream::Mode::until_idle);
    attach(*st, after);
    serve_stream(res, std::move(st));
  }

  // POST /agent/runs/{threadId}/resume {approvalRequestId, decisions, runId?} -> 202 {status:"accepted", ...}
  void post_resume(const Request& req, Response& res) {
    const std::string user = user_of(req);
    const std::string thread_id = req.matches[1];
    own_thread(user, thread_id);
    json body = parse_json_body(req);
    if (!body.contains("approvalRequestId") || !body["approvalRequestId"].is_string())
      throw HttpError{422, "invalid_argument", "'approvalRequestId' must be a string"};
    if (!body.contains("decisions") || !body["decisions"].is_array())
      throw HttpError{422, "invalid_argument", "'decisions' must be an array"};
    const std::string approval_id = body["approvalRequestId"].get<std::string>();
    std::vector<Decision> decisions;
    for (const auto& d : body["decisions"]) decisions.push_back(d.get<Decision>());
    const std::string run_id = body.value("runId", "");
    std::string turn_id;
    if (auto prior = rt->store().get_approval(approval_id)) {
      if (prior->thread_id != thread_id)
        throw HttpError{404, "not_found", fmt::format("approval request {} not found", approval_id)};
      turn_id = prior->turn_id;
    } else {
      auto active = rt->active_turn(thread_id);
      if (!active || active->approval_request_id != approval_id)
        throw HttpError{404, "not_found",
                        fmt::format("approval request {} is not open on thread {}", approval_id, thread_id)};
      rate_limit(req, res);
      turn_id = active->id;
    }
    send_json(res, 202, rt->resume(turn_id, approval_id, decisions, run_id));
  }

  // POST /agent/runs/{threadId}/cancel -> 202 {status:"accepted", turnId, runId}
  void post_cancel(const Request& req, Response& res) {
    const std::string user = user_of(req);
    const std::string thread_id = req.matches[1];
    own_thread(user, thread_id);
    if (!req.body.empty()) parse_json_body(req);  // optional body, but not a malformed one
    auto active = rt->active_turn(thread_id);
    if (!active)
      throw HttpError{409, "no_active_turn", fmt::format("thread {} has no running or waiting turn", thread_id)};
    rt->cancel(active->id);
    send_json(res, 202,
              json{{"status", "accepted"}, {"threadId", thread_id}, {"turnId", active->id}, {"runId", active->run_id}});
  }

  // GET /agent/runs/{threadId}/history -> {threadId, messages}
  void get_history(const Request& req, Response& res) {
    const std::string user = user_of(req);
    const std::string thread_id = req.matches[1];
    own_thread(user, thread_id);
    json messages = json::array();
    for (auto& m : rt->history(thread_id)) messages.push_back(m);  // attachments re-signed by the runtime
    send_json(res, 200, json{{"threadId", thread_id}, {"messages", std::move(messages)}});
  }

  // ------------------------------------------------------------------------------------ jobs

  // The caller's job: another user's job, one on a deleted thread and an unknown one are all 404.
  JobRecord own_job(const std::string& user, const std::string& job_id) {
    if (!is_valid_attachment_id(job_id))
      throw HttpError{422, "invalid_argument", "a job id is 1-128 of [A-Za-z0-9._-]"};
    auto j = rt->job(job_id);
    auto t = j ? rt->thread(j->thread_id) : std::nullopt;
    if (!j || j->user_id != user || !t || t->user_id != user || t->deleted)
      throw HttpError{404, "not_found", fmt::format("job {} not found", job_id)};
    return *j;
  }

  // GET /agent/jobs/{jobId} -> the job record (agentrt::job_to_json)
  void get_job(const Request& req, Response& res) {
    const std::string user = user_of(req);
    send_json(res, 200, job_to_json(own_job(user, req.matches[1])));
  }

  // POST /agent/jobs/{jobId}/cancel, optional body {reason} -> the cancelled record. The runtime calls the
  // job cancel hook and adds the outcome to the thread's history. A job that has already ended otherwise, or
  // waits for the person's confirmation, is 409 invalid_state; a cancelled one is answered unchanged.
  void post_cancel_job(const Request& req, Response& res) {
    const std::string user = user_of(req);
    const std::string job_id = req.matches[1];
    std::string reason;
    if (!req.body.empty()) {
      json body = parse_json_body(req);
      if (body.contains("reason")) {
        if (!body["reason"].is_string()) throw HttpError{422, "invalid_argument", "'reason' must be a string"};
        reason = body["reason"].get<std::string>();
      }
    }
    own_job(user, job_id);
    send_json(res, 200, job_to_json(rt->cancel_job(job_id, reason)));
  }

  // GET /agent/threads/{threadId}/jobs -> {threadId, jobs:[...]} in creation order
  void get_thread_jobs(const Request& req, Response& res) {
    const std::string user = user_of(req);
    const std::string thread_id = req.matches[1];
    own_thread(user, thread_id);
    json jobs = json::array();
    for (const auto& j : rt->jobs(thread_id)) jobs.push_back(job_to_json(j));
    send_json(res, 200, json{{"threadId", thread_id}, {"jobs", std::move(jobs)}});
  }

  // GET /agent/threads -> {threads:[{id, title, createdAt, updatedAt, lastSeq, status?}]}
  void get_threads(const Request& req, Response& res) {
    const std::string user = user_of(req);
    json out = json::array();
    for (const auto& t : rt->threads(user)) {
      json j = {{"id", t.id},
                {"title", t.title},
                {"createdAt", t.created_at},
                {"updatedAt", t.updated_at},
                {"lastSeq", t.last_seq}};
      out.push_back(std::move(j));
    }
    send_json(res, 200, json{{"threads", std::move(out)}});
  }

  // DELETE /agent/threads/{id}: soft delete (a running or waiting turn is cancelled first).
  void delete_thread(const Request& req, Response& res) {
    const std::string user = user_of(req);
    const std::string thread_id = req.matches[1];
    own_thread(user, thread_id);
    if (auto active = rt->active_turn(thread_id)) {
      try {
        rt->cancel(active->id);
      } catch (const Error& e) {
        log(LogLevel::warn,
            fmt::format("delete thread {}: cancel of turn {} failed: {}", thread_id, active->id, e.message()));
      }
    }
    rt->store().soft_delete_thread(thread_id);
    send_json(res, 200, json{{"id", thread_id}, {"deleted", true}});
  }

  // POST /agent/uploads?threadId=T, raw body with its Content-Type -> 201 {id, url, mimeType, size, ...}
  void post_upload(const Request& req, Response& res) {
    const std::string user = user_of(req);
    if (!rt->config().objects)
      throw HttpError{501, "unsupported", "uploads need an object store; this server has none"};
    const std::string thread_id = req.get_param_value("threadId");
    if (thread_id.empty()) throw HttpError{400, "missing_thread", "the query parameter 'threadId' is required"};
    if (!is_valid_attachment_id(thread_id))
      throw HttpError{422, "invalid_argument", "threadId must be 1-128 of [A-Za-z0-9._-]"};
    usable_thread(user, thread_id);
    if (req.body.size() > cfg.limits.max_upload_bytes)
      throw HttpError{
          413, "too_large",
          fmt::format("the file is {} bytes; the limit is {}", req.body.size(), cfg.limits.max_upload_bytes)};
    const std::string mime = normalize_mime(req.get_header_value("Content-Type"));
    try {
      check_attachment(mime, req.body.size(), rt->config().attachment_limits);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::invalid_argument) throw HttpError{422, "unsupported_media_type", e.message()};
      throw;
    }
    const Upload u = rt->upload(user, thread_id, req.body, mime);
    send_json(res, 201,
              json{{"id", u.id},
                   {"url", u.url},
                   {"mimeType", u.mime_type},
                   {"size", u.size},
                   {"expiresAt", u.expires_at},
                   {"ref", u.ref},
                   {"part",
                    {{"type", media_kind(u.mime_type)},
                     {"source", {{"type", "url"}, {"value", u.url}, {"mimeType", u.mime_type}}}}}});
  }

  // GET /objects/{bucket}/{key}?expires&sig: the signature is the credential (an <img src> sends no header).
  void get_object(const Request& req, Response& res) {
    auto objects = rt->config().objects;
    if (!objects) throw HttpError{404, "not_found", "no object store"};
    const std::string prefix = kObjectsPath;
    if (req.target.rfind(prefix, 0) != 0) throw HttpError{404, "not_found", "not an object URL"};
    std::string key;
    try {
      key = objects->verify_url(objects_base_url + req.target.substr(prefix.size()), now_ms());
    } catch (const Error& e) {
      if (e.code() == ErrorCode::expired) throw HttpError{401, "expired", "the object URL has expired"};
      throw HttpError{401, "invalid_signature", "the object URL's signature is missing or wrong"};
    }
    // Only user uploads are served; and a caller who names itself must own them.
    constexpr std::string_view root = "agent-inputs/";
    if (key.rfind(root, 0) != 0) throw HttpError{404, "not_found", "object not found"};
    if (req.has_header("Authorization")) {
      const std::string user = user_of(req);
      const std::string owner = key.substr(root.size(), key.find('/', root.size()) - root.size());
      if (owner != user) throw HttpError{404, "not_found", "object not found"};
    }
    auto info = objects->head(key);
    auto bytes = info ? objects->get(key) : std::nullopt;
    if (!bytes) throw HttpError{404, "not_found", "object not found"};
    res.set_header("Cache-Control", "private, max-age=300");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.status = 200;
    res.set_content(*bytes, info->content_type);
  }

  // POST /asr/transcriptions: multipart (file, optional language and prompt) or a raw audio body -> {transcript}
  void post_transcription(const Request& req, Response& res) {
    user_of(req);
    if (!transcriber)
      throw HttpError{501, "unsupported", "speech-to-text is not configured on this server ('asr' in the config)"};
    if (req.body.size() > cfg.limits.max_audio_bytes)
      throw HttpError{
          413, "too_large",
          fmt::format("the request is {} bytes; the audio limit is {}", req.body.size(), cfg.limits.max_audio_bytes)};
    std::string audio;
    std::string mime;
    TranscribeOptions options;
    if (req.is_multipart_form_data()) {
      if (!req.has_file("file")) throw HttpError{422, "invalid_argument", "the multipart form needs a 'file' part"};
      auto f = req.get_file_value("file");
      audio = std::move(f.content);
      mime = normalize_mime(f.content_type);
      options.filename = f.filename;
      if (req.has_file("language")) options.language = req.get_file_value("language").content;
      if (req.has_file("prompt")) options.prompt = req.get_file_value("prompt").content;
    } else {
      audio = req.body;
      mime = normalize_mime(req.get_header_value("Content-Type"));
      options.language = req.get_param_value("language");
    }
    if (audio.size() > cfg.limits.max_audio_bytes)
      throw HttpError{413, "too_large",
                      fmt::format("the audio is {} bytes; the limit is {}", audio.size(), cfg.limits.max_audio_bytes)};
    std::string text;
    try {
      text = transcriber->transcribe(audio, mime, options);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::io || e.code() == ErrorCode::model || e.code() == ErrorCode::timeout)
        throw HttpError{502, "upstream_error", e.message()};
      throw;
    }
    send_json(res, 200, json{{"transcript", text}});
  }

  // ------------------------------------------------------------------------------------ setup

  void install_routes() {
    const std::string api = kApi;
    svr.Get(api + "/health", [this](const Request&, Response& res) {
      send_json(res, 200, json{{"status", "ok"}, {"streams", streams.load()}});
    });
    svr.Post(api + "/agent/runs", route([this](const Request& q, Response& r) { post_run(q, r); }));
    svr.Get(api + R"(/agent/runs/([^/]+)/events)", route([this](const Request& q, Response& r) { get_events(q, r); }));
    svr.Post(api + R"(/agent/runs/([^/]+)/resume)",
             route([this](const Request& q, Response& r) { post_resume(q, r); }));
    svr.Post(api + R"(/agent/runs/([^/]+)/cancel)",
             route([this](const Request& q, Response& r) { post_cancel(q, r); }));
    svr.Get(api + R"(/agent/runs/([^/]+)/history)",
            route([this](const Request& q, Response& r) { get_history(q, r); }));
    svr.Get(api + "/agent/threads", route([this](const Request& q, Response& r) { get_threads(q, r); }));
    svr.Delete(api + R"(/agent/threads/([^/]+))",
               route([this](const Request& q, Response& r) { delete_thread(q, r); }));
    svr.Get(api + R"(/agent/threads/([^/]+)/jobs)",
            route([this](const Request& q, Response& r) { get_thread_jobs(q, r); }));
    svr.Get(api + R"(/agent/jobs/([^/]+))", route([this](const Request& q, Response& r) { get_job(q, r); }));
    svr.Post(api + R"(/agent/jobs/([^/]+)/cancel)",
             route([this](const Request& q, Response& r) { post_cancel_job(q, r); }));
    svr.Post(api + "/agent/uploads", route([this](const Request& q, Response& r) { post_upload(q, r); }));
    svr.Get(std::string(kObjectsPath) + "/(.+)", route([this](const Request& q, Response& r) { get_object(q, r); }));
    svr.Post(api + "/asr/transcriptions", route([this](const Request& q, Response& r) { post_transcription(q, r); }));

    // httplib answers some errors itself (unknown route 404, 413 over the payload limit, 400): give them
    // the JSON error shape too. Answers that already have a body are ours.
    svr.set_error_handler(httplib::Server::HandlerWithResponse([](const Request&, Response& res) {
      if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
      const int s = res.status;
      const char* code = s == 404 ? "not_found" : s == 413 ? "too_large" : s == 400 ? "bad_request" : "error";
      send_error(res, s, code, s == 404 ? "no such endpoint" : s == 413 ? "the body is too large" : "request failed");
      return httplib::Server::HandlerResponse::Handled;
    }));
    svr.set_exception_handler([this](const Request& req, Response& res, std::exception_ptr ep) {
      try {
        if (ep) std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        log(LogLevel::error, fmt::format("{} {}: {}", req.method, req.path, e.what()));
      } catch (...) {
      }
      send_error(res, 500, "internal", "internal error");
    });
    if (!cfg.cors_origins.empty()) {
      svr.set_pre_routing_handler([this](const Request& req, Response& res) {
        const std::string origin = req.get_header_value("Origin");
        bool allowed = false;
        for (const auto& o : cfg.cors_origins) allowed = allowed || o == "*" || o == origin;
        if (!origin.empty() && allowed) {
          res.set_header("Access-Control-Allow-Origin", origin);
          res.set_header("Vary", "Origin");
          res.set_header("Access-Control-Expose-Headers", "Retry-After");
        }
        if (req.method == "OPTIONS") {
          res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
          res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type, Accept, Last-Event-ID");
          res.set_header("Access-Control-Max-Age", "600");
          res.status = 204;
          return httplib::Server::HandlerResponse::Handled;
        }
        return httplib::Server::HandlerResponse::Unhandled;
      });
    }
    if (cfg.access_log) {
      svr.set_logger([](const Request& req, const Response& res) {
        // The path only: object URLs carry their signature in the query.
        std::cerr << fmt::format("agentrt-server {} {} {}\n", req.method, req.path, res.status) << std::flush;
      });
    }
  }
};

// ------------------------------------------------------------------------------------------------ AgentServer

AgentServer::AgentServer(ServerConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {
  auto& d = *impl_;
  validate_server_config(d.cfg);
  const auto& L = d.cfg.limits;

  // Every stream holds a connection thread for its whole life; `spare_threads` more serve everything else
  // (short requests, idle keep-alive connections), so streams can never starve the other endpoints.
  const size_t max_threads = static_cast<size_t>(L.max_streams) + static_cast<size_t>(L.spare_threads);
  d.svr.new_task_queue = [max_threads] {
    return new ConnectionThreads(max_threads);  // httplib's API: it takes ownership of the raw pointer
  };
  d.svr.set_payload_max_length(static_cast<size_t>(std::max<uint64_t>(
                                   {static_cast<uint64_t>(L.max_body_bytes), L.max_upload_bytes, L.max_audio_bytes})) +
                               (64u << 10));
  d.svr.set_tcp_nodelay(true);
  d.svr.set_keep_alive_max_count(100);
  d.svr.set_read_timeout(30, 0);
  d.svr.set_write_timeout(10, 0);

  if (d.cfg.port == 0) {
    d.bound_port = d.svr.bind_to_any_port(d.cfg.host);
    if (d.bound_port < 0) throw Error(ErrorCode::io, fmt::format("cannot listen on {}:(any port)", d.cfg.host));
  } else {
    if (!d.svr.bind_to_port(d.cfg.host, d.cfg.port))
      throw Error(ErrorCode::io, fmt::format("cannot listen on {}:{}", d.cfg.host, d.cfg.port));
    d.bound_port = d.cfg.port;
  }
  d.svr.widen_backlog(1024);
  if (d.cfg.public_url.empty()) {
    const bool v6 = d.cfg.host.find(':') != std::string::npos;
    d.cfg.public_url = fmt::format("http://{}{}{}:{}", v6 ? "[" : "", d.cfg.host, v6 ? "]" : "", d.bound_port);
  }
  while (!d.cfg.public_url.empty() && d.cfg.public_url.back() == '/') d.cfg.public_url.pop_back();

  // The runtime's object store signs URLs that point back at this server.
  json rc = d.cfg.runtime;
  if (!rc.contains("objects") || rc["objects"].is_object()) {
    json& o = rc["objects"];
    if (!o.is_object()) o = json::object();
    if (!o.contains("public_base_url")) o["public_base_url"] = d.cfg.public_url + kObjectsPath;
    d.objects_base_url = o["public_base_url"].get<std::string>();
    while (!d.objects_base_url.empty() && d.objects_base_url.back() == '/') d.objects_base_url.pop_back();
  }
  RuntimeConfig runtime_config = runtime_config_from_json(rc);
  const bool demo = uses_demo_model(runtime_config);
  const ScriptedModelOptions demo_options{8, std::chrono::milliseconds(d.cfg.demo_chunk_delay_ms), true};
  if (demo && d.cfg.demo_chunk_delay_ms > 0) runtime_config.model = make_demo_model(demo_options);
  Impl* impl = impl_.get();
  if (d.cfg.demo_jobs_ms > 0) {
    // Opt-in: the render_preview tool; this process finishes its jobs demo_jobs_ms later.
    d.demo_jobs = examples::DemoJobs::create(std::chrono::milliseconds(d.cfg.demo_jobs_ms),
                                             [impl](const std::string& m) { impl->log(LogLevel::warn, m); });
    std::weak_ptr<examples::DemoJobs> jobs = d.demo_jobs;
    runtime_config.job_cancel_hook = [jobs](const JobRecord& j) {
      if (auto dj = jobs.lock()) dj->on_cancelled(j);
    };
    if (demo) runtime_config.model = d.demo_jobs->wrap_model(runtime_config.model, demo_options);
  }
  runtime_config.log = [impl](LogLevel level, std::string_view component, std::string_view message) {
    impl->log(level, fmt::format("{}: {}", component, message));
  };
  runtime_config.log_level = LogLevel::debug;  // filtered by Impl::log
  runtime_config.attachment_limits.max_bytes = L.max_upload_bytes;
  runtime_config.signed_url_ttl = std::chrono::duration_cast<std::chrono::seconds>(L.signed_url_ttl);
  d.rt = std::make_unique<Runtime>(std::move(runtime_config));
  if (demo) register_demo_tools(d.rt->tools());
  if (d.demo_jobs) {
    d.rt->tools().add(d.demo_jobs->tool());
    d.demo_jobs->attach(d.rt.get());
  }

  if (d.cfg.asr.is_object()) {
    json a = d.cfg.asr;
    const std::string type = a.value("type", "openai");
    if (type != "openai")
      throw Error(ErrorCode::invalid_argument, fmt::format("asr type '{}' is unknown (openai)", type));
    a.erase("type");
    d.transcriber = make_openai_transcriber(openai_config_from_json(a));
  }
  d.install_routes();
}

AgentServer::~AgentServer() {
  stop();
  if (impl_->demo_jobs) impl_->demo_jobs->stop();  // it reports to the runtime: stop it before the runtime goes
}

int AgentServer::port() const { return impl_->bound_port; }
const std::string& AgentServer::public_url() const { return impl_->cfg.public_url; }

void AgentServer::run() {
  if (!impl_->svr.listen_after_bind()) {
    std::lock_guard<std::mutex> lock(impl_->streams_mutex);
    if (!impl_->stopping) throw Error(ErrorCode::io, "the server stopped listening unexpectedly");
  }
}

void AgentServer::stop() {
  {
    std::lock_guard<std::mutex> lock(impl_->streams_mutex);
    impl_->stopping = true;
    for (auto* s : impl_->open_subs) s->close();
  }
  impl_->svr.stop();
}

}  // namespace agentrt::server
