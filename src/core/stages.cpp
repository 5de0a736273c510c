#include "agentrt/stages.hpp"

#include <fmt/format.h>

#include "agentrt/error.hpp"

namespace agentrt {
inline namespace v1 {

void to_json(json& j, const StagePolicy& p) {
  j = json{{"call_model", p.call_model}, {"system_prompt", p.system_prompt}, {"params", p.params}};
  if (!p.model.empty()) j["model"] = p.model;
  if (p.tools) j["tools"] = *p.tools;
}

void from_json(const json& j, StagePolicy& p) {
  if (!j.is_object()) throw Error(ErrorCode::invalid_argument, "stage policy must be an object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    const auto& k = it.key();
    if (k == "call_model") {
      if (!it->is_boolean()) throw Error(ErrorCode::invalid_argument, "stage: call_model must be a boolean");
      p.call_model = it->get<bool>();
    } else if (k == "system_prompt") {
      if (!it->is_string()) throw Error(ErrorCode::invalid_argument, "stage: system_prompt must be a string");
      p.system_prompt = it->get<std::string>();
    } else if (k == "model") {
      if (!it->is_string()) throw Error(ErrorCode::invalid_argument, "stage: model must be a string");
      p.model = it->get<std::string>();
    } else if (k == "params") {
      if (!it->is_object()) throw Error(ErrorCode::invalid_argument, "stage: params must be an object");
      p.params = *it;
    } else if (k == "tools") {
      if (it->is_null()) {
        p.tools.reset();
      } else {
        if (!it->is_array()) throw Error(ErrorCode::invalid_argument, "stage: tools must be an array of names");
        std::vector<std::string> names;
        for (const auto& n : *it) {
          if (!n.is_string()) throw Error(ErrorCode::invalid_argument, "stage: tools must be an array of names");
          names.push_back(n.get<std::string>());
        }
        p.tools = std::move(names);
      }
    } else {
      throw Error(ErrorCode::invalid_argument, fmt::format("stage: unknown field '{}'", k));
    }
  }
}

void to_json(json& j, const StagePolicies& p) {
  j = json{{"intent", p.intent}, {"execution", p.execution}, {"organization", p.organization}};
}

void from_json(const json& j, StagePolicies& p) {
  if (!j.is_object()) throw Error(ErrorCode::invalid_argument, "stages must be an object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    Stage s = Stage::execution;
    try {
      s = stage_from_string(it.key());
    } catch (const Error& e) {
      throw Error(ErrorCode::invalid_argument, fmt::format("stages: {}", e.message()));
    }
    from_json(*it, s == Stage::intent ? p.intent : s == Stage::organization ? p.organization : p.execution);
  }
}

}  // namespace v1
}  // namespace agentrt
