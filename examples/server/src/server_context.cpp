#include "server_context.hpp"

#include <iostream>

#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "thread_namespace.hpp"

namespace agentrt::server {

namespace {

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

}  // namespace

void ServerContext::answer_failure(ApiCall& c, std::exception_ptr failure) const {
  try {
    std::rethrow_exception(std::move(failure));
  } catch (const ApiError& e) {
    c.send_error(e.status, e.code, e.message, e.headers);
  } catch (const Error& e) {
    const int status = status_for(e.code());
    if (status >= 500) {
      log(LogLevel::error, fmt::format("{} {}: {}: {}", c.req.method, c.req.path, to_string(e.code()), e.message()));
      c.send_error(status, status == 502 ? "upstream_error" : "internal", std::string(public_message(e.code())));
    } else {
      c.send_error(status, to_string(e.code()), e.message());
    }
  } catch (const json::exception& e) {
    c.send_error(422, "invalid_argument", e.what());
  } catch (const std::exception& e) {
    log(LogLevel::error, fmt::format("{} {}: {}", c.req.method, c.req.path, e.what()));
    c.send_error(500, "internal", "internal error");
  } catch (...) {
    log(LogLevel::error, fmt::format("{} {}: a non-standard exception", c.req.method, c.req.path));
    c.send_error(500, "internal", "internal error");
  }
}

void ServerContext::post_work(std::function<void()> job) {
  std::shared_lock<std::shared_mutex> lock(work_mutex);
  if (!work_closed && pool) pool->post(std::move(job));
}

void ServerContext::close_work() {
  std::unique_lock<std::shared_mutex> lock(work_mutex);
  work_closed = true;
}

void ServerContext::log(LogLevel level, std::string_view message) const {
  if (log_threshold == LogLevel::off || level < log_threshold) return;
  std::cerr << fmt::format("agentrt-server [{}] {}\n", to_string(level), message) << std::flush;
}

void ServerContext::name_thread(ApiCall& c, const std::string& client_id) const {
  try {
    c.internal_thread = internal_thread_id(c.user, client_id);
  } catch (const Error& e) {
    throw ApiError{422, "invalid_argument", e.message()};
  }
  c.client_thread = client_id;
}

namespace {
[[noreturn]] void thread_not_found(const ApiCall& c) {
  throw ApiError{404, "not_found", fmt::format("thread {} not found", c.client_thread)};
}
}  // namespace

ThreadRecord ServerContext::own_thread(ApiCall& c, const std::string& client_id) const {
  name_thread(c, client_id);
  auto t = rt->thread(c.internal_thread);
  if (!t || t->user_id != c.user || t->deleted) thread_not_found(c);
  return *t;
}

void ServerContext::usable_thread(ApiCall& c, const std::string& client_id) const {
  name_thread(c, client_id);
  check_usable(c);
}

void ServerContext::check_usable(const ApiCall& c) const {
  auto t = rt->thread(c.internal_thread);
  if (t && (t->user_id != c.user || t->deleted)) thread_not_found(c);
}

void ServerContext::rate_limit(const ApiCall& c) {
  // By the token itself: the ways of writing its header (the scheme's case, spaces) are one token's.
  const int64_t wait = limiter.acquire(std::string(c.req.bearer_token().value_or("")));
  if (wait > 0)
    throw ApiError{429,
                   "rate_limited",
                   fmt::format("too many runs started with this token; retry in {} s", wait),
                   {{"Retry-After", std::to_string(wait)}}};
}

}  // namespace agentrt::server
