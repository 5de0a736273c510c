// AgentServer: the routes of agentrt-server over HttpServer (Boost.Beast). Requests that call the runtime run
// on the work pool; /health and the limits are answered on the I/O threads.
#include "agent_server.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "agentrt/attachments.hpp"
#include "agentrt/clock.hpp"
#include "agentrt/config.hpp"
#include "agentrt/error.hpp"
#include "agentrt/ids.hpp"
#include "agentrt/json_limits.hpp"
#include "agentrt/openai.hpp"
#include "agentrt/records.hpp"
#include "agentrt/runtime.hpp"
#include "agentrt/scripted_model.hpp"
#include "demo_jobs.hpp"  // examples/cli: the opt-in render_preview demo job tool (--demo-jobs)
#include "event_feeds.hpp"
#include "http_server.hpp"
#include "multipart_form.hpp"
#include "thread_namespace.hpp"
#include "token_table.hpp"
#include "work_pool.hpp"

namespace agentrt::server {

namespace {

using Clock = std::chrono::steady_clock;
using Headers = std::vector<std::pair<std::string, std::string>>;

constexpr std::string_view kApi = "/api/v1";
constexpr std::string_view kObjectsPath = "/api/v1/objects";

// An answer decided before any event: a status and a JSON error {error:{code, message}}.
struct HttpError {
  int status;
  std::string code;
  std::string message;
  Headers headers = {};
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

// What a client is told of a failure on our side: what failed, in words it can use. The details (SQL, paths,
// errno texts) go to the log only.
std::string_view public_message(ErrorCode code) {
  switch (code) {
    case ErrorCode::io: return "the server could not read or write its data; retry later";
    case ErrorCode::timeout: return "the server took too long; retry later";
    case ErrorCode::model: return "the model provider failed";
    default: return "internal error";
  }
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string error_body(std::string_view code, std::string_view message) {
  return dump(json{{"error", {{"code", std::string(code)}, {"message", std::string(message)}}}});
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  if (from.empty()) return s;
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// True when the Accept header prefers application/json to text/event-stream (a missing or wildcard Accept
// keeps the stream). Media ranges are compared by their q values; a range without one has q=1.
bool prefers_json(std::string_view accept) {
  double json_q = -1, sse_q = -1;
  size_t pos = 0;
  while (pos <= accept.size()) {
    size_t end = accept.find(',', pos);
    if (end == std::string_view::npos) end = accept.size();
    std::string range(accept.substr(pos, end - pos));
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

// A single byte range of an object of `size` bytes: "bytes=a-b", "bytes=a-", "bytes=-n".
struct ByteRange {
  enum class Kind { whole, partial, unsatisfiable } kind = Kind::whole;
  uint64_t first = 0;
  uint64_t length = 0;
};

ByteRange parse_range(std::string_view header, uint64_t size) {
  ByteRange r;
  r.length = size;
  constexpr std::string_view unit = "bytes=";
  if (header.substr(0, unit.size()) != unit) return r;  // another unit, or garbage: the whole body
  std::string_view spec = header.substr(unit.size());
  if (spec.find(',') != std::string_view::npos) return r;  // several ranges: the whole body, never a multipart
  const size_t dash = spec.find('-');
  if (dash == std::string_view::npos) return r;
  auto number = [](std::string_view s) -> std::optional<uint64_t> {
    if (s.empty() || s.size() > 19) return std::nullopt;
    uint64_t v = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return std::nullopt;
      v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    return v;
  };
  const auto a = number(spec.substr(0, dash));
  const auto b = number(spec.substr(dash + 1));
  if (!a && !b) return r;
  if (!a) {  // the last *b bytes
    if (*b == 0 || size == 0) return ByteRange{ByteRange::Kind::unsatisfiable, 0, 0};
    const uint64_t n = std::min(*b, size);
    return ByteRange{ByteRange::Kind::partial, size - n, n};
  }
  if (b && *b < *a) return r;  // invalid: ignored
  if (*a >= size) return ByteRange{ByteRange::Kind::unsatisfiable, 0, 0};
  const uint64_t last = b ? std::min(*b, size - 1) : size - 1;
  return ByteRange{ByteRange::Kind::partial, *a, last - *a + 1};
}

// True when an If-None-Match list names `etag` (weak comparison) or is "*".
bool etag_matches(std::string_view list, std::string_view etag) {
  size_t pos = 0;
  while (pos < list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string_view::npos) end = list.size();
    std::string_view item = list.substr(pos, end - pos);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (item.substr(0, 2) == "W/") item.remove_prefix(2);
    if (item == "*" || item == etag) return true;
    pos = end + 1;
  }
  return false;
}

// Route of a request path (no query): which handler, and the {id} it names.
enum class Route {
  none,
  health,
  runs,
  events,
  resume,
  cancel,
  history,
  threads,
  delete_thread,
  thread_jobs,
  job,
  cancel_job,
  uploads,
  object,
  transcriptions,
};

struct Match {
  Route route = Route::none;
  std::string id;
};

Match match_route(std::string_view method, std::string_view path) {
  if (path.substr(0, kObjectsPath.size() + 1) == std::string(kObjectsPath) + "/" &&
      path.size() > kObjectsPath.size() + 1)
    return {method == "GET" ? Route::object : Route::none, {}};
  if (path.substr(0, kApi.size()) != kApi) return {};
  std::string_view rest = path.substr(kApi.size());
  std::vector<std::string_view> seg;
  while (!rest.empty()) {
    if (rest.front() != '/') return {};
    rest.remove_prefix(1);
    const size_t slash = rest.find('/');
    seg.push_back(rest.substr(0, slash));
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  }
  for (const auto& s : seg)
    if (s.empty()) return {};
  auto is = [&](std::initializer_list<std::string_view> want, std::string_view m) {
    if (method != m || seg.size() != want.size()) return false;
    size_t i = 0;
    for (auto w : want) {
      if (w != "*" && w != seg[i]) return false;
      ++i;
    }
    return true;
  };
  if (is({"health"}, "GET")) return {Route::health, {}};
  if (is({"agent", "runs"}, "POST")) return {Route::runs, {}};
  if (is({"agent", "runs", "*", "events"}, "GET")) return {Route::events, std::string(seg[2])};
  if (is({"agent", "runs", "*", "resume"}, "POST")) return {Route::resume, std::string(seg[2])};
  if (is({"agent", "runs", "*", "cancel"}, "POST")) return {Route::cancel, std::string(seg[2])};
  if (is({"agent", "runs", "*", "history"}, "GET")) return {Route::history, std::string(seg[2])};
  if (is({"agent", "threads"}, "GET")) return {Route::threads, {}};
  if (is({"agent", "threads", "*"}, "DELETE")) return {Route::delete_thread, std::string(seg[2])};
  if (is({"agent", "threads", "*", "jobs"}, "GET")) return {Route::thread_jobs, std::string(seg[2])};
  if (is({"agent", "jobs", "*"}, "GET")) return {Route::job, std::string(seg[2])};
  if (is({"agent", "jobs", "*", "cancel"}, "POST")) return {Route::cancel_job, std::string(seg[2])};
  if (is({"agent", "uploads"}, "POST")) return {Route::uploads, {}};
  if (is({"asr", "transcriptions"}, "POST")) return {Route::transcriptions, {}};
  return {};
}

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

}  // namespace

// ------------------------------------------------------------------------------------------------ Impl

struct AgentServer::Impl final : HttpApp {
  // One request on its way: the parsed request, the user (once authenticated), the thread it names (client
  // and runtime ids, for translating answers back) and the headers every answer carries (CORS).
  struct Call {
    HttpRequest req;
    std::shared_ptr<HttpResponder> out;
    Match match;
    std::string user;
    std::string client_thread;
    std::string internal_thread;
    Headers extra;
  };

  // One SSE stream: a feed's subscriber that filters (one run), ends (after its run, or once the thread is
  // idle) and gives back its slot when the connection is over. Thread-safe.
  class SseStream final : public FeedSubscriber,
                          public EventStreamListener,
                          public std::enable_shared_from_this<SseStream> {
   public:
    enum class Mode {
      one_run,     // this run's events until its RUN_FINISHED / RUN_ERROR (POST /agent/runs)
      until_idle,  // the thread's events until nothing runs and everything committed was sent
      follow,      // the thread's events until the client leaves
    };
    SseStream(Impl& owner, std::string user, std::string internal_id, std::string client_id, Mode mode,
              std::string run_id, int64_t after)
        : owner_(owner),
          user_(std::move(user)),
          internal_id_(std::move(internal_id)),
          client_id_(std::move(client_id)),
          mode_(mode),
          run_id_(std::move(run_id)),
          delivered_(after) {}

    void deliver(const SharedChunk* frames, size_t n) override {
      auto w = writer();
      if (!w || n == 0) return;
      // This run's frames only (one_run), up to and with the first terminal one that ends the stream.
      std::vector<SharedChunk> mine;
      mine.reserve(n);
      bool terminal = false;
      for (size_t i = 0; i < n && !(terminal && mode_ == Mode::one_run); ++i) {
        if (mode_ == Mode::one_run && frames[i]->run_id != run_id_) continue;
        mine.push_back(frames[i]);
        terminal = terminal || frames[i]->terminal;
      }
      if (!mine.empty() && !w->push(mine.data(), mine.size())) return;
      delivered_ = frames[n - 1]->seq;
      if (!terminal) return;
      if (mode_ == Mode::one_run) w->finish();
      if (mode_ == Mode::until_idle) owner_.check_idle(shared_from_this());
    }

    void on_tick() override {
      if (mode_ == Mode::until_idle) owner_.check_idle(shared_from_this());
    }

    bool has_room() override {
      auto w = writer();
      return w && !w->ended() && w->has_room();
    }

    void on_drained() override {
      std::shared_ptr<EventFeeds::Member> m;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        m = member_;
      }
      owner_.feeds->wake(m);
    }

    void on_closed() override {
      std::shared_ptr<EventFeeds::Member> m;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (closed_) return;
        closed_ = true;
        m = std::move(member_);
      }
      owner_.feeds->leave(m);
      owner_.release_stream(user_);
    }

    // After start_stream and join: false when the connection was already over (the member must go).
    bool attach(std::shared_ptr<EventStreamWriter> writer, std::shared_ptr<EventFeeds::Member> member) {
      std::lock_guard<std::mutex> lock(mutex_);
      writer_ = std::move(writer);
      if (closed_) return false;
      member_ = std::move(member);
      return true;
    }
    void set_writer(std::shared_ptr<EventStreamWriter> w) {
      std::lock_guard<std::mutex> lock(mutex_);
      writer_ = std::move(w);
    }
    std::shared_ptr<EventStreamWriter> writer() const {
      std::lock_guard<std::mutex> lock(mutex_);
      return writer_;
    }

    const std::string& internal_id() const { return internal_id_; }
    const std::string& client_id() const { return client_id_; }
    Mode mode() const { return mode_; }
    int64_t delivered() const { return delivered_; }

   private:
    Impl& owner_;
    const std::string user_;
    const std::string internal_id_;
    const std::string client_id_;
    const Mode mode_;
    const std::string run_id_;
    std::atomic<int64_t> delivered_;
    mutable std::mutex mutex_;
    std::shared_ptr<EventStreamWriter> writer_;
    std::shared_ptr<EventFeeds::Member> member_;
    bool closed_ = false;
  };

  ServerConfig cfg;
  std::string objects_base_url;
  std::unique_ptr<TokenTable> tokens;
  std::unique_ptr<Runtime> rt;
  std::shared_ptr<examples::DemoJobs> demo_jobs;  // --demo-jobs: render_preview jobs finished by this process
  std::shared_ptr<Transcriber> transcriber;
  RunRateLimiter limiter;
  LogLevel log_threshold;

  // Declared in this order so that they go in the other: the HTTP server first, then the work pool (its
  // queued jobs still see the feeds and the runtime), then the feeds, then (above) the runtime.
  std::unique_ptr<EventFeeds> feeds;
  std::unique_ptr<WorkPool> feed_pool;  // feed pumps only: never behind a request that waits for the store's lock
  std::unique_ptr<WorkPool> pool;       // requests, idle checks, object pieces
  std::unique_ptr<HttpServer> http;

  // The turns this process started or resumed lately: at shutdown each may reach its next commit (pause or
  // end) within the grace before the runtime goes.
  static constexpr size_t kRecentTurns = 4096;
  std::mutex turns_mutex;
  std::deque<std::string> recent_turns;

  void note_turn(const std::string& id) {
    std::lock_guard<std::mutex> lock(turns_mutex);
    recent_turns.push_back(id);
    if (recent_turns.size() > kRecentTurns) recent_turns.pop_front();
  }

  void let_turns_settle(Clock::time_point deadline) {
    std::deque<std::string> turns;
    {
      std::lock_guard<std::mutex> lock(turns_mutex);
      turns.swap(recent_turns);
    }
    for (const auto& id : turns) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return;
      try {
        rt->wait(id, left);
      } catch (const std::exception& e) {
        log(LogLevel::warn, fmt::format("shutdown: turn {}: {}", id, e.what()));
      }
    }
  }

