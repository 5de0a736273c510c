// AgentServer: the agentrt Runtime behind HttpServer (Boost.Beast) — the wiring of its parts, and the API's
// entry: CORS, the route, the encoding, the token and the body limit judged from the header; each request then
// handed to its route group (routes.hpp) on the work pool, its failures answered as JSON errors. /health and the
// limits are answered on the I/O threads.
#include "agent_server.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <memory>

#include <fmt/format.h>

#include "agentrt/config.hpp"
#include "agentrt/error.hpp"
#include "agentrt/scripted_model.hpp"
#include "http_server.hpp"
#include "routes.hpp"
#include "server_context.hpp"

namespace agentrt::server {

namespace {

using Clock = std::chrono::steady_clock;

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

// The API as HttpServer's application: judges each request from its header, then runs its route group on the
// work pool. Thread-safe: called from every I/O thread at once; its state is the context's parts.
struct AgentServer::Impl final : HttpApp {
  explicit Impl(ServerConfig c) : ctx(std::move(c)) {}

  ServerContext ctx;
  std::unique_ptr<HttpServer> http;  // declared last: it goes first

  HttpResponse error_response(int status, std::string_view code, std::string_view message) override {
    return server::error_response(status, code, message);
  }

  Headers cors_headers(const HttpRequest& req) const {
    Headers h;
    if (ctx.cfg.cors_origins.empty()) return h;
    // Every answer depends on the Origin (the allowed one's is echoed, another's is not): a cache must not give
    // one origin's answer to another.
    h.emplace_back("Vary", "Origin");
    const std::string origin(req.header("Origin"));
    bool allowed = false;
    for (const auto& o : ctx.cfg.cors_origins) allowed = allowed || o == "*" || o == origin;
    if (!origin.empty() && allowed) {
      h.emplace_back("Access-Control-Allow-Origin", origin);
      h.emplace_back("Access-Control-Expose-Headers", "Retry-After, ETag, Content-Range");
    }
    return h;
  }

  HttpResponse early(const HttpRequest& req, HttpResponse r) const {
    for (auto& h : cors_headers(req)) r.headers.push_back(std::move(h));
    log_access(ctx.cfg.access_log, req, r.status);
    return r;
  }

  // Before any body byte: the route, the encoding, the token, the body limit.
  HeaderVerdict on_header(const HttpRequest& req) override {
    HeaderVerdict v;
    if (req.method == "OPTIONS" && !ctx.cfg.cors_origins.empty()) {
      HttpResponse r;
      r.status = 204;
      r.headers = {{"Access-Control-Allow-Methods", "GET, HEAD, POST, DELETE, OPTIONS"},
                   {"Access-Control-Allow-Headers",
                    "Authorization, Content-Type, Accept, Last-Event-ID, Range, If-Range, "
                    "If-None-Match"},
                   {"Access-Control-Max-Age", "600"}};
      v.answer = early(req, std::move(r));
      return v;
    }
    const RouteMatch m = route_of(req);
    if (m.route == Route::none && m.allow.empty()) {
      v.answer = early(req, error_response(404, "not_found", "no such endpoint"));
      return v;
    }
    // A path the API has, under another method; or HEAD of an event stream (no header of its own to give).
    if (m.route == Route::none || (req.head && m.route == Route::events)) {
      const std::string method = req.head ? "HEAD" : req.method;
      const std::string allow = m.route == Route::none ? m.allow : "GET";
      HttpResponse r = error_response(405, "method_not_allowed",
                                      fmt::format("{} is not served on this path; it takes {}", method, allow));
      r.headers.emplace_back("Allow", allow);
      v.answer = early(req, std::move(r));
      return v;
    }
    const std::string_view encoding = req.header("Content-Encoding");
    if (!encoding.empty() && !iequals(encoding, "identity")) {
      v.answer = early(req, error_response(415, "unsupported_encoding",
                                           "request bodies are taken without Content-Encoding (identity only)"));
      return v;
    }
    const bool token_required = m.route != Route::health && m.route != Route::object && m.route != Route::web;
    if (std::count_if(req.headers.begin(), req.headers.end(),
                      [](const auto& f) { return iequals(f.first, "Authorization"); }) > 1) {
      v.answer = early(req, error_response(400, "bad_request", "more than one Authorization header field"));
      return v;
    }
    if (token_required || req.has_header("Authorization")) {
      std::string error;
      if (!authenticate(req, error)) {
        v.answer = early(req, error_response(401, "unauthorized", error));
        return v;
      }
    }
    const auto& L = ctx.cfg.limits;
    switch (m.route) {
      case Route::uploads: v.body_limit = L.max_upload_bytes; break;
      case Route::transcriptions: v.body_limit = L.max_audio_bytes + (64u << 10); break;  // the form's parts
      default: v.body_limit = L.max_body_bytes; break;
    }
    return v;
  }

