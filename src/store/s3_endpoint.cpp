// Addressing of an S3 bucket and its presigned GET URLs (s3_endpoint.hpp).
#include "store/s3_endpoint.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "agentrt/error.hpp"
#include "store/object_keys.hpp"
#include "store/signed_url.hpp"
#include "util/crypto.hpp"
#include "util/printable.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

constexpr int64_t kMaxPresignSeconds = 7 * 24 * 3600;  // S3 refuses X-Amz-Expires above a week

[[noreturn]] void refuse(std::string_view why) {
  throw Error(ErrorCode::invalid_argument, fmt::format("presigned URL refused: {}", why));
}

int default_port(std::string_view scheme) { return scheme == "https" ? 443 : 80; }

bool is_ipv4(std::string_view host) {
  int dots = 0;
  for (char c : host) {
    if (c == '.')
      ++dots;
    else if (c < '0' || c > '9')
      return false;
  }
  return dots == 3;
}

}  // namespace

const char* s3_bucket_problem(std::string_view bucket) {
  if (bucket.size() < 3 || bucket.size() > 63) return "must be 3 to 63 characters";
  for (char c : bucket) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-'))
      return "may only hold lower-case letters, digits, '.' and '-'";
  }
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(bucket.front()) || !alnum(bucket.back())) return "must start and end with a letter or digit";
  if (bucket.find("..") != std::string_view::npos) return "must not hold '..'";
  if (is_ipv4(bucket)) return "must not be an IP address";
  return nullptr;
}

S3Endpoint::S3Endpoint(std::string_view endpoint, std::string bucket, std::string prefix, bool path_style)
    : bucket_(std::move(bucket)), prefix_(std::move(prefix)), path_style_(path_style) {
  if (const char* problem = s3_bucket_problem(bucket_))
    throw Error(ErrorCode::invalid_argument,
                fmt::format("invalid S3 bucket '{}': it {}", printable(bucket_, 120), problem));
  if (!prefix_.empty()) {
    if (prefix_.back() != '/' || object_key_problem(std::string_view(prefix_).substr(0, prefix_.size() - 1)))
      throw Error(
          ErrorCode::invalid_argument,
          fmt::format("invalid S3 key prefix '{}': it must be a valid key followed by '/'", printable(prefix_, 120)));
  }
  ParsedUrl url;
  try {
    url = parse_url(endpoint);
    if (url.scheme != "http" && url.scheme != "https") bad_url("the scheme must be http or https");
    if (url.host.empty() || url.host == "[]") bad_url("it has no host");
    if (url.has_userinfo || url.query || url.has_fragment || (!url.path.empty() && url.path != "/"))
      bad_url("it has user info, a path, a query or a fragment");
  } catch (const Error& e) {
    throw Error(ErrorCode::invalid_argument,
                fmt::format("invalid S3 endpoint '{}': {}", printable(endpoint, 120), e.message()));
  }
  if (!path_style_ && (url.host.front() == '[' || is_ipv4(url.host)))
    throw Error(ErrorCode::invalid_argument,
                fmt::format("S3 endpoint '{}': virtual-hosted addressing needs a DNS name (set path_style)",
                            printable(endpoint, 120)));
  scheme_ = url.scheme;
  host_ = path_style_ ? url.host : fmt::format("{}.{}", bucket_, url.host);
  if (url.port != default_port(scheme_)) host_ += fmt::format(":{}", url.port);
}

std::string S3Endpoint::object_path(std::string_view key) const {
  const std::string full = prefix_ + std::string(key);
  return path_style_ ? fmt::format("/{}/{}", bucket_, sigv4::uri_path(full)) : "/" + sigv4::uri_path(full);
}

std::string S3Endpoint::bucket_path() const { return path_style_ ? "/" + bucket_ : "/"; }

std::string S3Endpoint::url(std::string_view path, std::string_view canonical_query) const {
  if (canonical_query.empty()) return fmt::format("{}://{}{}", scheme_, host_, path);
  return fmt::format("{}://{}{}?{}", scheme_, host_, path, canonical_query);
}

std::string S3Endpoint::describe(std::string_view key) const {
  return fmt::format("s3://{}/{}{}", bucket_, prefix_, printable(key, 200));
}

std::string S3Endpoint::presign_get(const sigv4::Signer& signer, std::string_view key, int64_t now_seconds,
                                    int64_t expires_seconds) const {
  validate_object_key(key);
  expires_seconds = std::clamp<int64_t>(expires_seconds, 1, kMaxPresignSeconds);
  const std::string path = object_path(key);
  sigv4::Request request{"GET", path, {}, {{"host", host_}}, std::string(sigv4::kUnsignedPayload)};
  return url(path, signer.presign(request, now_seconds, expires_seconds));
}

