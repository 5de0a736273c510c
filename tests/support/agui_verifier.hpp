// Test support: an AG-UI 1.0 stream checker, as strict as @ag-ui/client 1.0 and the closed protocol schema
// (the AG-UI 1.0 specification, §1, §2 and §6).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agentrt/json.hpp"

namespace agentrt::testing {

// Checks one AG-UI event stream, fed one event at a time, and keeps the first violation.
// Each event is first checked against the closed schema of its type (§1-§2: known type, required fields with
// the right JSON type, no null fields, integer timestamp, object metadata, no unknown properties, outcome and
// role shapes), then against the client's ordering rules (§6, rules 1-21, with the client's verbatim messages
// where the doc gives them), then RUN_STARTED/RUN_FINISHED of one run must agree on threadId and runId.
// *_CHUNK events are schema-checked only: the client expands them before its ordering checks, and agentrt
// does not emit them.
// Not thread-safe: one verifier per stream, used from one thread.
class AguiVerifier {
 public:
  AguiVerifier();
  ~AguiVerifier();
  AguiVerifier(const AguiVerifier&) = delete;
  AguiVerifier& operator=(const AguiVerifier&) = delete;

  // The violation this event causes, or nullopt. After the first violation the stream is dead (as the client's
  // run is) and every later call returns that first message again.
  std::optional<std::string> feed(const json& event);

  // For a stream that is complete: a violation if it had no event or its last run is still open (a truncated
  // run, with neither RUN_FINISHED nor RUN_ERROR). Returns the first violation if there was one.
  std::optional<std::string> finish() const;

  const std::optional<std::string>& violation() const;
  std::size_t events_accepted() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Feeds every event and calls finish(). The message is prefixed with the failing event's index ("event 3: ...").
std::optional<std::string> verify_agui_stream(const std::vector<json>& events);

// Only the per-event schema checks (§1-§2) of one event.
std::optional<std::string> check_agui_event_schema(const json& event);

// RUN_STARTED and RUN_FINISHED of one run must carry the same threadId and runId (spec 1.0, run-input).
std::optional<std::string> check_run_ids_agree(const json& run_started, const json& run_finished);

}  // namespace agentrt::testing
