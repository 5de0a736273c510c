// OtlpReceiver: an in-process OTLP/HTTP (JSON) trace collector for tests (Boost.Beast on 127.0.0.1). It records
// every export request and the spans in it; it can answer with another status, or never answer at all.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agentrt/json.hpp"

namespace agentrt::testing {

struct OtlpRequest {
  std::string path;
  std::multimap<std::string, std::string> headers;                   // names as sent
  agentrt::json body;                                                // null when the body was not JSON
  std::optional<std::string> header(const std::string& name) const;  // case-insensitive
};

// Thread-safe: configure and inspect from the test's threads while the server's I/O thread answers.
class OtlpReceiver {
 public:
  // Binds 127.0.0.1 on a free port and starts serving. `keep`: false = count requests only, neither parse nor keep
  // them (a benchmark's collector, whose cost is not the runtime's).
  explicit OtlpReceiver(bool keep = true);
  ~OtlpReceiver();
  OtlpReceiver(const OtlpReceiver&) = delete;
  OtlpReceiver& operator=(const OtlpReceiver&) = delete;

  std::string endpoint() const;  // "http://127.0.0.1:<port>/v1/traces"

  // The status of the next answers (200 by default); `times` answers, then 200 again (0: for good).
  void answer_status(int status, int times = 0);
  // Reads requests but never answers them (a hung collector).
  void never_answer();
  // Records the requests that arrive from now on (they count in wait_spans/wait_requests) but answers none of them
  // until release_answers() (a collector that is slow to answer: the exporter waits on its request meanwhile).
  void hold_answers();
  void release_answers();

  std::vector<OtlpRequest> requests() const;
  // Every span received so far (the OTLP JSON span objects), in arrival order.
  std::vector<agentrt::json> spans() const;
  // Blocks until at least `n` spans (or requests) have arrived, or the timeout passes.
  bool wait_spans(size_t n, std::chrono::milliseconds timeout) const;
  bool wait_requests(size_t n, std::chrono::milliseconds timeout) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Test helpers over OTLP JSON spans.
// The first span named `name` (nullopt when none is).
std::optional<agentrt::json> find_span(const std::vector<agentrt::json>& spans, const std::string& name);
// The value of the span's attribute `key` as plain JSON (a string, a number for intValue/doubleValue, a bool, an
// array of strings), null when absent.
agentrt::json span_attr(const agentrt::json& span, const std::string& key);

}  // namespace agentrt::testing
