#include "agentrt/error.hpp"

namespace agentrt {
inline namespace v1 {

std::string_view to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::ok: return "ok";
    case ErrorCode::invalid_argument: return "invalid_argument";
    case ErrorCode::not_found: return "not_found";
    case ErrorCode::conflict: return "conflict";
    case ErrorCode::expired: return "expired";
    case ErrorCode::too_large: return "too_large";
    case ErrorCode::cancelled: return "cancelled";
    case ErrorCode::timeout: return "timeout";
    case ErrorCode::io: return "io";
    case ErrorCode::invalid_state: return "invalid_state";
    case ErrorCode::model: return "model";
    case ErrorCode::unauthorized: return "unauthorized";
    case ErrorCode::unsupported: return "unsupported";
    case ErrorCode::internal: return "internal";
  }
  return "internal";
}

}  // namespace v1
}  // namespace agentrt
