#include "store/fs_object_store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <system_error>
#include <utility>

#include "agentrt/error.hpp"
#include "store/fs_files.hpp"
#include "store/fs_object_meta.hpp"
#include "util/crypto.hpp"
#include "util/printable.hpp"

namespace agentrt {
inline namespace v1 {

using fsfiles::DirLock;
using fsfiles::Fd;
using fsfiles::open_regular;
using fsfiles::open_subdir;
using fsfiles::throw_io;

namespace {

constexpr std::string_view kDefaultContentType = "application/octet-stream";
constexpr size_t kMaxSidecarBytes = 64 * 1024;
// Each attempt of a write re-walks the path; a concurrent remove() may prune a directory between our
// mkdir and our create, which is rare and resolves on the next attempt.
constexpr int kWriteAttempts = 8;
const std::string kMetaDir(kMetaDirName);

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// Removes a temporary file on every path but the one that published it.
struct TmpGuard {
  int dir;
  const std::string& name;
  bool armed = true;
  ~TmpGuard() {
    if (armed) ::unlinkat(dir, name.c_str(), 0);
  }
};

std::string sha256_of_file(int fd, uint64_t size, std::string_view path) {
  if (size == 0) return crypto::sha256_hex("");
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) throw_io("cannot map", path, errno);
  const std::string sha = crypto::sha256_hex(std::string_view(static_cast<const char*>(map), size));
  ::munmap(map, size);
  return sha;
}

// The sidecar of `name` in meta_fd, or nullopt when it has none or an unreadable one.
std::optional<Sidecar> read_sidecar(int meta_fd, const std::string& name, std::string_view path) {
  const auto side = open_regular(meta_fd, name, path);
  if (!side) return std::nullopt;
  const auto size = static_cast<uint64_t>(side->st.st_size);
  if (size > kMaxSidecarBytes) return std::nullopt;
  return decode_sidecar(fsfiles::read_at(side->fd.get(), 0, static_cast<size_t>(size), path));
}

// What the sidecar says about the data file `file` (its size and time, else its bytes' sha256), or nullopt
// when nothing describes it. Call with the directory's lock held (shared at least).
std::optional<ObjectMeta> describe(int meta_fd, const std::string& name, const fsfiles::OpenFile& file,
                                   std::string_view path) {
  if (meta_fd < 0) return std::nullopt;
  const auto sidecar = read_sidecar(meta_fd, name, path);
  if (!sidecar) return std::nullopt;
  SidecarMatch match = match_sidecar(*sidecar, file.st);
  if (match.meta) return std::move(match.meta);
  const auto size = static_cast<uint64_t>(file.st.st_size);
  return match_sidecar_by_hash(*sidecar, size, sha256_of_file(file.fd.get(), size, path));
}

ObjectInfo info_of(std::string key, const ObjectMeta& meta) {
  ObjectInfo info;
  info.key = std::move(key);
  info.size = meta.size;
  info.content_type = meta.content_type;
  info.sha256 = meta.sha256;
  info.modified_at = meta.mtime_ns / 1'000'000;
  return info;
}

[[noreturn]] void not_an_object(std::string_view path) {
  throw Error(
      ErrorCode::io,
      fmt::format("'{}' is not an agentrt object: it has no metadata, or its bytes changed outside the store", path));
}

std::vector<std::string> dir_names(int dir_fd, std::string_view path) {
  std::vector<std::string> names;
  // fdopendir takes ownership of its descriptor, so give it its own.
  const int own = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (own < 0) throw_io("cannot open directory", path, errno);
  DIR* dir = ::fdopendir(own);
  if (dir == nullptr) {
    const int err = errno;
    ::close(own);
    throw_io("cannot read directory", path, err);
  }
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (name == "." || name == ".." || starts_with(name, kReservedPrefix)) continue;
    names.emplace_back(name);
  }
  ::closedir(dir);
  return names;
}

// Lists the objects of one directory and its subdirectories whose keys start with `prefix`.
void list_dir(int dir_fd, const std::string& dir_key, std::string_view prefix, std::string_view root,
              std::vector<ObjectInfo>& out) {
  const std::string dir_path = fmt::format("{}/{}", root, dir_key);
  const std::vector<std::string> names = dir_names(dir_fd, dir_path);
  std::vector<std::string> subdirs;
  {
    const auto meta = open_subdir(dir_fd, kMetaDir, dir_path, false);
    std::optional<DirLock> lock;
    if (meta) lock.emplace(meta->get(), false, dir_path);
    for (const std::string& name : names) {
      const std::string key = dir_key + name;
      // Files a host dropped in by hand under names no key can have are not objects.
      if (object_key_problem(key) != nullptr) continue;
      const std::string path = fmt::format("{}/{}", root, key);
      struct stat st {};
      if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue;  // removed while we list
        throw_io("cannot stat", path, errno);
      }
      if (S_ISDIR(st.st_mode)) {
        const std::string sub_key = key + "/";
        if (starts_with(sub_key, prefix) || starts_with(prefix, sub_key)) subdirs.push_back(name);
      } else if (S_ISREG(st.st_mode) && starts_with(key, prefix)) {
        const auto file = open_regular(dir_fd, name, path);
        if (!file) continue;
        const auto described = describe(meta ? meta->get() : -1, name, *file, path);
        if (!described) not_an_object(path);
        out.push_back(info_of(key, *described));
      }
      // Symlinks and special files are never objects.
    }
  }
  for (const std::string& name : subdirs) {
    Fd sub(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sub) {
      if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) continue;  // replaced while we list
      throw_io("cannot open directory", fmt::format("{}/{}{}", root, dir_key, name), errno);
    }
    list_dir(sub.get(), dir_key + name + "/", prefix, root, out);
  }
}

}  // namespace

