#include "route_table.hpp"

#include "http_server.hpp"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

namespace agentrt::server {

namespace {

// The API's endpoints: a path pattern ("*" is the id) under one method each.
struct Endpoint {
  std::string_view method;
  std::initializer_list<std::string_view> pattern;
  Route route;
};

const Endpoint kEndpoints[] = {
    {"GET", {"health"}, Route::health},
    {"POST", {"agent", "runs"}, Route::runs},
    {"GET", {"agent", "capabilities"}, Route::capabilities},
    {"POST", {"agent", "connect"}, Route::connect},
    {"GET", {"agent", "runs", "*", "events"}, Route::events},
    {"POST", {"agent", "runs", "*", "resume"}, Route::resume},
    {"POST", {"agent", "runs", "*", "cancel"}, Route::cancel},
    {"GET", {"agent", "runs", "*", "history"}, Route::history},
    {"GET", {"agent", "threads"}, Route::threads},
    {"DELETE", {"agent", "threads", "*"}, Route::delete_thread},
    {"GET", {"agent", "threads", "*", "jobs"}, Route::thread_jobs},
    {"GET", {"agent", "threads", "*", "spend"}, Route::thread_spend},
    {"GET", {"agent", "spend"}, Route::spend},
    {"GET", {"agent", "jobs", "*"}, Route::job},
    {"POST", {"agent", "jobs", "*", "cancel"}, Route::cancel_job},
    {"POST", {"agent", "uploads"}, Route::uploads},
    {"POST", {"asr", "transcriptions"}, Route::transcriptions},
    {"GET", {"mcp", "tools"}, Route::mcp_tools},
    {"POST", {"mcp", "tools", "*", "approve"}, Route::approve_mcp_tool},
};

bool matches(const Endpoint& e, const std::vector<std::string>& seg) {
  if (seg.size() != e.pattern.size()) return false;
  size_t i = 0;
  for (auto w : e.pattern) {
    if (w != "*" && w != seg[i]) return false;
    ++i;
  }
  return true;
}

}  // namespace

RouteMatch match_route(std::string_view method, std::string_view path) {
  if (path.substr(0, kObjectsPath.size() + 1) == std::string(kObjectsPath) + "/" &&
      path.size() > kObjectsPath.size() + 1) {
    if (method == "GET") return {Route::object, {}, {}};
    return {Route::none, {}, "GET, HEAD"};
  }
  if (path.substr(0, kApi.size()) != kApi) return {};
  std::string_view rest = path.substr(kApi.size());
  std::vector<std::string> seg;
  while (!rest.empty()) {
    if (rest.front() != '/') return {};
    rest.remove_prefix(1);
    const size_t slash = rest.find('/');
    // Clients encode ids (encodeURIComponent("a:b") is "a%3Ab"): each segment is decoded.
    seg.push_back(percent_decode(rest.substr(0, slash), false));
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  }
  for (const auto& s : seg)
    if (s.empty()) return {};
  RouteMatch other;  // the path under other methods: what Allow lists
  for (const auto& e : kEndpoints) {
    if (!matches(e, seg)) continue;
    if (e.method == method) {
      const size_t star = static_cast<size_t>(std::find(e.pattern.begin(), e.pattern.end(), "*") - e.pattern.begin());
      return {e.route, star < seg.size() ? seg[star] : std::string(), {}};
    }
    if (!other.allow.empty()) other.allow += ", ";
    other.allow += e.method;
    if (e.method == "GET") other.allow += ", HEAD";
  }
  return other;
}

}  // namespace agentrt::server
