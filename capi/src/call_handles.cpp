// The extern "C" entry points of agentrt.h that a host's tool or model calls back on its call handle
// (agentrt_tool_call_*, agentrt_model_call_*). Every body runs through the firewall (guard/guard_void).
#include <memory>
#include <string>

#include <fmt/format.h>

#include "agentrt.h"
#include "agentrt/json_limits.hpp"
#include "firewall.hpp"
#include "host_model.hpp"
#include "host_tool.hpp"
#include "wire_json.hpp"

using agentrt::Error;
using agentrt::ErrorCode;
using agentrt::json;
using namespace agentrt::capi;

namespace {

// `accepted`: what a ToolCompletion answered; false when the call had ended before.
void require_open_call(bool accepted) {
  if (!accepted)
    throw Error(ErrorCode::invalid_state,
                "the tool call has already ended (completed, failed, timed out or cancelled)");
}

}  // namespace

extern "C" {

// ------------------------------------------------------------------------------------------- tool calls

AGENTRT_API int32_t agentrt_tool_call_complete(agentrt_tool_call* call, const char* result_json, const char* ui_json) {
  return guard("agentrt_tool_call_complete", [&]() -> int32_t {
    require_handle(call, "call");
    agentrt::ToolResult r;
    // Nested too deep, the result is refused and the call fails with code "invalid_result": the turn goes on.
    const size_t max_depth = call->max_json_depth;
    auto refuse_deep = [&](const char* text, const char* name) {
      if (text && agentrt::json_text_depth(text, max_depth) > max_depth) {
        const std::string why = fmt::format("{} is nested deeper than {} levels", name, max_depth);
        call->completion.fail("invalid_result", "the tool's " + why);
        throw Error(ErrorCode::invalid_argument, why + "; the call has failed with code invalid_result");
      }
    };
    refuse_deep(result_json, "result_json");
    refuse_deep(ui_json, "ui_json");
    r.result = parse_json_arg(result_json, "result_json", max_depth);
    if (ui_json && *ui_json) {
      try {
        r.ui = agentrt::parse_ui_schema(parse_json_arg(ui_json, "ui_json", max_depth));
      } catch (const Error& e) {
        throw Error(e.code(), "ui_json: " + e.message());
      }
    }
    r.state_delta = std::move(call->state_delta);
    require_open_call(call->completion.complete(std::move(r)));
    return AGENTRT_OK;
  });
}

AGENTRT_API int32_t agentrt_tool_call_state_delta(agentrt_tool_call* call, const char* delta_json) {
  return guard("agentrt_tool_call_state_delta", [&]() -> int32_t {
    require_handle(call, "call");
    json delta = parse_json_arg(delta_json, "delta_json", call->max_json_depth);
    if (!delta.is_array())
      throw Error(ErrorCode::invalid_argument, "delta_json must be a JSON Patch: an array of operations");
    call->state_delta = std::move(delta);
    return AGENTRT_OK;
  });
}

AGENTRT_API int32_t agentrt_tool_call_fail(agentrt_tool_call* call, const char* code, const char* message) {
  return guard("agentrt_tool_call_fail", [&]() -> int32_t {
    require_handle(call, "call");
    require_open_call(call->completion.fail(code && *code ? code : "tool_error", message ? message : ""));
    return AGENTRT_OK;
  });
}

AGENTRT_API int32_t agentrt_tool_call_start_job(agentrt_tool_call* call, const char* job_json) {
  return guard("agentrt_tool_call_start_job", [&]() -> int32_t {
    require_handle(call, "call");
    agentrt::JobStart job = job_start_from_json(parse_json_arg(job_json, "job_json", call->max_json_depth, true));
    require_open_call(call->completion.start_job(std::move(job)));
    return AGENTRT_OK;
  });
}

AGENTRT_API void agentrt_tool_call_free(agentrt_tool_call* call) {
  guard_void("agentrt_tool_call_free", [&] {
    if (!call) return;
    std::unique_ptr<agentrt_tool_call> owned(call);
    owned->completion.fail("tool_error", "the host released the tool call without completing it");
  });
}

// ------------------------------------------------------------------------------------------- host models

AGENTRT_API int32_t agentrt_model_call_text(agentrt_model_call* call, const char* delta) {
  return guard("agentrt_model_call_text", [&]() -> int32_t {
    require_handle(call, "call");
    return call->state->push(
        {ModelCallState::Item::Kind::text, 0, require_arg(delta, "delta"), {}, {}, ErrorCode::model});
  });
}

AGENTRT_API int32_t agentrt_model_call_reasoning(agentrt_model_call* call, const char* delta) {
  return guard("agentrt_model_call_reasoning", [&]() -> int32_t {
    require_handle(call, "call");
    return call->state->push(
        {ModelCallState::Item::Kind::reasoning, 0, require_arg(delta, "delta"), {}, {}, ErrorCode::model});
  });
}

AGENTRT_API int32_t agentrt_model_call_tool_call_start(agentrt_model_call* call, int32_t index, const char* id,
                                                       const char* name) {
  return guard("agentrt_model_call_tool_call_start", [&]() -> int32_t {
    require_handle(call, "call");
    if (index < 0) throw Error(ErrorCode::invalid_argument, fmt::format("index must not be negative, not {}", index));
    return call->state->push(
        {ModelCallState::Item::Kind::tool_start, index, id_arg(id, "id"), id_arg(name, "name"), {}, ErrorCode::model});
  });
}

AGENTRT_API int32_t agentrt_model_call_tool_call_args(agentrt_model_call* call, int32_t index, const char* delta) {
  return guard("agentrt_model_call_tool_call_args", [&]() -> int32_t {
    require_handle(call, "call");
    if (index < 0) throw Error(ErrorCode::invalid_argument, fmt::format("index must not be negative, not {}", index));
    return call->state->push(
        {ModelCallState::Item::Kind::tool_args, index, require_arg(delta, "delta"), {}, {}, ErrorCode::model});
  });
}

AGENTRT_API int32_t agentrt_model_call_finish(agentrt_model_call* call, const char* result_json) {
  return guard("agentrt_model_call_finish", [&]() -> int32_t {
    require_handle(call, "call");
    json r = parse_json_arg(result_json, "result_json", call->state->max_json_depth(), true);
    validate_model_result(r);
    return call->state->push({ModelCallState::Item::Kind::finish, 0, {}, {}, std::move(r), ErrorCode::model});
  });
}

AGENTRT_API int32_t agentrt_model_call_fail(agentrt_model_call* call, int32_t status, const char* message) {
  return guard("agentrt_model_call_fail", [&]() -> int32_t {
    require_handle(call, "call");
    const ErrorCode code =
        (status < 0 && status >= AGENTRT_E_INTERNAL) ? static_cast<ErrorCode>(status) : ErrorCode::model;
    return call->state->push(
        {ModelCallState::Item::Kind::fail, 0, message && *message ? message : "the host model failed", {}, {}, code});
  });
}

AGENTRT_API void agentrt_model_call_free(agentrt_model_call* call) {
  guard_void("agentrt_model_call_free", [&] {
    if (!call) return;
    std::unique_ptr<agentrt_model_call> owned(call);
    owned->state->release();
  });
}

}  // extern "C"
