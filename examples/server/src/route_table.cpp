#include "route_table.hpp"

#include "http_server.hpp"

#include <initializer_list>
#include <string>
#include <vector>

namespace agentrt::server {

RouteMatch match_route(std::string_view method, std::string_view path) {
  if (path.substr(0, kObjectsPath.size() + 1) == std::string(kObjectsPath) + "/" &&
      path.size() > kObjectsPath.size() + 1)
    return {method == "GET" ? Route::object : Route::none, {}};
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
  if (is({"agent", "capabilities"}, "GET")) return {Route::capabilities, {}};
  if (is({"agent", "connect"}, "POST")) return {Route::connect, {}};
  if (is({"agent", "runs", "*", "events"}, "GET")) return {Route::events, seg[2]};
  if (is({"agent", "runs", "*", "resume"}, "POST")) return {Route::resume, seg[2]};
  if (is({"agent", "runs", "*", "cancel"}, "POST")) return {Route::cancel, seg[2]};
  if (is({"agent", "runs", "*", "history"}, "GET")) return {Route::history, seg[2]};
  if (is({"agent", "threads"}, "GET")) return {Route::threads, {}};
  if (is({"agent", "threads", "*"}, "DELETE")) return {Route::delete_thread, seg[2]};
  if (is({"agent", "threads", "*", "jobs"}, "GET")) return {Route::thread_jobs, seg[2]};
  if (is({"agent", "threads", "*", "spend"}, "GET")) return {Route::thread_spend, seg[2]};
  if (is({"agent", "spend"}, "GET")) return {Route::spend, {}};
  if (is({"agent", "jobs", "*"}, "GET")) return {Route::job, seg[2]};
  if (is({"agent", "jobs", "*", "cancel"}, "POST")) return {Route::cancel_job, seg[2]};
  if (is({"agent", "uploads"}, "POST")) return {Route::uploads, {}};
  if (is({"asr", "transcriptions"}, "POST")) return {Route::transcriptions, {}};
  if (is({"mcp", "tools"}, "GET")) return {Route::mcp_tools, {}};
  if (is({"mcp", "tools", "*", "approve"}, "POST")) return {Route::approve_mcp_tool, seg[2]};
  return {};
}

}  // namespace agentrt::server
