// TokenTable: the bearer tokens a server accepts and the user each stands for.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentrt::server {

// Looks a presented token up without letting the time taken depend on how much of it matches any accepted
// token: every entry's SHA-256 is compared with CRYPTO_memcmp, all of them, every time. Immutable after
// construction, so thread-safe.
class TokenTable {
 public:
  explicit TokenTable(const std::map<std::string, std::string>& tokens);
  std::optional<std::string> find(std::string_view presented) const;

 private:
  struct Entry {
    std::array<unsigned char, 32> digest;
    std::string user;
  };
  std::vector<Entry> entries_;
};

}  // namespace agentrt::server
