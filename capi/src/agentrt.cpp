// The extern "C" entry points of agentrt.h on a runtime (call_handles.cpp has those on a tool or model call
// handle). Every body runs through the firewall (guard/guard_void).
#include "agentrt.h"

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "agentrt/config.hpp"
#include "agentrt/jobs.hpp"
#include "agentrt/json_limits.hpp"
#include "agentrt/json_reader.hpp"
#include "agentrt/records.hpp"
#include "firewall.hpp"
#include "host_model.hpp"
#include "host_tool.hpp"
#include "runtime_state.hpp"
#include "wire_json.hpp"

using agentrt::Error;
using agentrt::ErrorCode;
using agentrt::json;
using namespace agentrt::capi;

namespace {

agentrt::capi::RuntimeState& state_of(agentrt_runtime* rt) { return *require_handle(rt, "rt")->state; }

// Opens a runtime; `model` set means the host's model replaces the config's.
int32_t open_runtime(const char* fn, agentrt_runtime** out, const char* config_json, bool with_model,
                     agentrt_model_cb model, HostData data) {
  return guard(fn, [&]() -> int32_t {
    require_out(out);
    if (with_model && !model) throw Error(ErrorCode::invalid_argument, "model is NULL");
    json cfg = parse_json_arg(config_json, "config_json", agentrt::kDefaultMaxJsonDepth, true);
    // demo_tools is the C ABI's own key; the rest is the runtime's config.
    const bool demo_tools = agentrt::wire::JsonReader(cfg, "config_json").optional_bool("demo_tools").value_or(false);
    cfg.erase("demo_tools");
    json model_section = cfg.value("model", json::object());
    if (model) cfg["model"] = json{{"type", "demo"}};  // a placeholder: replaced by the host's model below
    agentrt::RuntimeConfig rc = agentrt::runtime_config_from_json(cfg);
    if (model) rc.model = std::make_shared<HostModelProvider>(model, std::move(data), rc.max_json_depth);
    auto handle = std::make_unique<agentrt_runtime>();
    handle->state = std::make_unique<RuntimeState>(std::move(rc), std::move(model_section));
    if (demo_tools) agentrt::register_demo_tools(handle->state->runtime().tools());
    *out = handle.release();
    return AGENTRT_OK;
  });
}

// The functions on one job: `op(runtime, job id)` returns the job as it is afterwards, handed to the host as
// JSON in *out.
template <class Op>
int32_t job_call(const char* fn, char** out, agentrt_runtime* rt, const char* job_id, Op&& op) {
  return guard(fn, [&]() -> int32_t {
    require_out(out);
    auto& st = state_of(rt);
    const std::string id = id_arg(job_id, "job_id");
    *out = dup_json(agentrt::job_to_json(op(st.runtime(), id)));
    return AGENTRT_OK;
  });
}

}  // namespace