struct FsObjectStore::Found {
  fsfiles::OpenFile file;
  ObjectMeta meta;
};

FsObjectStore::FsObjectStore(FsObjectStoreOptions options)
    : options_(std::move(options)), urls_(options_.bucket, options_.signing_secret, options_.public_base_url) {
  if (options_.root.empty()) throw Error(ErrorCode::invalid_argument, "the object store's root must not be empty");
  std::error_code ec;
  const bool existed = std::filesystem::exists(options_.root, ec);
  std::filesystem::create_directories(options_.root, ec);
  // Users' uploads and tool payloads: a new root is its owner's only (an existing one keeps its mode).
  if (!ec && !existed) ::chmod(options_.root.c_str(), 0700);
  if (ec) {
    throw Error(ErrorCode::io,
                fmt::format("cannot create the object store root '{}': {}", options_.root, ec.message()));
  }
  root_fd_ = ::open(options_.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd_ < 0) throw_io("cannot open the object store root", options_.root, errno);
  try {
    open_layout();
  } catch (...) {
    ::close(root_fd_);
    throw;
  }
}

FsObjectStore::~FsObjectStore() {
  if (root_fd_ >= 0) ::close(root_fd_);
}

std::string FsObjectStore::bucket() const { return options_.bucket; }

std::string FsObjectStore::display_path(std::string_view key) const { return fmt::format("{}/{}", options_.root, key); }

std::string FsObjectStore::sign_url(std::string_view key, int64_t expires_at_ms) const {
  return urls_.sign(key, expires_at_ms);
}

std::string FsObjectStore::verify_url(std::string_view url, int64_t now_ms) const { return urls_.verify(url, now_ms); }

void FsObjectStore::put(std::string_view key, std::string_view bytes, std::string_view content_type) {
  validate_object_key(key);
  validate_content_type(content_type);
  const ObjectMeta meta{std::string(content_type.empty() ? kDefaultContentType : content_type),
                        crypto::sha256_hex(bytes), bytes.size(), 0};
  write_object(key, Source{bytes}, meta, false);
}

bool FsObjectStore::put_if_absent(std::string_view key, std::string_view bytes, std::string_view content_type) {
  validate_object_key(key);
  validate_content_type(content_type);
  const ObjectMeta meta{std::string(content_type.empty() ? kDefaultContentType : content_type),
                        crypto::sha256_hex(bytes), bytes.size(), 0};
  return write_object(key, Source{bytes}, meta, true);
}

