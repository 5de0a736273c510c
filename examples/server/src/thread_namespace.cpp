#include "thread_namespace.hpp"

#include <openssl/evp.h>

#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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
// comparison below is of the raw text; a look-alike only costs the exact pass). Sixteen places a step where SSE2
// is there: a quote, `from`'s first byte after it and a quote after `from` mark a place, then compared whole.
bool holds_quoted(std::string_view text, std::string_view from) {
  const size_t n = from.size();
  if (n == 0 || text.size() < n + 2) return false;
  const char* t = text.data();
  const size_t last = text.size() - n - 2;  // the last place of the opening quote
  size_t q = 0;
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i head = _mm_set1_epi8(from[0]);
  for (; q + n + 1 + 16 <= text.size(); q += 16) {
    const __m128i open = _mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t + q)), quote);
    const __m128i first = _mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t + q + 1)), head);
    const __m128i close = _mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t + q + n + 1)), quote);
    for (unsigned mask = static_cast<unsigned>(_mm_movemask_epi8(_mm_and_si128(_mm_and_si128(open, first), close)));
         mask != 0; mask &= mask - 1)
      if (std::memcmp(t + q + static_cast<size_t>(__builtin_ctz(mask)) + 1, from.data(), n) == 0) return true;
  }
#endif
  for (; q <= last; ++q)
    if (t[q] == '"' && t[q + n + 1] == '"' && std::memcmp(t + q + 1, from.data(), n) == 0) return true;
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