extern "C" {

// ------------------------------------------------------------------------------------------------ general

AGENTRT_API const char* agentrt_version(void) {
  clear_last_error();
  return AGENTRT_VERSION_STRING;
}

AGENTRT_API uint32_t agentrt_abi_version(void) {
  clear_last_error();
  return AGENTRT_ABI_VERSION;
}

AGENTRT_API const char* agentrt_last_error(void) { return last_error(); }

AGENTRT_API const char* agentrt_status_name(int32_t status) {
  clear_last_error();
  return status_name(status);
}

AGENTRT_API void agentrt_free(void* ptr) {
  clear_last_error();
  std::free(ptr);
}

// ------------------------------------------------------------------------------------------------ runtime

AGENTRT_API int32_t agentrt_runtime_open(agentrt_runtime** out, const char* config_json) {
  return open_runtime("agentrt_runtime_open", out, config_json, false, nullptr, HostData(nullptr, nullptr));
}

AGENTRT_API int32_t agentrt_runtime_open_with_model(agentrt_runtime** out, const char* config_json,
                                                    agentrt_model_cb model, void* user_data,
                                                    agentrt_destroy_cb destroy) {
  // Owns user_data from the first line: destroy runs exactly once whatever happens below.
  return open_runtime("agentrt_runtime_open_with_model", out, config_json, true, model, HostData(user_data, destroy));
}

AGENTRT_API void agentrt_runtime_free(agentrt_runtime* rt) {
  guard_void("agentrt_runtime_free", [&] { delete rt; });
}

// -------------------------------------------------------------------------------------------------- tools

AGENTRT_API int32_t agentrt_tool_register(agentrt_runtime* rt, const char* spec_json, agentrt_tool_cb cb,
                                          void* user_data, agentrt_destroy_cb destroy) {
  HostData data(user_data, destroy);
  return guard("agentrt_tool_register", [&]() -> int32_t {
    auto& st = state_of(rt);
    if (!cb) throw Error(ErrorCode::invalid_argument, "cb is NULL");
    const size_t max_depth = st.runtime().config().max_json_depth;
    json spec = parse_json_arg(spec_json, "spec_json", max_depth);
    st.runtime().tools().add(host_tool_spec(spec, cb, std::move(data), max_depth));
    return AGENTRT_OK;
  });
}

AGENTRT_API int32_t agentrt_tool_unregister(agentrt_runtime* rt, const char* name) {
  return guard("agentrt_tool_unregister", [&]() -> int32_t {
    auto& st = state_of(rt);
    const std::string n = id_arg(name, "name");
    if (!st.runtime().tools().remove(n)) throw Error(ErrorCode::not_found, fmt::format("no tool named '{}'", n));
    return AGENTRT_OK;
  });
}

// -------------------------------------------------------------------------------------------------- turns

AGENTRT_API int32_t agentrt_turn_start(char** out, agentrt_runtime* rt, const char* input_json) {
  return guard("agentrt_turn_start", [&]() -> int32_t {
    require_out(out);
    auto& st = state_of(rt);
    const auto limits = agentrt::input_limits(st.runtime().config());
    auto input = turn_input_from_json(parse_json_arg(input_json, "input_json", limits.max_json_depth), limits);
    const agentrt::TurnHandle h = st.runtime().start_turn(input);
    std::string status;  // a repeated start says where the first turn is
    if (h.existing)
      if (auto t = st.runtime().turn(h.turn_id)) status = to_string(t->status);
    *out = dup_json(agentrt::turn_handle_to_json(h, status));
    return AGENTRT_OK;
  });
}

AGENTRT_API int32_t agentrt_turn_resume(char** out, agentrt_runtime* rt, const char* turn_id,
                                        const char* approval_request_id, const char* decisions_json) {
  return guard("agentrt_turn_resume", [&]() -> int32_t {
    require_out(out);
    auto& st = state_of(rt);
    const std::string turn = id_arg(turn_id, "turn_id");
    const std::string approval = id_arg(approval_request_id, "approval_request_id");
    const auto limits = agentrt::input_limits(st.runtime().config());
    auto req =
        resume_request_from_json(parse_json_arg(decisions_json, "decisions_json", limits.max_json_depth), limits);
    agentrt::ResumeInput in;
    in.turn_id = turn;
    in.approval_request_id = approval;
    in.decisions = std::move(req.decisions);
    in.answers = std::move(req.answers);
    in.run_id = std::move(req.run_id);
    in.context = std::move(req.context);
    in.client_tools = std::move(req.client_tools);
    in.state = std::move(req.state);
    in.traceparent = std::move(req.traceparent);
    *out = dup_json(st.runtime().resume(in));
    return AGENTRT_OK;
  });
}

AGENTRT_API int32_t agentrt_turn_cancel(agentrt_runtime* rt, const char* turn_id) {
  return guard("agentrt_turn_cancel", [&]() -> int32_t {
    auto& st = state_of(rt);
    st.runtime().cancel(id_arg(turn_id, "turn_id"));
    return AGENTRT_OK;
  });
}

namespace {
// The turn named by a C argument, or Error(not_found).
agentrt::TurnRecord find_turn(agentrt_runtime* rt, const char* turn_id) {
  auto& st = state_of(rt);  // the handle is checked before the id, as everywhere
  const std::string id = id_arg(turn_id, "turn_id");
  auto t = st.runtime().turn(id);
  if (!t) throw Error(ErrorCode::not_found, fmt::format("turn {} not found", id));
  return *t;
}
}  // namespace

AGENTRT_API int32_t agentrt_turn_get(char** out, agentrt_runtime* rt, const char* turn_id) {
  return guard("agentrt_turn_get", [&]() -> int32_t {
    require_out(out);
    *out = dup_json(agentrt::turn_to_json(find_turn(rt, turn_id)));
    return AGENTRT_OK;
  });
}

AGENTRT_API int32_t agentrt_turn_wait(char** out, agentrt_runtime* rt, const char* turn_id, int32_t timeout_ms) {
  return guard("agentrt_turn_wait", [&]() -> int32_t {
    require_out(out);
    auto& st = state_of(rt);
    const std::string id = id_arg(turn_id, "turn_id");
    if (timeout_ms < 0)
      throw Error(ErrorCode::invalid_argument, fmt::format("timeout_ms must not be negative, not {}", timeout_ms));
    auto t = st.runtime().wait(id, std::chrono::milliseconds(timeout_ms));
    if (t.status == agentrt::TurnStatus::running || t.status == agentrt::TurnStatus::resuming)
      return fail(AGENTRT_E_TIMEOUT, fmt::format("agentrt_turn_wait: turn {} is still {} after {} ms", id,
                                                 to_string(t.status), timeout_ms));
    *out = dup_json(agentrt::turn_to_json(t));
    return AGENTRT_OK;
  });
}

AGENTRT_API int32_t agentrt_turn_interrupts(char** out, agentrt_runtime* rt, const char* turn_id) {
  return guard("agentrt_turn_interrupts", [&]() -> int32_t {
    require_out(out);
    *out = dup_json(agentrt::turn_interrupts_to_json(find_turn(rt, turn_id)));
    return AGENTRT_OK;
  });
}

AGENTRT_API int32_t agentrt_turn_messages(char** out, agentrt_runtime* rt, const char* turn_id) {
  return guard("agentrt_turn_messages", [&]() -> int32_t {
    require_out(out);
    auto& st = state_of(rt);
    // Error(not_found) "turn <id> not found" for an unknown turn, as agentrt_turn_get.
    *out = dup_json(json(st.runtime().turn_messages(id_arg(turn_id, "turn_id"))));
    return AGENTRT_OK;
  });
}

AGENTRT_API int32_t agentrt_thread_history(char** out, agentrt_runtime* rt, const char* thread_id) {
  return guard("agentrt_thread_history", [&]() -> int32_t {
    require_out(out);
    auto& st = state_of(rt);
    *out = dup_json(json(st.runtime().history(id_arg(thread_id, "thread_id"))));
    return AGENTRT_OK;
  });
}

AGENTRT_API int32_t agentrt_thread_state(char** out, agentrt_runtime* rt, const char* thread_id) {
  return guard("agentrt_thread_state", [&]() -> int32_t {
    require_out(out);
    auto& st = state_of(rt);
    auto state = st.runtime().thread_state(id_arg(thread_id, "thread_id"));
    *out = dup_json(state ? *state : json(nullptr));
    return AGENTRT_OK;
  });
}

AGENTRT_API int32_t agentrt_threads_list(char** out, agentrt_runtime* rt, const char* user_id) {
  return guard("agentrt_threads_list", [&]() -> int32_t {
    require_out(out);
    auto& st = state_of(rt);
    json list = json::array();
    for (const auto& t : st.runtime().threads(id_arg(user_id, "user_id"))) list.push_back(agentrt::thread_to_json(t));
    *out = dup_json(list);
    return AGENTRT_OK;
  });
}

AGENTRT_API int32_t agentrt_mcp_servers(char** out, agentrt_runtime* rt) {
  return guard("agentrt_mcp_servers", [&]() -> int32_t {
    require_out(out);
    json list = json::array();
    for (const auto& s : state_of(rt).runtime().mcp_servers()) list.push_back(agentrt::mcp_server_to_json(s));
    *out = dup_json(list);
    return AGENTRT_OK;
  });
}

AGENTRT_API int32_t agentrt_flush_traces(agentrt_runtime* rt, int32_t timeout_ms) {
  return guard("agentrt_flush_traces", [&]() -> int32_t {
    auto& r = state_of(rt).runtime();
    if (timeout_ms < 0)
      throw Error(ErrorCode::invalid_argument, fmt::format("timeout_ms must not be negative, not {}", timeout_ms));
    if (!r.flush_traces(std::chrono::milliseconds(timeout_ms)))
      return fail(
          AGENTRT_E_TIMEOUT,
          fmt::format("agentrt_flush_traces: the collector had not answered for every span after {} ms", timeout_ms));
    return AGENTRT_OK;
  });
}

AGENTRT_API int32_t agentrt_spend(char** out, agentrt_runtime* rt, const char* scope, const char* id) {
  return guard("agentrt_spend", [&]() -> int32_t {
    require_out(out);
    auto& r = state_of(rt).runtime();
    const std::string s = scope ? scope : "";
    const std::string key = id_arg(id, "id");
    agentrt::Spend spend;
    if (s == "turn")
      spend = r.turn_spend(key);
    else if (s == "thread")
      spend = r.thread_spend(key);
    else if (s == "user")
      spend = r.user_spend(key);
    else
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("scope must be \"turn\", \"thread\" or \"user\", not \"{}\"", s));
    *out = dup_json(json(spend));
    return AGENTRT_OK;
  });
}

