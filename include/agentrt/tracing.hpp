// Tracing: OpenTelemetry spans of the runtime's runs, model calls, tool calls, approval waits and jobs (the GenAI
// semantic conventions), exported as OTLP/HTTP JSON to a collector.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "agentrt/json.hpp"

namespace agentrt {
inline namespace v1 {

// Off by default (an empty endpoint): the runtime then makes no span and sends no trace context.
// Tracing never blocks or fails a run: spans wait in a bounded queue (dropped and counted when it is full) for a
// background exporter, whose failures (the collector down or slow) drop the batch with a rate-limited log line.
struct TracingConfig {
  // Where spans are POSTed, e.g. "http://127.0.0.1:4318/v1/traces" (OTLP/HTTP, JSON encoding). "" = tracing off.
  std::string otlp_endpoint;
  // Sent with every export (e.g. {"Authorization", "Bearer ..."}).
  std::vector<std::pair<std::string, std::string>> headers;
  std::string service_name = "agentrt";  // resource attribute service.name
  std::string agent_name = "agentrt";    // gen_ai.agent.name, and the run span's name: "invoke_agent <agent_name>"
  // Share of new traces recorded (0..1), decided once at the root by the trace id; a run with a parent (a host's
  // traceparent) follows its parent's sampled flag.
  double sample_ratio = 1.0;
  // Record message content (prompts, answers, tool arguments and results) on spans. Off: sizes and ids only.
  bool capture_content = false;
  size_t max_queue_spans = 2048;                    // finished spans waiting for export; more are dropped
  size_t max_batch_spans = 512;                     // spans per export request
  std::chrono::milliseconds export_interval{1000};  // longest a finished span waits before its batch is sent
  // Longest one export request may take; also the bound on the final flush when the runtime is destroyed.
  std::chrono::milliseconds export_timeout{3000};
};

// Keys (all optional): otlp_endpoint (string), headers ({name: value} of strings), service_name, agent_name
// (strings), sample_ratio (number 0..1), capture_content (bool), max_queue_spans, max_batch_spans (integers
// 1..1000000), export_interval_ms, export_timeout_ms (integers 1..600000). Error(invalid_argument) for another
// key, a value of the wrong type or out of range, or an endpoint that is not an http(s) URL.
TracingConfig tracing_config_from_json(const json& j);

}  // namespace v1
}  // namespace agentrt
