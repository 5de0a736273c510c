// FsObjectStore: the embedded default ObjectStore, one file per object under a root directory (internal).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentrt/storage.hpp"

namespace agentrt {
inline namespace v1 {

struct FsObjectStoreOptions {
  std::string root;             // directory holding the objects; created (with parents) if missing
  std::string bucket;           // the name this store answers to in URLs: [A-Za-z0-9._-]{1,63}
  std::string signing_secret;   // HMAC key for signed URLs (any bytes, must not be empty)
  std::string public_base_url;  // e.g. "http://127.0.0.1:8080/api/v1/objects"; no query, fragment or user
  bool fsync = false;           // fsync file and directory on every write: survives power loss, costs ~ms
};

// Throws Error(invalid_argument) saying which rule `key` breaks: empty, longer than 1024 bytes, absolute,
// a backslash, NUL or other control character, invalid UTF-8, an empty, ".", ".." or >255-byte segment, or a
// segment starting with ".agentrt-" (reserved for the store's temporary files).
void validate_object_key(std::string_view key);
// The rule `key` breaks, in words ("is empty", ...), or nullptr when it is a valid key.
const char* object_key_problem(std::string_view key) noexcept;

// Stores each object as one regular file at <root>/<key>, holding a small header (magic line, then one JSON
// line with content_type, sha256 and size) followed by the bytes. Data and metadata live in the same file so
// one rename() publishes both: there is no moment where one is new and the other old, and no sidecar for
// list() to filter. Writes go to a private temporary file in the target's directory, then rename() (put) or
// link() (put_if_absent, which fails atomically if the name exists, also against other processes). Paths are
// walked with openat(O_NOFOLLOW) from a descriptor of the root, so a symlink planted inside the root can
// never lead outside it: it is refused with Error(io). Foreign or damaged files under the root give
// Error(io) rather than being passed off as objects. Directories emptied by remove() are pruned.
//
// Thread-safe, and safe to share one root between processes: the only state is the root's descriptor.
class FsObjectStore final : public ObjectStore {
 public:
  // Throws Error(invalid_argument) for an empty secret, a bad bucket or base URL, Error(io) when the root
  // cannot be created or opened.
  explicit FsObjectStore(FsObjectStoreOptions options);
  ~FsObjectStore() override;
  FsObjectStore(const FsObjectStore&) = delete;
  FsObjectStore& operator=(const FsObjectStore&) = delete;

  std::string bucket() const override;
  // An empty content_type is stored as "application/octet-stream"; others must be printable ASCII of at most
  // 255 bytes. Fails with Error(io) when a prefix of the key is an object ("a" exists, put "a/b") or the key
  // names a directory ("a/b" exists, put "a").
  void put(std::string_view key, std::string_view bytes, std::string_view content_type) override;
  bool put_if_absent(std::string_view key, std::string_view bytes, std::string_view content_type) override;
  // The bytes as stored (the size is checked against the header; the sha256 is not recomputed).
  std::optional<std::string> get(std::string_view key) override;
  // A part of the bytes, read with pread() from the object's file (the size is the header's).
  std::optional<std::string> read(std::string_view key, uint64_t offset, size_t max_bytes) override;
  std::optional<ObjectInfo> head(std::string_view key) override;
  bool remove(std::string_view key) override;
  // Objects whose key starts with `prefix` (a plain string prefix, as in S3), sorted by key bytes.
  std::vector<ObjectInfo> list(std::string_view prefix) override;
  // "{base}/{bucket}/{percent-encoded key}?expires={ms}&sig={hex}", sig = HMAC-SHA-256 over
  // "GET\n{bucket}\n{key}\n{expires}". Valid while now < expires_at_ms.
  std::string sign_url(std::string_view key, int64_t expires_at_ms) const override;
  std::string verify_url(std::string_view url, int64_t now_ms) const override;

 private:
  struct Origin {
    std::string scheme;  // lower-case
    std::string host;    // lower-case; IPv6 literals keep their brackets
    int port = 0;        // explicit, or the scheme's default
    std::string path;    // without a trailing '/'
  };

  std::string signature(std::string_view key, std::string_view expires) const;
  std::string display_path(std::string_view key) const;
  bool write_object(std::string_view key, std::string_view bytes, std::string_view content_type, bool only_if_absent);

  FsObjectStoreOptions options_;
  Origin origin_;
  std::string base_url_;  // options_.public_base_url without a trailing '/'
  int root_fd_ = -1;
};

}  // namespace v1
}  // namespace agentrt