bool FsObjectStore::write_object(std::string_view key, const Source& source, ObjectMeta meta, bool only_if_absent) {
  const std::string path = display_path(key);
  const std::vector<std::string> segments = split_key(key);
  const std::string& name = segments.back();

  for (int attempt = 0; attempt < kWriteAttempts; ++attempt) {
    const auto chain = fsfiles::open_dirs(root_fd_, options_.root, segments, segments.size() - 1, true);
    if (!chain) continue;
    const int dir = chain->parent(root_fd_);
    // 1. The bytes, under a temporary name, outside the lock (the slow part).
    const std::string tmp = fsfiles::temp_name();
    Fd fd(::openat(dir, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd) {
      if (errno == ENOENT) continue;  // the directory was pruned after we opened it
      throw_io("cannot create a temporary file next to", path, errno);
    }
    TmpGuard data_guard{dir, tmp};
    if (source.legacy_fd >= 0) {
      fsfiles::copy_range(source.legacy_fd, source.legacy_offset, meta.size, fd.get(), path);
    } else {
      fsfiles::write_all(fd.get(), source.bytes, path);
    }

    // 2. Under the directory's lock: what is there now, the sidecar, then the data file.
    const auto meta_dir = open_subdir(dir, kMetaDir, path, true);
    if (!meta_dir) continue;
    DirLock lock(meta_dir->get(), true, path);
    Sidecar sidecar{meta, std::nullopt};
    if (auto existing = open_regular(dir, name, path)) {
      if (only_if_absent) return false;
      // Kept as the previous version: what a crash before the data file's rename leaves readable.
      if (source.legacy_fd < 0) sidecar.previous = describe(meta_dir->get(), name, *existing, path);
    } else {
      struct stat st {};
      if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISDIR(st.st_mode))
          throw Error(ErrorCode::io, fmt::format("cannot store '{}': other objects live under it", path));
        if (only_if_absent) return false;  // a symlink or special file has the name
      }
    }
    // The data file's time ties the sidecar entry to it: now, and always after the version it replaces.
    int64_t mtime = meta.mtime_ns > 0 ? meta.mtime_ns : fsfiles::now_ns();
    if (sidecar.previous && mtime <= sidecar.previous->mtime_ns) mtime = sidecar.previous->mtime_ns + 1;
    const timespec times[2] = {{0, UTIME_OMIT}, {mtime / 1'000'000'000, mtime % 1'000'000'000}};
    if (::futimens(fd.get(), times) != 0) throw_io("cannot set the time of", path, errno);
    if (options_.fsync && ::fsync(fd.get()) != 0) throw_io("cannot fsync", path, errno);
    struct stat written {};
    if (::fstat(fd.get(), &written) != 0) throw_io("cannot stat", path, errno);
    if (::close(fd.release()) != 0) throw_io("cannot close", path, errno);
    sidecar.current.mtime_ns = fsfiles::mtime_ns(written);  // as the filesystem keeps it
    sidecar.current.size = static_cast<uint64_t>(written.st_size);

    const std::string side_tmp = fsfiles::temp_name();
    Fd side(::openat(meta_dir->get(), side_tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!side) {
      if (errno == ENOENT) continue;  // .agentrt-meta was pruned before we locked it
      throw_io("cannot create a temporary file for the metadata of", path, errno);
    }
    TmpGuard side_guard{meta_dir->get(), side_tmp};
    fsfiles::write_all(side.get(), encode_sidecar(sidecar), path);
    if (options_.fsync && ::fsync(side.get()) != 0) throw_io("cannot fsync the metadata of", path, errno);
    if (::close(side.release()) != 0) throw_io("cannot close the metadata of", path, errno);
    if (::renameat(meta_dir->get(), side_tmp.c_str(), meta_dir->get(), name.c_str()) != 0)
      throw_io("cannot rename the metadata of", path, errno);
    side_guard.armed = false;
    // Durable before the data file moves: a power loss never leaves new bytes under an old description.
    if (options_.fsync && ::fsync(meta_dir->get()) != 0)
      throw_io("cannot fsync the metadata directory of", path, errno);
    if (options_.crash_point) options_.crash_point("sidecar");

    if (only_if_absent) {
      // link() fails with EEXIST when the name exists, atomically, in every process: no check-then-write.
      if (::linkat(dir, tmp.c_str(), dir, name.c_str(), 0) != 0) {
        const int err = errno;
        if (err != EEXIST) throw_io("cannot link", path, err);
        // Only a writer that ignores our lock gets here; its file is no object of ours.
        ::unlinkat(meta_dir->get(), name.c_str(), 0);
        return false;
      }
    } else {
      if (::renameat(dir, tmp.c_str(), dir, name.c_str()) != 0) {
        const int err = errno;
        if (err == EISDIR || err == ENOTEMPTY || err == EEXIST) {
          throw Error(ErrorCode::io, fmt::format("cannot store '{}': other objects live under it", path));
        }
        throw_io("cannot rename into", path, err);
      }
      data_guard.armed = false;
    }
    if (options_.fsync && ::fsync(dir) != 0) throw_io("cannot fsync the directory of", path, errno);
    return true;
  }
  throw Error(ErrorCode::io, fmt::format("cannot store '{}': its directory kept disappearing", path));
}

