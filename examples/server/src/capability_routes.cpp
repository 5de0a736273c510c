// GET /agent/capabilities: what this server's agent can do, as AG-UI 1.0's AgentCapabilities object, read from its
// configuration (the runtime's stages, tools, limits and object store) at each request.
#include "routes.hpp"

#include <string_view>

#include "agentrt/attachments.hpp"

namespace agentrt::server {

namespace {

bool allows_prefix(const AttachmentLimits& limits, std::string_view prefix) {
  for (const auto& m : limits.allowed_mime_types)
    if (std::string_view(m).substr(0, prefix.size()) == prefix) return true;
  return false;
}

// What an uploaded or inline file of an allowed type is, in the categories AG-UI names.
json multimodal_input(const RuntimeConfig& cfg) {
  const auto& limits = cfg.attachment_limits;
  // Media parts are stored before the model sees them: without an object store none are taken.
  const bool stored = cfg.objects != nullptr;
  bool other = false;
  for (const auto& m : limits.allowed_mime_types) {
    const std::string_view t = m;
    if (t.substr(0, 6) != "image/" && t.substr(0, 6) != "audio/" && t.substr(0, 6) != "video/" &&
        t != "application/pdf")
      other = true;
  }
  return json{{"image", stored && allows_prefix(limits, "image/")},
              {"audio", stored && allows_prefix(limits, "audio/")},
              {"video", stored && allows_prefix(limits, "video/")},
              {"pdf", stored && allows_prefix(limits, "application/pdf")},
              {"file", stored && other}};
}

}  // namespace

json agent_capabilities(ServerContext& s) {
  const RuntimeConfig& cfg = s.rt->config();
  const StagePolicy& exec = cfg.stages.execution;
  json items = json::array();
  for (const auto& d : s.rt->tools().definitions("execution", exec.tools))
    items.push_back(json{{"name", d.name}, {"description", d.description}, {"parameters", d.parameters}});
  const bool organization_writes = cfg.stages.organization.call_model;
  return json{
      {"identity",
       {{"name", "agentrt"},
        {"type", "agentrt"},
        {"version", AGENTRT_SERVER_VERSION},
        {"description", "An agent runtime: intent, execution and organization stages with durable tool calls"}}},
      // SSE with an id per event; GET /agent/runs/{threadId}/events?after=N (or Last-Event-ID) resumes a stream.
      {"transport",
       {{"streaming", true},
        {"websocket", false},
        {"httpBinary", false},
        {"pushNotifications", false},
        {"resumable", true}}},
      {"tools",
       {{"supported", true},  // the server's tools, and the client's (RunAgentInput.tools)
        {"items", std::move(items)},
        {"parallelCalls", true},
        {"clientProvided", true}}},
      // RunAgentInput.state is the thread's; runs start with STATE_SNAPSHOT, tools change it with STATE_DELTA.
      {"state", {{"snapshots", true}, {"deltas", true}, {"memory", false}, {"persistentState", true}}},
      {"multiAgent", {{"supported", false}}},
      // The organization stage, when it calls the model, shows the execution's draft as reasoning.
      {"reasoning", {{"supported", organization_writes}, {"streaming", organization_writes}, {"encrypted", false}}},
      {"multimodal", {{"input", multimodal_input(cfg)}, {"output", {{"image", false}, {"audio", false}}}}},
      {"execution", {{"codeExecution", false}, {"maxIterations", cfg.max_steps}}},
      {"humanInTheLoop",
       {{"supported", true},
        {"approvals", true},
        {"interventions", false},
        {"feedback", false},
        {"interrupts", true},
        {"approveWithEdits", true}}},
  };
}

// GET /agent/capabilities -> AgentCapabilities
void get_capabilities(ServerContext& s, ApiCall& c) { c.send_json(200, agent_capabilities(s)); }

}  // namespace agentrt::server
