// Ids the runtime makes: "<prefix>_" + 32 random hex digits, distinct across threads and forked processes.
#pragma once

#include <string>
#include <string_view>

#include "agentrt/ids.hpp"

namespace agentrt {
inline namespace v1 {

std::string new_id(std::string_view prefix);

}  // namespace v1
}  // namespace agentrt
