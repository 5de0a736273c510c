// Stage policies: per stage a system prompt, model parameters and the tools it may use.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentrt/json.hpp"

namespace agentrt {
inline namespace v1 {

// The three stages of a turn, in the order it runs them.
enum class Stage { intent, execution, organization };
inline constexpr Stage kStages[] = {Stage::intent, Stage::execution, Stage::organization};

std::string_view to_string(Stage s) noexcept;  // "intent", "execution", "organization"
// Throws Error(invalid_argument) "unknown stage 'x' (expected one of: intent, execution, organization)".
Stage stage_from_string(std::string_view s);

struct StagePolicy {
  // Whether the stage calls the model. A stage that does not is still entered and reported
  // (STEP_STARTED/STEP_FINISHED). The execution stage always calls the model.
  bool call_model = true;
  std::string system_prompt;
  std::string model;             // "" = the provider's default
  json params = json::object();  // passed to the provider as is
  // The tools this stage may use; nullopt = every tool registered for the stage. Empty = none.
  std::optional<std::vector<std::string>> tools;
};

// intent: classifies the request, read-only (no tools). execution: the tool loop. organization: writes the
// final answer from the execution's draft when it calls the model; otherwise the draft is the answer.
struct StagePolicies {
  StagePolicy intent{true, "Say in one short line what the user wants. Do not answer it.", "", json::object(),
                     std::vector<std::string>{}};
  StagePolicy execution{true, "You are a helpful assistant. Use the tools when they help.", "", json::object(),
                        std::nullopt};
  StagePolicy organization{false, "Write the final answer for the user from the draft and the tool results.", "",
                           json::object(), std::vector<std::string>{}};

  const StagePolicy& of(Stage s) const {
    return s == Stage::intent ? intent : s == Stage::organization ? organization : execution;
  }
};

void to_json(json& j, const StagePolicy& p);
void from_json(const json& j, StagePolicy& p);
void to_json(json& j, const StagePolicies& p);
void from_json(const json& j, StagePolicies& p);  // missing stages keep their defaults

}  // namespace v1
}  // namespace agentrt