  std::mutex streams_mutex;
  std::unordered_map<std::string, int> user_streams;
  int streams = 0;  // under streams_mutex; /health reads it

  explicit Impl(ServerConfig c)
      : cfg(std::move(c)), limiter(cfg.limits.runs_per_minute, cfg.limits.run_burst), log_threshold(cfg.log_level) {}

  void log(LogLevel level, std::string_view message) const {
    if (log_threshold == LogLevel::off || level < log_threshold) return;
    std::cerr << fmt::format("agentrt-server [{}] {}\n", to_string(level), message) << std::flush;
  }

  // ------------------------------------------------------------------------------------ HttpApp

  HttpResponse error_response(int status, std::string_view code, std::string_view message) override {
    HttpResponse r;
    r.status = status;
    r.content_type = "application/json";
    r.body = error_body(code, message);
    if (status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
    return r;
  }

  Headers cors_headers(const HttpRequest& req) const {
    Headers h;
    if (cfg.cors_origins.empty()) return h;
    const std::string origin(req.header("Origin"));
    bool allowed = false;
    for (const auto& o : cfg.cors_origins) allowed = allowed || o == "*" || o == origin;
    if (!origin.empty() && allowed) {
      h.emplace_back("Access-Control-Allow-Origin", origin);
      h.emplace_back("Vary", "Origin");
      h.emplace_back("Access-Control-Expose-Headers", "Retry-After, ETag, Content-Range");
    }
    return h;
  }

  void access(const HttpRequest& req, int status) const {
    // The path only: object URLs carry their signature in the query.
    if (cfg.access_log)
      std::cerr << fmt::format("agentrt-server {} {} {}\n", req.method, req.path, status) << std::flush;
  }

  HttpResponse early(const HttpRequest& req, HttpResponse r) const {
    for (auto& h : cors_headers(req)) r.headers.push_back(std::move(h));
    access(req, r.status);
    return r;
  }

  // Before any body byte: the route, the encoding, the token, the body limit.
  HeaderVerdict on_header(const HttpRequest& req) override {
    HeaderVerdict v;
    if (req.method == "OPTIONS" && !cfg.cors_origins.empty()) {
      HttpResponse r;
      r.status = 204;
      r.headers = {{"Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS"},
                   {"Access-Control-Allow-Headers",
                    "Authorization, Content-Type, Accept, Last-Event-ID, Range, "
                    "If-None-Match"},
                   {"Access-Control-Max-Age", "600"}};
      v.answer = early(req, std::move(r));
      return v;
    }
    const Match m = match_route(req.method, req.path);
    if (m.route == Route::none) {
      v.answer = early(req, error_response(404, "not_found", "no such endpoint"));
      return v;
    }
    const std::string_view encoding = req.header("Content-Encoding");
    if (!encoding.empty() && !iequals(encoding, "identity")) {
      v.answer = early(req, error_response(415, "unsupported_encoding",
                                           "request bodies are taken without Content-Encoding (identity only)"));
      return v;
    }
    const bool token_required = m.route != Route::health && m.route != Route::object;
    if (token_required || req.has_header("Authorization")) {
      std::string error;
      if (!authenticate(req, error)) {
        v.answer = early(req, error_response(401, "unauthorized", error));
        return v;
      }
    }
    switch (m.route) {
      case Route::uploads: v.body_limit = cfg.limits.max_upload_bytes; break;
      case Route::transcriptions: v.body_limit = cfg.limits.max_audio_bytes + (64u << 10); break;  // the form's parts
      default: v.body_limit = cfg.limits.max_body_bytes; break;
    }
    return v;
  }

  bool authenticate(const HttpRequest& req, std::string& error) const {
    const std::string_view h = req.header("Authorization");
    constexpr std::string_view bearer = "Bearer ";
    if (h.size() > bearer.size() && h.substr(0, bearer.size()) == bearer) {
      if (tokens->find(h.substr(bearer.size()))) return true;
      error = "the bearer token is not valid";
      return false;
    }
    error = "missing 'Authorization: Bearer <token>'";
    return false;
  }

  void on_request(HttpRequest req, std::shared_ptr<HttpResponder> out) override {
    auto call = std::make_shared<Call>();
    call->match = match_route(req.method, req.path);
    call->extra = cors_headers(req);
    call->req = std::move(req);
    call->out = std::move(out);
    if (call->match.route == Route::health) {  // on the I/O thread: never behind the runtime
      int n = 0;
      {
        std::lock_guard<std::mutex> lock(streams_mutex);
        n = streams;
      }
      send_json(*call, 200, json{{"status", "ok"}, {"streams", n}});
      return;
    }
    pool->post([this, call] { handle(*call); });
  }

  // ------------------------------------------------------------------------------------ answers

  void send(Call& c, HttpResponse r) {
    for (auto& h : c.extra) r.headers.push_back(h);
    access(c.req, r.status);
    c.out->send(std::move(r));
  }

  // JSON with the runtime's thread id said as the client's.
  void send_json(Call& c, int status, const json& body) {
    HttpResponse r;
    r.status = status;
    r.content_type = "application/json";
    r.body = dump(body);
    if (!c.internal_thread.empty()) r.body = rewrite_json_string(r.body, c.internal_thread, c.client_thread);
    send(c, std::move(r));
  }

  void send_error(Call& c, int status, std::string_view code, std::string message, Headers headers = {}) {
    if (!c.internal_thread.empty()) message = replace_all(std::move(message), c.internal_thread, c.client_thread);
    HttpResponse r = error_response(status, code, message);
    for (auto& h : headers) r.headers.push_back(std::move(h));
    send(c, std::move(r));
  }

  // Runs the handler, turning every failure into a JSON error answer (5xx without internals).
  void handle(Call& c) {
    try {
      route(c);
    } catch (const HttpError& e) {
      send_error(c, e.status, e.code, e.message, e.headers);
    } catch (const Error& e) {
      const int status = status_for(e.code());
      if (status >= 500) {
        log(LogLevel::error, fmt::format("{} {}: {}: {}", c.req.method, c.req.path, to_string(e.code()), e.message()));
        send_error(c, status, status == 502 ? "upstream_error" : "internal", std::string(public_message(e.code())));
      } else {
        send_error(c, status, to_string(e.code()), e.message());
      }
    } catch (const json::exception& e) {
      send_error(c, 422, "invalid_argument", e.what());
    } catch (const std::exception& e) {
      log(LogLevel::error, fmt::format("{} {}: {}", c.req.method, c.req.path, e.what()));
      send_error(c, 500, "internal", "internal error");
    }
  }

  void route(Call& c) {
    c.user = user_of(c.req);
    switch (c.match.route) {
      case Route::runs: return post_run(c);
      case Route::events: return get_events(c);
      case Route::resume: return post_resume(c);
      case Route::cancel: return post_cancel(c);
      case Route::history: return get_history(c);
      case Route::threads: return get_threads(c);
      case Route::delete_thread: return delete_thread(c);
      case Route::thread_jobs: return get_thread_jobs(c);
      case Route::job: return get_job(c);
      case Route::cancel_job: return post_cancel_job(c);
      case Route::uploads: return post_upload(c);
      case Route::object: return get_object(c);
      case Route::transcriptions: return post_transcription(c);
      case Route::health:
      case Route::none: break;
    }
    throw HttpError{404, "not_found", "no such endpoint"};
  }

  // ------------------------------------------------------------------------------------ plumbing

  // The caller (checked on the header already); "" for an object request without a token.
  std::string user_of(const HttpRequest& req) const {
    const std::string_view h = req.header("Authorization");
    constexpr std::string_view bearer = "Bearer ";
    if (h.size() > bearer.size() && h.substr(0, bearer.size()) == bearer)
      if (auto u = tokens->find(h.substr(bearer.size()))) return *u;
    if (match_route(req.method, req.path).route == Route::object && !req.has_header("Authorization")) return {};
    throw HttpError{401, "unauthorized", "the bearer token is not valid"};
  }

  json parse_json_body(const HttpRequest& req) const {
    if (req.body.size() > cfg.limits.max_body_bytes)
      throw HttpError{413, "too_large",
                      fmt::format("the body is {} bytes; the limit is {}", req.body.size(), cfg.limits.max_body_bytes)};
    // The nesting first, by a scan of the text: a deep one never reaches the parser (nor its stack).
    if (json_text_depth(req.body, kDefaultMaxJsonDepth) > kDefaultMaxJsonDepth)
      throw HttpError{422, "invalid_argument",
                      fmt::format("the body is nested deeper than {} levels", kDefaultMaxJsonDepth)};
    json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded()) throw HttpError{400, "invalid_json", "the body is not valid JSON"};
    if (!body.is_object()) throw HttpError{422, "invalid_argument", "the body must be a JSON object"};
    return body;
  }

