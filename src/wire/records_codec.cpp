// The records codec: the JSON form of every record the Runtime facade returns (agentrt/records.hpp).
#include <cstdint>
#include <string>

#include "agentrt/json_limits.hpp"
#include "agentrt/json_reader.hpp"
#include "agentrt/records.hpp"
#include "agentrt/turn_state.hpp"
#include "util/json_object.hpp"

namespace agentrt {
inline namespace v1 {

json turn_to_json(const TurnRecord& t) {
  return json{{"id", t.id},
              {"threadId", t.thread_id},
              {"userId", t.user_id},
              {"status", to_string(t.status)},
              {"version", t.version},
              {"clientMessageId", t.client_message_id},
              {"runId", t.run_id},
              {"parentRunId", t.parent_run_id},
              {"stage", t.stage},
              {"approvalRequestId", t.approval_request_id},
              {"interrupts", t.interrupts.is_array() ? t.interrupts : json::array()},
              {"expiresAt", t.expires_at},
              {"intent", t.intent},
              {"error", t.error},
              {"usage", t.usage.is_array() ? t.usage : json::array()},
              {"steps", t.steps},
              {"createdAt", t.created_at},
              {"updatedAt", t.updated_at}};
}

json turn_handle_to_json(const TurnHandle& h, std::string_view status) {
  json out{{"threadId", h.thread_id}, {"turnId", h.turn_id}, {"runId", h.run_id}, {"existing", h.existing}};
  if (!h.existing) {
    out["firstSeq"] = h.first_seq;
    return out;
  }
  if (!status.empty()) out["status"] = status;
  out["deltaMessages"] = json(h.delta_messages);
  return out;
}

json turn_interrupts_to_json(const TurnRecord& t) {
  const bool waiting = is_waiting(t.status);
  return json{{"turnId", t.id},
              {"threadId", t.thread_id},
              {"status", to_string(t.status)},
              {"approvalRequestId", waiting ? t.approval_request_id : std::string()},
              {"expiresAt", waiting ? t.expires_at : 0},
              {"interrupts", waiting && t.interrupts.is_array() ? t.interrupts : json::array()}};
}

json job_to_json(const JobRecord& j) {
  json out = {{"id", j.id},
              {"threadId", j.thread_id},
              {"turnId", j.turn_id},
              {"runId", j.run_id},
              {"toolCallId", j.tool_call_id},
              {"toolName", j.tool_name},
              {"userId", j.user_id},
              {"status", to_string(j.status)},
              {"progress", j.progress},
              {"assets", j.assets.is_array() ? j.assets : json::array()},
              {"metadata", j.metadata.is_object() ? j.metadata : json::object()},
              {"delivered", j.delivered},
              {"version", j.version},
              {"createdAt", j.created_at},
              {"updatedAt", j.updated_at}};
  if (!j.message.empty()) out["message"] = j.message;
  if (!j.result.is_null()) out["result"] = j.result;
  if (!j.error_code.empty() || !j.error_message.empty())
    out["error"] = {{"code", j.error_code}, {"message", j.error_message}};
  if (j.confirmation != JobConfirmation::none) out["confirmation"] = to_string(j.confirmation);
  if (!j.confirm_message.empty()) out["confirmMessage"] = j.confirm_message;
  if (j.timeout_ms > 0) out["timeoutMs"] = j.timeout_ms;
  if (j.expires_at > 0) out["expiresAt"] = j.expires_at;
  if (j.finished_at > 0) out["finishedAt"] = j.finished_at;
  return out;
}

JobRecord job_from_json(const json& j) {
  const wire::JsonReader in(j, "job record");
  in.only_keys({"id",           "threadId",       "turnId",    "runId",     "toolCallId", "toolName",
                "userId",       "status",         "progress",  "assets",    "metadata",   "delivered",
                "version",      "createdAt",      "updatedAt", "message",   "result",     "error",
                "confirmation", "confirmMessage", "timeoutMs", "expiresAt", "finishedAt"});
  constexpr int64_t kMax = INT64_MAX;
  JobRecord r;
  r.id = in.required_string("id");
  r.thread_id = in.required_string("threadId");
  r.turn_id = in.optional_string("turnId");
  r.run_id = in.optional_string("runId");
  r.tool_call_id = in.optional_string("toolCallId");
  r.tool_name = in.optional_string("toolName");
  r.user_id = in.optional_string("userId");
  r.status = job_status_from_string(in.required_string("status"));
  if (const json* p = in.find("progress")) {
    if (!p->is_number()) in.wrong_type("progress", "a number");
    r.progress = p->get<double>();
  }
  if (const json* a = in.find("assets")) {
    if (!a->is_array()) in.wrong_type("assets", "an array");
    r.assets = *a;
  }
  if (const json* m = in.find("metadata")) {
    if (!m->is_object()) in.wrong_type("metadata", "a JSON object");
    r.metadata = *m;
  }
  r.delivered = in.optional_bool("delivered").value_or(false);
  r.version = in.optional_integer("version", 0, kMax).value_or(0);
  r.created_at = in.optional_integer("createdAt", 0, kMax).value_or(0);
  r.updated_at = in.optional_integer("updatedAt", 0, kMax).value_or(0);
  r.message = in.optional_string("message");
  if (const json* res = in.find("result")) r.result = *res;
  if (const json* e = in.find("error")) {
    const wire::JsonReader err(*e, "job record: error");
    err.only_keys({"code", "message"});
    r.error_code = err.optional_string("code");
    r.error_message = err.optional_string("message");
  }
  if (const json* c = in.find("confirmation")) {
    if (!c->is_string()) in.wrong_type("confirmation", "a string");
    r.confirmation = job_confirmation_from_string(c->get_ref<const std::string&>());
  }
  r.confirm_message = in.optional_string("confirmMessage");
  r.timeout_ms = in.optional_integer("timeoutMs", 0, kMax).value_or(0);
  r.expires_at = in.optional_integer("expiresAt", 0, kMax).value_or(0);
  r.finished_at = in.optional_integer("finishedAt", 0, kMax).value_or(0);
  return r;
}

json thread_to_json(const ThreadRecord& t) {
  return json{{"id", t.id},
              {"title", t.title},
              {"createdAt", t.created_at},
              {"updatedAt", t.updated_at},
              {"lastSeq", t.last_seq}};
}

std::string_view media_kind(std::string_view mime_type) {
  if (mime_type.rfind("image/", 0) == 0) return "image";
  if (mime_type.rfind("audio/", 0) == 0) return "audio";
  if (mime_type.rfind("video/", 0) == 0) return "video";
  return "document";
}

json upload_to_json(const Upload& u) {
  return json{{"id", u.id},
              {"url", u.url},
              {"mimeType", u.mime_type},
              {"size", u.size},
              {"expiresAt", u.expires_at},
              {"ref", u.ref},
              {"part",
               {{"type", media_kind(u.mime_type)},
                {"source", {{"type", "url"}, {"value", u.url}, {"mimeType", u.mime_type}}}}}};
}

json resume_answer_to_json(std::string_view turn_id, std::string_view thread_id, std::string_view run_id,
                           std::string_view approval_request_id) {
  return json_object("status", "accepted", "turnId", turn_id, "threadId", thread_id, "runId", run_id,
                     "approvalRequestId", approval_request_id);
}

json stored_event_to_json(const StoredEvent& e) {
  return json{{"seq", e.seq}, {"event", parse_json_text(e.json, kMaxStoredJsonDepth, "a stored event")}};
}

json mcp_server_to_json(const McpServerInfo& s) {
  return json{{"name", s.name},          {"transport", s.transport},
              {"state", s.state},        {"protocolVersion", s.protocol_version},
              {"server", s.server_name}, {"version", s.server_version},
              {"tools", s.tools},        {"restarts", s.restarts},
              {"error", s.error}};
}

json mcp_tool_to_json(const McpToolInfo& t) {
  json j = {{"name", t.name},
            {"server", t.server},
            {"tool", t.tool},
            {"description", t.description},
            {"inputSchema", t.input_schema},
            {"outputSchema", t.output_schema},
            {"hash", t.hash},
            {"offered", t.offered}};
  if (!t.problem.empty()) j["problem"] = t.problem;
  if (!t.changed_hash.empty()) j["changed"] = {{"hash", t.changed_hash}, {"definition", t.changed_definition}};
  return j;
}

}  // namespace v1
}  // namespace agentrt
