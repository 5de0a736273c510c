#include "host_tool.hpp"

#include <memory>

#include <fmt/format.h>

namespace agentrt::capi {

namespace {

[[noreturn]] void bad(const std::string& m) { throw Error(ErrorCode::invalid_argument, "tool spec: " + m); }

struct HostTool {
  agentrt_tool_cb cb;
  HostData data;
};

}  // namespace

json tool_call_to_json(const ToolCallContext& c) {
  return json{{"toolCallId", c.tool_call_id},
              {"toolName", c.tool_name},
              {"args", c.args},
              {"threadId", c.thread_id},
              {"turnId", c.turn_id},
              {"runId", c.run_id},
              {"userId", c.user_id},
              {"stage", c.stage},
              {"jobId", c.job_id},
              {"jobConfirmed", c.job_confirmed}};
}

ToolSpec host_tool_spec(const json& j, agentrt_tool_cb cb, HostData data, size_t max_json_depth) {
  auto tool = std::make_shared<HostTool>(HostTool{cb, std::move(data)});
  if (!j.is_object()) bad("must be a JSON object");
  ToolSpec spec;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const json& v = *it;
    if (k == "name") {
      if (!v.is_string()) bad("'name' must be a string");
      spec.name = v.get<std::string>();
    } else if (k == "description") {
      if (!v.is_string()) bad("'description' must be a string");
      spec.description = v.get<std::string>();
    } else if (k == "parameters") {
      if (!v.is_object()) bad("'parameters' must be a JSON Schema object");
      spec.parameters = v;
    } else if (k == "approval") {
      const std::string a = v.is_string() ? v.get<std::string>() : std::string();
      if (a == "never")
        spec.approval = ApprovalPolicy::never();
      else if (a == "always")
        spec.approval = ApprovalPolicy::always();
      else
        bad(fmt::format("'approval' must be \"never\" or \"always\", not {}", v.dump()));
    } else if (k == "stages") {
      if (!v.is_array()) bad("'stages' must be an array of stage names");
      spec.stages.clear();
      for (const auto& s : v) {
        if (!s.is_string()) bad("'stages' must be an array of stage names");
        const auto& name = s.get_ref<const std::string&>();
        if (name != "intent" && name != "execution" && name != "organization")
          bad(fmt::format("unknown stage '{}' (intent, execution, organization)", name));
        spec.stages.push_back(name);
      }
    } else if (k == "idempotent") {
      if (!v.is_boolean()) bad("'idempotent' must be a boolean");
      spec.idempotent = v.get<bool>();
    } else if (k == "timeoutMs") {
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > int64_t{24} * 3600 * 1000)
        bad(fmt::format("'timeoutMs' must be an integer from 1 to 86400000, not {}", v.dump()));
      spec.timeout = std::chrono::milliseconds(v.get<int64_t>());
    } else {
      bad(fmt::format("unknown key '{}' (name, description, parameters, approval, stages, idempotent, timeoutMs)", k));
    }
  }
  if (spec.name.empty()) bad("'name' is required");
  spec.handler = [tool, max_json_depth](const ToolCallContext& call, ToolCompletion completion) {
    const std::string call_json = tool_call_to_json(call).dump(-1, ' ', false, json::error_handler_t::replace);
    auto handle = std::make_unique<agentrt_tool_call>(agentrt_tool_call{std::move(completion), max_json_depth});
    // From here on the host owns the handle (it frees it with agentrt_tool_call_free).
    tool->cb(handle.release(), call_json.c_str(), tool->data.get());
  };
  return spec;
}

}  // namespace agentrt::capi
