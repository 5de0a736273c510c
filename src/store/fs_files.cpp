// The POSIX file plumbing of the filesystem object store (fs_files.hpp).
#include "store/fs_files.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <system_error>

#include "agentrt/error.hpp"
#include "store/object_keys.hpp"
#include "util/crypto.hpp"

namespace agentrt {
inline namespace v1 {
namespace fsfiles {

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

DirLock::DirLock(int dir_fd, bool exclusive, std::string_view path) : fd_(dir_fd) {
  while (::flock(fd_, exclusive ? LOCK_EX : LOCK_SH) != 0) {
    if (errno != EINTR) throw_io("cannot lock", path, errno);
  }
}

DirLock::~DirLock() { ::flock(fd_, LOCK_UN); }

void throw_io(std::string_view what, std::string_view path, int err) {
  throw Error(ErrorCode::io,
              fmt::format("{} '{}': {}", what, path, std::error_code(err, std::generic_category()).message()));
}

std::optional<DirChain> open_dirs(int root_fd, std::string_view root, const std::vector<std::string>& segments,
                                  size_t n, bool create) {
  DirChain chain;
  std::string path(root);
  for (size_t i = 0; i < n; ++i) {
    path += '/';
    path += segments[i];
    auto dir = open_subdir(chain.parent(root_fd), segments[i], path, create);
    if (!dir) return std::nullopt;
    chain.dirs.push_back(std::move(*dir));
  }
  return chain;
}

std::optional<Fd> open_subdir(int at, const std::string& name, std::string_view path, bool create) {
  bool made = false;
  while (true) {
    const int fd = ::openat(at, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) return Fd(fd);
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

std::string read_at(int fd, uint64_t offset, size_t limit, std::string_view path) {
  std::string out(limit, '\0');
  size_t done = 0;
  while (done < limit) {
    const ssize_t n = ::pread(fd, out.data() + done, limit - done, static_cast<off_t>(offset + done));
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

void copy_range(int from, uint64_t offset, uint64_t size, int to, std::string_view path) {
  auto in = static_cast<off_t>(offset);
  uint64_t left = size;
  while (left > 0) {
    const ssize_t n = ::copy_file_range(from, &in, to, nullptr, std::min<uint64_t>(left, uint64_t{1} << 30), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP)) {
      // A filesystem the kernel cannot copy within: through user space, a MiB at a time.
      while (left > 0) {
        const std::string piece =
            read_at(from, static_cast<uint64_t>(in), static_cast<size_t>(std::min<uint64_t>(left, 1 << 20)), path);
        if (piece.empty()) throw Error(ErrorCode::io, fmt::format("'{}' is shorter than expected", path));
        write_all(to, piece, path);
        in += static_cast<off_t>(piece.size());
        left -= piece.size();
      }
      return;
    }
    if (n < 0) throw_io("cannot copy", path, errno);
    if (n == 0) throw Error(ErrorCode::io, fmt::format("'{}' is shorter than expected", path));
    left -= static_cast<uint64_t>(n);
  }
}

int64_t mtime_ns(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + static_cast<int64_t>(st.st_mtim.tv_nsec);
}

int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<int64_t>(ts.tv_nsec);
}

std::optional<OpenFile> open_regular(int dir_fd, const std::string& name, std::string_view path) {
  // O_NONBLOCK: a FIFO planted in the store must not hang the caller; regular files ignore it.
  Fd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) return std::nullopt;
    if (err == ELOOP) throw Error(ErrorCode::io, fmt::format("refusing to follow the symlink '{}'", path));
    throw_io("cannot open", path, err);
  }
  OpenFile file{std::move(fd), {}};
  if (::fstat(file.fd.get(), &file.st) != 0) throw_io("cannot stat", path, errno);
  if (S_ISDIR(file.st.st_mode)) return std::nullopt;
  if (!S_ISREG(file.st.st_mode)) throw Error(ErrorCode::io, fmt::format("'{}' is not a regular file", path));
  return file;
}

std::string temp_name() { return fmt::format("{}tmp-{}", kReservedPrefix, crypto::random_hex(12)); }

}  // namespace fsfiles
}  // namespace v1
}  // namespace agentrt
