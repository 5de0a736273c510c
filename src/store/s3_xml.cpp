// S3's XML answers and dates (s3_xml.hpp).
#include "store/s3_xml.hpp"

#include <fmt/format.h>

#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>
#include <ctime>
#include <sstream>

#include "agentrt/error.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

namespace pt = boost::property_tree;

std::optional<pt::ptree> parse_xml(std::string_view body) {
  try {
    std::istringstream in{std::string(body)};
    pt::ptree tree;
    pt::read_xml(in, tree);
    return tree;
  } catch (const pt::ptree_error&) {
    return std::nullopt;
  }
}

std::optional<uint64_t> parse_u64(const std::string& s) {
  if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoull(s);
}

}  // namespace

S3ErrorBody parse_s3_error(std::string_view body) {
  S3ErrorBody out;
  if (body.empty()) return out;
  const auto tree = parse_xml(body);
  if (!tree) return out;
  out.code = tree->get("Error.Code", "");
  out.message = tree->get("Error.Message", "");
  return out;
}

S3ListPage parse_list_objects_v2(std::string_view body) {
  const auto tree = parse_xml(body);
  const auto result = tree ? tree->get_child_optional("ListBucketResult") : boost::none;
  if (!result) throw Error(ErrorCode::io, "S3 ListObjectsV2 answered with something that is not a ListBucketResult");
  S3ListPage page;
  page.truncated = result->get("IsTruncated", "false") == "true";
  page.next_token = result->get("NextContinuationToken", "");
  for (const auto& [name, child] : *result) {
    if (name != "Contents") continue;
    S3ListEntry entry;
    entry.key = child.get("Key", "");
    const auto size = parse_u64(child.get("Size", ""));
    if (entry.key.empty() || !size)
      throw Error(ErrorCode::io, "S3 ListObjectsV2 listed an entry without a key or size");
    entry.size = *size;
    entry.modified_at = parse_iso8601_ms(child.get("LastModified", "")).value_or(0);
    page.entries.push_back(std::move(entry));
  }
  if (page.truncated && page.next_token.empty())
    throw Error(ErrorCode::io, "S3 ListObjectsV2 said the list goes on but gave no continuation token");
  return page;
}

std::optional<int64_t> parse_iso8601_ms(std::string_view text) {
  std::tm tm{};
  const std::string s(text);
  const char* end = ::strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr) return std::nullopt;
  int64_t ms = 0;
  if (*end == '.') {
    ++end;
    int digits = 0;
    while (*end >= '0' && *end <= '9') {
      if (digits < 3) ms = ms * 10 + (*end - '0');
      ++digits;
      ++end;
    }
    for (; digits < 3; ++digits) ms *= 10;
  }
  if (std::string_view(end) != "Z") return std::nullopt;
  return static_cast<int64_t>(::timegm(&tm)) * 1000 + ms;
}

std::optional<int64_t> parse_http_date_ms(std::string_view text) {
  std::tm tm{};
  const std::string s(text);
  const char* end = ::strptime(s.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  return static_cast<int64_t>(::timegm(&tm)) * 1000;
}

}  // namespace v1
}  // namespace agentrt