  // Names the call's thread: the client's id and the runtime's (the user's namespace).
  void name_thread(Call& c, const std::string& client_id) {
    try {
      c.internal_thread = internal_thread_id(c.user, client_id);
    } catch (const Error& e) {
      throw HttpError{422, "invalid_argument", e.message()};
    }
    c.client_thread = client_id;
  }

  [[noreturn]] void thread_not_found(const Call& c) {
    throw HttpError{404, "not_found", fmt::format("thread {} not found", c.client_thread)};
  }

  // The caller's thread; a deleted one and an unknown one are 404 (another user's cannot be named).
  ThreadRecord own_thread(Call& c, const std::string& client_id) {
    name_thread(c, client_id);
    auto t = rt->thread(c.internal_thread);
    if (!t || t->user_id != c.user || t->deleted) thread_not_found(c);
    return *t;
  }

  // The caller's thread, or no thread yet (a new one may be started under that id).
  void usable_thread(Call& c, const std::string& client_id) {
    name_thread(c, client_id);
    auto t = rt->thread(c.internal_thread);
    if (t && (t->user_id != c.user || t->deleted)) thread_not_found(c);
  }

  void rate_limit(const Call& c) {
    const int64_t wait = limiter.acquire(std::string(c.req.header("Authorization")));
    if (wait > 0)
      throw HttpError{429,
                      "rate_limited",
                      fmt::format("too many runs started with this token; retry in {} s", wait),
                      {{"Retry-After", std::to_string(wait)}}};
  }

