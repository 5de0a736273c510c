'use strict';
// Every function of agentrt.h as a koffi prototype, in the header's order. Handles are `void *` (koffi gives them
// to JS as BigInt addresses); library-owned strings come back through `_Out_ void **` so they can be freed with
// agentrt_free. Pure data: tools (the binding-completeness check) read it without loading the library.

const CALLBACKS = {
  agentrt_destroy_cb: 'void agentrt_destroy_cb(void *user_data)',
  agentrt_tool_cb: 'void agentrt_tool_cb(void *call, const char *call_json, void *user_data)',
  agentrt_model_cb: 'void agentrt_model_cb(void *call, const char *request_json, void *user_data)',
  agentrt_job_cb: 'void agentrt_job_cb(const char *job_json, void *user_data)',
};

const PROTOTYPES = {
  agentrt_version: 'const char *agentrt_version(void)',
  agentrt_abi_version: 'uint32_t agentrt_abi_version(void)',
  agentrt_last_error: 'const char *agentrt_last_error(void)',
  agentrt_status_name: 'const char *agentrt_status_name(int32_t status)',
  agentrt_free: 'void agentrt_free(void *ptr)',
  agentrt_runtime_open: 'int32_t agentrt_runtime_open(_Out_ void **out, const char *config_json)',
  agentrt_runtime_open_with_model:
    'int32_t agentrt_runtime_open_with_model(_Out_ void **out, const char *config_json, agentrt_model_cb *model, ' +
    'void *user_data, agentrt_destroy_cb *destroy)',
  agentrt_runtime_free: 'void agentrt_runtime_free(void *rt)',
  agentrt_tool_register:
    'int32_t agentrt_tool_register(void *rt, const char *spec_json, agentrt_tool_cb *cb, void *user_data, ' +
    'agentrt_destroy_cb *destroy)',
  agentrt_tool_unregister: 'int32_t agentrt_tool_unregister(void *rt, const char *name)',
  agentrt_tool_call_complete:
    'int32_t agentrt_tool_call_complete(void *call, const char *result_json, const char *ui_json)',
  agentrt_tool_call_state_delta: 'int32_t agentrt_tool_call_state_delta(void *call, const char *delta_json)',
  agentrt_tool_call_fail: 'int32_t agentrt_tool_call_fail(void *call, const char *code, const char *message)',
  agentrt_tool_call_start_job: 'int32_t agentrt_tool_call_start_job(void *call, const char *job_json)',
  agentrt_tool_call_free: 'void agentrt_tool_call_free(void *call)',
  agentrt_model_call_text: 'int32_t agentrt_model_call_text(void *call, const char *delta)',
  agentrt_model_call_reasoning: 'int32_t agentrt_model_call_reasoning(void *call, const char *delta)',
  agentrt_model_call_tool_call_start:
    'int32_t agentrt_model_call_tool_call_start(void *call, int32_t index, const char *id, const char *name)',
  agentrt_model_call_tool_call_args:
    'int32_t agentrt_model_call_tool_call_args(void *call, int32_t index, const char *delta)',
  agentrt_model_call_finish: 'int32_t agentrt_model_call_finish(void *call, const char *result_json)',
  agentrt_model_call_fail: 'int32_t agentrt_model_call_fail(void *call, int32_t status, const char *message)',
  agentrt_model_call_free: 'void agentrt_model_call_free(void *call)',
  agentrt_turn_start: 'int32_t agentrt_turn_start(_Out_ void **out, void *rt, const char *input_json)',
  agentrt_turn_resume:
    'int32_t agentrt_turn_resume(_Out_ void **out, void *rt, const char *turn_id, const char *approval_request_id, ' +
    'const char *decisions_json)',
  agentrt_turn_cancel: 'int32_t agentrt_turn_cancel(void *rt, const char *turn_id)',
  agentrt_turn_get: 'int32_t agentrt_turn_get(_Out_ void **out, void *rt, const char *turn_id)',
  agentrt_turn_wait: 'int32_t agentrt_turn_wait(_Out_ void **out, void *rt, const char *turn_id, int32_t timeout_ms)',
  agentrt_turn_interrupts: 'int32_t agentrt_turn_interrupts(_Out_ void **out, void *rt, const char *turn_id)',
  agentrt_turn_messages: 'int32_t agentrt_turn_messages(_Out_ void **out, void *rt, const char *turn_id)',
  agentrt_thread_history: 'int32_t agentrt_thread_history(_Out_ void **out, void *rt, const char *thread_id)',
  agentrt_thread_state: 'int32_t agentrt_thread_state(_Out_ void **out, void *rt, const char *thread_id)',
  agentrt_threads_list: 'int32_t agentrt_threads_list(_Out_ void **out, void *rt, const char *user_id)',
  agentrt_thread_delete: 'int32_t agentrt_thread_delete(void *rt, const char *thread_id, const char *user_id)',
  agentrt_mcp_servers: 'int32_t agentrt_mcp_servers(_Out_ void **out, void *rt)',
  agentrt_mcp_tools: 'int32_t agentrt_mcp_tools(_Out_ void **out, void *rt)',
  agentrt_spend: 'int32_t agentrt_spend(_Out_ void **out, void *rt, const char *scope, const char *id)',
  agentrt_flush_traces: 'int32_t agentrt_flush_traces(void *rt, int32_t timeout_ms)',
  agentrt_mcp_tool_approve: 'int32_t agentrt_mcp_tool_approve(_Out_ void **out, void *rt, const char *name)',
  agentrt_upload_create:
    'int32_t agentrt_upload_create(_Out_ void **out, void *rt, const char *user_id, const char *thread_id, ' +
    'const void *bytes, size_t len, const char *mime_type)',
  agentrt_job_get: 'int32_t agentrt_job_get(_Out_ void **out, void *rt, const char *job_id)',
  agentrt_jobs_list: 'int32_t agentrt_jobs_list(_Out_ void **out, void *rt, const char *thread_id)',
  agentrt_job_update:
    'int32_t agentrt_job_update(_Out_ void **out, void *rt, const char *job_id, const char *progress_json)',
  agentrt_job_complete:
    'int32_t agentrt_job_complete(_Out_ void **out, void *rt, const char *job_id, const char *result_json)',
  agentrt_job_fail:
    'int32_t agentrt_job_fail(_Out_ void **out, void *rt, const char *job_id, const char *code, const char *message)',
  agentrt_job_cancel: 'int32_t agentrt_job_cancel(_Out_ void **out, void *rt, const char *job_id, const char *reason)',
  agentrt_runtime_set_job_cancel_hook:
    'int32_t agentrt_runtime_set_job_cancel_hook(void *rt, agentrt_job_cb *cb, void *user_data, ' +
    'agentrt_destroy_cb *destroy)',
  agentrt_events_open:
    'int32_t agentrt_events_open(_Out_ void **out, void *rt, const char *thread_id, int64_t after_seq)',
  agentrt_events_page:
    'int32_t agentrt_events_page(_Out_ void **out, void *rt, const char *thread_id, const char *user_id, ' +
    'int64_t after_seq, int32_t limit)',
  agentrt_events_next:
    'int32_t agentrt_events_next(_Out_ void **out, _Out_ int64_t *out_seq, void *stream, int32_t timeout_ms)',
  agentrt_events_close: 'int32_t agentrt_events_close(void *stream)',
  agentrt_events_free: 'void agentrt_events_free(void *stream)',
  agentrt_transcribe:
    'int32_t agentrt_transcribe(_Out_ void **out, void *rt, const void *audio, size_t audio_len, ' +
    'const char *mime_type, const char *options_json)',
};

module.exports = { CALLBACKS, PROTOTYPES };
