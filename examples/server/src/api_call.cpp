#include "api_call.hpp"

#include <iostream>

#include <fmt/format.h>

#include "agentrt/json_limits.hpp"
#include "thread_namespace.hpp"

namespace agentrt::server {

HttpResponse error_response(int status, std::string_view code, std::string_view message) {
  HttpResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.body = dump(json{{"error", {{"code", std::string(code)}, {"message", std::string(message)}}}});
  if (status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  if (from.empty()) return s;
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
  return s;
}

void log_access(bool enabled, const HttpRequest& req, int status) {
  if (enabled) std::cerr << fmt::format("agentrt-server {} {} {}\n", req.method, req.path, status) << std::flush;
}

json parse_json_body(const HttpRequest& req, size_t max_body_bytes) {
  if (req.body.size() > max_body_bytes)
    throw ApiError{413, "too_large",
                   fmt::format("the body is {} bytes; the limit is {}", req.body.size(), max_body_bytes)};
  // The nesting first, by a scan of the text: a deep one never reaches the parser (nor its stack).
  if (json_text_depth(req.body, kDefaultMaxJsonDepth) > kDefaultMaxJsonDepth)
    throw ApiError{422, "invalid_argument",
                   fmt::format("the body is nested deeper than {} levels", kDefaultMaxJsonDepth)};
  json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded()) throw ApiError{400, "invalid_json", "the body is not valid JSON"};
  if (!body.is_object()) throw ApiError{422, "invalid_argument", "the body must be a JSON object"};
  return body;
}

void ApiCall::send(HttpResponse r) {
  for (auto& h : extra) r.headers.push_back(h);
  log_access(access_log, req, r.status);
  out->send(std::move(r));
}

void ApiCall::send_json(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.body = dump(body);
  if (!internal_thread.empty()) r.body = rewrite_json_string(r.body, internal_thread, client_thread);
  send(std::move(r));
}

void ApiCall::send_error(int status, std::string_view code, std::string message, Headers headers) {
  if (!internal_thread.empty()) message = replace_all(std::move(message), internal_thread, client_thread);
  HttpResponse r = error_response(status, code, message);
  for (auto& h : headers) r.headers.push_back(std::move(h));
  send(std::move(r));
}

}  // namespace agentrt::server
