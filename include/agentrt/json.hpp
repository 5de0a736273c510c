// The JSON type used across agentrt's public API (nlohmann/json).
#pragma once

#include <nlohmann/json.hpp>

namespace agentrt {
inline namespace v1 {
using json = nlohmann::json;
}  // namespace v1
}  // namespace agentrt
