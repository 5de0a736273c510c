// The WAL write buffer (see the header).
#include "store/sqlite/wal_buffer.hpp"

#include <sqlite3.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "agentrt/error.hpp"

namespace agentrt {
inline namespace v1 {
namespace sqlite {

namespace {

constexpr const char* kPrefix = "agentrt-wal-";
constexpr int kFrameHeader = 24;  // a WAL frame's header (SQLite's file format)
// The most one write hands the wrapped VFS: the unix VFS writes at most 128 KiB - 1 bytes a call (it masks
// the length with 0x1ffff and calls a write that moved nothing a full disk). A commit of more is written in
// pieces of up to this, each whole frames or a frame's header apart from its page.
constexpr size_t kMaxWrite = 0x1ffff;

// What SQLite allocates for a file of ours: this, then the wrapped VFS's file at kRealOffset.
struct WalFile {
  sqlite3_file base;  // pMethods: kMethods
  sqlite3_file* real;
  char* held;  // frames not yet written: [start, start + len) of the file
  size_t len;
  size_t cap;
  sqlite3_int64 start;
  sqlite3_int64 end;  // where the next piece of the frames being taken in goes
  bool want_page;     // the last frame taken in is its header only
  bool commit;        // the last header taken in is a commit frame's
};
constexpr size_t kRealOffset = (sizeof(WalFile) + 15) & ~size_t{15};

WalFile* of(sqlite3_file* f) { return reinterpret_cast<WalFile*>(f); }
sqlite3_file* real_of(sqlite3_file* f) { return of(f)->real; }
sqlite3_vfs* base_of(sqlite3_vfs* vfs) { return static_cast<sqlite3_vfs*>(vfs->pAppData); }

// Writes what is held, in one write. Nothing is held afterwards, whatever the write answered.
int write_held(WalFile* w) {
  if (w->len == 0) return SQLITE_OK;
  int rc = w->real->pMethods->xWrite(w->real, w->held, static_cast<int>(w->len), w->start);
  w->len = 0;
  return rc;
}

// Everything but the next piece of the frames: what is held goes first, in the order SQLite wrote it.
int write_held_first(WalFile* w) {
  w->want_page = false;
  return write_held(w);
}

bool hold(WalFile* w, const void* data, int amt, sqlite3_int64 off) {
  const size_t need = w->len + static_cast<size_t>(amt);
  if (need > w->cap) {
    size_t cap = w->cap ? w->cap : 32 * 1024;
    while (cap < need) cap *= 2;
    void* p = std::realloc(w->held, cap);
    if (!p) return false;
    w->held = static_cast<char*>(p);
    w->cap = cap;
  }
  if (w->len == 0) w->start = off;
  std::memcpy(w->held + w->len, data, static_cast<size_t>(amt));
  w->len = need;
  w->end = off + amt;
  return true;
}

int x_write(sqlite3_file* f, const void* data, int amt, sqlite3_int64 off) {
  WalFile* w = of(f);
  const bool header = !w->want_page && amt == kFrameHeader && (w->len == 0 || off == w->end);
  const bool page = w->want_page && off == w->end && amt > 0 && static_cast<size_t>(amt) <= kMaxWrite;
  if (header || page) {
    if (w->len + static_cast<size_t>(amt) > kMaxWrite) {
      if (int rc = write_held(w)) return write_held_first(w), rc;
    }
    if (hold(w, data, amt, off)) {
      w->want_page = header;
      if (header) {
        const auto* h = static_cast<const unsigned char*>(data);
        w->commit = (h[4] | h[5] | h[6] | h[7]) != 0;  // the database's size after a commit, else 0
        return SQLITE_OK;
      }
      return w->commit ? write_held(w) : SQLITE_OK;
    }
  }
  if (int rc = write_held_first(w)) return rc;  // not the next piece, or no memory to hold it
  return w->real->pMethods->xWrite(w->real, data, amt, off);
}

int x_close(sqlite3_file* f) {
  WalFile* w = of(f);
  int rc = write_held_first(w);
  int closed = w->real->pMethods ? w->real->pMethods->xClose(w->real) : SQLITE_OK;
  std::free(w->held);
  w->held = nullptr;
  w->cap = 0;
  return rc != SQLITE_OK ? rc : closed;
}

int x_read(sqlite3_file* f, void* buf, int amt, sqlite3_int64 off) {
  if (int rc = write_held_first(of(f))) return rc;
  return real_of(f)->pMethods->xRead(real_of(f), buf, amt, off);
}
int x_truncate(sqlite3_file* f, sqlite3_int64 size) {
  if (int rc = write_held_first(of(f))) return rc;
  return real_of(f)->pMethods->xTruncate(real_of(f), size);
}
int x_sync(sqlite3_file* f, int flags) {
  if (int rc = write_held_first(of(f))) return rc;
  return real_of(f)->pMethods->xSync(real_of(f), flags);
}
int x_file_size(sqlite3_file* f, sqlite3_int64* size) {
  if (int rc = write_held_first(of(f))) return rc;
  return real_of(f)->pMethods->xFileSize(real_of(f), size);
}
int x_file_control(sqlite3_file* f, int op, void* arg) {
  if (int rc = write_held_first(of(f))) return rc;
  return real_of(f)->pMethods->xFileControl(real_of(f), op, arg);
}
int x_lock(sqlite3_file* f, int l) { return real_of(f)->pMethods->xLock(real_of(f), l); }
int x_unlock(sqlite3_file* f, int l) { return real_of(f)->pMethods->xUnlock(real_of(f), l); }
int x_check_reserved(sqlite3_file* f, int* out) { return real_of(f)->pMethods->xCheckReservedLock(real_of(f), out); }
int x_sector_size(sqlite3_file* f) { return real_of(f)->pMethods->xSectorSize(real_of(f)); }
int x_device(sqlite3_file* f) { return real_of(f)->pMethods->xDeviceCharacteristics(real_of(f)); }

// Version 1: a WAL file has no shared memory and is never memory-mapped.
const sqlite3_io_methods kMethods = {1,           x_close, x_read,   x_write,          x_truncate,     x_sync,
                                     x_file_size, x_lock,  x_unlock, x_check_reserved, x_file_control, x_sector_size,
                                     x_device,    nullptr, nullptr,  nullptr,          nullptr,        nullptr,
                                     nullptr};

int v_open(sqlite3_vfs* vfs, sqlite3_filename name, sqlite3_file* file, int flags, int* out_flags) {
  sqlite3_vfs* base = base_of(vfs);
  if (!(flags & SQLITE_OPEN_WAL)) return base->xOpen(base, name, file, flags, out_flags);  // the base's own
  WalFile* w = of(file);
  std::memset(w, 0, sizeof *w);
  w->real = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(file) + kRealOffset);
  int rc = base->xOpen(base, name, w->real, flags, out_flags);
  if (rc == SQLITE_OK) w->base.pMethods = &kMethods;
  return rc;
}

// The rest is the base's.
int v_delete(sqlite3_vfs* v, const char* n, int d) { return base_of(v)->xDelete(base_of(v), n, d); }
int v_access(sqlite3_vfs* v, const char* n, int f, int* o) { return base_of(v)->xAccess(base_of(v), n, f, o); }
int v_full(sqlite3_vfs* v, const char* n, int k, char* o) { return base_of(v)->xFullPathname(base_of(v), n, k, o); }
void* v_dl_open(sqlite3_vfs* v, const char* n) { return base_of(v)->xDlOpen(base_of(v), n); }
void v_dl_error(sqlite3_vfs* v, int k, char* o) { base_of(v)->xDlError(base_of(v), k, o); }
void (*v_dl_sym(sqlite3_vfs* v, void* h, const char* s))(void) { return base_of(v)->xDlSym(base_of(v), h, s); }
void v_dl_close(sqlite3_vfs* v, void* h) { base_of(v)->xDlClose(base_of(v), h); }
int v_random(sqlite3_vfs* v, int k, char* o) { return base_of(v)->xRandomness(base_of(v), k, o); }
int v_sleep(sqlite3_vfs* v, int us) { return base_of(v)->xSleep(base_of(v), us); }
int v_time(sqlite3_vfs* v, double* t) { return base_of(v)->xCurrentTime(base_of(v), t); }
int v_last_error(sqlite3_vfs* v, int k, char* o) { return base_of(v)->xGetLastError(base_of(v), k, o); }
int v_time64(sqlite3_vfs* v, sqlite3_int64* t) { return base_of(v)->xCurrentTimeInt64(base_of(v), t); }
int v_set_call(sqlite3_vfs* v, const char* n, sqlite3_syscall_ptr p) {
  return base_of(v)->xSetSystemCall(base_of(v), n, p);
}
sqlite3_syscall_ptr v_get_call(sqlite3_vfs* v, const char* n) { return base_of(v)->xGetSystemCall(base_of(v), n); }
const char* v_next_call(sqlite3_vfs* v, const char* n) { return base_of(v)->xNextSystemCall(base_of(v), n); }

struct Wrapper {
  std::string name;
  sqlite3_vfs vfs;
};

}  // namespace

const char* wal_buffer_vfs(const std::string& base_name) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Wrapper>> wrappers;  // by the base's name; never unregistered
  std::lock_guard<std::mutex> lock(mutex);
  sqlite3_vfs* base = sqlite3_vfs_find(base_name.empty() ? nullptr : base_name.c_str());
  if (!base) throw Error(ErrorCode::io, fmt::format("sqlite: no VFS named '{}'", base_name));
  if (std::strncmp(base->zName, kPrefix, std::strlen(kPrefix)) == 0) return base->zName;  // already one of ours
  auto& w = wrappers[base->zName];
  if (w) return w->name.c_str();
  auto made = std::make_unique<Wrapper>();
  made->name = std::string(kPrefix) + base->zName;
  sqlite3_vfs& v = made->vfs;
  v = sqlite3_vfs{};
  v.iVersion = base->iVersion < 3 ? base->iVersion : 3;
  v.szOsFile = static_cast<int>(kRealOffset) + base->szOsFile;
  v.mxPathname = base->mxPathname;
  v.zName = made->name.c_str();
  v.pAppData = base;
  v.xOpen = v_open;
  v.xDelete = base->xDelete ? v_delete : nullptr;
  v.xAccess = base->xAccess ? v_access : nullptr;
  v.xFullPathname = base->xFullPathname ? v_full : nullptr;
  v.xDlOpen = base->xDlOpen ? v_dl_open : nullptr;
  v.xDlError = base->xDlError ? v_dl_error : nullptr;
  v.xDlSym = base->xDlSym ? v_dl_sym : nullptr;
  v.xDlClose = base->xDlClose ? v_dl_close : nullptr;
  v.xRandomness = base->xRandomness ? v_random : nullptr;
  v.xSleep = base->xSleep ? v_sleep : nullptr;
  v.xCurrentTime = base->xCurrentTime ? v_time : nullptr;
  v.xGetLastError = base->xGetLastError ? v_last_error : nullptr;
  if (v.iVersion >= 2) v.xCurrentTimeInt64 = base->xCurrentTimeInt64 ? v_time64 : nullptr;
  if (v.iVersion >= 3) {
    v.xSetSystemCall = base->xSetSystemCall ? v_set_call : nullptr;
    v.xGetSystemCall = base->xGetSystemCall ? v_get_call : nullptr;
    v.xNextSystemCall = base->xNextSystemCall ? v_next_call : nullptr;
  }
  if (int rc = sqlite3_vfs_register(&v, 0); rc != SQLITE_OK)
    throw Error(ErrorCode::io,
                fmt::format("sqlite: cannot register the WAL buffer over '{}': {}", base->zName, sqlite3_errstr(rc)));
  w = std::move(made);
  return w->name.c_str();
}

}  // namespace sqlite
}  // namespace v1
}  // namespace agentrt