  // The API's route, or the web page's files for a GET outside the API.
  RouteMatch route_of(const HttpRequest& req) const {
    RouteMatch m = match_route(req.method, req.path);
    if (m.route == Route::none && is_web_request(ctx.cfg, req)) m.route = Route::web;
    return m;
  }

  bool authenticate(const HttpRequest& req, std::string& error) const {
    if (const auto token = req.bearer_token()) {
      if (ctx.tokens->find(*token)) return true;
      error = "the bearer token is not valid";
      return false;
    }
    error = "missing 'Authorization: Bearer <token>'";
    return false;
  }

  void on_request(HttpRequest req, std::shared_ptr<HttpResponder> out) override {
    auto call = std::make_shared<ApiCall>();
    call->match = route_of(req);
    call->extra = cors_headers(req);
    call->access_log = ctx.cfg.access_log;
    call->req = std::move(req);
    call->out = std::move(out);
    if (call->match.route == Route::health) {  // on the I/O thread: never behind the runtime
      call->send_json(200, json{{"status", "ok"}, {"streams", ctx.stream_slots.open()}});
      return;
    }
    ctx.pool->post([this, call] { handle(*call); });
  }

  // Runs the handler, turning every failure into a JSON error answer (5xx without internals).
  void handle(ApiCall& c) {
    try {
      route(c);
    } catch (...) {
      ctx.answer_failure(c, std::current_exception());
    }
  }

  void route(ApiCall& c) {
    c.user = user_of(c.req);
    ServerContext& s = ctx;
    switch (c.match.route) {
      case Route::runs: return post_run(s, c);
      case Route::events: return get_events(s, c);
      case Route::resume: return post_resume(s, c);
      case Route::cancel: return post_cancel(s, c);
      case Route::history: return get_history(s, c);
      case Route::threads: return get_threads(s, c);
      case Route::delete_thread: return delete_thread(s, c);
      case Route::thread_jobs: return get_thread_jobs(s, c);
      case Route::thread_spend: return get_thread_spend(s, c);
      case Route::spend: return get_spend(s, c);
      case Route::job: return get_job(s, c);
      case Route::cancel_job: return post_cancel_job(s, c);
      case Route::uploads: return post_upload(s, c);
      case Route::object: return get_object(s, c);
      case Route::transcriptions: return post_transcription(s, c);
      case Route::capabilities: return get_capabilities(s, c);
      case Route::connect: return post_connect(s, c);
      case Route::mcp_tools: return get_mcp_tools(s, c);
      case Route::approve_mcp_tool: return post_approve_mcp_tool(s, c);
      case Route::web: return get_web(s, c);
      case Route::health:
      case Route::none: break;
    }
    throw ApiError{404, "not_found", "no such endpoint"};
  }

