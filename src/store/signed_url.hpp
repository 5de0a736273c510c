// The filesystem object store's URLs: a strict parser for the public base URL and for signed URLs handed
// back (absolute, ASCII, no user information or fragment), used by FsObjectStore::sign_url / verify_url
// (signed_url.cpp). Pure functions, thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace agentrt {
inline namespace v1 {

// A URL taken apart.
struct ParsedUrl {
  std::string scheme;  // lower-case
  std::string host;    // lower-case
  int port = 0;        // explicit or default for the scheme; 0 when unknown
  bool has_userinfo = false;
  std::string path;
  std::optional<std::string> query;
  bool has_fragment = false;
};

// Throws Error(invalid_argument) "not an acceptable URL: <why>".
[[noreturn]] void bad_url(std::string_view why);

// Throws (bad_url) for anything but an absolute ASCII URL.
ParsedUrl parse_url(std::string_view url);

}  // namespace v1
}  // namespace agentrt