  // ------------------------------------------------------------------------------------ streams

  // A slot among max_streams and the user's max_streams_per_user, or 429 at once.
  void reserve_stream(const std::string& user) {
    std::lock_guard<std::mutex> lock(streams_mutex);
    if (streams >= cfg.limits.max_streams)
      throw HttpError{429, "too_many_streams",
                      fmt::format("{} streams are open, the limit of this server; retry later", streams)};
    int& mine = user_streams[user];
    if (mine >= cfg.limits.max_streams_per_user)
      throw HttpError{429, "too_many_streams",
                      fmt::format("you have {} streams open, the limit per user; close one or retry later", mine)};
    ++mine;
    ++streams;
  }

  void release_stream(const std::string& user) {
    std::lock_guard<std::mutex> lock(streams_mutex);
    --streams;
    auto it = user_streams.find(user);
    if (it != user_streams.end() && --it->second <= 0) user_streams.erase(it);
  }

  // Holds a reserved slot until a stream takes it over (or gives it back when the request fails first).
  struct StreamSlot {
    Impl* owner = nullptr;
    std::string user;
    ~StreamSlot() {
      if (owner) owner->release_stream(user);
    }
  };

  StreamSlot take_stream_slot(const std::string& user) {
    reserve_stream(user);
    return StreamSlot{this, user};
  }

