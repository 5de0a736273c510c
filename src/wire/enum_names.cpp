// Every enum's wire names, one constexpr table each (the mechanism: enum_names.hpp), and the public
// to_string / *_from_string functions of include/agentrt/ that read them.
#include "wire/enum_names.hpp"

#include <string>

#include <fmt/format.h>

#include "agentrt/content.hpp"
#include "agentrt/error.hpp"
#include "agentrt/jobs.hpp"
#include "agentrt/ledger_state.hpp"
#include "agentrt/log.hpp"
#include "agentrt/outputs.hpp"
#include "agentrt/stages.hpp"
#include "agentrt/turn_state.hpp"
#include "util/printable.hpp"

namespace agentrt {
inline namespace v1 {

namespace wire {

void throw_unknown_name(std::string_view kind, std::string_view value, std::span<const std::string_view> names) {
  std::string known;
  for (std::string_view n : names) {
    if (!known.empty()) known += ", ";
    known += n.empty() ? std::string_view("\"\"") : n;
  }
  throw Error(ErrorCode::invalid_argument,
              fmt::format("unknown {} '{}' (expected one of: {})", kind, printable(value, 40), known));
}

}  // namespace wire

namespace {

using wire::enum_names;

constexpr auto kRoles = enum_names<Role>("message role", {{Role::developer, "developer"},
                                                          {Role::system, "system"},
                                                          {Role::assistant, "assistant"},
                                                          {Role::user, "user"},
                                                          {Role::tool, "tool"},
                                                          {Role::activity, "activity"},
                                                          {Role::reasoning, "reasoning"}});

constexpr auto kJobStatuses = enum_names<JobStatus>("job status", {{JobStatus::queued, "queued"},
                                                                   {JobStatus::running, "running"},
                                                                   {JobStatus::succeeded, "succeeded"},
                                                                   {JobStatus::failed, "failed"},
                                                                   {JobStatus::cancelled, "cancelled"}});

// `none` is the empty name: a job row without a confirmation stores "".
constexpr auto kJobConfirmations =
    enum_names<JobConfirmation>("job confirmation state", {{JobConfirmation::none, ""},
                                                           {JobConfirmation::pending, "pending"},
                                                           {JobConfirmation::confirmed, "confirmed"},
                                                           {JobConfirmation::declined, "declined"}});

constexpr auto kLedgerStatuses = enum_names<LedgerStatus>("ledger status", {{LedgerStatus::requested, "requested"},
                                                                            {LedgerStatus::approved, "approved"},
                                                                            {LedgerStatus::rejected, "rejected"},
                                                                            {LedgerStatus::started, "started"},
                                                                            {LedgerStatus::finished, "finished"},
                                                                            {LedgerStatus::failed, "failed"},
                                                                            {LedgerStatus::interrupted, "interrupted"},
                                                                            {LedgerStatus::expired, "expired"}});

constexpr auto kToolStatuses = enum_names<ToolStatus>("tool status", {{ToolStatus::succeeded, "succeeded"},
                                                                      {ToolStatus::failed, "failed"},
                                                                      {ToolStatus::rejected, "rejected"},
                                                                      {ToolStatus::expired, "expired"},
                                                                      {ToolStatus::interrupted, "interrupted"}});

constexpr auto kTurnStatuses =
    enum_names<TurnStatus>("turn status", {{TurnStatus::running, "RUNNING"},
                                           {TurnStatus::waiting_approval, "WAITING_APPROVAL"},
                                           {TurnStatus::resuming, "RESUMING"},
                                           {TurnStatus::completed, "COMPLETED"},
                                           {TurnStatus::failed, "FAILED"},
                                           {TurnStatus::expired, "EXPIRED"},
                                           {TurnStatus::cancelled, "CANCELLED"},
                                           {TurnStatus::waiting_client, "WAITING_CLIENT"}});

constexpr auto kStageNames = enum_names<Stage>(
    "stage", {{Stage::intent, "intent"}, {Stage::execution, "execution"}, {Stage::organization, "organization"}});

constexpr auto kLogLevels = enum_names<LogLevel>("log level", {{LogLevel::debug, "debug"},
                                                               {LogLevel::info, "info"},
                                                               {LogLevel::warn, "warn"},
                                                               {LogLevel::error, "error"},
                                                               {LogLevel::off, "off"}});

constexpr auto kErrorCodes = enum_names<ErrorCode>("error code", {{ErrorCode::ok, "ok"},
                                                                  {ErrorCode::invalid_argument, "invalid_argument"},
                                                                  {ErrorCode::not_found, "not_found"},
                                                                  {ErrorCode::conflict, "conflict"},
                                                                  {ErrorCode::expired, "expired"},
                                                                  {ErrorCode::too_large, "too_large"},
                                                                  {ErrorCode::cancelled, "cancelled"},
                                                                  {ErrorCode::timeout, "timeout"},
                                                                  {ErrorCode::io, "io"},
                                                                  {ErrorCode::invalid_state, "invalid_state"},
                                                                  {ErrorCode::model, "model"},
                                                                  {ErrorCode::unauthorized, "unauthorized"},
                                                                  {ErrorCode::unsupported, "unsupported"},
                                                                  {ErrorCode::internal, "internal"}});

}  // namespace

std::string_view to_string(Role role) noexcept { return kRoles.name(role); }
Role role_from_string(std::string_view s) { return kRoles.parse(s); }

std::string_view to_string(JobStatus s) noexcept { return kJobStatuses.name(s); }
JobStatus job_status_from_string(std::string_view s) { return kJobStatuses.parse(s); }

std::string_view to_string(JobConfirmation c) noexcept { return kJobConfirmations.name(c); }
JobConfirmation job_confirmation_from_string(std::string_view s) { return kJobConfirmations.parse(s); }

std::string_view to_string(LedgerStatus s) noexcept { return kLedgerStatuses.name(s); }
LedgerStatus ledger_status_from_string(std::string_view s) { return kLedgerStatuses.parse(s); }

std::string_view to_string(ToolStatus s) noexcept { return kToolStatuses.name(s); }
ToolStatus tool_status_from_string(std::string_view s) { return kToolStatuses.parse(s); }

std::string_view to_string(TurnStatus s) noexcept { return kTurnStatuses.name(s); }
TurnStatus turn_status_from_string(std::string_view s) { return kTurnStatuses.parse(s); }

std::string_view to_string(Stage s) noexcept { return kStageNames.name(s); }
Stage stage_from_string(std::string_view s) { return kStageNames.parse(s); }

std::string_view to_string(LogLevel l) noexcept { return kLogLevels.name(l); }
LogLevel log_level_from_string(std::string_view s) { return kLogLevels.parse(s); }

std::string_view to_string(ErrorCode code) noexcept { return kErrorCodes.name(code); }

}  // namespace v1
}  // namespace agentrt
