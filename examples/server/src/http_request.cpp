// HttpRequest's lookups: header fields by name, the bearer token, query parameters percent-decoded.
#include <algorithm>
#include <boost/beast/core/string.hpp>
#include <optional>

#include "http_server.hpp"

namespace agentrt::server {

namespace {

using boost::beast::iequals;

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string percent_decode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+' && plus_is_space) {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

namespace {

// Finds `name` in a raw query string; nullopt when absent.
std::optional<std::string> query_param(std::string_view query, std::string_view name) {
  size_t pos = 0;
  while (pos <= query.size()) {
    size_t end = query.find('&', pos);
    if (end == std::string_view::npos) end = query.size();
    std::string_view pair = query.substr(pos, end - pos);
    const size_t eq = pair.find('=');
    if (percent_decode(pair.substr(0, eq), true) == name)
      return eq == std::string_view::npos ? std::string() : percent_decode(pair.substr(eq + 1), true);
    pos = end + 1;
  }
  return std::nullopt;
}

}  // namespace

std::string_view HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (iequals(k, name)) return v;
  return {};
}

bool HttpRequest::has_header(std::string_view name) const {
  return std::any_of(headers.begin(), headers.end(), [&](const auto& h) { return iequals(h.first, name); });
}

std::optional<std::string_view> HttpRequest::bearer_token() const {
  constexpr std::string_view scheme = "Bearer";
  std::string_view h = header("Authorization");
  if (h.size() <= scheme.size() || !iequals(h.substr(0, scheme.size()), scheme) || h[scheme.size()] != ' ')
    return std::nullopt;
  h.remove_prefix(scheme.size());
  while (!h.empty() && h.front() == ' ') h.remove_prefix(1);
  if (h.empty()) return std::nullopt;
  return h;
}

std::string HttpRequest::param(std::string_view name) const { return query_param(query, name).value_or(""); }
bool HttpRequest::has_param(std::string_view name) const { return query_param(query, name).has_value(); }

}  // namespace agentrt::server
