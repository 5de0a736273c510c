// User attachments: where uploads live in the ObjectStore, which keys a user's thread may reference, and
// which files are accepted. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace agentrt {
inline namespace v1 {

// "agent-inputs/{user_id}/{thread_id}/uploads/{upload_id}". Throws Error(invalid_argument) naming the bad
// id when one breaks the id rule (agentrt/ids.hpp), so no id can add or climb a path segment.
std::string upload_key(std::string_view user_id, std::string_view thread_id, std::string_view upload_id);

// True when `key` lies under "agent-inputs/{user_id}/{thread_id}/" and every segment after that prefix is a
// valid id (agentrt/ids.hpp; so "../" tricks and empty segments are false). Never throws: bad ids or keys give false.
bool key_belongs_to(std::string_view key, std::string_view user_id, std::string_view thread_id);

// "img_" + the first 16 hex digits of sha256(bucket + "/" + key): a stable handle that a model or client can
// name without learning the storage path.
std::string image_ref_id(std::string_view bucket, std::string_view key);

// What a user may attach. Plain data; copy and change freely.
struct AttachmentLimits {
  uint64_t max_bytes = 20ull * 1024 * 1024;
  // Compared after normalize_mime(); keep entries lower-case without parameters.
  std::vector<std::string> allowed_mime_types = {
      "image/png",  "image/jpeg", "image/gif",  "image/webp", "audio/wav",       "audio/x-wav",
      "audio/mpeg", "audio/mp4",  "audio/webm", "audio/ogg",  "application/pdf", "text/plain",
  };
};

// Lower-cases a media type and drops parameters and surrounding spaces: " Text/Plain; charset=UTF-8" ->
// "text/plain".
std::string normalize_mime(std::string_view mime);

// Throws Error(invalid_argument) when the normalised type is not allowed (checked first), and
// Error(too_large) when size > limits.max_bytes. Empty files are allowed.
void check_attachment(std::string_view mime, uint64_t size, const AttachmentLimits& limits = {});

// The usual file extension with its dot (".png", ".jpg", ".mp3", ".m4a", ".txt"), for the normalised type;
// "" for a type it does not know.
std::string extension_for_mime(std::string_view mime);

}  // namespace v1
}  // namespace agentrt
