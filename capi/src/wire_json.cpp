#include "wire_json.hpp"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

#include <fmt/format.h>

#include "agentrt/json_limits.hpp"
#include "agentrt/json_reader.hpp"

namespace agentrt::capi {

using wire::JsonReader;

json parse_json_arg(const char* text, const char* name, size_t max_depth, bool optional, json empty) {
  if (!text || !*text) {
    if (optional) return empty;
    wire::refuse({}, fmt::format("{} is {}", name, text ? "empty" : "NULL"));
  }
  return parse_json_text(text, max_depth, name);
}

char* dup_string(std::string_view s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (!p) throw std::bad_alloc();
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  return p;
}

char* dup_json(const json& j) { return dup_string(j.dump(-1, ' ', false, json::error_handler_t::replace)); }

TurnInput turn_input_from_json(const json& input, const InputLimits& limits) {
  check_json_depth(input, limits.max_json_depth, "input_json");
  const JsonReader in(input, "input_json");
  const std::string& user = in.required_string("userId");
  if (in.find("messages")) return turn_input_from_agui(input, user, limits);

  in.only_keys(
      {"threadId", "userId", "message", "runId", "clientMessageId", "context", "state", "tools", "traceparent"},
      "or an AG-UI RunAgentInput with 'messages'");
  TurnInput t;
  t.thread_id = in.required_string("threadId");
  t.user_id = user;
  t.run_id = in.optional_string("runId");
  t.client_message_id = in.optional_string("clientMessageId");
  t.traceparent = in.optional_string("traceparent");
  if (const json* c = in.find("context")) t.context = context_from_agui(*c, limits);
  if (const json* s = in.find("state"); s && !s->is_null()) {
    check_state(*s, limits);
    t.state = *s;
  }
  if (const json* tools = in.find("tools")) t.client_tools = client_tools_from_agui(*tools, limits);
  const json& m = in.required("message");
  if (!m.is_object()) in.wrong_type("message", "a JSON object {role: \"user\", content}");
  if (auto c = m.find("content"); c != m.end() && c->is_array() && c->size() > limits.max_input_parts)
    throw Error(ErrorCode::too_large, fmt::format("input_json: the message has {} content parts; the limit is {}",
                                                  c->size(), limits.max_input_parts));
  json msg = m;
  const bool has_id = msg.contains("id");
  if (!has_id) msg["id"] = "pending";
  if (!msg.contains("role")) msg["role"] = "user";
  t.message = message_from_json(msg, limits.max_json_depth);
  if (!has_id) t.message.id.clear();
  return t;
}

ResumeRequest resume_request_from_json(const json& j, const InputLimits& limits) {
  check_json_depth(j, limits.max_json_depth, "decisions_json");
  ResumeRequest r;
  const json* list = &j;
  if (j.is_object()) {
    const JsonReader in(j, "decisions_json");
    in.only_keys({"decisions", "resume", "answers", "runId", "context", "tools", "state", "traceparent"});
    r.traceparent = in.optional_string("traceparent");
    if (const json* s = in.find("state"); s && !s->is_null()) {
      check_state(*s, limits);
      r.state = *s;
    }
    r.run_id = in.optional_string("runId");
    if (const json* c = in.find("context")) r.context = context_from_agui(*c, limits);
    if (const json* tools = in.find("tools")) r.client_tools = client_tools_from_agui(*tools, limits);
    if (const json* answers = in.find("answers")) {
      // Client tool answers, as AG-UI tool messages without their role.
      if (!answers->is_array()) in.wrong_type("answers", "an array of {toolCallId, content, error?, id?}");
      json messages = json::array();
      for (const auto& a : *answers) {
        if (!a.is_object()) in.wrong_type("answers", "an array of {toolCallId, content, error?, id?}");
        json m = a;
        m["role"] = "tool";
        messages.push_back(std::move(m));
      }
      r.answers = tool_answers_from_agui(json{{"messages", std::move(messages)}}, limits);
    }
    const char* key = in.find("decisions") ? "decisions" : "resume";
    list = in.find(key);
    if (!list && in.find("answers")) return r;  // client tool answers alone
    if (!list) in.fail("needs 'decisions' (or 'resume', or 'answers')");
    if (!list->is_array()) in.wrong_type(key, "an array");
  }
  if (!list->is_array()) wire::refuse({}, "decisions_json must be an array of decisions or a JSON object");
  bool agui = false;
  for (const auto& d : *list) agui = agui || (d.is_object() && d.contains("status"));
  if (agui) {
    r.decisions = decisions_from_agui_resume(*list, limits);
  } else {
    for (const auto& d : *list) r.decisions.push_back(decision_from_json(d, limits.max_json_depth));
  }
  return r;
}

namespace {

// A queued or running status (the only ones a job starts with or moves to).
std::optional<JobStatus> open_job_status(const JsonReader& in) {
  const json* v = in.find("status");
  if (!v) return std::nullopt;
  if (*v == "queued") return JobStatus::queued;
  if (*v == "running") return JobStatus::running;
  in.wrong_value("status", "\"queued\" or \"running\"", *v);
}

}  // namespace

JobStart job_start_from_json(const json& j) {
  const JsonReader in(j, "job_json");
  in.only_keys({"status", "message", "metadata", "confirm", "confirmMessage", "timeoutMs"});
  JobStart js;
  if (auto s = open_job_status(in)) js.status = *s;
  js.message = in.optional_string("message");
  if (in.find("metadata")) js.metadata = in.optional_object("metadata");
  js.confirm = in.optional_bool("confirm").value_or(false);
  js.confirm_message = in.optional_string("confirmMessage");
  // The bounds of the config's job_timeout_ms.
  constexpr int64_t kMaxTimeoutMs = int64_t{365} * 24 * 3600 * 1000;
  if (auto ms = in.optional_integer("timeoutMs", 1, kMaxTimeoutMs)) js.timeout = std::chrono::milliseconds(*ms);
  return js;
}

JobProgress job_progress_from_json(const json& j) {
  const JsonReader in(j, "progress_json");
  in.only_keys({"status", "progress", "message"});
  JobProgress p;
  p.status = open_job_status(in);
  if (const json* v = in.find("progress")) {
    if (!v->is_number()) in.wrong_value("progress", "a number from 0 to 1", *v);
    p.progress = v->get<double>();
  }
  if (in.find("message")) p.message = in.optional_string("message");
  return p;
}

JobResult job_result_from_json(const json& j) {
  const JsonReader in(j, "result_json");
  in.only_keys({"result", "assets", "message"});
  JobResult r;
  if (!in.find("result")) in.fail("'result' is required (any JSON value, null included)");
  r.result = *in.find("result");
  if (const json* v = in.find("assets")) {
    if (!v->is_array()) in.wrong_type("assets", "an array");
    r.assets = *v;
  }
  r.message = in.optional_string("message");
  return r;
}

TranscribeOptions transcribe_options_from_json(const json& j) {
  const JsonReader in(j, "options_json");
  in.only_keys({"model", "language", "prompt", "responseFormat", "filename"});
  TranscribeOptions o;
  o.model = in.optional_string("model");
  o.language = in.optional_string("language");
  o.prompt = in.optional_string("prompt");
  o.response_format = in.optional_string("responseFormat");
  o.filename = in.optional_string("filename");
  return o;
}

}  // namespace agentrt::capi