  // Answers 200 text/event-stream and joins the thread's feed after `after`: the stream's events as
  // `id: <seq>` + `data: <json>` frames (LF only), ": keep-alive" during silence.
  void open_stream(Call& c, StreamSlot& slot, SseStream::Mode mode, std::string run_id, int64_t after) {
    auto st =
        std::make_shared<SseStream>(*this, c.user, c.internal_thread, c.client_thread, mode, std::move(run_id), after);
    Headers headers = {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}};
    for (auto& h : c.extra) headers.push_back(h);
    access(c.req, 200);
    const auto tick =
        mode == SseStream::Mode::until_idle ? std::chrono::milliseconds(1000) : std::chrono::milliseconds(0);
    auto writer = c.out->start_stream(std::move(headers), st, cfg.limits.keepalive, tick);
    slot.owner = nullptr;  // the stream gives it back (on_closed)
    st->set_writer(writer);
    std::shared_ptr<EventFeeds::Member> member;
    try {
      member = feeds->join(c.internal_thread, c.client_thread, after, st);
    } catch (const std::exception& e) {
      log(LogLevel::error, fmt::format("stream on thread {}: {}", c.client_thread, e.what()));
      writer->finish();
      return;
    }
    if (!st->attach(writer, member)) {
      feeds->leave(member);
      return;
    }
    if (mode == SseStream::Mode::until_idle) check_idle(st);
  }

  // Nothing runs on the thread and every committed event up to what the stream was given was sent: ends it.
  void check_idle(const std::shared_ptr<SseStream>& st) {
    std::weak_ptr<SseStream> w = st;
    pool->post([this, w] {
      auto s = w.lock();
      if (!s) return;
      auto writer = s->writer();
      if (!writer || writer->ended()) return;
      const int64_t delivered = s->delivered();
      auto t = rt->thread(s->internal_id());
      if (t && t->last_seq > delivered) return;
      auto a = rt->active_turn(s->internal_id());
      if (a && (a->status == TurnStatus::running || a->status == TurnStatus::resuming)) return;
      writer->finish();
    });
  }

  // ------------------------------------------------------------------------------------ handlers

  // POST /agent/runs: AG-UI RunAgentInput in, this run's events out. With `Accept: application/json` (preferred
  // to text/event-stream) a start is answered in JSON instead of a stream: a repeated message id with the turn
  // it already started and the messages that turn added (200, existing:true), a new one with the started
  // turn's ids (202, existing:false) to follow on /events.
  void post_run(Call& c) {
    json in = parse_json_body(c.req);
    for (const char* k : {"threadId", "runId"})
      if (!in.contains(k) || !in[k].is_string())
        throw HttpError{422, "invalid_argument", fmt::format("RunAgentInput: '{}' must be a string", k)};
    const std::string run_id = in["runId"].get<std::string>();
    usable_thread(c, in["threadId"].get<std::string>());
    in["threadId"] = c.internal_thread;  // the runtime's name of it
    const json resume = in.value("resume", json());
    if (!resume.is_null() && !resume.is_array())
      throw HttpError{422, "invalid_argument", "RunAgentInput: 'resume' must be an array"};
    if (resume.is_array() && !resume.empty()) {
      auto slot = take_stream_slot(c.user);
      const int64_t after = resume_run(c, run_id, resume);
      open_stream(c, slot, SseStream::Mode::one_run, run_id, after);
      return;
    }
    if (prefers_json(c.req.header("Accept"))) {
      const TurnHandle h = start_run(c, in);
      std::string status;
      if (h.existing)
        if (auto t = rt->turn(h.turn_id)) status = to_string(t->status);
      json out = turn_handle_to_json(h, status);
      out["threadId"] = c.client_thread;
      send_json(c, h.existing ? 200 : 202, out);
      return;
    }
    auto slot = take_stream_slot(c.user);  // a free stream slot before anything starts
    std::string message_id;
    const TurnHandle h = start_run(c, in, &message_id);
    if (h.existing && h.run_id != run_id)
      throw HttpError{409, "already_answered",
                      fmt::format("message {} was already answered by run {}; send a new user message (or ask "
                                  "with 'Accept: application/json' for the messages of that turn)",
                                  message_id, h.run_id)};
    // A repeat replays its run from the start (only that run's events: one_run filters by run id).
    open_stream(c, slot, SseStream::Mode::one_run, run_id, h.existing ? 0 : std::max<int64_t>(0, h.first_seq - 1));
  }

  TurnHandle start_run(Call& c, const json& in, std::string* message_id = nullptr) {
    // Media parts are the runtime's business: it accepts only this server's own signed upload URLs (and
    // upload ids, inline data) for the same user and thread, stores them as bucket/path, and never fetches.
    TurnInput input = turn_input_from_agui(in, c.user);
    if (message_id) *message_id = input.client_message_id;
    rate_limit(c);
    try {
      TurnHandle h = rt->start_turn(input);  // a repeated message id answers with its turn (existing), even paused
      if (!h.existing) note_turn(h.turn_id);
      return h;
    } catch (const Error& e) {
      auto active = e.code() == ErrorCode::conflict ? rt->active_turn(c.internal_thread) : std::nullopt;
      if (!active || active->status != TurnStatus::waiting_approval) throw;
      std::string ids;
      for (const auto& i : active->interrupts) ids += (ids.empty() ? "" : ", ") + i.value("id", std::string());
      throw HttpError{409, "pending_interrupts",
                      fmt::format("thread {} has {} pending interrupt(s) not addressed by resume: {}", c.client_thread,
                                  active->interrupts.size(), ids)};
    }
  }