AGENTRT_API int32_t agentrt_mcp_tools(char** out, agentrt_runtime* rt) {
  return guard("agentrt_mcp_tools", [&]() -> int32_t {
    require_out(out);
    json list = json::array();
    for (const auto& t : state_of(rt).runtime().mcp_tools()) list.push_back(agentrt::mcp_tool_to_json(t));
    *out = dup_json(list);
    return AGENTRT_OK;
  });
}

AGENTRT_API int32_t agentrt_mcp_tool_approve(char** out, agentrt_runtime* rt, const char* name) {
  return guard("agentrt_mcp_tool_approve", [&]() -> int32_t {
    require_out(out);
    auto& st = state_of(rt);
    if (!name || !*name) throw agentrt::Error(agentrt::ErrorCode::invalid_argument, "name must be a tool name");
    *out = dup_json(agentrt::mcp_tool_to_json(st.runtime().approve_mcp_tool(name)));
    return AGENTRT_OK;
  });
}

AGENTRT_API int32_t agentrt_thread_delete(agentrt_runtime* rt, const char* thread_id, const char* user_id) {
  return guard("agentrt_thread_delete", [&]() -> int32_t {
    auto& st = state_of(rt);
    const std::string thread = id_arg(thread_id, "thread_id");
    st.runtime().delete_thread(thread, id_arg(user_id, "user_id"));
    return AGENTRT_OK;
  });
}

