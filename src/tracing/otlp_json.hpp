// The OTLP/HTTP JSON encoding of a batch of spans (ExportTraceServiceRequest): one resource (service.name), one
// scope ("agentrt"), ids as lower-case hex, times as decimal strings, kinds and status codes as numbers, int values
// as decimal strings (OTLP's JSON mapping of 64-bit integers). Pure function, thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tracing/span.hpp"

namespace agentrt {
inline namespace v1 {
namespace trace {

// A request is otlp_prefix(service) + spans, each by append_span_json and separated by commas, + kOtlpSuffix: how
// the exporter builds its requests a span at a time.
std::string otlp_prefix(const std::string& service_name);
inline constexpr std::string_view kOtlpSuffix = "]}]}]}";
void append_span_json(std::string& out, const SpanData& span);

// One request of `spans` (null entries skipped).
std::string otlp_json(const std::vector<std::unique_ptr<SpanData>>& spans, const std::string& service_name);

}  // namespace trace
}  // namespace v1
}  // namespace agentrt
