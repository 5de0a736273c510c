#include "support/fault_vfs.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "agentrt/error.hpp"

namespace agentrt::testing {

namespace {

sqlite3_vfs* g_unix = nullptr;

// Our file: SQLite allocates szOsFile bytes; the unix VFS's file follows ours in the same block.
struct FaultFile {
  sqlite3_file base;
  sqlite3_file* real;
  char path[600];
};

sqlite3_file* real_of(sqlite3_file* f) { return reinterpret_cast<FaultFile*>(f)->real; }
const char* path_of(sqlite3_file* f) { return reinterpret_cast<FaultFile*>(f)->path; }

int error_for(IoKind kind, int armed) {
  if (armed != 0) return armed;
  return kind == IoKind::read ? SQLITE_IOERR_READ : kind == IoKind::write ? SQLITE_IOERR_WRITE : SQLITE_IOERR_FSYNC;
}

// The bytes at [offset, offset+len) as they are now (short at the end of the file), and the file's size.
void read_region(sqlite3_file* real, int64_t offset, int64_t len, std::string& out, int64_t& size) {
  sqlite3_int64 sz = 0;
  if (real->pMethods->xFileSize(real, &sz) != SQLITE_OK) sz = 0;
  size = sz;
  out.clear();
  const int64_t end = std::min<int64_t>(offset + len, sz);
  if (end <= offset) return;
  out.resize(static_cast<size_t>(end - offset));
  int rc = real->pMethods->xRead(real, out.data(), static_cast<int>(out.size()), offset);
  if (rc != SQLITE_OK && rc != SQLITE_IOERR_SHORT_READ) throw std::runtime_error("fault vfs: cannot read back");
}

int x_close(sqlite3_file* f) {
  sqlite3_file* real = real_of(f);
  return real->pMethods ? real->pMethods->xClose(real) : SQLITE_OK;
}

int x_read(sqlite3_file* f, void* buf, int amt, sqlite3_int64 off) {
  if (int rc = FaultVfs::instance().before_io(IoKind::read)) return rc;
  sqlite3_file* real = real_of(f);
  return real->pMethods->xRead(real, buf, amt, off);
}

int x_write(sqlite3_file* f, const void* buf, int amt, sqlite3_int64 off) {
  auto& vfs = FaultVfs::instance();
  if (int rc = vfs.before_io(IoKind::write)) return rc;
  sqlite3_file* real = real_of(f);
  if (vfs.tracking()) {
    std::string old;
    int64_t size = 0;
    read_region(real, off, amt, old, size);
    vfs.note_write(path_of(f), off, amt, size, old);
  }
  return real->pMethods->xWrite(real, buf, amt, off);
}

int x_truncate(sqlite3_file* f, sqlite3_int64 size) {
  auto& vfs = FaultVfs::instance();
  if (int rc = vfs.before_io(IoKind::write)) return rc;
  sqlite3_file* real = real_of(f);
  if (vfs.tracking()) {
    std::string old;
    int64_t before = 0;
    read_region(real, size, int64_t{1} << 40, old, before);
    vfs.note_write(path_of(f), size, -1, before, old);
  }
  return real->pMethods->xTruncate(real, size);
}

int x_sync(sqlite3_file* f, int flags) {
  auto& vfs = FaultVfs::instance();
  if (int rc = vfs.before_io(IoKind::sync)) return rc;
  sqlite3_file* real = real_of(f);
  int rc = real->pMethods->xSync(real, flags);
  if (rc == SQLITE_OK) vfs.note_sync(path_of(f));
  return rc;
}

int x_file_size(sqlite3_file* f, sqlite3_int64* size) { return real_of(f)->pMethods->xFileSize(real_of(f), size); }
int x_lock(sqlite3_file* f, int l) { return real_of(f)->pMethods->xLock(real_of(f), l); }
int x_unlock(sqlite3_file* f, int l) { return real_of(f)->pMethods->xUnlock(real_of(f), l); }
int x_check_reserved(sqlite3_file* f, int* out) { return real_of(f)->pMethods->xCheckReservedLock(real_of(f), out); }
int x_file_control(sqlite3_file* f, int op, void* arg) {
  return real_of(f)->pMethods->xFileControl(real_of(f), op, arg);
}
int x_sector_size(sqlite3_file* f) { return real_of(f)->pMethods->xSectorSize(real_of(f)); }
int x_device(sqlite3_file* f) { return real_of(f)->pMethods->xDeviceCharacteristics(real_of(f)); }
int x_shm_map(sqlite3_file* f, int page, int size, int extend, void volatile** out) {
  return real_of(f)->pMethods->xShmMap(real_of(f), page, size, extend, out);
}
int x_shm_lock(sqlite3_file* f, int offset, int n, int flags) {
  return real_of(f)->pMethods->xShmLock(real_of(f), offset, n, flags);
}
void x_shm_barrier(sqlite3_file* f) { real_of(f)->pMethods->xShmBarrier(real_of(f)); }
int x_shm_unmap(sqlite3_file* f, int del) { return real_of(f)->pMethods->xShmUnmap(real_of(f), del); }
int x_fetch(sqlite3_file* f, sqlite3_int64 off, int amt, void** out) {
  // No memory-mapped reads: every read goes through x_read and is counted.
  (void)f;
  (void)off;
  (void)amt;
  *out = nullptr;
  return SQLITE_OK;
}
int x_unfetch(sqlite3_file* f, sqlite3_int64 off, void* p) {
  (void)f;
  (void)off;
  (void)p;
  return SQLITE_OK;
}

const sqlite3_io_methods kMethods = {
    3,          x_close,       x_read,           x_write,        x_truncate,    x_sync,   x_file_size,
    x_lock,     x_unlock,      x_check_reserved, x_file_control, x_sector_size, x_device, x_shm_map,
    x_shm_lock, x_shm_barrier, x_shm_unmap,      x_fetch,        x_unfetch};

int x_open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* file, int flags, int* out_flags) {
  auto* f = reinterpret_cast<FaultFile*>(file);
  f->base.pMethods = nullptr;
  f->real = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(file) + sizeof(FaultFile));
  f->path[0] = '\0';
  if (name) {
    std::strncpy(f->path, name, sizeof f->path - 1);
    f->path[sizeof f->path - 1] = '\0';
  }
  int rc = g_unix->xOpen(g_unix, name, f->real, flags, out_flags);
  if (rc == SQLITE_OK) f->base.pMethods = &kMethods;
  return rc;
}

