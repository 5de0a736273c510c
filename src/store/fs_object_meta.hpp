// The filesystem object store's metadata sidecars (internal): each object's bytes are a plain file at
// <root>/<key>; its content type, sha256, size and time live in <dir of key>/.agentrt-meta/<name>, one small
// JSON file. Pure functions, thread-safe.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace agentrt {
inline namespace v1 {

// The directory of sidecars next to the objects of a directory, and the root's layout marker. Both start
// with the reserved prefix, so no key can name them and list() never shows them.
inline constexpr std::string_view kMetaDirName = ".agentrt-meta";
inline constexpr std::string_view kLayoutMarkerName = ".agentrt-layout";
inline constexpr std::string_view kLayoutMarker = "agentrt object layout 2: plain files, sidecars in .agentrt-meta\n";

// One version of an object as its sidecar describes it.
struct ObjectMeta {
  std::string content_type;
  std::string sha256;  // hex of the bytes
  uint64_t size = 0;
  // The data file's modification time as published (the store sets it, distinct from the version before):
  // with the size, what ties this entry to one data file without reading it.
  int64_t mtime_ns = 0;
};

// An object's sidecar: the version published last and the one it replaced. A write renames the sidecar into
// place before the data file, so after a crash between the two the data file is still the previous version,
// which the sidecar still describes: every crash state reads as the whole old or the whole new object.
struct Sidecar {
  ObjectMeta current;
  std::optional<ObjectMeta> previous;
};

std::string encode_sidecar(const Sidecar& sidecar);
// nullopt when the text is not a sidecar (damaged or foreign).
std::optional<Sidecar> decode_sidecar(std::string_view text);

// How a sidecar relates to a data file with this stat: the entry whose size and time match it (when exactly
// one does), else nullopt; `ambiguous` says whether the caller must decide by the bytes' sha256 (no entry
// matches, e.g. after a copy that lost the times, or both do, on a filesystem with coarse times).
struct SidecarMatch {
  std::optional<ObjectMeta> meta;
  bool ambiguous = false;
};
SidecarMatch match_sidecar(const Sidecar& sidecar, const struct stat& st);
// The entry whose size and sha256 are the bytes' (the data file read in full), else nullopt.
std::optional<ObjectMeta> match_sidecar_by_hash(const Sidecar& sidecar, uint64_t size, std::string_view sha256);

// The legacy single-file layout ("AGENTRT-OBJECT/1" line, a JSON line, the bytes): the metadata and where the
// bytes start, or nullopt when `prefix` (the file's first bytes) is not such a header for a file of file_size.
struct LegacyHeader {
  ObjectMeta meta;
  uint64_t offset = 0;
};
inline constexpr size_t kLegacyHeaderMaxBytes = 4096;
std::optional<LegacyHeader> parse_legacy_header(std::string_view prefix, uint64_t file_size);

}  // namespace v1
}  // namespace agentrt
