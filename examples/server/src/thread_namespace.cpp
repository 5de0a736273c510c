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
  // Each request names its user's threads: the last user's prefix is kept per thread (a digest is ~6k
  // instructions, a tenth of what a request's routing costs otherwise).
  thread_local std::string last_user, last_prefix;
  if (!last_prefix.empty() && last_user == user) return last_prefix;
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
  last_user.assign(user);
  last_prefix = out;
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
  // String tokens found by their quotes (memchr); only the text up to a match and its replacement are copied
  // apart, the rest in runs.
  const char* const t = text.data();
  const size_t size = text.size();
  size_t copied = 0, i = 0;
  while (i < size) {
    const auto* q = static_cast<const char*>(std::memchr(t + i, '"', size - i));
    if (!q) break;
    const size_t open = static_cast<size_t>(q - t);
    // Its closing quote: the next one after an even number of backslashes (an odd number escapes it).
    size_t close = open + 1;
    for (;;) {
      const auto* c = static_cast<const char*>(std::memchr(t + close, '"', size - close));
      if (!c) {
        close = size;
        break;
      }
      close = static_cast<size_t>(c - t);
      size_t backslashes = 0;
      while (close - backslashes > open + 1 && t[close - backslashes - 1] == '\\') ++backslashes;
      if (backslashes % 2 == 0) break;
      ++close;
    }
    if (close >= size) break;  // unterminated: the rest as it is
    if (close - open - 1 == from.size() && std::memcmp(t + open + 1, from.data(), from.size()) == 0) {
      out.append(t + copied, open + 1 - copied);
      out.append(to);
      copied = close;
    }
    i = close + 1;
  }
  out.append(t + copied, size - copied);
}

std::string rewrite_json_string(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  append_rewritten_json(out, text, from, to);
  return out;
}

}  // namespace agentrt::server