AGENTRT_API int32_t agentrt_upload_create(char** out, agentrt_runtime* rt, const char* user_id, const char* thread_id,
                                          const void* bytes, size_t len, const char* mime_type) {
  return guard("agentrt_upload_create", [&]() -> int32_t {
    require_out(out);
    auto& st = state_of(rt);
    const std::string user = id_arg(user_id, "user_id");
    const std::string thread = id_arg(thread_id, "thread_id");
    if (!bytes && len > 0) throw Error(ErrorCode::invalid_argument, fmt::format("bytes is NULL (len is {})", len));
    const std::string mime = id_arg(mime_type, "mime_type");
    const agentrt::Upload u =
        st.runtime().upload(user, thread, std::string_view(len ? static_cast<const char*>(bytes) : "", len), mime);
    *out = dup_json(agentrt::upload_to_json(u));
    return AGENTRT_OK;
  });
}

// --------------------------------------------------------------------------------------------------- jobs

AGENTRT_API int32_t agentrt_job_get(char** out, agentrt_runtime* rt, const char* job_id) {
  return job_call("agentrt_job_get", out, rt, job_id, [&](agentrt::Runtime& r, const std::string& id) {
    auto job = r.job(id);
    if (!job) throw Error(ErrorCode::not_found, fmt::format("job {} not found", id));
    return *job;
  });
}

AGENTRT_API int32_t agentrt_jobs_list(char** out, agentrt_runtime* rt, const char* thread_id) {
  return guard("agentrt_jobs_list", [&]() -> int32_t {
    require_out(out);
    auto& st = state_of(rt);
    json list = json::array();
    for (const auto& j : st.runtime().jobs(id_arg(thread_id, "thread_id"))) list.push_back(agentrt::job_to_json(j));
    *out = dup_json(list);
    return AGENTRT_OK;
  });
}

AGENTRT_API int32_t agentrt_job_update(char** out, agentrt_runtime* rt, const char* job_id, const char* progress_json) {
  return job_call("agentrt_job_update", out, rt, job_id, [&](agentrt::Runtime& r, const std::string& id) {
    return r.update_job(
        id, job_progress_from_json(parse_json_arg(progress_json, "progress_json", r.config().max_json_depth)));
  });
}

AGENTRT_API int32_t agentrt_job_complete(char** out, agentrt_runtime* rt, const char* job_id, const char* result_json) {
  return job_call("agentrt_job_complete", out, rt, job_id, [&](agentrt::Runtime& r, const std::string& id) {
    return r.complete_job(id,
                          job_result_from_json(parse_json_arg(result_json, "result_json", r.config().max_json_depth)));
  });
}

AGENTRT_API int32_t agentrt_job_fail(char** out, agentrt_runtime* rt, const char* job_id, const char* code,
                                     const char* message) {
  return job_call("agentrt_job_fail", out, rt, job_id, [&](agentrt::Runtime& r, const std::string& id) {
    return r.fail_job(id, code ? code : "", message ? message : "");
  });
}

AGENTRT_API int32_t agentrt_job_cancel(char** out, agentrt_runtime* rt, const char* job_id, const char* reason) {
  return job_call("agentrt_job_cancel", out, rt, job_id,
                  [&](agentrt::Runtime& r, const std::string& id) { return r.cancel_job(id, reason ? reason : ""); });
}