  // Ownership was checked by the caller (post_run). Returns the sequence number to stream after.
  int64_t resume_run(Call& c, const std::string& run_id, const json& resume) {
    auto decisions = decisions_from_agui_resume(resume);
    std::string turn_id;
    std::string approval_id;
    bool replay = false;
    auto active = rt->active_turn(c.internal_thread);
    if (active && active->status == TurnStatus::waiting_approval) {
      turn_id = active->id;
      approval_id = active->approval_request_id;
    } else {
      // The same request again (a retry after the first was accepted): answer with the first run.
      auto last = rt->last_turn(c.internal_thread);
      if (last && !last->approval_request_id.empty())
        if (auto prior = rt->approval(last->approval_request_id); prior && prior->answer.value("runId", "") == run_id) {
          turn_id = last->id;
          approval_id = last->approval_request_id;
          replay = true;
        }
      if (!replay)
        throw HttpError{409, "no_pending_interrupts",
                        fmt::format("thread {} has no interrupt waiting for an answer", c.client_thread)};
    }
    if (!replay) rate_limit(c);
    const int64_t before = replay ? 0 : rt->thread(c.internal_thread)->last_seq;
    json answer = rt->resume(turn_id, approval_id, decisions, run_id);
    note_turn(turn_id);
    if (answer.value("runId", "") != run_id)
      throw HttpError{409, "already_resumed",
                      fmt::format("the interrupts were already answered by run {}", answer.value("runId", ""))};
    return before;
  }

  // GET /agent/runs/{threadId}/events: replay after Last-Event-ID (or ?after=), then the live tail.
  void get_events(Call& c) {
    own_thread(c, c.match.id);
    std::string cursor(c.req.header("Last-Event-ID"));
    if (cursor.empty() && c.req.has_param("after")) cursor = c.req.param("after");
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
    const std::string follow = c.req.param("follow");
    auto slot = take_stream_slot(c.user);
    open_stream(c, slot, follow == "1" || follow == "true" ? SseStream::Mode::follow : SseStream::Mode::until_idle, {},
                after);
  }

  // POST /agent/runs/{threadId}/resume {approvalRequestId, decisions, runId?} -> 202 {status:"accepted", ...}
  void post_resume(Call& c) {
    own_thread(c, c.match.id);
    json body = parse_json_body(c.req);
    if (!body.contains("approvalRequestId") || !body["approvalRequestId"].is_string())
      throw HttpError{422, "invalid_argument", "'approvalRequestId' must be a string"};
    if (!body.contains("decisions") || !body["decisions"].is_array())
      throw HttpError{422, "invalid_argument", "'decisions' must be an array"};
    const std::string approval_id = body["approvalRequestId"].get<std::string>();
    std::vector<Decision> decisions;
    for (const auto& d : body["decisions"]) decisions.push_back(d.get<Decision>());
    const std::string run_id = body.value("runId", "");
    std::string turn_id;
    if (auto prior = rt->approval(approval_id)) {
      if (prior->thread_id != c.internal_thread)
        throw HttpError{404, "not_found", fmt::format("approval request {} not found", approval_id)};
      turn_id = prior->turn_id;
    } else {
      auto active = rt->active_turn(c.internal_thread);
      if (!active || active->approval_request_id != approval_id)
        throw HttpError{404, "not_found",
                        fmt::format("approval request {} is not open on thread {}", approval_id, c.client_thread)};
      rate_limit(c);
      turn_id = active->id;
    }
    json answer = rt->resume(turn_id, approval_id, decisions, run_id);
    note_turn(turn_id);
    send_json(c, 202, answer);
  }

  // POST /agent/runs/{threadId}/cancel -> 202 {status:"accepted", turnId, runId}
  void post_cancel(Call& c) {
    own_thread(c, c.match.id);
    if (!c.req.body.empty()) parse_json_body(c.req);  // optional body, but not a malformed one
    auto active = rt->active_turn(c.internal_thread);
    if (!active)
      throw HttpError{409, "no_active_turn", fmt::format("thread {} has no running or waiting turn", c.client_thread)};
    rt->cancel(active->id);
    send_json(
        c, 202,
        json{{"status", "accepted"}, {"threadId", c.client_thread}, {"turnId", active->id}, {"runId", active->run_id}});
  }

  // GET /agent/runs/{threadId}/history -> {threadId, messages}
  void get_history(Call& c) {
    own_thread(c, c.match.id);
    json messages = json::array();
    for (auto& m : rt->history(c.internal_thread)) messages.push_back(m);  // attachments re-signed by the runtime
    send_json(c, 200, json{{"threadId", c.client_thread}, {"messages", std::move(messages)}});
  }

  // ------------------------------------------------------------------------------------ jobs

  // The job record as the client sees it: its thread under the client's id.
  json client_job(const Call& c, const JobRecord& j) {
    std::string text = dump(job_to_json(j));
    if (auto client = client_thread_id(c.user, j.thread_id)) text = rewrite_json_string(text, j.thread_id, *client);
    return json::parse(text);
  }

  // The caller's job: another user's job, one on a deleted thread and an unknown one are all 404.
  JobRecord own_job(const Call& c, const std::string& job_id) {
    if (const char* problem = id_problem(job_id))
      throw HttpError{422, "invalid_argument", fmt::format("the job id {}", problem)};
    auto j = rt->job(job_id);
    auto t = j ? rt->thread(j->thread_id) : std::nullopt;
    if (!j || j->user_id != c.user || !t || t->user_id != c.user || t->deleted)
      throw HttpError{404, "not_found", fmt::format("job {} not found", job_id)};
    return *j;
  }

  // GET /agent/jobs/{jobId} -> the job record (agentrt::job_to_json)
  void get_job(Call& c) { send_json(c, 200, client_job(c, own_job(c, c.match.id))); }