  // The caller (checked on the header already); "" for an object request without a token.
  std::string user_of(const HttpRequest& req) const {
    if (const auto token = req.bearer_token())
      if (auto u = ctx.tokens->find(*token)) return *u;
    const Route r = route_of(req).route;
    if ((r == Route::object || r == Route::web) && !req.has_header("Authorization")) return {};
    throw ApiError{401, "unauthorized", "the bearer token is not valid"};
  }
};

// ------------------------------------------------------------------------------------------------ AgentServer

AgentServer::AgentServer(ServerConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {
  auto& d = *impl_;
  ServerContext& s = d.ctx;
  validate_server_config(s.cfg);
  const auto& L = s.cfg.limits;
  s.tokens = std::make_unique<TokenTable>(s.cfg.tokens);

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
  d.http = std::make_unique<HttpServer>(s.cfg.host, s.cfg.port, hl, d);
  Impl* impl = impl_.get();
  d.http->set_log([impl](std::string_view m) { impl->ctx.log(LogLevel::error, m); });
  if (s.cfg.public_url.empty()) {
    const bool v6 = s.cfg.host.find(':') != std::string::npos;
    s.cfg.public_url = fmt::format("http://{}{}{}:{}", v6 ? "[" : "", s.cfg.host, v6 ? "]" : "", d.http->port());
  }
  while (!s.cfg.public_url.empty() && s.cfg.public_url.back() == '/') s.cfg.public_url.pop_back();

  // The runtime's object store signs URLs that point back at this server.
  json rc = s.cfg.runtime;
  if (!rc.contains("objects") || rc["objects"].is_object()) {
    json& o = rc["objects"];
    if (!o.is_object()) o = json::object();
    if (!o.contains("public_base_url")) o["public_base_url"] = s.cfg.public_url + std::string(kObjectsPath);
    s.objects_base_url = o["public_base_url"].get<std::string>();
    while (!s.objects_base_url.empty() && s.objects_base_url.back() == '/') s.objects_base_url.pop_back();
  }
  RuntimeConfig runtime_config = runtime_config_from_json(rc);
  const bool demo = uses_demo_model(runtime_config);
  const ScriptedModelOptions demo_options{8, std::chrono::milliseconds(s.cfg.demo_chunk_delay_ms), true};
  if (demo && s.cfg.demo_chunk_delay_ms > 0) runtime_config.model = make_demo_model(demo_options);
  if (s.cfg.demo_jobs_ms > 0) {
    // Opt-in: the render_preview tool; this process finishes its jobs demo_jobs_ms later.
    s.demo_jobs = examples::DemoJobs::create(std::chrono::milliseconds(s.cfg.demo_jobs_ms),
                                             [impl](const std::string& m) { impl->ctx.log(LogLevel::warn, m); });
    std::weak_ptr<examples::DemoJobs> jobs = s.demo_jobs;
    runtime_config.job_cancel_hook = [jobs](const JobRecord& j) {
      if (auto dj = jobs.lock()) dj->on_cancelled(j);
    };
    if (demo) runtime_config.model = s.demo_jobs->wrap_model(runtime_config.model, demo_options);
  }
  runtime_config.log = [impl](LogLevel level, std::string_view component, std::string_view message) {
    impl->ctx.log(level, fmt::format("{}: {}", component, message));
  };
  runtime_config.log_level = LogLevel::debug;  // filtered by Impl::log
  runtime_config.attachment_limits.max_bytes = L.max_upload_bytes;
  runtime_config.signed_url_ttl = std::chrono::duration_cast<std::chrono::seconds>(L.signed_url_ttl);
  s.rt = std::make_unique<Runtime>(std::move(runtime_config));
  if (demo) register_demo_tools(s.rt->tools());
  if (s.demo_jobs) {
    s.rt->tools().add(s.demo_jobs->tool());
    s.demo_jobs->attach(s.rt.get());
  }

  if (s.cfg.asr.is_object()) {
    json a = s.cfg.asr;
    const std::string type = a.value("type", "openai");
    if (type != "openai")
      throw Error(ErrorCode::invalid_argument, fmt::format("asr type '{}' is unknown (openai)", type));
    a.erase("type");
    s.transcriber = make_openai_transcriber(openai_config_from_json(a));
  }
  s.pool =
      std::make_unique<WorkPool>(L.work_threads, [impl](std::string_view m) { impl->ctx.log(LogLevel::error, m); });
  s.feed_pool = std::make_unique<WorkPool>(2, [impl](std::string_view m) { impl->ctx.log(LogLevel::error, m); });
  s.feeds = std::make_unique<EventFeeds>(
      *s.rt, [impl](std::function<void()> job) { impl->ctx.feed_pool->post(std::move(job)); },
      [impl](std::string_view m) { impl->ctx.log(LogLevel::error, m); });
}

AgentServer::~AgentServer() {
  stop();
  auto& d = *impl_;
  ServerContext& s = d.ctx;
  const auto deadline = Clock::now() + s.cfg.limits.shutdown_grace;
  d.http.reset();  // no request reaches the pool any more
  s.close_work();  // nor a streamed start's answer (the runtime's callbacks come until it goes)
  s.pool.reset();  // what is queued runs (answers to closed connections go nowhere)
  s.feed_pool.reset();
  s.feeds.reset();
  // Running turns reach their next commit (or the grace runs out).
  s.recent_turns.settle(*s.rt, deadline, [&s](std::string_view m) { s.log(LogLevel::warn, m); });
  if (s.demo_jobs) s.demo_jobs->stop();  // it reports to the runtime: stop it before the runtime goes
  // The runtime goes while the rest of the context is there: a start it still tells lets go of what its callback
  // holds (a stream slot, the request) into a context that is whole.
  s.rt.reset();
}

int AgentServer::port() const { return impl_->http->port(); }
const std::string& AgentServer::public_url() const { return impl_->ctx.cfg.public_url; }

void AgentServer::run() { impl_->http->run(); }

void AgentServer::stop() {
  if (impl_->http) impl_->http->stop(impl_->ctx.cfg.limits.shutdown_grace);
}

}  // namespace agentrt::server
