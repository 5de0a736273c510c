// The routes of agentrt-server's API: which handler a method and path name, and the {id} in the path.
#pragma once

#include <string>
#include <string_view>

namespace agentrt::server {

inline constexpr std::string_view kApi = "/api/v1";
inline constexpr std::string_view kObjectsPath = "/api/v1/objects";

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
  thread_spend,
  spend,
  job,
  cancel_job,
  uploads,
  object,
  transcriptions,
  capabilities,
  connect,
  mcp_tools,
  approve_mcp_tool,
  web,  // a static file of the web page (see web_routes.cpp): outside match_route, which knows no config
};

// A request path's route (Route::none: no such endpoint) and the id it names, if any. For Route::none, the
// methods the path takes when it is an endpoint under other methods ("GET, HEAD", ...; "" when it is none).
struct RouteMatch {
  Route route = Route::none;
  std::string id;
  std::string allow;
};

// `path` without its query.
RouteMatch match_route(std::string_view method, std::string_view path);

}  // namespace agentrt::server
