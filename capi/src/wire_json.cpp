#include "wire_json.hpp"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

#include <fmt/format.h>

#include "agentrt/json_limits.hpp"

namespace agentrt::capi {

namespace {

[[noreturn]] void bad(const std::string& m) { throw Error(ErrorCode::invalid_argument, m); }

std::string req_string(const json& j, const char* key, const char* where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) bad(fmt::format("{}: '{}' must be a string", where, key));
  return it->get<std::string>();
}

std::string opt_string(const json& j, const char* key, const char* where) {
  auto it = j.find(key);
  if (it == j.end()) return {};
  if (!it->is_string()) bad(fmt::format("{}: '{}' must be a string", where, key));
  return it->get<std::string>();
}

}  // namespace

json parse_json_arg(const char* text, const char* name, size_t max_depth, bool optional, json empty) {
  if (!text || !*text) {
    if (optional) return empty;
    bad(fmt::format("{} is {}", name, text ? "empty" : "NULL"));
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

TurnInput turn_input_from_json(const json& in, const InputLimits& limits) {
  check_json_depth(in, limits.max_json_depth, "input_json");
  if (!in.is_object()) bad("input_json must be a JSON object");
  const std::string user = req_string(in, "userId", "input_json");
  if (in.contains("messages")) return turn_input_from_agui(in, user, limits);

  for (auto it = in.begin(); it != in.end(); ++it) {
    const std::string& k = it.key();
    if (k != "threadId" && k != "userId" && k != "message" && k != "runId" && k != "clientMessageId")
      bad(
          fmt::format("input_json: unknown key '{}' (threadId, userId, message, runId, clientMessageId; or an "
                      "AG-UI RunAgentInput with 'messages')",
                      k));
  }
  TurnInput t;
  t.thread_id = req_string(in, "threadId", "input_json");
  t.user_id = user;
  t.run_id = opt_string(in, "runId", "input_json");
  t.client_message_id = opt_string(in, "clientMessageId", "input_json");
  auto m = in.find("message");
  if (m == in.end() || !m->is_object()) bad("input_json: 'message' must be an object {role:\"user\", content}");
  if (auto c = m->find("content"); c != m->end() && c->is_array() && c->size() > limits.max_input_parts)
    throw Error(ErrorCode::too_large, fmt::format("input_json: the message has {} content parts; the limit is {}",
                                                  c->size(), limits.max_input_parts));
  json msg = *m;
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
    for (auto it = j.begin(); it != j.end(); ++it)
      if (it.key() != "decisions" && it.key() != "resume" && it.key() != "runId")
        bad(fmt::format("decisions_json: unknown key '{}' (decisions, resume, runId)", it.key()));
    r.run_id = opt_string(j, "runId", "decisions_json");
    if (j.contains("decisions"))
      list = &j["decisions"];
    else if (j.contains("resume"))
      list = &j["resume"];
    else
      bad("decisions_json: needs 'decisions' (or 'resume')");
  }
  if (!list->is_array()) bad("decisions_json must be an array of decisions");
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
JobStatus open_job_status(const json& v, const char* where) {
  const std::string s = v.is_string() ? v.get<std::string>() : std::string();
  if (s == "queued") return JobStatus::queued;
  if (s == "running") return JobStatus::running;
  bad(fmt::format("{}: 'status' must be \"queued\" or \"running\", not {}", where, v.dump()));
}

}  // namespace

JobStart job_start_from_json(const json& j) {
  constexpr const char* where = "job_json";
  if (!j.is_object()) bad("job_json must be a JSON object");
  JobStart js;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const json& v = *it;
    if (k == "status") {
      js.status = open_job_status(v, where);
    } else if (k == "message") {
      if (!v.is_string()) bad("job_json: 'message' must be a string");
      js.message = v.get<std::string>();
    } else if (k == "metadata") {
      if (!v.is_object()) bad("job_json: 'metadata' must be a JSON object");
      js.metadata = v;
    } else if (k == "confirm") {
      if (!v.is_boolean()) bad("job_json: 'confirm' must be a boolean");
      js.confirm = v.get<bool>();
    } else if (k == "confirmMessage") {
      if (!v.is_string()) bad("job_json: 'confirmMessage' must be a string");
      js.confirm_message = v.get<std::string>();
    } else if (k == "timeoutMs") {
      // The bounds of the config's job_timeout_ms.
      constexpr int64_t kMax = int64_t{365} * 24 * 3600 * 1000;
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > kMax)
        bad(fmt::format("job_json: 'timeoutMs' must be an integer from 1 to {}, not {}", kMax, v.dump()));
      js.timeout = std::chrono::milliseconds(v.get<int64_t>());
    } else {
      bad(fmt::format("job_json: unknown key '{}' (status, message, metadata, confirm, confirmMessage, timeoutMs)", k));
    }
  }
  return js;
}

JobProgress job_progress_from_json(const json& j) {
  constexpr const char* where = "progress_json";
  if (!j.is_object()) bad("progress_json must be a JSON object");
  JobProgress p;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const json& v = *it;
    if (k == "status") {
      p.status = open_job_status(v, where);
    } else if (k == "progress") {
      if (!v.is_number()) bad(fmt::format("progress_json: 'progress' must be a number from 0 to 1, not {}", v.dump()));
      p.progress = v.get<double>();
    } else if (k == "message") {
      if (!v.is_string()) bad("progress_json: 'message' must be a string");
      p.message = v.get<std::string>();
    } else {
      bad(fmt::format("progress_json: unknown key '{}' (status, progress, message)", k));
    }
  }
  return p;
}

JobResult job_result_from_json(const json& j) {
  if (!j.is_object()) bad("result_json must be a JSON object {result, assets?, message?}");
  JobResult r;
  bool has_result = false;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const json& v = *it;
    if (k == "result") {
      r.result = v;
      has_result = true;
    } else if (k == "assets") {
      if (!v.is_array()) bad("result_json: 'assets' must be an array");
      r.assets = v;
    } else if (k == "message") {
      if (!v.is_string()) bad("result_json: 'message' must be a string");
      r.message = v.get<std::string>();
    } else {
      bad(fmt::format("result_json: unknown key '{}' (result, assets, message)", k));
    }
  }
  if (!has_result) bad("result_json: 'result' is required (any JSON value, null included)");
  return r;
}

TranscribeOptions transcribe_options_from_json(const json& j) {
  if (!j.is_object()) bad("options_json must be a JSON object");
  TranscribeOptions o;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (!it->is_string()) bad(fmt::format("options_json: '{}' must be a string", k));
    const std::string v = it->get<std::string>();
    if (k == "model")
      o.model = v;
    else if (k == "language")
      o.language = v;
    else if (k == "prompt")
      o.prompt = v;
    else if (k == "responseFormat")
      o.response_format = v;
    else if (k == "filename")
      o.filename = v;
    else
      bad(fmt::format("options_json: unknown key '{}' (model, language, prompt, responseFormat, filename)", k));
  }
  return o;
}

}  // namespace agentrt::capi
