// FsObjectStore: the embedded default ObjectStore, one plain file per object under a root directory (internal).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentrt/storage.hpp"
#include "store/object_keys.hpp"
#include "store/signed_url.hpp"

namespace agentrt {
inline namespace v1 {

struct FsObjectStoreOptions {
  std::string root;             // directory holding the objects; created (with parents) if missing
  std::string bucket;           // the name this store answers to in URLs: [A-Za-z0-9._-]{1,63}
  std::string signing_secret;   // HMAC key for signed URLs (any bytes, must not be empty)
  std::string public_base_url;  // e.g. "http://127.0.0.1:8080/api/v1/objects"; no query, fragment or user
  bool fsync = false;           // fsync files and directories on every write: survives power loss, costs ~ms
  // Crash tests only: called at the named points of a write ("sidecar": the new metadata is in place, the
  // data file not yet). A test's child process _exit()s there to leave exactly the state a crash would.
  std::function<void(std::string_view step)> crash_point = nullptr;
};

namespace fsfiles {
struct OpenFile;
}
struct ObjectMeta;

// Stores each object's bytes as a plain regular file at <root>/<key>, so the folder holds what a bucket
// would, and its metadata (content type, sha256, size, modification time) in a sidecar,
// <dir>/.agentrt-meta/<name> (fs_object_meta.hpp). A write makes the data file under a temporary name
// (fsync), then, holding the directory's lock (flock on .agentrt-meta: writers exclusive, readers shared, so
// two writers of a key never interleave their renames), renames the sidecar into place and then the data
// file: rename() for put, link() for put_if_absent (which fails atomically if the name exists, also against
// other processes). The data file is the object: a crash before its rename leaves the old object (or none),
// described by the sidecar's previous entry; after it, the new one. Each sidecar entry is tied to its data
// file by size and modification time (set by the store, distinct between versions), so a reader never reads
// a stale description; when neither entry fits (a copy that lost the times), the bytes' sha256 decides.
// Paths are walked with openat(O_NOFOLLOW) from a descriptor of the root, so a symlink planted inside the
// root never leads outside it: it is refused with Error(io). A file without metadata (dropped in by hand) or
// whose bytes no longer match it gives Error(io) rather than being passed off as an object. Directories
// emptied by remove() are pruned.
//
// Legacy roots: files of the earlier single-file layout (an "AGENTRT-OBJECT/1" header line, a JSON line, the
// bytes) are converted when a store opens a root that lacks the layout marker .agentrt-layout, once, under
// an exclusive flock on the root (other processes opening it wait), each file with the same crash-safe write
// as put; the marker is written last, so a conversion cut short resumes at the next open. Converting on open
// rather than on read keeps one read path and one on-disk format (a folder half in each would not be what a
// bucket holds), and a file whose own bytes begin with the old header is never mistaken for one.
//
// Thread-safe, and safe to share one root between processes: the only state is the root's descriptor.
class FsObjectStore final : public ObjectStore {
 public:
  // Throws Error(invalid_argument) for an empty secret, a bad bucket or base URL, Error(io) when the root
  // cannot be created, opened or converted, Error(unsupported) for a root of a newer layout.
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
  // The bytes as stored (the size is checked against the metadata; the sha256 is not recomputed).
  std::optional<std::string> get(std::string_view key) override;
  // A part of the bytes, read with pread() from the object's file.
  std::optional<std::string> read(std::string_view key, uint64_t offset, size_t max_bytes) override;
  std::optional<ObjectInfo> head(std::string_view key) override;
  bool remove(std::string_view key) override;
  // Objects whose key starts with `prefix` (a plain string prefix, as in S3), sorted by key bytes.
  std::vector<ObjectInfo> list(std::string_view prefix) override;
  // "{base}/{bucket}/{percent-encoded key}?expires={ms}&sig={hex}" (ServerUrlSigner). Valid while
  // now < expires_at_ms.
  std::string sign_url(std::string_view key, int64_t expires_at_ms) const override;
  std::string verify_url(std::string_view url, int64_t now_ms) const override;

 private:
  struct Found;
  // Where a write's bytes come from: the caller's, or a legacy file's (converted in place).
  struct Source {
    std::string_view bytes;
    int legacy_fd = -1;
    uint64_t legacy_offset = 0;
  };

  std::string display_path(std::string_view key) const;
  std::optional<Found> find(std::string_view key, const std::string& path) const;
  bool write_object(std::string_view key, const Source& source, ObjectMeta meta, bool only_if_absent);
  void open_layout();
  void convert_legacy_dir(int dir_fd, const std::string& dir_key);

  FsObjectStoreOptions options_;
  ServerUrlSigner urls_;
  int root_fd_ = -1;
};

}  // namespace v1
}  // namespace agentrt
