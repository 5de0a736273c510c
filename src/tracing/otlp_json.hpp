// The OTLP/HTTP JSON encoding of a batch of spans (ExportTraceServiceRequest): one resource (service.name), one
// scope ("agentrt"), ids as lower-case hex, times as decimal strings, kinds and status codes as numbers, int values
// as decimal strings (OTLP's JSON mapping of 64-bit integers). Pure function, thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tracing/span.hpp"

namespace agentrt {
inline namespace v1 {
namespace trace {

std::string otlp_json(const std::vector<std::unique_ptr<SpanData>>& spans, const std::string& service_name);

}  // namespace trace
}  // namespace v1
}  // namespace agentrt