std::optional<FsObjectStore::Found> FsObjectStore::find(std::string_view key, const std::string& path) const {
  const std::vector<std::string> segments = split_key(key);
  const auto chain = fsfiles::open_dirs(root_fd_, options_.root, segments, segments.size() - 1, false);
  if (!chain) return std::nullopt;
  const int dir = chain->parent(root_fd_);
  const std::string& name = segments.back();
  const auto meta_dir = open_subdir(dir, kMetaDir, path, false);
  std::optional<DirLock> lock;
  if (meta_dir) lock.emplace(meta_dir->get(), false, path);
  auto file = open_regular(dir, name, path);
  if (!file) return std::nullopt;
  auto meta = describe(meta_dir ? meta_dir->get() : -1, name, *file, path);
  if (!meta) not_an_object(path);
  return Found{std::move(*file), std::move(*meta)};
}

std::optional<std::string> FsObjectStore::get(std::string_view key) {
  validate_object_key(key);
  const std::string path = display_path(key);
  const auto found = find(key, path);
  if (!found) return std::nullopt;
  // Published files are never modified in place (writes replace them), so the size holds.
  std::string data = fsfiles::read_at(found->file.fd.get(), 0, static_cast<size_t>(found->meta.size), path);
  if (data.size() != found->meta.size) throw Error(ErrorCode::io, fmt::format("'{}' is shorter than its size", path));
  return data;
}

std::optional<std::string> FsObjectStore::read(std::string_view key, uint64_t offset, size_t max_bytes) {
  validate_object_key(key);
  const std::string path = display_path(key);
  const auto found = find(key, path);
  if (!found) return std::nullopt;
  if (offset >= found->meta.size) return std::string();
  const size_t want = static_cast<size_t>(std::min<uint64_t>(max_bytes, found->meta.size - offset));
  std::string out = fsfiles::read_at(found->file.fd.get(), offset, want, path);
  if (out.size() != want) throw Error(ErrorCode::io, fmt::format("'{}' is shorter than its size", path));
  return out;
}

std::optional<ObjectInfo> FsObjectStore::head(std::string_view key) {
  validate_object_key(key);
  const std::string path = display_path(key);
  const auto found = find(key, path);
  if (!found) return std::nullopt;
  return info_of(std::string(key), found->meta);
}