int x_delete(sqlite3_vfs*, const char* name, int sync_dir) {
  if (FaultVfs::instance().crashed()) return SQLITE_IOERR_DELETE;  // a dead process deletes nothing
  int rc = g_unix->xDelete(g_unix, name, sync_dir);
  if (rc == SQLITE_OK) FaultVfs::instance().note_sync(name);  // gone: nothing of it to undo
  return rc;
}

sqlite3_vfs g_fault;

}  // namespace

FaultVfs& FaultVfs::instance() {
  static FaultVfs* vfs = [] {
    g_unix = sqlite3_vfs_find("unix");
    if (!g_unix) throw std::runtime_error("fault vfs: SQLite has no unix VFS");
    g_fault = *g_unix;
    g_fault.zName = kName;
    g_fault.szOsFile = static_cast<int>(sizeof(FaultFile)) + g_unix->szOsFile;
    g_fault.xOpen = x_open;
    g_fault.xDelete = x_delete;
    g_fault.pNext = nullptr;
    if (sqlite3_vfs_register(&g_fault, 0) != SQLITE_OK) throw std::runtime_error("fault vfs: cannot register");
    static FaultVfs the;
    return &the;
  }();
  return *vfs;
}

void FaultVfs::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& c : counts_) c = 0;
  total_ = 0;
  crashed_ = false;
  fired_ = false;
  disk_full_ = false;
  tracking_ = false;
  fail_at_ = 0;
  fail_error_ = 0;
  crash_at_ = 0;
  undo_.clear();
}

void FaultVfs::fail_nth(IoKind kind, int64_t n, int sqlite_error) {
  std::lock_guard<std::mutex> lock(mutex_);
  fail_kind_ = kind;
  fail_at_ = counts_[static_cast<int>(kind)].load() + n;
  fail_error_ = sqlite_error;
}

void FaultVfs::set_disk_full(bool full) { disk_full_ = full; }

void FaultVfs::crash_after(int64_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  crash_at_ = n > 0 ? total_.load() + n : 0;
}

void FaultVfs::track_unsynced(bool on) { tracking_ = on; }

int FaultVfs::before_io(IoKind kind) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (crashed_) return error_for(kind, 0);
  const int64_t n = ++counts_[static_cast<int>(kind)];
  const int64_t t = ++total_;
  if (crash_at_ > 0 && t >= crash_at_) {
    // This I/O is the last one the process makes: done, then the process is gone.
    crashed_ = true;
    return 0;
  }
  if (disk_full_ && kind != IoKind::read) {
    fired_ = true;
    return SQLITE_FULL;
  }
  if (fail_at_ > 0 && kind == fail_kind_ && n == fail_at_) {
    fired_ = true;
    return error_for(kind, fail_error_);
  }
  return 0;
}

void FaultVfs::note_write(const std::string& path, int64_t offset, int64_t len, int64_t size_before,
                          const std::string& old_bytes) {
  (void)len;
  std::lock_guard<std::mutex> lock(mutex_);
  undo_[path].push_back(Undo{offset, size_before, old_bytes});
}

void FaultVfs::note_sync(const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  undo_.erase(path);
}

void FaultVfs::power_loss() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [path, log] : undo_) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) continue;  // never created on disk, or deleted since
    for (auto it = log.rbegin(); it != log.rend(); ++it) {
      if (!it->old_bytes.empty() && ::pwrite(fd, it->old_bytes.data(), it->old_bytes.size(), it->offset) !=
                                        static_cast<ssize_t>(it->old_bytes.size()))
        throw std::runtime_error("fault vfs: cannot undo a write of " + path);
      if (::ftruncate(fd, it->size_before) != 0) throw std::runtime_error("fault vfs: cannot undo the size of " + path);
    }
    ::close(fd);
  }
  undo_.clear();
}

void FaultyObjects::io(IoKind kind, std::string_view key) {
  if (FaultVfs::instance().before_io(kind) != 0)
    throw Error(ErrorCode::io, "object store: injected fault at " + std::string(key));
}

void FaultyObjects::put(std::string_view key, std::string_view bytes, std::string_view content_type) {
  io(IoKind::write, key);
  inner_->put(key, bytes, content_type);
}

bool FaultyObjects::put_if_absent(std::string_view key, std::string_view bytes, std::string_view content_type) {
  io(IoKind::write, key);
  return inner_->put_if_absent(key, bytes, content_type);
}

std::optional<std::string> FaultyObjects::get(std::string_view key) {
  io(IoKind::read, key);
  return inner_->get(key);
}

std::optional<ObjectInfo> FaultyObjects::head(std::string_view key) {
  io(IoKind::read, key);
  return inner_->head(key);
}

bool FaultyObjects::remove(std::string_view key) {
  io(IoKind::write, key);
  return inner_->remove(key);
}

std::vector<ObjectInfo> FaultyObjects::list(std::string_view prefix) {
  io(IoKind::read, prefix);
  return inner_->list(prefix);
}

}  // namespace agentrt::testing