  // POST /agent/jobs/{jobId}/cancel, optional body {reason} -> the cancelled record. The runtime calls the
  // job cancel hook and adds the outcome to the thread's history. A job that has already ended otherwise, or
  // waits for the person's confirmation, is 409 invalid_state; a cancelled one is answered unchanged.
  void post_cancel_job(Call& c) {
    const std::string job_id = c.match.id;
    std::string reason;
    if (!c.req.body.empty()) {
      json body = parse_json_body(c.req);
      if (body.contains("reason")) {
        if (!body["reason"].is_string()) throw HttpError{422, "invalid_argument", "'reason' must be a string"};
        reason = body["reason"].get<std::string>();
      }
    }
    own_job(c, job_id);
    send_json(c, 200, client_job(c, rt->cancel_job(job_id, reason)));
  }

  // GET /agent/threads/{threadId}/jobs -> {threadId, jobs:[...]} in creation order
  void get_thread_jobs(Call& c) {
    own_thread(c, c.match.id);
    json jobs = json::array();
    for (const auto& j : rt->jobs(c.internal_thread)) jobs.push_back(job_to_json(j));
    send_json(c, 200, json{{"threadId", c.client_thread}, {"jobs", std::move(jobs)}});
  }

  // GET /agent/threads -> {threads:[{id, title, createdAt, updatedAt, lastSeq}]}: the caller's namespace only.
  void get_threads(Call& c) {
    json out = json::array();
    for (const auto& t : rt->threads(c.user)) {
      auto id = client_thread_id(c.user, t.id);
      if (!id) continue;  // not made through this server's namespaces
      json record = thread_to_json(t);
      record["id"] = *id;
      out.push_back(std::move(record));
    }
    send_json(c, 200, json{{"threads", std::move(out)}});
  }

  // DELETE /agent/threads/{id}: soft delete (a running or waiting turn is cancelled first).
  void delete_thread(Call& c) {
    own_thread(c, c.match.id);
    // The runtime cancels an active turn first; the store refuses a start on the deleted thread.
    rt->delete_thread(c.internal_thread, c.user);
    send_json(c, 200, json{{"id", c.client_thread}, {"deleted", true}});
  }

  // ------------------------------------------------------------------------------------ uploads, objects

  // POST /agent/uploads?threadId=T, raw body with its Content-Type -> 201 {id, url, mimeType, size, ...}
  void post_upload(Call& c) {
    if (!rt->config().objects)
      throw HttpError{501, "unsupported", "uploads need an object store; this server has none"};
    const std::string thread_id = c.req.param("threadId");
    if (thread_id.empty()) throw HttpError{400, "missing_thread", "the query parameter 'threadId' is required"};
    require_client_thread_id(thread_id);
    usable_thread(c, thread_id);
    if (c.req.body.size() > cfg.limits.max_upload_bytes)
      throw HttpError{
          413, "too_large",
          fmt::format("the file is {} bytes; the limit is {}", c.req.body.size(), cfg.limits.max_upload_bytes)};
    const std::string mime = normalize_mime(c.req.header("Content-Type"));
    try {
      check_attachment(mime, c.req.body.size(), rt->config().attachment_limits);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::invalid_argument) throw HttpError{422, "unsupported_media_type", e.message()};
      throw;
    }
    const Upload u = rt->upload(c.user, c.internal_thread, c.req.body, mime);
    send_json(c, 201, upload_to_json(u));
  }

  // GET /objects/{bucket}/{key}?expires&sig: the signature is the credential (an <img src> sends no header).
  // Streamed from the store in pieces; one byte range (206), ETag / If-None-Match (304).
  void get_object(Call& c) {
    auto objects = rt->config().objects;
    if (!objects) throw HttpError{404, "not_found", "no object store"};
    const std::string& target = c.req.target;
    if (target.rfind(kObjectsPath, 0) != 0) throw HttpError{404, "not_found", "not an object URL"};
    std::string key;
    try {
      key = objects->verify_url(objects_base_url + target.substr(kObjectsPath.size()), now_ms());
    } catch (const Error& e) {
      if (e.code() == ErrorCode::expired) throw HttpError{401, "expired", "the object URL has expired"};
      throw HttpError{401, "invalid_signature", "the object URL's signature is missing or wrong"};
    }
    // Only user uploads are served; and a caller who names itself must own them.
    constexpr std::string_view root = "agent-inputs/";
    if (key.rfind(root, 0) != 0) throw HttpError{404, "not_found", "object not found"};
    if (!c.user.empty()) {
      const std::string owner = key.substr(root.size(), key.find('/', root.size()) - root.size());
      if (owner != c.user) throw HttpError{404, "not_found", "object not found"};
    }
    auto info = objects->head(key);
    if (!info) throw HttpError{404, "not_found", "object not found"};
    const std::string etag = "\"" + info->sha256 + "\"";
    Headers common = {{"ETag", etag},
                      {"Accept-Ranges", "bytes"},
                      {"Cache-Control", "private, max-age=300"},
                      {"X-Content-Type-Options", "nosniff"}};
    const std::string_view inm = c.req.header("If-None-Match");
    if (!inm.empty() && etag_matches(inm, etag)) {
      HttpResponse r;
      r.status = 304;
      r.headers = common;
      return send(c, std::move(r));
    }
    ByteRange range;
    range.length = info->size;
    const std::string_view if_range = c.req.header("If-Range");
    if (c.req.has_header("Range") && (if_range.empty() || if_range == etag))
      range = parse_range(c.req.header("Range"), info->size);
    if (range.kind == ByteRange::Kind::unsatisfiable) {
      HttpResponse r = error_response(416, "range_not_satisfiable",
                                      fmt::format("the object has {} bytes; the range is outside them", info->size));
      r.headers = common;
      r.headers.emplace_back("Content-Range", fmt::format("bytes */{}", info->size));
      return send(c, std::move(r));
    }
    HttpResponse head;
    head.status = range.kind == ByteRange::Kind::partial ? 206 : 200;
    head.content_type = info->content_type;
    head.headers = common;
    if (range.kind == ByteRange::Kind::partial)
      head.headers.emplace_back("Content-Range",
                                fmt::format("bytes {}-{}/{}", range.first, range.first + range.length - 1, info->size));
    for (auto& h : c.extra) head.headers.push_back(h);
    access(c.req, head.status);
    c.out->stream_body(
        std::move(head), range.first, range.length,
        [objects, key](uint64_t offset, size_t max) {
          auto piece = objects->read(key, offset, max);
          if (!piece) throw Error(ErrorCode::not_found, "the object went away while it was being sent");
          return std::move(*piece);
        },
        [this](std::function<void()> job) { pool->post(std::move(job)); });
  }