bool FsObjectStore::remove(std::string_view key) {
  validate_object_key(key);
  const std::string path = display_path(key);
  const std::vector<std::string> segments = split_key(key);
  const std::string& name = segments.back();
  const auto chain = fsfiles::open_dirs(root_fd_, options_.root, segments, segments.size() - 1, false);
  if (!chain) return false;
  const int dir = chain->parent(root_fd_);
  const auto meta_dir = open_subdir(dir, kMetaDir, path, false);
  {
    std::optional<DirLock> lock;
    if (meta_dir) lock.emplace(meta_dir->get(), true, path);
    if (::unlinkat(dir, name.c_str(), 0) != 0) {
      const int err = errno;
      if (err == ENOENT) return false;
      struct stat st {};
      if ((err == EISDIR || err == EPERM) && ::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISDIR(st.st_mode)) {
        return false;  // a prefix of other keys, not an object
      }
      throw_io("cannot remove", path, err);
    }
    // The data file was the object; a sidecar left by a crash here describes nothing and is replaced later.
    if (meta_dir) ::unlinkat(meta_dir->get(), name.c_str(), 0);
  }
  // Prune directories this left empty, deepest first (each one's .agentrt-meta before it); the first
  // non-empty one (ENOTEMPTY) stops it.
  for (size_t i = chain->dirs.size() + 1; i-- > 0;) {
    const int here = i == 0 ? root_fd_ : chain->dirs[i - 1].get();
    if (::unlinkat(here, kMetaDir.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) break;
    if (i == 0) break;
    const int above = i == 1 ? root_fd_ : chain->dirs[i - 2].get();
    if (::unlinkat(above, segments[i - 1].c_str(), AT_REMOVEDIR) != 0) break;
  }
  return true;
}

std::vector<ObjectInfo> FsObjectStore::list(std::string_view prefix) {
  validate_key_prefix(prefix);
  // Only the directory part must be walkable; the last, partial segment is matched as a string prefix.
  const size_t last_slash = prefix.rfind('/');
  const std::string_view dir_part =
      last_slash == std::string_view::npos ? std::string_view{} : prefix.substr(0, last_slash);
  const std::vector<std::string> segments =
      last_slash == std::string_view::npos ? std::vector<std::string>{} : split_key(dir_part);
  std::vector<ObjectInfo> out;
  const auto chain = fsfiles::open_dirs(root_fd_, options_.root, segments, segments.size(), false);
  if (!chain) return out;
  const std::string dir_key = segments.empty() ? std::string{} : std::string(dir_part) + "/";
  list_dir(chain->parent(root_fd_), dir_key, prefix, options_.root, out);
  std::sort(out.begin(), out.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  return out;
}

void FsObjectStore::open_layout() {
  const std::string marker_path = fmt::format("{}/{}", options_.root, kLayoutMarkerName);
  const std::string marker_name(kLayoutMarkerName);
  auto marker = [&]() -> bool {
    const auto file = open_regular(root_fd_, marker_name, marker_path);
    if (!file) return false;
    const std::string text = fsfiles::read_at(file->fd.get(), 0, 4096, marker_path);
    if (text != kLayoutMarker) {
      throw Error(ErrorCode::unsupported, fmt::format("the object store root '{}' has a layout this build does not "
                                                      "know ({} says '{}')",
                                                      options_.root, marker_path, printable(text, 120)));
    }
    return true;
  };
  if (marker()) return;
  DirLock lock(root_fd_, true, options_.root);
  if (marker()) return;  // another process converted it while we waited
  convert_legacy_dir(root_fd_, "");
  const std::string tmp = fsfiles::temp_name();
  Fd fd(::openat(root_fd_, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) throw_io("cannot create", marker_path, errno);
  TmpGuard guard{root_fd_, tmp};
  fsfiles::write_all(fd.get(), kLayoutMarker, marker_path);
  if (options_.fsync && ::fsync(fd.get()) != 0) throw_io("cannot fsync", marker_path, errno);
  if (::close(fd.release()) != 0) throw_io("cannot close", marker_path, errno);
  if (::renameat(root_fd_, tmp.c_str(), root_fd_, marker_name.c_str()) != 0)
    throw_io("cannot rename into", marker_path, errno);
  guard.armed = false;
  if (options_.fsync && ::fsync(root_fd_) != 0) throw_io("cannot fsync", options_.root, errno);
}

void FsObjectStore::convert_legacy_dir(int dir_fd, const std::string& dir_key) {
  const std::string dir_path = fmt::format("{}/{}", options_.root, dir_key);
  for (const std::string& name : dir_names(dir_fd, dir_path)) {
    const std::string key = dir_key + name;
    if (object_key_problem(key) != nullptr) continue;
    const std::string path = display_path(key);
    struct stat st {};
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      if (auto sub = open_subdir(dir_fd, name, path, false)) convert_legacy_dir(sub->get(), key + "/");
      continue;
    }
    if (!S_ISREG(st.st_mode)) continue;  // symlinks and special files are never objects
    const auto file = open_regular(dir_fd, name, path);
    if (!file) continue;
    const auto size = static_cast<uint64_t>(file->st.st_size);
    // Converted already by a run cut short: its sidecar ties it to this file.
    if (const auto meta_dir = open_subdir(dir_fd, kMetaDir, path, false)) {
      if (const auto sidecar = read_sidecar(meta_dir->get(), name, path);
          sidecar && match_sidecar(*sidecar, file->st).meta)
        continue;
    }
    const std::string prefix = fsfiles::read_at(file->fd.get(), 0, kLegacyHeaderMaxBytes, path);
    auto header = parse_legacy_header(prefix, size);
    if (!header) continue;                                // not one of ours: it reads as an error, as before
    header->meta.mtime_ns = fsfiles::mtime_ns(file->st);  // the object keeps its modification time
    write_object(key, Source{{}, file->fd.get(), header->offset}, header->meta, false);
  }
}

}  // namespace v1
}  // namespace agentrt
