// Every enum's wire names come from one table each (src/wire/enum_names.hpp): both directions agree, and an
// unknown name is refused the same way for every kind.
#include <doctest/doctest.h>

#include <string>

#include "agentrt/content.hpp"
#include "agentrt/error.hpp"
#include "agentrt/events.hpp"
#include "agentrt/jobs.hpp"
#include "agentrt/ledger_state.hpp"
#include "agentrt/log.hpp"
#include "agentrt/outputs.hpp"
#include "agentrt/stages.hpp"
#include "agentrt/turn_state.hpp"

using namespace agentrt;

namespace {

template <class E, class Parse>
void check_round_trip(std::initializer_list<E> values, Parse parse) {
  for (E v : values) {
    CAPTURE(std::string(to_string(v)));
    CHECK(parse(to_string(v)) == v);
  }
}

std::string refusal(void (*parse)(std::string_view), std::string_view name) {
  try {
    parse(name);
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    return e.message();
  }
  FAIL("an unknown name was read");
  return {};
}

}  // namespace

TEST_CASE("enum names: every name reads back as its value") {
  check_round_trip(
      {Role::developer, Role::system, Role::assistant, Role::user, Role::tool, Role::activity, Role::reasoning},
      role_from_string);
  check_round_trip(
      {JobStatus::queued, JobStatus::running, JobStatus::succeeded, JobStatus::failed, JobStatus::cancelled},
      job_status_from_string);
  check_round_trip(
      {JobConfirmation::none, JobConfirmation::pending, JobConfirmation::confirmed, JobConfirmation::declined},
      job_confirmation_from_string);
  check_round_trip(
      {ToolStatus::succeeded, ToolStatus::failed, ToolStatus::rejected, ToolStatus::expired, ToolStatus::interrupted},
      tool_status_from_string);
  check_round_trip({Stage::intent, Stage::execution, Stage::organization}, stage_from_string);
  check_round_trip({LogLevel::debug, LogLevel::info, LogLevel::warn, LogLevel::error, LogLevel::off},
                   log_level_from_string);
  check_round_trip({TurnStatus::running, TurnStatus::waiting_approval, TurnStatus::resuming, TurnStatus::completed,
                    TurnStatus::failed, TurnStatus::expired, TurnStatus::cancelled},
                   turn_status_from_string);
  for (int i = 0; i <= static_cast<int>(EventType::SUBAGENT_ERROR); ++i) {
    auto t = static_cast<EventType>(i);
    CHECK(event_type_from_string(to_string(t)) == t);
  }
  CHECK(to_string(TurnStatus::waiting_approval) == "WAITING_APPROVAL");
  CHECK(to_string(JobConfirmation::none).empty());
  CHECK(to_string(LogLevel::warn) == "warn");
  CHECK(to_string(ErrorCode::invalid_state) == "invalid_state");
  CHECK(to_string(ErrorCode::internal) == "internal");
  CHECK_FALSE(event_type_from_string("run_started"));
}

TEST_CASE("enum names: an unknown name is invalid_argument naming the kind, the value and the known names") {
  CHECK(refusal([](std::string_view s) { job_status_from_string(s); }, "done") ==
        "unknown job status 'done' (expected one of: queued, running, succeeded, failed, cancelled)");
  CHECK(refusal([](std::string_view s) { job_confirmation_from_string(s); }, "maybe") ==
        "unknown job confirmation state 'maybe' (expected one of: \"\", pending, confirmed, declined)");
  CHECK(refusal([](std::string_view s) { role_from_string(s); }, "Assistant") ==
        "unknown message role 'Assistant' (expected one of: developer, system, assistant, user, tool, activity, "
        "reasoning)");
  CHECK(refusal([](std::string_view s) { turn_status_from_string(s); }, "running") ==
        "unknown turn status 'running' (expected one of: RUNNING, WAITING_APPROVAL, RESUMING, COMPLETED, FAILED, "
        "EXPIRED, CANCELLED, WAITING_CLIENT)");
  CHECK(refusal([](std::string_view s) { stage_from_string(s); }, "planning") ==
        "unknown stage 'planning' (expected one of: intent, execution, organization)");
  // The value is quoted printable-escaped and bounded: it may come from a hostile caller or a damaged row.
  const std::string hostile = "a\nb\xff" + std::string(100, 'x');
  const std::string m = refusal([](std::string_view s) { tool_status_from_string(s); }, hostile);
  CHECK(m.rfind("unknown tool status 'a\\x0ab\\xff" + std::string(36, 'x') + "...' (expected one of: ", 0) == 0);
}
