// The upload and object routes: a file stored, an object served from the store in pieces.
#include "routes.hpp"

#include <algorithm>
#include <boost/beast/core/string.hpp>
#include <cstdint>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "agentrt/attachments.hpp"
#include "agentrt/clock.hpp"
#include "agentrt/error.hpp"
#include "agentrt/records.hpp"
#include "thread_namespace.hpp"

namespace agentrt::server {

namespace {

// A single byte range of an object of `size` bytes: "bytes=a-b", "bytes=a-", "bytes=-n".
struct ByteRange {
  enum class Kind { whole, partial, unsatisfiable } kind = Kind::whole;
  uint64_t first = 0;
  uint64_t length = 0;
};

ByteRange parse_range(std::string_view header, uint64_t size) {
  ByteRange r;
  r.length = size;
  // The unit's case is free (RFC 9110 14.1); another unit, or garbage: the whole body.
  if (header.size() < 6 || !boost::beast::iequals(header.substr(0, 6), "bytes=")) return r;
  std::string_view spec = header.substr(6);
  if (spec.find(',') != std::string_view::npos) return r;  // several ranges: the whole body, never a multipart
  // A list element: spaces and tabs around it are not part of it.
  while (!spec.empty() && (spec.front() == ' ' || spec.front() == '\t')) spec.remove_prefix(1);
  while (!spec.empty() && (spec.back() == ' ' || spec.back() == '\t')) spec.remove_suffix(1);
  const size_t dash = spec.find('-');
  if (dash == std::string_view::npos) return r;
  // Digits only; a value past 64 bits is as good as the largest (a last position past the end is the end).
  auto number = [](std::string_view s) -> std::optional<uint64_t> {
    if (s.empty()) return std::nullopt;
    uint64_t v = 0;
    constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
    for (char c : s) {
      if (c < '0' || c > '9') return std::nullopt;
      const auto d = static_cast<uint64_t>(c - '0');
      v = v > (kMax - d) / 10 ? kMax : v * 10 + d;
    }
    return v;
  };
  const std::string_view first_text = spec.substr(0, dash), last_text = spec.substr(dash + 1);
  const auto a = number(first_text);
  const auto b = number(last_text);
  // Both missing, or one written but not a number ("x-5" is not the suffix "-5"): ignored.
  if ((!a && !b) || (!a && !first_text.empty()) || (!b && !last_text.empty())) return r;
  if (!a) {  // the last *b bytes
    if (*b == 0 || size == 0) return ByteRange{ByteRange::Kind::unsatisfiable, 0, 0};
    const uint64_t n = std::min(*b, size);
    return ByteRange{ByteRange::Kind::partial, size - n, n};
  }
  if (b && *b < *a) return r;  // invalid: ignored
  if (*a >= size) return ByteRange{ByteRange::Kind::unsatisfiable, 0, 0};
  const uint64_t last = b ? std::min(*b, size - 1) : size - 1;
  return ByteRange{ByteRange::Kind::partial, *a, last - *a + 1};
}

// True when an If-None-Match list names `etag` (weak comparison) or is "*".
bool etag_matches(std::string_view list, std::string_view etag) {
  size_t pos = 0;
  while (pos < list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string_view::npos) end = list.size();
    std::string_view item = list.substr(pos, end - pos);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (item.substr(0, 2) == "W/") item.remove_prefix(2);
    if (item == "*" || item == etag) return true;
    pos = end + 1;
  }
  return false;
}

}  // namespace

