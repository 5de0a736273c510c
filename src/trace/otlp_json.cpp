#include "trace/otlp_json.hpp"

#include <algorithm>

#include "agentrt/json.hpp"

namespace agentrt {
inline namespace v1 {
namespace trace {
namespace {

json any_value(const AttrValue& v) {
  struct Visit {
    json operator()(const std::string& s) const { return json{{"stringValue", s}}; }
    json operator()(int64_t i) const { return json{{"intValue", std::to_string(i)}}; }
    json operator()(double d) const { return json{{"doubleValue", d}}; }
    json operator()(bool b) const { return json{{"boolValue", b}}; }
    json operator()(const std::vector<std::string>& list) const {
      json values = json::array();
      for (const auto& s : list) values.push_back(json{{"stringValue", s}});
      return json{{"arrayValue", json{{"values", std::move(values)}}}};
    }
  };
  return std::visit(Visit{}, v);
}

json attributes(const std::vector<Attribute>& attrs) {
  json out = json::array();
  for (const auto& a : attrs) out.push_back(json{{"key", a.key}, {"value", any_value(a.value)}});
  return out;
}

std::string hex(const std::array<uint8_t, 8>& id) {
  SpanContext c;
  c.span_id = id;
  return c.span_id_hex();
}

json span_json(const SpanData& s) {
  json j = json::object();
  j["traceId"] = s.context.trace_id_hex();
  j["spanId"] = s.context.span_id_hex();
  if (std::any_of(s.parent_span_id.begin(), s.parent_span_id.end(), [](uint8_t b) { return b != 0; }))
    j["parentSpanId"] = hex(s.parent_span_id);
  j["flags"] = s.context.sampled ? 1 : 0;
  j["name"] = s.name;
  j["kind"] = static_cast<int>(s.kind);
  j["startTimeUnixNano"] = std::to_string(s.start_ns);
  j["endTimeUnixNano"] = std::to_string(s.end_ns);
  j["attributes"] = attributes(s.attributes);
  if (!s.events.empty()) {
    json events = json::array();
    for (const auto& e : s.events)
      events.push_back(json{
          {"timeUnixNano", std::to_string(e.time_ns)}, {"name", e.name}, {"attributes", attributes(e.attributes)}});
    j["events"] = std::move(events);
  }
  if (!s.links.empty()) {
    json links = json::array();
    for (const auto& l : s.links) links.push_back(json{{"traceId", l.trace_id_hex()}, {"spanId", l.span_id_hex()}});
    j["links"] = std::move(links);
  }
  // STATUS_CODE_ERROR = 2; UNSET (0) otherwise, as the conventions ask of spans that did not fail.
  j["status"] = s.error ? json{{"code", 2}, {"message", s.status_message}} : json::object();
  return j;
}

}  // namespace

std::string otlp_json(const std::vector<std::unique_ptr<SpanData>>& spans, const std::string& service_name) {
  json list = json::array();
  for (const auto& s : spans)
    if (s) list.push_back(span_json(*s));
  json resource = {
      {"attributes", json::array({json{{"key", "service.name"}, {"value", {{"stringValue", service_name}}}}})}};
  json scope = {{"scope", {{"name", "agentrt"}}}, {"spans", std::move(list)}};
  json body = {{"resourceSpans", json::array({json{{"resource", std::move(resource)},
                                                   {"scopeSpans", json::array({std::move(scope)})}}})}};
  // Invalid UTF-8 in content (a tool's bytes) is replaced rather than failing the whole batch.
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace trace
}  // namespace v1
}  // namespace agentrt
