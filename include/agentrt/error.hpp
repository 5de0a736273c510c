// agentrt::Error — the one exception type of the library, carrying a code that matches the C ABI status.
#pragma once

#include <exception>
#include <string>
#include <string_view>

namespace agentrt {
inline namespace v1 {

// The numbers are the C ABI's status codes (capi/include/agentrt.h) and never change.
enum class ErrorCode : int {
  ok = 0,
  invalid_argument = -1,  // bad input from the caller (malformed JSON, schema violation, bad id shape)
  not_found = -2,         // unknown thread, turn, approval request, job, object
  conflict = -3,          // one active turn per thread, a lost compare-and-set, a duplicate id
  expired = -4,           // an approval deadline or a signed URL has passed
  too_large = -5,         // a size limit was exceeded
  cancelled = -6,         // the operation was cancelled
  timeout = -7,           // a deadline passed (tool, HTTP, pull)
  io = -8,                // storage or network I/O failed
  invalid_state = -9,     // the turn is not in a state that allows the operation
  model = -10,            // the model provider failed (HTTP error, malformed stream)
  unauthorized = -11,     // missing or wrong credentials
  unsupported = -12,      // a feature not available in this build or configuration
  internal = -13,         // a bug in agentrt or an exception from host code
};

// The stable lower-case name of a code ("invalid_argument", "not_found", ...).
std::string_view to_string(ErrorCode code) noexcept;

// Thread-safe (immutable after construction).
class Error : public std::exception {
 public:
  Error(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  ErrorCode code() const noexcept { return code_; }
  const char* what() const noexcept override { return message_.c_str(); }
  const std::string& message() const noexcept { return message_; }

 private:
  ErrorCode code_;
  std::string message_;
};

}  // namespace v1
}  // namespace agentrt
