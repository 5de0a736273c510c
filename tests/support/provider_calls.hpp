// What the HTTP provider tests share: a configuration aimed at the mock server, a request, and calls expected to fail.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "agentrt/error.hpp"
#include "agentrt/model.hpp"

namespace agentrt::testing {

// An OpenAIConfig or AnthropicConfig for the mock server at `base_url`: the key, short timeouts, two retries after
// millisecond backoffs.
template <class Config>
Config provider_test_config(std::string base_url, std::string key, std::string model) {
  using namespace std::chrono_literals;
  Config c;
  c.base_url = std::move(base_url);
  c.api_key = std::move(key);
  c.model = std::move(model);
  c.connect_timeout = 2s;
  c.request_timeout = 10s;
  c.idle_timeout = 3s;
  c.max_retries = 2;
  c.retry_base_backoff = 1ms;
  c.retry_max_backoff = 4ms;
  return c;
}

// An execution-stage request: a system prompt ("You are terse.") and one user message.
inline ModelRequest user_request(const std::string& text) {
  ModelRequest r;
  r.stage = "execution";
  Message sys;
  sys.role = Role::system;
  sys.content = "You are terse.";
  Message user;
  user.role = Role::user;
  user.content = text;
  r.messages = {sys, user};
  return r;
}

// Runs complete() and returns the Error it threw (fails the test if it did not throw one).
inline Error complete_error(ModelProvider& p, const ModelRequest& r, ModelStreamSink& sink,
                            const CancelToken& cancel = {}) {
  try {
    p.complete(r, sink, cancel);
  } catch (const Error& e) {
    return e;
  }
  FAIL("complete() succeeded but an error was expected");
  return Error(ErrorCode::internal, "unreachable");
}

inline long long ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count();
}

}  // namespace agentrt::testing