  // POST /asr/transcriptions: multipart (file, optional language and prompt) or a raw audio body -> {transcript}
  void post_transcription(Call& c) {
    if (!transcriber)
      throw HttpError{501, "unsupported", "speech-to-text is not configured on this server ('asr' in the config)"};
    const HttpRequest& req = c.req;
    std::string audio;
    std::string mime;
    TranscribeOptions options;
    if (auto boundary = multipart_boundary(req.header("Content-Type"))) {
      std::vector<FormPart> parts;
      try {
        parts = parse_multipart_form(req.body, *boundary);
      } catch (const Error& e) {
        throw HttpError{400, "bad_request", e.message()};
      }
      const FormPart* file = nullptr;
      for (const auto& p : parts) {
        if (p.name == "file" && !file) file = &p;
        if (p.name == "language") options.language = p.data;
        if (p.name == "prompt") options.prompt = p.data;
      }
      if (!file) throw HttpError{422, "invalid_argument", "the multipart form needs a 'file' part"};
      audio = file->data;
      mime = normalize_mime(file->content_type);
      options.filename = file->filename;
    } else {
      audio = req.body;
      mime = normalize_mime(req.header("Content-Type"));
      options.language = req.param("language");
    }
    if (audio.size() > cfg.limits.max_audio_bytes)
      throw HttpError{413, "too_large",
                      fmt::format("the audio is {} bytes; the limit is {}", audio.size(), cfg.limits.max_audio_bytes)};
    std::string text;
    try {
      text = transcriber->transcribe(audio, mime, options);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::io || e.code() == ErrorCode::model || e.code() == ErrorCode::timeout) {
        log(LogLevel::warn, fmt::format("transcription: {}", e.message()));
        throw HttpError{502, "upstream_error", "the transcription service failed"};
      }
      throw;
    }
    send_json(c, 200, json{{"transcript", text}});
  }
};

// ------------------------------------------------------------------------------------------------ AgentServer

AgentServer::AgentServer(ServerConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {
  auto& d = *impl_;
  validate_server_config(d.cfg);
  const auto& L = d.cfg.limits;
  d.tokens = std::make_unique<TokenTable>(d.cfg.tokens);

  HttpLimits hl;
  hl.max_header_bytes = L.max_header_bytes;
  hl.max_header_fields = L.max_header_fields;
  hl.header_timeout = L.header_timeout;
  hl.idle_timeout = L.idle_timeout;
  hl.body_timeout = L.body_timeout;
  hl.write_timeout = L.write_timeout;
  hl.max_connections = L.max_connections;
  hl.max_connections_per_client = L.max_connections_per_client;
  hl.reserve_connections = L.reserve_connections;
  hl.listen_backlog = L.listen_backlog;
  hl.stream_buffer_bytes = L.stream_buffer_bytes;
  hl.io_threads = L.io_threads;
  d.http = std::make_unique<HttpServer>(d.cfg.host, d.cfg.port, hl, d);
  Impl* impl = impl_.get();
  d.http->set_log([impl](std::string_view m) { impl->log(LogLevel::error, m); });
  if (d.cfg.public_url.empty()) {
    const bool v6 = d.cfg.host.find(':') != std::string::npos;
    d.cfg.public_url = fmt::format("http://{}{}{}:{}", v6 ? "[" : "", d.cfg.host, v6 ? "]" : "", d.http->port());
  }
  while (!d.cfg.public_url.empty() && d.cfg.public_url.back() == '/') d.cfg.public_url.pop_back();

  // The runtime's object store signs URLs that point back at this server.
  json rc = d.cfg.runtime;
  if (!rc.contains("objects") || rc["objects"].is_object()) {
    json& o = rc["objects"];
    if (!o.is_object()) o = json::object();
    if (!o.contains("public_base_url")) o["public_base_url"] = d.cfg.public_url + std::string(kObjectsPath);
    d.objects_base_url = o["public_base_url"].get<std::string>();
    while (!d.objects_base_url.empty() && d.objects_base_url.back() == '/') d.objects_base_url.pop_back();
  }
  RuntimeConfig runtime_config = runtime_config_from_json(rc);
  const bool demo = uses_demo_model(runtime_config);
  const ScriptedModelOptions demo_options{8, std::chrono::milliseconds(d.cfg.demo_chunk_delay_ms), true};
  if (demo && d.cfg.demo_chunk_delay_ms > 0) runtime_config.model = make_demo_model(demo_options);
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
  d.pool = std::make_unique<WorkPool>(L.work_threads, [impl](std::string_view m) { impl->log(LogLevel::error, m); });
  d.feed_pool = std::make_unique<WorkPool>(2, [impl](std::string_view m) { impl->log(LogLevel::error, m); });
  d.feeds = std::make_unique<EventFeeds>(
      *d.rt, [impl](std::function<void()> job) { impl->feed_pool->post(std::move(job)); },
      [impl](std::string_view m) { impl->log(LogLevel::error, m); });
}

AgentServer::~AgentServer() {
  stop();
  auto& d = *impl_;
  const auto deadline = Clock::now() + d.cfg.limits.shutdown_grace;
  d.http.reset();  // no request reaches the pool any more
  d.pool.reset();  // what is queued runs (answers to closed connections go nowhere)
  d.feed_pool.reset();
  d.feeds.reset();
  d.let_turns_settle(deadline);          // running turns reach their next commit (or the grace runs out)
  if (d.demo_jobs) d.demo_jobs->stop();  // it reports to the runtime: stop it before the runtime goes
}

int AgentServer::port() const { return impl_->http->port(); }
const std::string& AgentServer::public_url() const { return impl_->cfg.public_url; }

void AgentServer::run() { impl_->http->run(); }

void AgentServer::stop() {
  if (impl_->http) impl_->http->stop(impl_->cfg.limits.shutdown_grace);
}

}  // namespace agentrt::server
