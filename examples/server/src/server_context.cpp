#include "server_context.hpp"

#include <iostream>

#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "thread_namespace.hpp"

namespace agentrt::server {

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
