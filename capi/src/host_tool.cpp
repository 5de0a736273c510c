#include "host_tool.hpp"

#include <memory>

#include <fmt/format.h>

#include "agentrt/json_reader.hpp"
#include "agentrt/stages.hpp"

namespace agentrt::capi {

namespace {

struct HostTool {
  agentrt_tool_cb cb;
  HostData data;
};

}  // namespace

json tool_call_to_json(const ToolCallContext& c) {
  json j{{"toolCallId", c.tool_call_id},
         {"toolName", c.tool_name},
         {"args", c.args},
         {"threadId", c.thread_id},
         {"turnId", c.turn_id},
         {"runId", c.run_id},
         {"userId", c.user_id},
         {"stage", c.stage},
         {"jobId", c.job_id},
         {"jobConfirmed", c.job_confirmed},
         {"state", c.state}};
  if (!c.traceparent.empty()) j["traceparent"] = c.traceparent;
  return j;
}

ToolSpec host_tool_spec(const json& j, agentrt_tool_cb cb, HostData data, size_t max_json_depth) {
  auto tool = std::make_shared<HostTool>(HostTool{cb, std::move(data)});
  const wire::JsonReader in(j, "tool spec");
  in.only_keys({"name", "description", "parameters", "approval", "stages", "idempotent", "timeoutMs"});
  ToolSpec spec;
  spec.name = in.required_string("name");
  spec.description = in.optional_string("description");
  if (const json* v = in.find("parameters")) {
    if (!v->is_object()) in.wrong_type("parameters", "a JSON Schema object");
    spec.parameters = *v;
  }
  if (const json* v = in.find("approval")) {
    if (*v == "never")
      spec.approval = ApprovalPolicy::never();
    else if (*v == "always")
      spec.approval = ApprovalPolicy::always();
    else
      in.wrong_value("approval", "\"never\" or \"always\"", *v);
  }
  if (const json* v = in.find("stages")) {
    if (!v->is_array()) in.wrong_type("stages", "an array of stage names");
    spec.stages.clear();
    for (const auto& s : *v) {
      bool known = false;
      for (Stage st : kStages) known |= s.is_string() && s.get_ref<const std::string&>() == to_string(st);
      if (!known)
        in.wrong_value("stages",
                       fmt::format("stage names ({}, {}, {})", to_string(Stage::intent), to_string(Stage::execution),
                                   to_string(Stage::organization)),
                       s);
      spec.stages.push_back(s.get<std::string>());
    }
  }
  spec.idempotent = in.optional_bool("idempotent").value_or(false);
  if (auto ms = in.optional_integer("timeoutMs", 1, int64_t{24} * 3600 * 1000))
    spec.timeout = std::chrono::milliseconds(*ms);
  if (spec.name.empty()) in.fail("'name' must not be empty");
  spec.handler = [tool, max_json_depth](const ToolCallContext& call, ToolCompletion completion) {
    const std::string call_json = tool_call_to_json(call).dump(-1, ' ', false, json::error_handler_t::replace);
    auto handle =
        std::make_unique<agentrt_tool_call>(agentrt_tool_call{std::move(completion), max_json_depth, nullptr});
    // From here on the host owns the handle (it frees it with agentrt_tool_call_free).
    tool->cb(handle.release(), call_json.c_str(), tool->data.get());
  };
  return spec;
}

}  // namespace agentrt::capi