AGENTRT_API int32_t agentrt_runtime_set_job_cancel_hook(agentrt_runtime* rt, agentrt_job_cb cb, void* user_data,
                                                        agentrt_destroy_cb destroy) {
  // Owns user_data from the first line: destroy runs exactly once whatever happens below.
  HostData data(user_data, destroy);
  return guard("agentrt_runtime_set_job_cancel_hook", [&]() -> int32_t {
    state_of(rt).job_cancel_hook().set(cb, std::move(data));
    return AGENTRT_OK;
  });
}

// ------------------------------------------------------------------------------------------------- events

AGENTRT_API int32_t agentrt_events_open(agentrt_events** out, agentrt_runtime* rt, const char* thread_id,
                                        int64_t after_seq) {
  return guard("agentrt_events_open", [&]() -> int32_t {
    require_out(out);
    auto& st = state_of(rt);
    const std::string thread = id_arg(thread_id, "thread_id");
    if (after_seq < 0)
      throw Error(ErrorCode::invalid_argument, fmt::format("after_seq must not be negative, not {}", after_seq));
    auto handle = std::make_unique<agentrt_events>();
    handle->stream = st.open_stream(thread, after_seq);
    *out = handle.release();
    return AGENTRT_OK;
  });
}

AGENTRT_API int32_t agentrt_events_page(char** out, agentrt_runtime* rt, const char* thread_id, const char* user_id,
                                        int64_t after_seq, int32_t limit) {
  return guard("agentrt_events_page", [&]() -> int32_t {
    require_out(out);
    auto& st = state_of(rt);
    const std::string thread = id_arg(thread_id, "thread_id");
    const std::string user = id_arg(user_id, "user_id");
    if (limit < 1 || static_cast<size_t>(limit) > agentrt::kMaxEventsPage)
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("limit must be from 1 to {}, not {}", agentrt::kMaxEventsPage, limit));
    json page = json::array();
    for (const auto& e : st.runtime().events_page(thread, user, after_seq, static_cast<size_t>(limit)))
      page.push_back(agentrt::stored_event_to_json(e));
    *out = dup_json(page);
    return AGENTRT_OK;
  });
}

AGENTRT_API int32_t agentrt_events_next(char** out, int64_t* out_seq, agentrt_events* stream, int32_t timeout_ms) {
  return guard("agentrt_events_next", [&]() -> int32_t {
    require_out(out);
    if (out_seq) *out_seq = 0;
    require_handle(stream, "stream");
    if (timeout_ms < 0)
      throw Error(ErrorCode::invalid_argument, fmt::format("timeout_ms must not be negative, not {}", timeout_ms));
    agentrt::StoredEvent e;
    switch (stream->stream->next(std::chrono::milliseconds(timeout_ms), e)) {
      case EventStream::Pull::timeout:
        return fail(AGENTRT_E_TIMEOUT, fmt::format("agentrt_events_next: no event within {} ms", timeout_ms));
      case EventStream::Pull::closed: return fail(AGENTRT_E_CANCELLED, "agentrt_events_next: the stream is closed");
      case EventStream::Pull::event: break;
    }
    *out = dup_string(e.json);
    if (out_seq) *out_seq = e.seq;
    return AGENTRT_OK;
  });
}

AGENTRT_API int32_t agentrt_events_close(agentrt_events* stream) {
  return guard("agentrt_events_close", [&]() -> int32_t {
    require_handle(stream, "stream")->stream->close();
    return AGENTRT_OK;
  });
}

AGENTRT_API void agentrt_events_free(agentrt_events* stream) {
  guard_void("agentrt_events_free", [&] { delete stream; });
}

// ---------------------------------------------------------------------------------------------------- ASR

AGENTRT_API int32_t agentrt_transcribe(char** out, agentrt_runtime* rt, const void* audio, size_t audio_len,
                                       const char* mime_type, const char* options_json) {
  return guard("agentrt_transcribe", [&]() -> int32_t {
    require_out(out);
    auto& st = state_of(rt);
    if (!audio) throw Error(ErrorCode::invalid_argument, "audio is NULL");
    if (audio_len == 0) throw Error(ErrorCode::invalid_argument, "audio is empty (audio_len is 0)");
    const std::string mime = id_arg(mime_type, "mime_type");
    auto options = transcribe_options_from_json(
        parse_json_arg(options_json, "options_json", st.runtime().config().max_json_depth, true));
    auto t = st.transcriber();
    *out = dup_string(t->transcribe(std::string_view(static_cast<const char*>(audio), audio_len), mime, options));
    return AGENTRT_OK;
  });
}

}  // extern "C"
