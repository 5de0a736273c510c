#include "store/fs_object_store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <system_error>
#include <utility>

#include "agentrt/error.hpp"
#include "agentrt/json.hpp"
#include "store/object_keys.hpp"
#include "store/signed_url.hpp"
#include "util/crypto.hpp"
#include "util/printable.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

constexpr std::string_view kMagic = "AGENTRT-OBJECT/1\n";
constexpr std::string_view kDefaultContentType = "application/octet-stream";
constexpr size_t kMaxHeaderBytes = 4096;
// Each attempt of a write re-walks the path; a concurrent remove() may prune a directory between our
// mkdir and our create, which is rare and resolves on the next attempt.
constexpr int kWriteAttempts = 8;

// Owns one file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

[[noreturn]] void throw_io(std::string_view what, std::string_view path, int err) {
  throw Error(ErrorCode::io, fmt::format("{} '{}': {}", what, path, errno_text(err)));
}

void validate_content_type(std::string_view content_type) {
  if (content_type.size() > 255) {
    throw Error(ErrorCode::invalid_argument,
                fmt::format("content type of {} bytes is longer than 255 bytes", content_type.size()));
  }
  for (unsigned char c : content_type) {
    if (c < 0x20 || c > 0x7e) {
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("content type '{}' must be printable ASCII", printable(content_type, 120)));
    }
  }
}

int64_t mtime_ms(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + static_cast<int64_t>(st.st_mtim.tv_nsec) / 1000000;
}

// The directories leading to a key's last segment, each opened with O_NOFOLLOW relative to the previous one.
struct DirChain {
  std::vector<Fd> dirs;
  int parent(int root_fd) const { return dirs.empty() ? root_fd : dirs.back().get(); }
};

