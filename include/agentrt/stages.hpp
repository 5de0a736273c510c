// Stage policies: per stage a system prompt, model parameters and the tools it may use.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agentrt/json.hpp"

namespace agentrt {
inline namespace v1 {

inline constexpr const char* kIntent = "intent";
inline constexpr const char* kExecution = "execution";
inline constexpr const char* kOrganization = "organization";

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
};

void to_json(json& j, const StagePolicy& p);
void from_json(const json& j, StagePolicy& p);
void to_json(json& j, const StagePolicies& p);
void from_json(const json& j, StagePolicies& p);  // missing stages keep their defaults

}  // namespace v1
}  // namespace agentrt
