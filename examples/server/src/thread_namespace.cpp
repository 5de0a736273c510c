#include "thread_namespace.hpp"

#include <openssl/evp.h>

#include <fmt/format.h>

#include "agentrt/error.hpp"

namespace agentrt::server {

void require_client_thread_id(std::string_view client_id) {
  require_id(client_id, "thread id");
  if (client_id.size() > kMaxClientThreadId)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("thread id '{}...' is longer than {} bytes", client_id.substr(0, 32), kMaxClientThreadId));
}

std::string thread_prefix(std::string_view user) {
  const std::string input = "agentrt-server thread namespace\n" + std::string(user);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(input.data(), input.size(), digest, &n, EVP_sha256(), nullptr) != 1 || n < 6)
    throw Error(ErrorCode::internal, "SHA-256 failed");
  static const char* hex = "0123456789abcdef";
  std::string out = "u";
  for (int i = 0; i < 6; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  out += '.';
  return out;
}

std::string internal_thread_id(std::string_view user, std::string_view client_id) {
  require_client_thread_id(client_id);
  return thread_prefix(user) + std::string(client_id);
}

std::optional<std::string> client_thread_id(std::string_view user, std::string_view internal_id) {
  const std::string prefix = thread_prefix(user);
  if (internal_id.size() <= prefix.size() || internal_id.substr(0, prefix.size()) != prefix) return std::nullopt;
  return std::string(internal_id.substr(prefix.size()));
}

std::string rewrite_json_string(std::string_view text, std::string_view from, std::string_view to) {
  if (from.empty() || text.find(from) == std::string_view::npos) return std::string(text);
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c != '"') {
      out += c;
      ++i;
      continue;
    }
    // A string token: find its closing quote (escapes skipped).
    size_t j = i + 1;
    while (j < text.size() && text[j] != '"') j += text[j] == '\\' ? 2 : 1;
    if (j >= text.size()) {  // unterminated: leave the rest as it is
      out.append(text.substr(i));
      break;
    }
    const std::string_view inner = text.substr(i + 1, j - i - 1);
    out += '"';
    out.append(inner == from ? to : inner);
    out += '"';
    i = j + 1;
  }
  return out;
}

}  // namespace agentrt::server
