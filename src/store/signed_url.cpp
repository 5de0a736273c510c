// This deployment's own signed object URLs (signed_url.hpp): HMAC-SHA256 over method, bucket, key and expiry;
// verify takes back only this deployment's own URLs, unexpired and unaltered.
#include "store/signed_url.hpp"

#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "store/fs_object_store.hpp"
#include "util/crypto.hpp"
#include "util/printable.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

[[noreturn]] void refuse(std::string_view why) {
  throw Error(ErrorCode::invalid_argument, fmt::format("signed URL refused: {}", why));
}

}  // namespace

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

[[noreturn]] void bad_url(std::string_view why) {
  throw Error(ErrorCode::invalid_argument, fmt::format("not an acceptable URL: {}", why));
}

ParsedUrl parse_url(std::string_view url) {
  for (unsigned char c : url) {
    if (c <= 0x20 || c >= 0x7f) bad_url("it contains a space, control or non-ASCII byte");
  }
  ParsedUrl out;
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos || scheme_end == 0) bad_url("it is not an absolute URL");
  const std::string_view scheme = url.substr(0, scheme_end);
  for (size_t i = 0; i < scheme.size(); ++i) {
    const char c = scheme[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!alpha && (i == 0 || !((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.'))) {
      bad_url("the scheme is malformed");
    }
  }
  out.scheme = ascii_lower(scheme);
  if (out.scheme == "http") out.port = 80;
  if (out.scheme == "https") out.port = 443;

  std::string_view rest = url.substr(scheme_end + 3);
  const size_t authority_end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, authority_end);
  rest = authority_end == std::string_view::npos ? std::string_view{} : rest.substr(authority_end);
  if (const size_t at = authority.rfind('@'); at != std::string_view::npos) {
    out.has_userinfo = true;
    authority.remove_prefix(at + 1);
  }
  std::string_view host = authority;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) bad_url("an IPv6 host is not closed by ']'");
    host = authority.substr(0, close + 1);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') bad_url("unexpected text after the IPv6 host");
      port = after.substr(1);
      if (port.empty()) bad_url("the port is empty");
    }
  } else if (const size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    if (port.empty()) bad_url("the port is empty");
  }
  out.host = ascii_lower(host);
  if (!port.empty()) {
    if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos) {
      bad_url("the port is not a number");
    }
    out.port = std::stoi(std::string(port));
    if (out.port < 1 || out.port > 65535) bad_url("the port is out of range");
  }

  const size_t fragment = rest.find('#');
  if (fragment != std::string_view::npos) {
    out.has_fragment = true;
    rest = rest.substr(0, fragment);
  }
  const size_t query = rest.find('?');
  out.path = std::string(rest.substr(0, query));
  if (query != std::string_view::npos) out.query = std::string(rest.substr(query + 1));
  return out;
}

const char* bucket_problem(std::string_view bucket) {
  if (bucket.empty() || bucket.size() > 63) return "must be 1 to 63 characters";
  if (bucket == "." || bucket == "..") return "must not be '.' or '..'";
  for (char c : bucket) {
    const bool ok =
        (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) return "may only hold [A-Za-z0-9._-]";
  }
  return nullptr;
}

ServerUrlSigner::ServerUrlSigner(std::string bucket, std::string secret, std::string public_base_url)
    : bucket_(std::move(bucket)), secret_(std::move(secret)), base_url_(std::move(public_base_url)) {
  if (secret_.empty()) {
    throw Error(ErrorCode::invalid_argument, "the object store's signing secret must not be empty");
  }
  if (const char* problem = bucket_problem(bucket_)) {
    throw Error(ErrorCode::invalid_argument,
                fmt::format("invalid bucket '{}': it {}", printable(bucket_, 120), problem));
  }
  const std::string given = base_url_;
  while (!base_url_.empty() && base_url_.back() == '/') base_url_.pop_back();
  try {
    ParsedUrl base = parse_url(base_url_);
    if (base.scheme != "http" && base.scheme != "https") bad_url("the scheme must be http or https");
    if (base.host.empty() || base.host == "[]") bad_url("it has no host");
    if (base.has_userinfo || base.query || base.has_fragment) bad_url("it has user info, a query or a fragment");
    origin_ = Origin{std::move(base.scheme), std::move(base.host), base.port, std::move(base.path)};
  } catch (const Error& e) {
    throw Error(ErrorCode::invalid_argument,
                fmt::format("invalid public base URL '{}': {}", printable(given, 120), e.message()));
  }
}

