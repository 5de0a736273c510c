#include "token_table.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <memory>

#include "agentrt/error.hpp"

namespace agentrt::server {

namespace {

// Every request's token is hashed (twice: its header, then its route): the algorithm is fetched once, and each
// thread keeps a digest context, instead of EVP_Digest's implicit fetch and a context allocated and freed a call.
std::array<unsigned char, 32> sha256(std::string_view s) {
  static const std::unique_ptr<EVP_MD, decltype(&EVP_MD_free)> md(EVP_MD_fetch(nullptr, "SHA256", nullptr),
                                                                  &EVP_MD_free);
  thread_local const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  std::array<unsigned char, 32> out{};
  unsigned int n = 0;
  if (!md || !ctx || EVP_DigestInit_ex(ctx.get(), md.get(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), s.data(), s.size()) != 1 || EVP_DigestFinal_ex(ctx.get(), out.data(), &n) != 1 ||
      n != out.size())
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
