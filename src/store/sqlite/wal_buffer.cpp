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

// What SQLite allocates for a file of ours (a database or its WAL): this, then the wrapped VFS's file at
// kRealOffset.
struct File {
  sqlite3_file base;  // pMethods: kWalMethods or one of kDbMethods
  sqlite3_file* real;
  File* peer;  // a WAL file's database file and the other way round, while both are open
  // A WAL file's frames not yet written: [start, start + len) of the file.
  char* held;
  size_t len;
  size_t cap;
  sqlite3_int64 start;
  sqlite3_int64 end;  // where the next piece of the frames being taken in goes
  bool want_page;     // the last frame taken in is its header only
  bool commit;        // the last header taken in is a commit frame's
};
constexpr size_t kRealOffset = (sizeof(File) + 15) & ~size_t{15};

File* of(sqlite3_file* f) { return reinterpret_cast<File*>(f); }
sqlite3_file* real_of(sqlite3_file* f) { return of(f)->real; }
sqlite3_vfs* base_of(sqlite3_vfs* vfs) { return static_cast<sqlite3_vfs*>(vfs->pAppData); }

// What is held belongs to a transaction that did not commit (a commit writes its frames in its commit frame's
// write): thrown away, never written, once the WAL's write lock is going or gone — another writer may then
// put its frames where these would go.
void drop_held(File* w) {
  w->len = 0;
  w->want_page = false;
}

// Writes what is held, in one write. Nothing is held afterwards, whatever the write answered.
int write_held(File* w) {
  if (w->len == 0) return SQLITE_OK;
  int rc = w->real->pMethods->xWrite(w->real, w->held, static_cast<int>(w->len), w->start);
  w->len = 0;
  return rc;
}

// Everything but the next piece of the frames: what is held goes first, in the order SQLite wrote it.
int write_held_first(File* w) {
  w->want_page = false;
  return write_held(w);
}

