// AWS Signature Version 4 (sigv4.hpp).
#include "store/sigv4.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>

#include "store/signed_url.hpp"
#include "util/crypto.hpp"

namespace agentrt {
inline namespace v1 {
namespace sigv4 {

namespace {

// Trimmed, with every run of spaces inside made one space (the suite's get-header-value-trim).
std::string squeeze(std::string_view value) {
  const size_t first = value.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const size_t last = value.find_last_not_of(" \t");
  value = value.substr(first, last - first + 1);
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\t') c = ' ';
    if (c == ' ' && !out.empty() && out.back() == ' ') continue;
    out.push_back(c);
  }
  return out;
}

bool digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::string uri_path(std::string_view path) { return crypto::percent_encode(path, true); }

std::string canonical_query(const Params& query) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(query.size());
  for (const auto& [name, value] : query)
    encoded.emplace_back(crypto::percent_encode(name), crypto::percent_encode(value));
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [name, value] : encoded) {
    if (!out.empty()) out += '&';
    out += name;
    out += '=';
    out += value;
  }
  return out;
}

std::string canonical_headers(const Params& headers, std::string* signed_headers) {
  // Stable: the values of a repeated header keep the order they were sent in.
  std::vector<std::pair<std::string, std::string>> lines;
  for (const auto& [name, value] : headers) lines.emplace_back(ascii_lower(name), squeeze(value));
  std::stable_sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string out;
  std::string names;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0 && lines[i].first == lines[i - 1].first) {
      out.back() = ',';  // the previous line's '\n'
      out += lines[i].second;
      out += '\n';
      continue;
    }
    out += lines[i].first;
    out += ':';
    out += lines[i].second;
    out += '\n';
    if (!names.empty()) names += ';';
    names += lines[i].first;
  }
  if (signed_headers) *signed_headers = std::move(names);
  return out;
}

std::string canonical_request(const Request& request) {
  std::string signed_headers;
  const std::string headers = canonical_headers(request.headers, &signed_headers);
  return fmt::format("{}\n{}\n{}\n{}\n{}\n{}", request.method, request.canonical_uri, canonical_query(request.query),
                     headers, signed_headers, request.payload_hash);
}

std::string amz_date(int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

std::optional<int64_t> parse_amz_date(std::string_view text) {
  if (text.size() != 16 || text[8] != 'T' || text[15] != 'Z' || !digits(text.substr(0, 8)) ||
      !digits(text.substr(9, 6))) {
    return std::nullopt;
  }
  auto num = [&](size_t at, size_t n) { return std::stoi(std::string(text.substr(at, n))); };
  std::tm tm{};
  tm.tm_year = num(0, 4) - 1900;
  tm.tm_mon = num(4, 2) - 1;
  tm.tm_mday = num(6, 2);
  tm.tm_hour = num(9, 2);
  tm.tm_min = num(11, 2);
  tm.tm_sec = num(13, 2);
  const int64_t seconds = static_cast<int64_t>(::timegm(&tm));
  if (amz_date(seconds) != text) return std::nullopt;  // "20150230T..." and other impossible dates
  return seconds;
}

Signer::Signer(std::string access_key, std::string secret_key, std::string region, std::string service,
               std::string session_token)
    : access_key_(std::move(access_key)),
      secret_key_(std::move(secret_key)),
      region_(std::move(region)),
      service_(std::move(service)),
      session_token_(std::move(session_token)) {}

std::string Signer::scope(std::string_view day) const {
  return fmt::format("{}/{}/{}/aws4_request", day, region_, service_);
}

std::string Signer::string_to_sign(std::string_view date, std::string_view canonical) const {
  return fmt::format("{}\n{}\n{}\n{}", kAlgorithm, date, scope(date.substr(0, 8)), crypto::sha256_hex(canonical));
}

std::string Signer::signature(std::string_view date, std::string_view canonical) const {
  const std::string k_date = crypto::hmac_sha256("AWS4" + secret_key_, date.substr(0, 8));
  const std::string k_region = crypto::hmac_sha256(k_date, region_);
  const std::string k_service = crypto::hmac_sha256(k_region, service_);
  const std::string k_signing = crypto::hmac_sha256(k_service, "aws4_request");
  return crypto::hmac_sha256_hex(k_signing, string_to_sign(date, canonical));
}

std::string Signer::authorize(Request& request, int64_t unix_seconds) const {
  const std::string date = amz_date(unix_seconds);
  request.headers.emplace_back("x-amz-date", date);
  if (!session_token_.empty()) request.headers.emplace_back("x-amz-security-token", session_token_);
  std::string signed_headers;
  canonical_headers(request.headers, &signed_headers);
  return fmt::format("{} Credential={}/{}, SignedHeaders={}, Signature={}", kAlgorithm, access_key_,
                     scope(std::string_view(date).substr(0, 8)), signed_headers,
                     signature(date, canonical_request(request)));
}

std::string Signer::presign(Request& request, int64_t unix_seconds, int64_t expires_seconds) const {
  const std::string date = amz_date(unix_seconds);
  std::string signed_headers;
  canonical_headers(request.headers, &signed_headers);
  request.payload_hash = std::string(kUnsignedPayload);
  request.query.emplace_back("X-Amz-Algorithm", std::string(kAlgorithm));
  request.query.emplace_back("X-Amz-Credential",
                             fmt::format("{}/{}", access_key_, scope(std::string_view(date).substr(0, 8))));
  request.query.emplace_back("X-Amz-Date", date);
  request.query.emplace_back("X-Amz-Expires", std::to_string(expires_seconds));
  if (!session_token_.empty()) request.query.emplace_back("X-Amz-Security-Token", session_token_);
  request.query.emplace_back("X-Amz-SignedHeaders", signed_headers);
  const std::string sig = signature(date, canonical_request(request));
  return fmt::format("{}&X-Amz-Signature={}", canonical_query(request.query), sig);
}

}  // namespace sigv4
}  // namespace v1
}  // namespace agentrt
