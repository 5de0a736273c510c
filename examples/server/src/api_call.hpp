// ApiCall: one request to agentrt-server's API on its way — the request, its answering end, the caller, the
// thread it names — and ApiError, an answer decided before any event.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentrt/json.hpp"
#include "http_server.hpp"
#include "route_table.hpp"

namespace agentrt::server {

using Headers = std::vector<std::pair<std::string, std::string>>;

// A failure answered as a status and a JSON error {error:{code, message}} (thrown by the route handlers).
struct ApiError {
  int status;
  std::string code;
  std::string message;
  Headers headers = {};
};

// The JSON error answer every error of the API is: {error:{code, message}} (a 401 with WWW-Authenticate).
HttpResponse error_response(int status, std::string_view code, std::string_view message);

// JSON text as the API writes it (invalid UTF-8 replaced, never an exception).
std::string dump(const json& j);

std::string replace_all(std::string s, std::string_view from, std::string_view to);

// The access log line (the path only: object URLs carry their signature in the query), when `enabled`.
void log_access(bool enabled, const HttpRequest& req, int status);

// A JSON object body: 413 over `max_body_bytes`, 422 nested deeper than kDefaultMaxJsonDepth (scanned before it
// is parsed), 400 not JSON, 422 not an object.
json parse_json_body(const HttpRequest& req, size_t max_body_bytes);

// One request being answered: the caller (once authenticated), the thread it names (the client's id and the
// runtime's, for translating answers back) and the headers every answer carries (CORS). Not thread-safe: one
// work thread handles a call at a time (a handler that answers later hands it on: shared_from_this). Made by
// std::make_shared.
struct ApiCall : std::enable_shared_from_this<ApiCall> {
  HttpRequest req;
  std::shared_ptr<HttpResponder> out;
  RouteMatch match;
  std::string user;
  std::string client_thread;
  std::string internal_thread;
  Headers extra;
  bool access_log = false;

  void send(HttpResponse r);
  // JSON with the runtime's thread id said as the client's.
  void send_json(int status, const json& body);
  void send_error(int status, std::string_view code, std::string message, Headers headers = {});
};

}  // namespace agentrt::server
