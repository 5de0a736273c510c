// Logging: the library never prints; it hands records to the sink the host sets.
#pragma once

#include <functional>
#include <string_view>

namespace agentrt {
inline namespace v1 {

enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3, off = 4 };
std::string_view to_string(LogLevel l) noexcept;
LogLevel log_level_from_string(std::string_view s);  // throws Error(invalid_argument) on an unknown level

// Called from any runtime thread; the sink must be thread-safe.
using LogSink = std::function<void(LogLevel level, std::string_view component, std::string_view message)>;

}  // namespace v1
}  // namespace agentrt