std::string S3Endpoint::verify_presigned_get(const sigv4::Signer& signer, std::string_view url_text,
                                             int64_t now_ms) const {
  const ParsedUrl parsed = parse_url(url_text);
  if (parsed.scheme != scheme_) refuse(fmt::format("scheme '{}' is not '{}'", printable(parsed.scheme, 40), scheme_));
  if (parsed.has_userinfo) refuse("it carries user information");
  if (parsed.has_fragment) refuse("it has a fragment");
  std::string authority = parsed.host;
  if (parsed.port != default_port(parsed.scheme)) authority += fmt::format(":{}", parsed.port);
  if (authority != host_) refuse(fmt::format("host '{}' is not '{}'", printable(authority, 120), host_));
  const std::string base = path_style_ ? fmt::format("/{}/", bucket_) : "/";
  if (!parsed.path.starts_with(base))
    refuse(fmt::format("path '{}' is not in bucket '{}'", printable(parsed.path, 120), bucket_));
  std::string full_key;
  try {
    full_key = crypto::percent_decode(std::string_view(parsed.path).substr(base.size()));
  } catch (const Error&) {
    refuse("the path has a malformed percent-escape");
  }
  if (!full_key.starts_with(prefix_))
    refuse(fmt::format("key '{}' is not under the prefix '{}'", printable(full_key, 120), prefix_));
  std::string key = full_key.substr(prefix_.size());
  if (const char* problem = object_key_problem(key))
    refuse(fmt::format("the key '{}' {}", printable(key, 120), problem));
  if (object_path(key) != parsed.path) refuse("the path is not encoded the way this deployment signs it");

  if (!parsed.query) refuse("it has no X-Amz-* query parameters");
  std::map<std::string, std::string, std::less<>> params;
  std::string_view query = *parsed.query;
  while (true) {
    const size_t amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    const size_t eq = param.find('=');
    std::string name;
    std::string value;
    try {
      name = crypto::percent_decode(param.substr(0, eq));
      value = eq == std::string_view::npos ? std::string() : crypto::percent_decode(param.substr(eq + 1));
    } catch (const Error&) {
      refuse("the query has a malformed percent-escape");
    }
    static constexpr std::string_view kAllowed[] = {"X-Amz-Algorithm", "X-Amz-Credential",    "X-Amz-Date",
                                                    "X-Amz-Expires",   "X-Amz-SignedHeaders", "X-Amz-Security-Token",
                                                    "X-Amz-Signature"};
    if (std::find(std::begin(kAllowed), std::end(kAllowed), name) == std::end(kAllowed))
      refuse(fmt::format("unexpected query parameter '{}'", printable(name, 60)));
    if (!params.emplace(name, std::move(value)).second) refuse(fmt::format("query parameter '{}' appears twice", name));
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  auto param = [&](std::string_view name) -> const std::string& {
    const auto it = params.find(name);
    if (it == params.end()) refuse(fmt::format("missing query parameter {}", name));
    return it->second;
  };
  if (param("X-Amz-Algorithm") != sigv4::kAlgorithm) refuse("X-Amz-Algorithm is not AWS4-HMAC-SHA256");
  if (param("X-Amz-SignedHeaders") != "host") refuse("X-Amz-SignedHeaders is not 'host'");
  const std::string& date = param("X-Amz-Date");
  const auto signed_at = sigv4::parse_amz_date(date);
  if (!signed_at) refuse("X-Amz-Date is not a yyyymmddThhmmssZ time");
  const std::string& expires = param("X-Amz-Expires");
  if (expires.empty() || expires.size() > 6 || expires.find_first_not_of("0123456789") != std::string::npos ||
      std::stoll(expires) < 1 || std::stoll(expires) > kMaxPresignSeconds)
    refuse("X-Amz-Expires is not a number of seconds from 1 to 604800");
  const std::string credential =
      fmt::format("{}/{}", signer.access_key(), signer.scope(std::string_view(date).substr(0, 8)));
  if (param("X-Amz-Credential") != credential) refuse("X-Amz-Credential is not this deployment's key and region");
  const bool has_token = params.count("X-Amz-Security-Token") > 0;
  if (has_token != !signer.session_token().empty() ||
      (has_token && params["X-Amz-Security-Token"] != signer.session_token()))
    refuse("X-Amz-Security-Token is not this deployment's");
  const std::string& sig = param("X-Amz-Signature");
  if (sig.size() != 64 || sig.find_first_not_of("0123456789abcdef") != std::string::npos)
    refuse("X-Amz-Signature is not 64 lower-case hex digits");

  sigv4::Request request{"GET", parsed.path, {}, {{"host", host_}}, std::string(sigv4::kUnsignedPayload)};
  for (const auto& [name, value] : params) {
    if (name != "X-Amz-Signature") request.query.emplace_back(name, value);
  }
  if (!crypto::constant_time_equal(sig, signer.signature(date, sigv4::canonical_request(request))))
    refuse("the signature does not match");
  const int64_t expires_at_ms = (*signed_at + std::stoll(expires)) * 1000;
  if (now_ms >= expires_at_ms)
    throw Error(ErrorCode::expired, fmt::format("presigned URL expired at {} ms (now {} ms)", expires_at_ms, now_ms));
  return key;
}

}  // namespace v1
}  // namespace agentrt
