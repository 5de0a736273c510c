// tracing_config_from_json (agentrt/tracing.hpp).
#include <fmt/format.h>

#include "agentrt/json_reader.hpp"
#include "agentrt/tracing.hpp"

namespace agentrt {
inline namespace v1 {

TracingConfig tracing_config_from_json(const json& j) {
  const wire::JsonReader r(j, "config: tracing");
  r.only_keys({"otlp_endpoint", "headers", "service_name", "agent_name", "sample_ratio", "capture_content",
               "max_queue_spans", "max_batch_spans", "export_interval_ms", "export_timeout_ms"});
  TracingConfig c;
  c.otlp_endpoint = r.optional_string("otlp_endpoint");
  if (!c.otlp_endpoint.empty() && c.otlp_endpoint.rfind("http://", 0) != 0 && c.otlp_endpoint.rfind("https://", 0) != 0)
    r.wrong_value("otlp_endpoint", "an http:// or https:// URL (or \"\" for off)", j["otlp_endpoint"]);
  if (const json* h = r.find("headers")) {
    if (!h->is_object()) r.wrong_type("headers", "a JSON object of strings");
    for (const auto& [name, value] : h->items()) {
      if (!value.is_string()) r.wrong_type("headers", "a JSON object of strings");
      if (name.empty() || name.find_first_of(":\r\n") != std::string::npos ||
          value.get_ref<const std::string&>().find_first_of("\r\n") != std::string::npos)
        r.fail(fmt::format("headers: '{}' is not a valid header", name.substr(0, 64)));
      c.headers.emplace_back(name, value.get<std::string>());
    }
  }
  if (r.find("service_name")) c.service_name = r.required_string("service_name");
  if (r.find("agent_name")) c.agent_name = r.required_string("agent_name");
  if (const json* s = r.find("sample_ratio")) {
    if (!s->is_number()) r.wrong_type("sample_ratio", "a number from 0 to 1");
    const double v = s->get<double>();
    if (!(v >= 0 && v <= 1)) r.wrong_value("sample_ratio", "a number from 0 to 1", *s);
    c.sample_ratio = v;
  }
  c.capture_content = r.optional_bool("capture_content").value_or(false);
  c.max_queue_spans = static_cast<size_t>(r.optional_integer("max_queue_spans", 1, 1000000).value_or(2048));
  c.max_batch_spans = static_cast<size_t>(r.optional_integer("max_batch_spans", 1, 1000000).value_or(512));
  c.export_interval = std::chrono::milliseconds(r.optional_integer("export_interval_ms", 1, 600000).value_or(1000));
  c.export_timeout = std::chrono::milliseconds(r.optional_integer("export_timeout_ms", 1, 600000).value_or(3000));
  return c;
}

}  // namespace v1
}  // namespace agentrt
