#include "wire_json.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

#include <fmt/format.h>

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

json parse_json_arg(const char* text, const char* name, bool optional, json empty) {
  if (!text || !*text) {
    if (optional) return empty;
    bad(fmt::format("{} is {}", name, text ? "empty" : "NULL"));
  }
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    bad(fmt::format("{} is not valid JSON: {}", name, e.what()));
  }
}

char* dup_string(std::string_view s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (!p) throw std::bad_alloc();
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  return p;
}

char* dup_json(const json& j) { return dup_string(j.dump(-1, ' ', false, json::error_handler_t::replace)); }

TurnInput turn_input_from_json(const json& in) {
  if (!in.is_object()) bad("input_json must be a JSON object");
  const std::string user = req_string(in, "userId", "input_json");
  if (in.contains("messages")) return turn_input_from_agui(in, user);

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
  json msg = *m;
  const bool has_id = msg.contains("id");
  if (!has_id) msg["id"] = "pending";
  if (!msg.contains("role")) msg["role"] = "user";
  t.message = msg.get<Message>();
  if (!has_id) t.message.id.clear();
  return t;
}

json turn_handle_to_json(const TurnHandle& h) {
  return json{{"turnId", h.turn_id},
              {"runId", h.run_id},
              {"threadId", h.thread_id},
              {"existing", h.existing},
              {"firstSeq", h.first_seq}};
}

ResumeRequest resume_request_from_json(const json& j) {
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
    r.decisions = decisions_from_agui_resume(*list);
  } else {
    for (const auto& d : *list) r.decisions.push_back(d.get<Decision>());
  }
  return r;
}

json turn_record_to_json(const TurnRecord& t) {
  return json{{"id", t.id},
              {"threadId", t.thread_id},
              {"userId", t.user_id},
              {"status", std::string(to_string(t.status))},
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

json turn_interrupts_to_json(const TurnRecord& t) {
  const bool waiting = t.status == TurnStatus::waiting_approval;
  return json{{"turnId", t.id},
              {"threadId", t.thread_id},
              {"status", std::string(to_string(t.status))},
              {"approvalRequestId", waiting ? t.approval_request_id : std::string()},
              {"expiresAt", waiting ? t.expires_at : 0},
              {"interrupts", waiting && t.interrupts.is_array() ? t.interrupts : json::array()}};
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
