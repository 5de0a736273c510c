// The XML of S3's answers that agentrt reads (internal): error bodies and ListObjectsV2 pages, parsed with
// Boost.PropertyTree; and the two date formats S3 uses. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentrt {
inline namespace v1 {

// <Error><Code>…</Code><Message>…</Message></Error>; empty fields when the body is not such a document (HEAD
// answers and some proxies' errors have none).
struct S3ErrorBody {
  std::string code;
  std::string message;
};
S3ErrorBody parse_s3_error(std::string_view body);

struct S3ListEntry {
  std::string key;  // as stored in the bucket (with the deployment's prefix)
  uint64_t size = 0;
  int64_t modified_at = 0;  // ms
};
struct S3ListPage {
  std::vector<S3ListEntry> entries;
  bool truncated = false;
  std::string next_token;  // NextContinuationToken when truncated
};
// Throws Error(io) for a body that is not a ListBucketResult.
S3ListPage parse_list_objects_v2(std::string_view body);

// "2009-10-12T17:50:30.000Z" (XML) and "Mon, 12 Oct 2009 17:50:30 GMT" (Last-Modified) as Unix ms, or nullopt.
std::optional<int64_t> parse_iso8601_ms(std::string_view text);
std::optional<int64_t> parse_http_date_ms(std::string_view text);

}  // namespace v1
}  // namespace agentrt
