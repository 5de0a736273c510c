#include "agentrt/outputs.hpp"

#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "agentrt/events.hpp"
#include "agentrt/json_reader.hpp"
#include "util/json_object.hpp"

namespace agentrt {
inline namespace v1 {

UiSchema parse_ui_schema(const json& j) {
  const wire::JsonReader in(j, "ui");
  in.only_keys({"type", "version", "data", "actions"});
  UiSchema ui;
  ui.type = in.required_string("type");
  if (ui.type.empty()) in.wrong_type("type", "a non-empty string");
  if (const json* v = in.find("version"); !v || *v != "v1") in.fail("'version' must be \"v1\"");
  if (const json* d = in.find("data")) {
    if (!d->is_object()) in.wrong_type("data", "a JSON object");
    ui.data = *d;
  }
  if (const json* a = in.find("actions")) {
    if (!a->is_array()) in.wrong_type("actions", "an array");
    for (size_t i = 0; i < a->size(); ++i) {
      const auto& act = (*a)[i];
      if (!act.is_object() || !act.contains("type") || !act["type"].is_string())
        in.fail(fmt::format("actions[{}] must be an object with a string 'type'", i));
    }
    ui.actions = *a;
  }
  return ui;
}

void to_json(json& j, const UiSchema& ui) {
  j = json{{"type", ui.type}, {"version", ui.version}, {"data", ui.data}, {"actions", ui.actions}};
}

void to_json(json& j, const ToolAgentOutput& o) {
  j = json_object("tool_call_id", o.tool_call_id, "tool_name", o.tool_name, "args", o.args, "status",
                  to_string(o.status), "result", o.result, "error",
                  o.error ? json_object("code", o.error->code, "message", o.error->message) : json(nullptr),
                  "result_summary", o.result_summary, "summary_version", o.summary_version, "ui",
                  o.ui ? *o.ui : json(nullptr), "timings",
                  json_object("started_at", o.timings.started_at_ms, "finished_at", o.timings.finished_at_ms,
                              "duration_ms", o.timings.duration_ms));
}

std::string to_json_string(const ToolAgentOutput& o) {
  auto dump = [](std::string& out, const json& j) { append_json(out, j); };
  std::string out;
  out.reserve(256);
  out += "{\"tool_call_id\":";
  append_json_string(out, o.tool_call_id);
  out += ",\"tool_name\":";
  append_json_string(out, o.tool_name);
  out += ",\"args\":";
  dump(out, o.args);
  out += ",\"status\":\"";
  out += to_string(o.status);
  out += "\",\"result\":";
  dump(out, o.result);
  out += ",\"error\":";
  if (o.error) {
    out += "{\"code\":";
    append_json_string(out, o.error->code);
    out += ",\"message\":";
    append_json_string(out, o.error->message);
    out += '}';
  } else {
    out += "null";
  }
  out += ",\"result_summary\":";
  append_json_string(out, o.result_summary);
  out += fmt::format(",\"summary_version\":{},\"ui\":", o.summary_version);
  if (o.ui) {
    out += "{\"type\":";
    append_json_string(out, o.ui->type);
    out += ",\"version\":";
    append_json_string(out, o.ui->version);
    out += ",\"data\":";
    dump(out, o.ui->data);
    out += ",\"actions\":";
    dump(out, o.ui->actions);
    out += '}';
  } else {
    out += "null";
  }
  out += fmt::format(",\"timings\":{{\"started_at\":{},\"finished_at\":{},\"duration_ms\":{}}}}}",
                     o.timings.started_at_ms, o.timings.finished_at_ms, o.timings.duration_ms);
  return out;
}

void from_json(const json& j, ToolAgentOutput& o) {
  o = ToolAgentOutput{};
  o.tool_call_id = j.at("tool_call_id").get<std::string>();
  o.tool_name = j.at("tool_name").get<std::string>();
  o.args = j.value("args", json::object());
  o.status = tool_status_from_string(j.at("status").get<std::string>());
  o.result = j.value("result", json());
  if (auto e = j.find("error"); e != j.end() && e->is_object())
    o.error = ToolError{e->value("code", ""), e->value("message", "")};
  o.result_summary = j.value("result_summary", "");
  o.summary_version = j.value("summary_version", 0);
  if (auto u = j.find("ui"); u != j.end() && u->is_object()) o.ui = parse_ui_schema(*u);
  if (auto t = j.find("timings"); t != j.end() && t->is_object()) {
    o.timings.started_at_ms = t->value("started_at", int64_t{0});
    o.timings.finished_at_ms = t->value("finished_at", int64_t{0});
    o.timings.duration_ms = t->value("duration_ms", int64_t{0});
  }
}

void to_json(json& j, const WorkerAgentOutput& o) {
  // Member by member (an initializer list builds every pair twice); one of these per final answer.
  json tools = json::array();
  auto& list = tools.get_ref<json::array_t&>();
  list.reserve(o.tools.size());
  for (const auto& t : o.tools) {
    json ref = json::object();
    auto& r = ref.get_ref<json::object_t&>();
    r.emplace("tool_call_id", t.tool_call_id);
    r.emplace("tool_name", t.tool_name);
    r.emplace("status", to_string(t.status));
    r.emplace("result_summary", t.result_summary);
    list.push_back(std::move(ref));
  }
  j = json::object();
  auto& m = j.get_ref<json::object_t&>();
  m.emplace("answer", o.answer);
  m.emplace("turn_id", o.turn_id);
  m.emplace("run_id", o.run_id);
  m.emplace("tools", std::move(tools));
  m.emplace("usage", o.usage);
  if (!o.intent.empty()) m.emplace("intent", o.intent);
}

void from_json(const json& j, WorkerAgentOutput& o) {
  o = WorkerAgentOutput{};
  o.answer = j.at("answer").get<std::string>();
  o.intent = j.value("intent", "");
  o.turn_id = j.value("turn_id", "");
  o.run_id = j.value("run_id", "");
  o.usage = j.value("usage", json::array());
  for (const auto& t : j.value("tools", json::array())) {
    WorkerAgentOutput::ToolRef r;
    r.tool_call_id = t.value("tool_call_id", "");
    r.tool_name = t.value("tool_name", "");
    r.status = tool_status_from_string(t.value("status", "succeeded"));
    r.result_summary = t.value("result_summary", "");
    o.tools.push_back(std::move(r));
  }
}

}  // namespace v1
}  // namespace agentrt