bool hold(File* w, const void* data, int amt, sqlite3_int64 off) {
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

bool is_commit_header(const void* data) {
  const auto* h = static_cast<const unsigned char*>(data);
  return (h[4] | h[5] | h[6] | h[7]) != 0;  // the database's size after a commit, else 0
}

int x_write(sqlite3_file* f, const void* data, int amt, sqlite3_int64 off) {
  File* w = of(f);
  // A frame's header after the frames held, or one that starts holding. A commit frame's header never starts:
  // it is not always followed by its page. At a commit that changed pages it had spilled to the WAL, SQLite
  // rewrites the checksums of the transaction's frame headers in place, each after reading its frame, the
  // commit frame's last, and publishes the commit right after that write: held, it would reach the file only
  // with the next operation on the WAL, and a process ending first would leave a commit that recovery cannot
  // find. (A one-frame commit is therefore two writes, as without the buffer.)
  const bool header =
      w->peer && !w->want_page && amt == kFrameHeader && (w->len > 0 ? off == w->end : !is_commit_header(data));
  const bool page = w->want_page && off == w->end && amt > 0 && static_cast<size_t>(amt) <= kMaxWrite;
  if (header || page) {
    if (w->len + static_cast<size_t>(amt) > kMaxWrite) {
      if (int rc = write_held(w)) {
        w->want_page = false;
        return rc;
      }
    }
    if (hold(w, data, amt, off)) {
      w->want_page = header;
      if (header) {
        w->commit = is_commit_header(data);
        return SQLITE_OK;
      }
      return w->commit ? write_held(w) : SQLITE_OK;
    }
  }
  if (int rc = write_held_first(w)) return rc;  // not the next piece, or no memory to hold it
  return w->real->pMethods->xWrite(w->real, data, amt, off);
}

int x_close(sqlite3_file* f) {
  File* w = of(f);
  drop_held(w);  // a WAL is closed outside any write transaction
  if (w->peer) w->peer->peer = nullptr;
  int rc = w->real->pMethods ? w->real->pMethods->xClose(w->real) : SQLITE_OK;
  std::free(w->held);
  w->held = nullptr;
  w->cap = 0;
  return rc;
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
const sqlite3_io_methods kWalMethods = {1,           x_close, x_read,   x_write,          x_truncate,     x_sync,
                                        x_file_size, x_lock,  x_unlock, x_check_reserved, x_file_control, x_sector_size,
                                        x_device,    nullptr, nullptr,  nullptr,          nullptr,        nullptr,
                                        nullptr};

// The database file: the wrapped VFS's, but for where the WAL's write lock is released.
int d_close(sqlite3_file* f) {
  File* d = of(f);
  if (d->peer) {
    drop_held(d->peer);
    d->peer->peer = nullptr;
  }
  return d->real->pMethods ? d->real->pMethods->xClose(d->real) : SQLITE_OK;
}
int d_read(sqlite3_file* f, void* buf, int amt, sqlite3_int64 off) {
  return real_of(f)->pMethods->xRead(real_of(f), buf, amt, off);
}
int d_write(sqlite3_file* f, const void* buf, int amt, sqlite3_int64 off) {
  return real_of(f)->pMethods->xWrite(real_of(f), buf, amt, off);
}
int d_truncate(sqlite3_file* f, sqlite3_int64 size) { return real_of(f)->pMethods->xTruncate(real_of(f), size); }
int d_sync(sqlite3_file* f, int flags) { return real_of(f)->pMethods->xSync(real_of(f), flags); }
int d_file_size(sqlite3_file* f, sqlite3_int64* size) { return real_of(f)->pMethods->xFileSize(real_of(f), size); }
int d_file_control(sqlite3_file* f, int op, void* arg) {
  return real_of(f)->pMethods->xFileControl(real_of(f), op, arg);
}
int d_shm_map(sqlite3_file* f, int page, int size, int extend, void volatile** out) {
  return real_of(f)->pMethods->xShmMap(real_of(f), page, size, extend, out);
}
// SQLite's WAL_WRITE_LOCK: slot 0 of the shared memory's locks (the -shm file format).
int d_shm_lock(sqlite3_file* f, int offset, int n, int flags) {
  File* d = of(f);
  if ((flags & SQLITE_SHM_UNLOCK) && offset == 0 && n > 0 && d->peer) drop_held(d->peer);
  return d->real->pMethods->xShmLock(d->real, offset, n, flags);
}
void d_shm_barrier(sqlite3_file* f) { real_of(f)->pMethods->xShmBarrier(real_of(f)); }
int d_shm_unmap(sqlite3_file* f, int del) {
  if (of(f)->peer) drop_held(of(f)->peer);
  return real_of(f)->pMethods->xShmUnmap(real_of(f), del);
}
int d_fetch(sqlite3_file* f, sqlite3_int64 off, int amt, void** out) {
  return real_of(f)->pMethods->xFetch(real_of(f), off, amt, out);
}
int d_unfetch(sqlite3_file* f, sqlite3_int64 off, void* p) {
  return real_of(f)->pMethods->xUnfetch(real_of(f), off, p);
}

// By the version of the wrapped file's methods (1: no shared memory, 2: no memory-mapped reads).
constexpr sqlite3_io_methods db_methods(int v) {
  return {v,
          d_close,
          d_read,
          d_write,
          d_truncate,
          d_sync,
          d_file_size,
          x_lock,
          x_unlock,
          x_check_reserved,
          d_file_control,
          x_sector_size,
          x_device,
          v >= 2 ? d_shm_map : nullptr,
          v >= 2 ? d_shm_lock : nullptr,
          v >= 2 ? d_shm_barrier : nullptr,
          v >= 2 ? d_shm_unmap : nullptr,
          v >= 3 ? d_fetch : nullptr,
          v >= 3 ? d_unfetch : nullptr};
}
constexpr sqlite3_io_methods kDbMethods[3] = {db_methods(1), db_methods(2), db_methods(3)};

bool is_our_db(const sqlite3_file* f) {
  if (!f) return false;
  for (const auto& m : kDbMethods)
    if (f->pMethods == &m) return true;
  return false;
}

int v_open(sqlite3_vfs* vfs, sqlite3_filename name, sqlite3_file* file, int flags, int* out_flags) {
  sqlite3_vfs* base = base_of(vfs);
  const bool wal = flags & SQLITE_OPEN_WAL, db = flags & SQLITE_OPEN_MAIN_DB;
  if (!wal && !db) return base->xOpen(base, name, file, flags, out_flags);  // the base's own
  File* f = of(file);
  std::memset(f, 0, sizeof *f);
  f->real = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(file) + kRealOffset);
  int rc = base->xOpen(base, name, f->real, flags, out_flags);
  if (rc != SQLITE_OK) return rc;
  if (db) {
    const int v = f->real->pMethods->iVersion;
    f->base.pMethods = &kDbMethods[(v < 1 ? 1 : v > 3 ? 3 : v) - 1];
    return rc;
  }
  f->base.pMethods = &kWalMethods;
  // Frames are held only where the lock that ends their transaction can be seen: with the database's file.
  sqlite3_file* main = name ? sqlite3_database_file_object(name) : nullptr;
  if (is_our_db(main) && !of(main)->peer) {
    f->peer = of(main);
    of(main)->peer = f;
  }
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
