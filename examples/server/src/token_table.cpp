#include "token_table.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "agentrt/error.hpp"

namespace agentrt::server {

namespace {

std::array<unsigned char, 32> sha256(std::string_view s) {
  std::array<unsigned char, 32> out{};
  unsigned int n = 0;
  if (EVP_Digest(s.data(), s.size(), out.data(), &n, EVP_sha256(), nullptr) != 1 || n != out.size())
    throw Error(ErrorCode::internal, "SHA-256 failed");
  return out;
}

}  // namespace

TokenTable::TokenTable(const std::map<std::string, std::string>& tokens) {
  for (const auto& [token, user] : tokens) entries_.push_back(Entry{sha256(token), user});
}

std::optional<std::string> TokenTable::find(std::string_view presented) const {
  const auto digest = sha256(presented);
  const Entry* found = nullptr;
  for (const auto& e : entries_) {
    // No early exit: every entry is compared, whichever matches.
    const bool match = CRYPTO_memcmp(digest.data(), e.digest.data(), digest.size()) == 0;
    if (match) found = &e;
  }
  if (!found) return std::nullopt;
  return found->user;
}

}  // namespace agentrt::server