// POST /agent/uploads?threadId=T, raw body with its Content-Type -> 201 {id, url, mimeType, size, ...}
void post_upload(ServerContext& s, ApiCall& c) {
  if (!s.rt->config().objects) throw ApiError{501, "unsupported", "uploads need an object store; this server has none"};
  const std::string thread_id = c.req.param("threadId");
  if (thread_id.empty()) throw ApiError{400, "missing_thread", "the query parameter 'threadId' is required"};
  require_client_thread_id(thread_id);
  s.usable_thread(c, thread_id);
  if (c.req.body.size() > s.cfg.limits.max_upload_bytes)
    throw ApiError{
        413, "too_large",
        fmt::format("the file is {} bytes; the limit is {}", c.req.body.size(), s.cfg.limits.max_upload_bytes)};
  const std::string mime = normalize_mime(c.req.header("Content-Type"));
  try {
    check_attachment(mime, c.req.body.size(), s.rt->config().attachment_limits);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::invalid_argument) throw ApiError{422, "unsupported_media_type", e.message()};
    throw;
  }
  const Upload u = s.rt->upload(c.user, c.internal_thread, c.req.body, mime);
  c.send_json(201, upload_to_json(u));
}

// GET /objects/{bucket}/{key}?expires&sig: the signature is the credential (an <img src> sends no header).
// Streamed from the store in pieces; one byte range (206), ETag / If-None-Match (304).
void get_object(ServerContext& s, ApiCall& c) {
  auto objects = s.rt->config().objects;
  if (!objects) throw ApiError{404, "not_found", "no object store"};
  const std::string& target = c.req.target;
  if (target.rfind(kObjectsPath, 0) != 0) throw ApiError{404, "not_found", "not an object URL"};
  std::string key;
  try {
    key = objects->verify_url(s.objects_base_url + target.substr(kObjectsPath.size()), now_ms());
  } catch (const Error& e) {
    if (e.code() == ErrorCode::expired) throw ApiError{401, "expired", "the object URL has expired"};
    throw ApiError{401, "invalid_signature", "the object URL's signature is missing or wrong"};
  }
  // Only user uploads are served; and a caller who names itself must own them.
  constexpr std::string_view root = "agent-inputs/";
  if (key.rfind(root, 0) != 0) throw ApiError{404, "not_found", "object not found"};
  if (!c.user.empty()) {
    const std::string owner = key.substr(root.size(), key.find('/', root.size()) - root.size());
    if (owner != c.user) throw ApiError{404, "not_found", "object not found"};
  }
  auto info = objects->head(key);
  if (!info) throw ApiError{404, "not_found", "object not found"};
  const std::string etag = "\"" + info->sha256 + "\"";
  Headers common = {{"ETag", etag},
                    {"Accept-Ranges", "bytes"},
                    {"Cache-Control", "private, max-age=300"},
                    {"X-Content-Type-Options", "nosniff"}};
  const std::string_view inm = c.req.header("If-None-Match");
  if (!inm.empty() && etag_matches(inm, etag)) {
    HttpResponse r;
    r.status = 304;
    r.headers = common;
    return c.send(std::move(r));
  }
  ByteRange range;
  range.length = info->size;
  const std::string_view if_range = c.req.header("If-Range");
  if (c.req.has_header("Range") && (if_range.empty() || if_range == etag))
    range = parse_range(c.req.header("Range"), info->size);
  if (range.kind == ByteRange::Kind::unsatisfiable) {
    HttpResponse r = error_response(416, "range_not_satisfiable",
                                    fmt::format("the object has {} bytes; the range is outside them", info->size));
    r.headers = common;
    r.headers.emplace_back("Content-Range", fmt::format("bytes */{}", info->size));
    return c.send(std::move(r));
  }
  HttpResponse head;
  head.status = range.kind == ByteRange::Kind::partial ? 206 : 200;
  head.content_type = info->content_type;
  head.headers = common;
  if (range.kind == ByteRange::Kind::partial)
    head.headers.emplace_back("Content-Range",
                              fmt::format("bytes {}-{}/{}", range.first, range.first + range.length - 1, info->size));
  for (auto& h : c.extra) head.headers.push_back(h);
  log_access(c.access_log, c.req, head.status);
  c.out->stream_body(
      std::move(head), range.first, range.length,
      [objects, key](uint64_t offset, size_t max) {
        auto piece = objects->read(key, offset, max);
        if (!piece) throw Error(ErrorCode::not_found, "the object went away while it was being sent");
        return std::move(*piece);
      },
      [&s](std::function<void()> job) { s.pool->post(std::move(job)); });
}

}  // namespace agentrt::server
