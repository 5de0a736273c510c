#include "thread_namespace.hpp"

#include <openssl/evp.h>
#include <string.h>

#include "agentrt/error.hpp"

namespace agentrt::server {

void require_client_thread_id(std::string_view client_id) { require_id(client_id, "thread id", kMaxClientThreadId); }

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

namespace {

// Whether `text` holds `from` between two quotes: a JSON string equal to it is written so (escapes and all, the
// comparison below is of the raw text). memmem, not find: an id's first letter is common in JSON text.
bool holds_quoted(std::string_view text, std::string_view from) {
  for (size_t at = 0; at + from.size() < text.size();) {
    const void* hit = ::memmem(text.data() + at, text.size() - at, from.data(), from.size());
    if (!hit) return false;
    const size_t i = static_cast<size_t>(static_cast<const char*>(hit) - text.data());
    if (i > 0 && text[i - 1] == '"' && i + from.size() < text.size() && text[i + from.size()] == '"') return true;
    at = i + 1;
  }
  return false;
}

}  // namespace

void append_rewritten_json(std::string& out, std::string_view text, std::string_view from, std::string_view to) {
  if (from.empty() || !holds_quoted(text, from)) {
    out.append(text);
    return;
  }
  size_t i = 0;
  while (i < text.size()) {
    const size_t open = text.find('"', i);
    if (open == std::string_view::npos) {
      out.append(text.substr(i));
      break;
    }
    out.append(text.substr(i, open - i));
    // A string token: find its closing quote (escapes skipped).
    size_t j = open + 1;
    while (j < text.size() && text[j] != '"') j += text[j] == '\\' ? 2 : 1;
    if (j >= text.size()) {  // unterminated: leave the rest as it is
      out.append(text.substr(open));
      break;
    }
    const std::string_view inner = text.substr(open + 1, j - open - 1);
    out += '"';
    out.append(inner == from ? to : inner);
    out += '"';
    i = j + 1;
  }
}

std::string rewrite_json_string(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  append_rewritten_json(out, text, from, to);
  return out;
}

}  // namespace agentrt::server