// Opens segments[0 .. n) as directories below root_fd. Returns nullopt when one is missing (or is an object,
// so nothing can live below it) and `create` is false, or when `create` is true and a directory vanished
// under us (a concurrent prune; the caller retries). A symlink on the way is refused with Error(io).
std::optional<DirChain> open_dirs(int root_fd, std::string_view root, const std::vector<std::string>& segments,
                                  size_t n, bool create) {
  DirChain chain;
  std::string path(root);
  for (size_t i = 0; i < n; ++i) {
    const std::string& name = segments[i];
    path += '/';
    path += name;
    const int at = chain.parent(root_fd);
    bool made = false;
    while (true) {
      const int fd = ::openat(at, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd >= 0) {
        chain.dirs.emplace_back(fd);
        break;
      }
      const int err = errno;
      if (err == ENOENT) {
        if (!create || made) return std::nullopt;
        if (::mkdirat(at, name.c_str(), 0700) != 0) {
          const int mkdir_err = errno;
          if (mkdir_err == ENOENT) return std::nullopt;
          if (mkdir_err != EEXIST) throw_io("cannot create directory", path, mkdir_err);
        }
        made = true;
        continue;
      }
      if (err == ENOTDIR || err == ELOOP) {
        struct stat st {};
        if (::fstatat(at, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
          throw Error(ErrorCode::io, fmt::format("refusing to follow the symlink '{}'", path));
        }
        if (!create) return std::nullopt;
        throw Error(ErrorCode::io, fmt::format("cannot create a directory at '{}': an object is stored there", path));
      }
      throw_io("cannot open directory", path, err);
    }
  }
  return chain;
}

void write_all(int fd, std::string_view data, std::string_view path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), std::min<size_t>(data.size(), size_t{1} << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_io("cannot write", path, errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

// Reads up to `limit` bytes from the start of the file (all of it when limit is the file size).
std::string read_prefix(int fd, size_t limit, std::string_view path) {
  std::string out(limit, '\0');
  size_t done = 0;
  while (done < limit) {
    const ssize_t n = ::pread(fd, out.data() + done, limit - done, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_io("cannot read", path, errno);
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  return out;
}

struct Header {
  std::string content_type;
  std::string sha256;
  uint64_t size = 0;
  size_t length = 0;  // bytes before the object's data
};

std::optional<Header> parse_header(std::string_view buffer) {
  if (buffer.substr(0, kMagic.size()) != kMagic) return std::nullopt;
  const size_t end = buffer.find('\n', kMagic.size());
  if (end == std::string_view::npos) return std::nullopt;
  const json meta = json::parse(buffer.substr(kMagic.size(), end - kMagic.size()), nullptr, false);
  if (!meta.is_object()) return std::nullopt;
  const auto type = meta.find("content_type");
  const auto sha = meta.find("sha256");
  const auto size = meta.find("size");
  if (type == meta.end() || !type->is_string() || sha == meta.end() || !sha->is_string() || size == meta.end() ||
      !size->is_number_unsigned()) {
    return std::nullopt;
  }
  return Header{type->get<std::string>(), sha->get<std::string>(), size->get<uint64_t>(), end + 1};
}

struct OpenObject {
  Fd fd;
  struct stat st {};
};

// Opens an object file without following a symlink; nullopt when there is no object by that name.
std::optional<OpenObject> open_object_at(int dir_fd, const std::string& name, std::string_view path) {
  // O_NONBLOCK: a FIFO planted in the store must not hang the caller; regular files ignore it.
  Fd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) return std::nullopt;
    if (err == ELOOP) throw Error(ErrorCode::io, fmt::format("refusing to follow the symlink '{}'", path));
    throw_io("cannot open", path, err);
  }
  OpenObject object{std::move(fd), {}};
  if (::fstat(object.fd.get(), &object.st) != 0) throw_io("cannot stat", path, errno);
  if (S_ISDIR(object.st.st_mode)) return std::nullopt;  // a key prefix of other objects, not an object
  if (!S_ISREG(object.st.st_mode)) {
    throw Error(ErrorCode::io, fmt::format("'{}' is not a regular file", path));
  }
  return object;
}

// The object `key` names, its directories opened one by one below the root without following a symlink;
// nullopt when there is none.
std::optional<OpenObject> open_object(int root_fd, std::string_view root, std::string_view key, std::string_view path) {
  const std::vector<std::string> segments = split_key(key);
  const auto chain = open_dirs(root_fd, root, segments, segments.size() - 1, false);
  if (!chain) return std::nullopt;
  return open_object_at(chain->parent(root_fd), segments.back(), path);
}

Header read_header(const OpenObject& object, std::string_view path) {
  const auto file_size = static_cast<uint64_t>(object.st.st_size);
  const std::string prefix =
      read_prefix(object.fd.get(), static_cast<size_t>(std::min<uint64_t>(file_size, kMaxHeaderBytes)), path);
  auto header = parse_header(prefix);
  if (!header || header->length + header->size != file_size) {
    throw Error(ErrorCode::io, fmt::format("'{}' is not an agentrt object or is damaged", path));
  }
  return std::move(*header);
}

ObjectInfo info_of(std::string key, const OpenObject& object, Header header) {
  ObjectInfo info;
  info.key = std::move(key);
  info.size = header.size;
  info.content_type = std::move(header.content_type);
  info.sha256 = std::move(header.sha256);
  info.modified_at = mtime_ms(object.st);
  return info;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

void list_dir(int dir_fd, const std::string& dir_key, std::string_view prefix, std::string_view root,
              std::vector<ObjectInfo>& out) {
  std::vector<std::string> names;
  {
    // fdopendir takes ownership of its descriptor, so give it its own.
    const int own = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (own < 0) throw_io("cannot open directory", fmt::format("{}/{}", root, dir_key), errno);
    DIR* dir = ::fdopendir(own);
    if (dir == nullptr) {
      const int err = errno;
      ::close(own);
      throw_io("cannot read directory", fmt::format("{}/{}", root, dir_key), err);
    }
    while (const dirent* entry = ::readdir(dir)) names.emplace_back(entry->d_name);
    ::closedir(dir);
  }
  for (const std::string& name : names) {
    if (name == "." || name == ".." || starts_with(name, kReservedPrefix)) continue;
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
      if (!starts_with(sub_key, prefix) && !starts_with(prefix, sub_key)) continue;
      Fd sub(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub) {
        if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) continue;  // replaced while we list
        throw_io("cannot open directory", path, errno);
      }
      list_dir(sub.get(), sub_key, prefix, root, out);
    } else if (S_ISREG(st.st_mode) && starts_with(key, prefix)) {
      auto object = open_object_at(dir_fd, name, path);
      if (!object) continue;
      out.push_back(info_of(key, *object, read_header(*object, path)));
    }
    // Symlinks and special files are never objects.
  }
}

const char* bucket_problem(std::string_view bucket) {
  if (bucket.empty() || bucket.size() > 63) return "must be 1 to 63 characters";
  if (bucket == "." || bucket == "..") return "must not be '.' or '..'";
  for (char c : bucket) {
    const bool ok =
        (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) return "may only hold [A-Za-z0-9._-]";
  }
  return nullptr;
}

}  // namespace

void validate_object_key(std::string_view key) {
  if (const char* problem = object_key_problem(key)) {
    throw Error(ErrorCode::invalid_argument,
                fmt::format("invalid object key '{}': it {}", printable(key, 120), problem));
  }
}

FsObjectStore::FsObjectStore(FsObjectStoreOptions options) : options_(std::move(options)) {
  if (options_.signing_secret.empty()) {
    throw Error(ErrorCode::invalid_argument, "the object store's signing secret must not be empty");
  }
  if (const char* problem = bucket_problem(options_.bucket)) {
    throw Error(ErrorCode::invalid_argument,
                fmt::format("invalid bucket '{}': it {}", printable(options_.bucket, 120), problem));
  }
  base_url_ = options_.public_base_url;
  while (!base_url_.empty() && base_url_.back() == '/') base_url_.pop_back();
  try {
    ParsedUrl base = parse_url(base_url_);
    if (base.scheme != "http" && base.scheme != "https") bad_url("the scheme must be http or https");
    if (base.host.empty() || base.host == "[]") bad_url("it has no host");
    if (base.has_userinfo || base.query || base.has_fragment) bad_url("it has user info, a query or a fragment");
    origin_ = Origin{std::move(base.scheme), std::move(base.host), base.port, std::move(base.path)};
  } catch (const Error& e) {
    throw Error(ErrorCode::invalid_argument,
                fmt::format("invalid public base URL '{}': {}", printable(options_.public_base_url, 120), e.message()));
  }

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
}

FsObjectStore::~FsObjectStore() {
  if (root_fd_ >= 0) ::close(root_fd_);
}

std::string FsObjectStore::bucket() const { return options_.bucket; }

std::string FsObjectStore::display_path(std::string_view key) const { return fmt::format("{}/{}", options_.root, key); }

void FsObjectStore::put(std::string_view key, std::string_view bytes, std::string_view content_type) {
  write_object(key, bytes, content_type, false);
}

bool FsObjectStore::put_if_absent(std::string_view key, std::string_view bytes, std::string_view content_type) {
  return write_object(key, bytes, content_type, true);
}

bool FsObjectStore::write_object(std::string_view key, std::string_view bytes, std::string_view content_type,
                                 bool only_if_absent) {
  validate_object_key(key);
  validate_content_type(content_type);
  const std::string path = display_path(key);
  const std::vector<std::string> segments = split_key(key);
  const std::string& name = segments.back();
  const std::string header =
      fmt::format("{}{}\n", kMagic,
                  json{{"content_type", content_type.empty() ? kDefaultContentType : content_type},
                       {"sha256", crypto::sha256_hex(bytes)},
                       {"size", static_cast<uint64_t>(bytes.size())}}
                      .dump());

  for (int attempt = 0; attempt < kWriteAttempts; ++attempt) {
    const auto chain = open_dirs(root_fd_, options_.root, segments, segments.size() - 1, true);
    if (!chain) continue;
    const int dir = chain->parent(root_fd_);
    const std::string tmp = fmt::format("{}tmp-{}", kReservedPrefix, crypto::random_hex(12));
    Fd fd(::openat(dir, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd) {
      if (errno == ENOENT) continue;  // the directory was pruned after we opened it
      throw_io("cannot create a temporary file next to", path, errno);
    }
    // The temporary file goes away on every path except a successful rename.
    struct TmpGuard {
      int dir;
      const std::string& name;
      bool armed = true;
      ~TmpGuard() {
        if (armed) ::unlinkat(dir, name.c_str(), 0);
      }
    } guard{dir, tmp};

    write_all(fd.get(), header, path);
    write_all(fd.get(), bytes, path);
    if (options_.fsync && ::fsync(fd.get()) != 0) throw_io("cannot fsync", path, errno);
    if (::close(fd.release()) != 0) throw_io("cannot close", path, errno);

    if (only_if_absent) {
      // link() fails with EEXIST when the name exists, atomically, in every process: no check-then-write.
      if (::linkat(dir, tmp.c_str(), dir, name.c_str(), 0) != 0) {
        const int err = errno;
        if (err != EEXIST) throw_io("cannot link", path, err);
        struct stat st {};
        if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
          throw Error(ErrorCode::io, fmt::format("cannot store '{}': other objects live under it", path));
        }
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
      guard.armed = false;
    }
    if (options_.fsync && ::fsync(dir) != 0) throw_io("cannot fsync the directory of", path, errno);
    return true;
  }
  throw Error(ErrorCode::io, fmt::format("cannot store '{}': its directory kept disappearing", path));
}

std::optional<std::string> FsObjectStore::get(std::string_view key) {
  validate_object_key(key);
  const std::string path = display_path(key);
  const auto object = open_object(root_fd_, options_.root, key, path);
  if (!object) return std::nullopt;
  // Published files are never modified in place (writes replace them), so the size from fstat holds.
  std::string data = read_prefix(object->fd.get(), static_cast<size_t>(object->st.st_size), path);
  const auto header = parse_header(std::string_view(data).substr(0, kMaxHeaderBytes));
  if (!header || header->length + header->size != data.size()) {
    throw Error(ErrorCode::io, fmt::format("'{}' is not an agentrt object or is damaged", path));
  }
  data.erase(0, header->length);
  return data;
}

std::optional<std::string> FsObjectStore::read(std::string_view key, uint64_t offset, size_t max_bytes) {
  validate_object_key(key);
  const std::string path = display_path(key);
  const auto object = open_object(root_fd_, options_.root, key, path);
  if (!object) return std::nullopt;
  const Header header = read_header(*object, path);
  if (offset >= header.size) return std::string();
  const size_t want = static_cast<size_t>(std::min<uint64_t>(max_bytes, header.size - offset));
  std::string out(want, '\0');
  size_t done = 0;
  while (done < want) {
    const ssize_t n =
        ::pread(object->fd.get(), out.data() + done, want - done, static_cast<off_t>(header.length + offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_io("cannot read", path, errno);
    }
    if (n == 0) throw Error(ErrorCode::io, fmt::format("'{}' is shorter than its header says", path));
    done += static_cast<size_t>(n);
  }
  return out;
}

std::optional<ObjectInfo> FsObjectStore::head(std::string_view key) {
  validate_object_key(key);
  const std::string path = display_path(key);
  const auto object = open_object(root_fd_, options_.root, key, path);
  if (!object) return std::nullopt;
  return info_of(std::string(key), *object, read_header(*object, path));
}

bool FsObjectStore::remove(std::string_view key) {
  validate_object_key(key);
  const std::string path = display_path(key);
  const std::vector<std::string> segments = split_key(key);
  const auto chain = open_dirs(root_fd_, options_.root, segments, segments.size() - 1, false);
  if (!chain) return false;
  const int dir = chain->parent(root_fd_);
  if (::unlinkat(dir, segments.back().c_str(), 0) != 0) {
    const int err = errno;
    if (err == ENOENT) return false;
    struct stat st {};
    if ((err == EISDIR || err == EPERM) && ::fstatat(dir, segments.back().c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISDIR(st.st_mode)) {
      return false;  // a prefix of other keys, not an object
    }
    throw_io("cannot remove", path, err);
  }
  // Prune directories this left empty, deepest first; the first non-empty one (ENOTEMPTY) stops it.
  for (size_t i = chain->dirs.size(); i-- > 0;) {
    const int above = i == 0 ? root_fd_ : chain->dirs[i - 1].get();
    if (::unlinkat(above, segments[i].c_str(), AT_REMOVEDIR) != 0) break;
  }
  return true;
}

std::vector<ObjectInfo> FsObjectStore::list(std::string_view prefix) {
  if (prefix.size() > kMaxKeyBytes || (!prefix.empty() && prefix.front() == '/') ||
      std::any_of(prefix.begin(), prefix.end(),
                  [](char c) { return c == '\\' || is_control_byte(static_cast<unsigned char>(c)); })) {
    throw Error(ErrorCode::invalid_argument, fmt::format("invalid object key prefix '{}'", printable(prefix, 120)));
  }
  // Only the directory part must be walkable; the last, partial segment is matched as a string prefix.
  const size_t last_slash = prefix.rfind('/');
  const std::string_view dir_part =
      last_slash == std::string_view::npos ? std::string_view{} : prefix.substr(0, last_slash);
  std::vector<std::string> segments;
  if (last_slash != std::string_view::npos) {
    segments = split_key(dir_part);
    for (const std::string& segment : segments) {
      if (const char* problem = key_segment_problem(segment)) {
        throw Error(ErrorCode::invalid_argument,
                    fmt::format("invalid object key prefix '{}': it {}", printable(prefix, 120), problem));
      }
    }
  }
  std::vector<ObjectInfo> out;
  const auto chain = open_dirs(root_fd_, options_.root, segments, segments.size(), false);
  if (!chain) return out;
  const std::string dir_key = segments.empty() ? std::string{} : std::string(dir_part) + "/";
  list_dir(chain->parent(root_fd_), dir_key, prefix, options_.root, out);
  std::sort(out.begin(), out.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  return out;
}

}  // namespace v1
}  // namespace agentrt
