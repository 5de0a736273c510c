// The exception firewall of the C ABI: every extern "C" body runs through guard(), which maps any exception to a
// status code and the calling thread's last-error message. Thread-safe (the message is thread-local).
#pragma once

#include <cstdint>
#include <string>

#include "agentrt.h"
#include "agentrt/error.hpp"

namespace agentrt::capi {

void clear_last_error() noexcept;
// Records `message` as the calling thread's last error and returns `status`.
int32_t fail(int32_t status, const std::string& message) noexcept;
const char* last_error() noexcept;
const char* status_name(int32_t status) noexcept;
// Maps the exception being handled (call only inside a catch block) to a status and a message.
int32_t translate_current_exception(const char* function) noexcept;

// A test seam: when set, it is called at the start of every guarded body, so a test can make any entry point
// throw from inside the firewall. Not exported from the shared library.
using FaultHook = void (*)(const char* function);
void set_fault_hook(FaultHook hook) noexcept;
void run_fault_hook(const char* function);

template <class Body>
int32_t guard(const char* function, Body&& body) noexcept {
  clear_last_error();
  try {
    run_fault_hook(function);
    return body();
  } catch (...) {
    return translate_current_exception(function);
  }
}

template <class Body>
void guard_void(const char* function, Body&& body) noexcept {
  clear_last_error();
  try {
    run_fault_hook(function);
    body();
  } catch (...) {
    translate_current_exception(function);
  }
}

// Argument checks that throw Error(invalid_argument) naming the function's parameter.
const char* require_arg(const char* value, const char* name);
// A non-empty string argument (an id or a name), copied.
std::string id_arg(const char* value, const char* name);
template <class T>
T* require_handle(T* handle, const char* name) {
  if (!handle) throw Error(ErrorCode::invalid_argument, std::string(name) + " is NULL");
  return handle;
}
template <class T>
void require_out(T** out) {
  if (!out) throw Error(ErrorCode::invalid_argument, "out is NULL");
  *out = nullptr;
}

}  // namespace agentrt::capi
