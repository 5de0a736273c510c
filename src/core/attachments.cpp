#include "agentrt/attachments.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <utility>

#include "agentrt/error.hpp"
#include "agentrt/ids.hpp"
#include "util/crypto.hpp"
#include "util/printable.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

constexpr std::string_view kInputsRoot = "agent-inputs/";

}  // namespace

std::string upload_key(std::string_view user_id, std::string_view thread_id, std::string_view upload_id) {
  require_id(user_id, "user id");
  require_id(thread_id, "thread id");
  require_id(upload_id, "upload id");
  return fmt::format("{}{}/{}/uploads/{}", kInputsRoot, user_id, thread_id, upload_id);
}

bool key_belongs_to(std::string_view key, std::string_view user_id, std::string_view thread_id) {
  if (!is_valid_id(user_id) || !is_valid_id(thread_id)) return false;
  const std::string prefix = fmt::format("{}{}/{}/", kInputsRoot, user_id, thread_id);
  if (key.size() <= prefix.size() || key.substr(0, prefix.size()) != prefix) return false;
  std::string_view rest = key.substr(prefix.size());
  while (true) {
    const size_t slash = rest.find('/');
    if (!is_valid_id(rest.substr(0, slash))) return false;
    if (slash == std::string_view::npos) return true;
    rest.remove_prefix(slash + 1);
  }
}

std::string image_ref_id(std::string_view bucket, std::string_view key) {
  std::string material;
  material.reserve(bucket.size() + 1 + key.size());
  material.append(bucket).append("/").append(key);
  return "img_" + crypto::sha256_hex(material).substr(0, 16);
}

std::string normalize_mime(std::string_view mime) {
  mime = mime.substr(0, mime.find(';'));
  const auto is_space = [](char c) { return c == ' ' || c == '\t'; };
  while (!mime.empty() && is_space(mime.front())) mime.remove_prefix(1);
  while (!mime.empty() && is_space(mime.back())) mime.remove_suffix(1);
  std::string out(mime);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; });
  return out;
}

void check_attachment(std::string_view mime, uint64_t size, const AttachmentLimits& limits) {
  const std::string type = normalize_mime(mime);
  if (std::find(limits.allowed_mime_types.begin(), limits.allowed_mime_types.end(), type) ==
      limits.allowed_mime_types.end()) {
    throw Error(ErrorCode::invalid_argument, fmt::format("attachment type '{}' is not allowed", printable(type, 64)));
  }
  if (size > limits.max_bytes) {
    throw Error(ErrorCode::too_large,
                fmt::format("attachment of {} bytes exceeds the limit of {} bytes", size, limits.max_bytes));
  }
}

std::string extension_for_mime(std::string_view mime) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 12> kExtensions = {{
      {"image/png", ".png"},
      {"image/jpeg", ".jpg"},
      {"image/gif", ".gif"},
      {"image/webp", ".webp"},
      {"audio/wav", ".wav"},
      {"audio/x-wav", ".wav"},
      {"audio/mpeg", ".mp3"},
      {"audio/mp4", ".m4a"},
      {"audio/webm", ".webm"},
      {"audio/ogg", ".ogg"},
      {"application/pdf", ".pdf"},
      {"text/plain", ".txt"},
  }};
  const std::string type = normalize_mime(mime);
  for (const auto& [known, extension] : kExtensions) {
    if (known == type) return std::string(extension);
  }
  return {};
}

}  // namespace v1
}  // namespace agentrt
