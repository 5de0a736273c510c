// The POSIX file plumbing of the filesystem object store (internal): owned descriptors, path walks that never
// follow a symlink, whole reads and writes, per-directory locks. Pure functions over descriptors, thread-safe.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace agentrt {
inline namespace v1 {
namespace fsfiles {

// Owns one file descriptor. Not thread-safe (a value).
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd();
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Holds flock() on a directory's descriptor: shared for readers, exclusive for writers. Released on
// destruction, and by the kernel when the process dies (a crash never leaves a lock behind). A value.
class DirLock {
 public:
  DirLock(int dir_fd, bool exclusive, std::string_view path);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_;
};

[[noreturn]] void throw_io(std::string_view what, std::string_view path, int err);

// The directories leading to a key's last segment, each opened with O_NOFOLLOW relative to the previous one.
struct DirChain {
  std::vector<Fd> dirs;
  int parent(int root_fd) const { return dirs.empty() ? root_fd : dirs.back().get(); }
};

// Opens segments[0 .. n) as directories below root_fd. Returns nullopt when one is missing (or is an object,
// so nothing can live below it) and `create` is false, or when `create` is true and a directory vanished
// under us (a concurrent prune; the caller retries). A symlink on the way is refused with Error(io).
std::optional<DirChain> open_dirs(int root_fd, std::string_view root, const std::vector<std::string>& segments,
                                  size_t n, bool create);

// Opens (`create`: makes first, mode 0700) the directory `name` below dir_fd without following a symlink;
// nullopt when it is missing (or vanished between the mkdir and the open) and Error(io) for anything else.
std::optional<Fd> open_subdir(int dir_fd, const std::string& name, std::string_view path, bool create);

void write_all(int fd, std::string_view data, std::string_view path);
// Up to `limit` bytes from `offset` (fewer only at the end of the file).
std::string read_at(int fd, uint64_t offset, size_t limit, std::string_view path);
// Copies `size` bytes of `from` (starting at `offset`) to the end of `to`, in the kernel where it can.
void copy_range(int from, uint64_t offset, uint64_t size, int to, std::string_view path);

int64_t mtime_ns(const struct stat& st);
// The current time as a file timestamp in nanoseconds (CLOCK_REALTIME, not the kernel's coarse file clock).
int64_t now_ns();

struct OpenFile {
  Fd fd;
  struct stat st {};
};

// Opens the regular file `name` below dir_fd without following a symlink; nullopt when there is none or it
// is a directory (a key prefix of other objects). A symlink or special file is Error(io).
std::optional<OpenFile> open_regular(int dir_fd, const std::string& name, std::string_view path);

// "<reserved prefix>tmp-<random>": a name no key can have.
std::string temp_name();

}  // namespace fsfiles
}  // namespace v1
}  // namespace agentrt
