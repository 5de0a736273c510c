#include "firewall.hpp"

#include <atomic>
#include <exception>
#include <filesystem>
#include <new>

#include <fmt/format.h>

#include "agentrt/json.hpp"

namespace agentrt::capi {

static_assert(AGENTRT_OK == static_cast<int>(ErrorCode::ok));
static_assert(AGENTRT_E_INVALID_ARGUMENT == static_cast<int>(ErrorCode::invalid_argument));
static_assert(AGENTRT_E_NOT_FOUND == static_cast<int>(ErrorCode::not_found));
static_assert(AGENTRT_E_CONFLICT == static_cast<int>(ErrorCode::conflict));
static_assert(AGENTRT_E_EXPIRED == static_cast<int>(ErrorCode::expired));
static_assert(AGENTRT_E_TOO_LARGE == static_cast<int>(ErrorCode::too_large));
static_assert(AGENTRT_E_CANCELLED == static_cast<int>(ErrorCode::cancelled));
static_assert(AGENTRT_E_TIMEOUT == static_cast<int>(ErrorCode::timeout));
static_assert(AGENTRT_E_IO == static_cast<int>(ErrorCode::io));
static_assert(AGENTRT_E_INVALID_STATE == static_cast<int>(ErrorCode::invalid_state));
static_assert(AGENTRT_E_MODEL == static_cast<int>(ErrorCode::model));
static_assert(AGENTRT_E_UNAUTHORIZED == static_cast<int>(ErrorCode::unauthorized));
static_assert(AGENTRT_E_UNSUPPORTED == static_cast<int>(ErrorCode::unsupported));
static_assert(AGENTRT_E_INTERNAL == static_cast<int>(ErrorCode::internal));

namespace {

thread_local std::string tl_message;
// Points at tl_message, or at a static text when building the message itself failed.
thread_local const char* tl_error = "";

std::atomic<FaultHook> g_fault_hook{nullptr};

}  // namespace

void clear_last_error() noexcept {
  tl_message.clear();
  tl_error = "";
}

int32_t fail(int32_t status, const std::string& message) noexcept {
  try {
    tl_message = message;
    tl_error = tl_message.c_str();
  } catch (...) {
    tl_error = "out of memory (while recording an error)";
  }
  return status;
}

const char* last_error() noexcept { return tl_error; }

const char* status_name(int32_t status) noexcept {
  if (status > 0 || status < AGENTRT_E_INTERNAL) return "unknown";
  // The core's names are string literals, so data() is NUL-terminated static storage.
  return to_string(static_cast<ErrorCode>(status)).data();
}

int32_t translate_current_exception(const char* function) noexcept {
  try {
    try {
      throw;
    } catch (const Error& e) {
      return fail(static_cast<int32_t>(e.code()), fmt::format("{}: {}", function, e.message()));
    } catch (const nlohmann::json::exception& e) {
      // Every JSON value the core reads here came from the host.
      return fail(AGENTRT_E_INVALID_ARGUMENT, fmt::format("{}: invalid JSON value: {}", function, e.what()));
    } catch (const std::bad_alloc&) {
      return fail(AGENTRT_E_INTERNAL, fmt::format("{}: out of memory", function));
    } catch (const std::filesystem::filesystem_error& e) {
      return fail(AGENTRT_E_IO, fmt::format("{}: {}", function, e.what()));
    } catch (const std::exception& e) {
      return fail(AGENTRT_E_INTERNAL, fmt::format("{}: internal error: {}", function, e.what()));
    } catch (...) {
      return fail(AGENTRT_E_INTERNAL, fmt::format("{}: internal error: an unknown exception", function));
    }
  } catch (...) {
    // Formatting the message failed (out of memory): keep the code, use a static message.
    tl_error = "internal error (the error message could not be built)";
    return AGENTRT_E_INTERNAL;
  }
}

void set_fault_hook(FaultHook hook) noexcept { g_fault_hook.store(hook); }

void run_fault_hook(const char* function) {
  if (FaultHook hook = g_fault_hook.load(std::memory_order_relaxed)) hook(function);
}

const char* require_arg(const char* value, const char* name) {
  if (!value) throw Error(ErrorCode::invalid_argument, std::string(name) + " is NULL");
  return value;
}

std::string id_arg(const char* value, const char* name) {
  require_arg(value, name);
  if (!*value) throw Error(ErrorCode::invalid_argument, std::string(name) + " is empty");
  return value;
}

}  // namespace agentrt::capi
