// The JSON reader is public (the C ABI's decoders use it too): agentrt/json_reader.hpp. This path is kept for
// the core's decoders that still include it.
#pragma once

#include "agentrt/json_reader.hpp"