std::string ServerUrlSigner::signature(std::string_view key, std::string_view expires) const {
  return crypto::hmac_sha256_hex(secret_, fmt::format("GET\n{}\n{}\n{}", bucket_, key, expires));
}

std::string ServerUrlSigner::sign(std::string_view key, int64_t expires_at_ms) const {
  validate_object_key(key);
  if (expires_at_ms < 0) {
    throw Error(ErrorCode::invalid_argument, fmt::format("expiry {} ms must not be negative", expires_at_ms));
  }
  const std::string expires = std::to_string(expires_at_ms);
  return fmt::format("{}/{}/{}?expires={}&sig={}", base_url_, crypto::percent_encode(bucket_),
                     crypto::percent_encode(key, true), expires, signature(key, expires));
}

std::string ServerUrlSigner::verify(std::string_view url, int64_t now_ms) const {
  const ParsedUrl parsed = parse_url(url);
  if (parsed.scheme != origin_.scheme) {
    refuse(fmt::format("scheme '{}' is not '{}'", printable(parsed.scheme, 120), origin_.scheme));
  }
  if (parsed.has_userinfo) refuse("it carries user information");
  if (parsed.host != origin_.host)
    refuse(fmt::format("host '{}' is not '{}'", printable(parsed.host, 120), origin_.host));
  if (parsed.port != origin_.port) refuse(fmt::format("port {} is not {}", parsed.port, origin_.port));
  if (parsed.has_fragment) refuse("it has a fragment");
  const std::string base_path = origin_.path + "/";
  if (!parsed.path.starts_with(base_path)) {
    refuse(fmt::format("path '{}' does not start with '{}'", printable(parsed.path, 120), base_path));
  }
  const std::string_view rest = std::string_view(parsed.path).substr(base_path.size());
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos) refuse("the path names no key");
  std::string bucket;
  std::string key;
  try {
    bucket = crypto::percent_decode(rest.substr(0, slash));
    key = crypto::percent_decode(rest.substr(slash + 1));
  } catch (const Error&) {
    refuse("the path has a malformed percent-escape");
  }
  if (bucket != bucket_) refuse(fmt::format("bucket '{}' is not '{}'", printable(bucket, 120), bucket_));
  if (const char* problem = object_key_problem(key))
    refuse(fmt::format("the key '{}' {}", printable(key, 120), problem));

  if (!parsed.query) refuse("missing query parameters expires and sig");
  std::optional<std::string_view> expires;
  std::optional<std::string_view> sig;
  std::string_view query = *parsed.query;
  while (true) {
    const size_t amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    const size_t eq = param.find('=');
    const std::string_view name = param.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? std::string_view{} : param.substr(eq + 1);
    std::optional<std::string_view>* slot = name == "expires" ? &expires : name == "sig" ? &sig : nullptr;
    if (slot == nullptr) refuse(fmt::format("unexpected query parameter '{}'", printable(name, 120)));
    if (slot->has_value()) refuse(fmt::format("query parameter '{}' appears twice", name));
    *slot = value;
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  if (!expires) refuse("missing query parameter expires");
  if (!sig) refuse("missing query parameter sig");
  if (expires->empty() || expires->size() > 18 || expires->find_first_not_of("0123456789") != std::string_view::npos) {
    refuse("expires is not a number of milliseconds");
  }
  if (sig->size() != 64 || sig->find_first_not_of("0123456789abcdef") != std::string_view::npos) {
    refuse("sig is not 64 lower-case hex digits");
  }
  // The signature covers the expiry as written, so "expires=007" is not a new name for "expires=7".
  if (!crypto::constant_time_equal(*sig, signature(key, *expires))) refuse("the signature does not match");
  const int64_t expires_at = std::stoll(std::string(*expires));
  if (now_ms >= expires_at) {
    throw Error(ErrorCode::expired, fmt::format("signed URL expired at {} ms (now {} ms)", expires_at, now_ms));
  }
  return key;
}

}  // namespace v1
}  // namespace agentrt
