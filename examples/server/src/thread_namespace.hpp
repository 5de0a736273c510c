// Per-user thread namespaces: a client names its threads as it likes, and the runtime keeps each user's
// under a prefix of their own, so two users' threads never meet and another user's thread looks exactly like
// an unknown one. Everything the server answers (events, records, errors) says the client's id.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "agentrt/ids.hpp"

namespace agentrt::server {

// The longest thread id a client may use: the runtime's 128 less the prefix.
inline constexpr size_t kMaxClientThreadId = kMaxIdBytes - 14;

// "u" + the first 12 hex digits of SHA-256("agentrt-server thread namespace\n" + user) + ".". A collision of
// two users' prefixes (one in 2^48) still keeps them apart: ownership is checked on the user id too.
std::string thread_prefix(std::string_view user);

// Throws Error(invalid_argument) unless `client_id` keeps the id rule (agentrt/ids.hpp) within 114 bytes.
void require_client_thread_id(std::string_view client_id);

// The runtime's id of `user`'s thread `client_id`; require_client_thread_id() first.
std::string internal_thread_id(std::string_view user, std::string_view client_id);

// The client's id of a runtime thread id, when it is in `user`'s namespace.
std::optional<std::string> client_thread_id(std::string_view user, std::string_view internal_id);

// `json_text` with every JSON string equal to `from` (key or value) replaced by `to`; strings that merely
// contain it, and escaped look-alikes, are left alone. `from` and `to` need no JSON escaping (thread ids).
std::string rewrite_json_string(std::string_view json_text, std::string_view from, std::string_view to);
// The same, appended to `out` (a text without such a string is appended as it is, after one search).
void append_rewritten_json(std::string& out, std::string_view json_text, std::string_view from, std::string_view to);

}  // namespace agentrt::server
