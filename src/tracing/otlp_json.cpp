// Written straight to text with the event log's JSON string writer (append_json_string: escaping, invalid UTF-8
// replaced): the exporter encodes every span the runtime makes, and a JSON tree per span cost more than the span.
#include "tracing/otlp_json.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "agentrt/events.hpp"

namespace agentrt {
inline namespace v1 {
namespace trace {
namespace {

void append_value(std::string& out, const AttrValue& v) {
  struct Visit {
    std::string& out;
    void operator()(const std::string& s) const {
      out += "{\"stringValue\":";
      append_json_string(out, s);
      out += '}';
    }
    void operator()(int64_t i) const { fmt::format_to(std::back_inserter(out), "{{\"intValue\":\"{}\"}}", i); }
    void operator()(double d) const {
      // JSON has no NaN or infinity: OTLP's JSON mapping writes them as strings.
      if (std::isfinite(d))
        fmt::format_to(std::back_inserter(out), "{{\"doubleValue\":{}}}", d);
      else
        fmt::format_to(std::back_inserter(out), "{{\"doubleValue\":\"{}\"}}",
                       std::isnan(d) ? "NaN"
                       : d > 0       ? "Infinity"
                                     : "-Infinity");
    }
    void operator()(bool b) const { out += b ? "{\"boolValue\":true}" : "{\"boolValue\":false}"; }
    void operator()(const std::vector<std::string>& list) const {
      out += "{\"arrayValue\":{\"values\":[";
      for (size_t i = 0; i < list.size(); ++i) {
        if (i) out += ',';
        (*this)(list[i]);
      }
      out += "]}}";
    }
  };
  std::visit(Visit{out}, v);
}

void append_attributes(std::string& out, const std::vector<Attribute>& attrs) {
  out += '[';
  for (size_t i = 0; i < attrs.size(); ++i) {
    if (i) out += ',';
    out += "{\"key\":";
    append_json_string(out, attrs[i].key);
    out += ",\"value\":";
    append_value(out, attrs[i].value);
    out += '}';
  }
  out += ']';
}

void append_ids(std::string& out, const SpanContext& c) {
  out += "\"traceId\":\"";
  out += c.trace_id_hex();
  out += "\",\"spanId\":\"";
  out += c.span_id_hex();
  out += '"';
}

void append_span(std::string& out, const SpanData& s) {
  out += '{';
  append_ids(out, s.context);
  if (std::any_of(s.parent_span_id.begin(), s.parent_span_id.end(), [](uint8_t b) { return b != 0; })) {
    SpanContext parent;
    parent.span_id = s.parent_span_id;
    out += ",\"parentSpanId\":\"";
    out += parent.span_id_hex();
    out += '"';
  }
  fmt::format_to(std::back_inserter(out), ",\"flags\":{},\"name\":", s.context.sampled ? 1 : 0);
  append_json_string(out, s.name);
  fmt::format_to(std::back_inserter(out), ",\"kind\":{},\"startTimeUnixNano\":\"{}\",\"endTimeUnixNano\":\"{}\"",
                 static_cast<int>(s.kind), s.start_ns, s.end_ns);
  out += ",\"attributes\":";
  append_attributes(out, s.attributes);
  if (!s.events.empty()) {
    out += ",\"events\":[";
    for (size_t i = 0; i < s.events.size(); ++i) {
      if (i) out += ',';
      fmt::format_to(std::back_inserter(out), "{{\"timeUnixNano\":\"{}\",\"name\":", s.events[i].time_ns);
      append_json_string(out, s.events[i].name);
      out += ",\"attributes\":";
      append_attributes(out, s.events[i].attributes);
      out += '}';
    }
    out += ']';
  }
  if (!s.links.empty()) {
    out += ",\"links\":[";
    for (size_t i = 0; i < s.links.size(); ++i) {
      if (i) out += ',';
      out += '{';
      append_ids(out, s.links[i]);
      out += '}';
    }
    out += ']';
  }
  // STATUS_CODE_ERROR = 2; UNSET (0, an empty status) otherwise, as the conventions ask of spans that did not fail.
  if (s.error) {
    out += ",\"status\":{\"code\":2,\"message\":";
    append_json_string(out, s.status_message);
    out += "}}";
  } else {
    out += ",\"status\":{}}";
  }
}

}  // namespace

std::string otlp_json(const std::vector<std::unique_ptr<SpanData>>& spans, const std::string& service_name) {
  std::string out;
  out.reserve(256 + spans.size() * 768);
  out += "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":";
  append_json_string(out, service_name);
  out += "}}]},\"scopeSpans\":[{\"scope\":{\"name\":\"agentrt\"},\"spans\":[";
  bool first = true;
  for (const auto& s : spans) {
    if (!s) continue;
    if (!first) out += ',';
    first = false;
    append_span(out, *s);
  }
  out += "]}]}]}";
  return out;
}

}  // namespace trace
}  // namespace v1
}  // namespace agentrt
