#include "store/sqlite_wal_vfs.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

// SQLite writes each WAL frame as two writes (the 24-byte frame header, then the page: walWriteOneFrame), so a
// commit of n pages costs 2n pwrite() calls. This VFS copies the appends of a transaction into a buffer and
// writes them with one call. Everything else is the default VFS's, untouched; only WAL files are buffered.
//
// When the frames must be in the file: sqlite3WalFrames writes the frames, the commit frame last (its header
// carries the database size, bytes 4-7, which are 0 in every other frame), then publishes the commit in the
// wal-index (walIndexAppend, then walIndexWriteHdr around a shm barrier), from where other connections read
// the frames from the file. So the write of the commit frame's page writes the buffer, inside that xWrite: the
// commit is in the file before it is published, and a failed write fails the commit (SQLite rolls it back)
// instead of being lost. Any other operation on the WAL file (a read of buffered bytes, sync, size, truncate,
// a write that is not an append, ...) writes the buffer first, so SQLite never sees the file without what it
// wrote.
//
// What may start a buffer: the WAL header (32 bytes at offset 0) or the header of a frame that is not a commit
// frame; a write contiguous with the buffer extends it. A commit frame's header never starts one, as it is
// not always followed by its page: at a commit that wrote a page twice, SQLite rewrites the frame headers'
// checksums in place (walRewriteChecksums), the commit frame's last, with nothing after it before the publish.
// Sector padding (synchronous=FULL on a device without powersafe overwrite) cuts writes at sync points inside
// frames, which this parsing does not follow: a WAL whose database lacks SQLITE_IOCAP_POWERSAFE_OVERWRITE (the
// flag SQLite itself reads to decide on padding, in sqlite3WalOpen) is not buffered.
//
// Failures. Only the connection holding the WAL write lock writes the WAL, past the last commit others can
// see, so the buffer may be written any time before that lock is released and never after (another writer
// may then append at the same offsets). SQLite releases it with xShmLock(UNLOCK) of lock 0 on the database
// file, or xShmUnmap, or by closing: the buffer is written there, and dropped if that fails. By then it can
// only hold frames of a transaction SQLite rolled back (a commit wrote its frames in its commit frame's
// xWrite), which nothing reads. Everywhere else a failed write keeps the data buffered and returns the error,
// and the next operation tries again: SQLite rolls the transaction back on an I/O error, and until it does,
// the transaction's reads of pages it spilled to the WAL must find them. The database file's xShmBarrier and
// xShmLock also write the buffer first, a second line of defence that finds it empty (the commit frame wrote
// it). A lock request returns a failure as its own error (not taken); xShmBarrier cannot return one, so the
// data stays buffered and the next WAL operation fails if the write still does, rather than let it vanish.
//
// Thread-safety: as SQLite requires of a VFS. A file is used by one connection at a time; the WAL buffer is
// touched only through its WAL file and that file's database file, which belong to the same connection. The
// counters are atomics.

namespace agentrt {
inline namespace v1 {

namespace {

constexpr const char* kVfsName = "agentrt-wal";
constexpr int kWalHeaderBytes = 32;    // at offset 0
constexpr int kFrameHeaderBytes = 24;  // bytes 4-7: the database size in pages after a commit frame, else 0
constexpr int kWalWriteLock = 0;       // the shm lock slot of WAL_WRITE_LOCK (fixed by the -shm file format)
// The buffer is written before an append would make it larger than this: the unix VFS writes at most 0x1ffff
// bytes per call (seekAndWrite masks the count to 17 bits; SQLite's own writes are at most a 64 KiB page), so
// a larger one would come out short (SQLITE_FULL). A commit of up to 31 pages of 4 KiB is still one write.
constexpr size_t kBufferCap = 0x1ffff;

std::atomic<uint64_t> g_sqlite_writes{0};
std::atomic<uint64_t> g_file_writes{0};

// Appends to a WAL file not written yet: bytes [offset, offset + bytes.size()).
struct WalBuffer {
  std::vector<unsigned char> bytes;
  sqlite3_int64 offset = 0;
  bool commit_pending = false;  // the last append was a commit frame's header: the next append is its page
};

// Our sqlite3_file: SQLite allocates szOsFile bytes; this struct, then the default VFS's file.
struct ShimFile {
  sqlite3_file base;                  // first: SQLite's sqlite3_file* is this struct's address
  sqlite3_io_methods methods;         // base.pMethods: the real file's methods that it has, wrapped
  sqlite3_file* real;                 // the default VFS's file
  ShimFile* wal;                      // a database file: its open WAL file when that buffers appends
  ShimFile* db;                       // a WAL file that buffers appends: its database file
  std::unique_ptr<WalBuffer> buffer;  // a WAL file that buffers appends, else null
  bool is_wal;                        // a WAL file (its writes are counted)
};
// libstdc++'s unique_ptr is standard-layout for gcc but not for clang (the fuzz build's), so the check is
// on the offset itself (offsetof of a non-standard-layout class is conditionally supported; both support it).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
static_assert(offsetof(ShimFile, base) == 0, "sqlite3_file must be at the address of ShimFile");
#pragma GCC diagnostic pop

constexpr size_t kRealOffset =
    (sizeof(ShimFile) + alignof(std::max_align_t) - 1) / alignof(std::max_align_t) * alignof(std::max_align_t);

sqlite3_vfs g_vfs;
const char* g_name = nullptr;
std::once_flag g_once;

ShimFile* shim(sqlite3_file* f) { return reinterpret_cast<ShimFile*>(f); }
sqlite3_vfs* real_vfs(sqlite3_vfs* v) { return static_cast<sqlite3_vfs*>(v->pAppData); }
const sqlite3_io_methods& real_methods(ShimFile* f) { return *f->real->pMethods; }

int write_through(ShimFile* f, const void* data, int amt, sqlite3_int64 offset) {
  g_file_writes.fetch_add(1, std::memory_order_relaxed);
  return real_methods(f).xWrite(f->real, data, amt, offset);
}

// Writes the buffer (one write); on failure it stays buffered, to be written by the next operation.
int flush(ShimFile* f) {
  WalBuffer* b = f->buffer.get();
  if (!b || b->bytes.empty()) return SQLITE_OK;
  int rc = write_through(f, b->bytes.data(), static_cast<int>(b->bytes.size()), b->offset);
  if (rc == SQLITE_OK) {
    b->bytes.clear();
    b->commit_pending = false;
  }
  return rc;
}

// Before the WAL write lock goes (or the file): what cannot be written now must never be (see the top).
int flush_or_drop(ShimFile* f) {
  int rc = flush(f);
  if (rc != SQLITE_OK) {
    f->buffer->bytes.clear();
    f->buffer->commit_pending = false;
  }
  return rc;
}

// False if there is no memory for the buffer (the write then goes through as it is).
bool append(WalBuffer& b, const unsigned char* p, size_t n) {
  try {
    b.bytes.reserve(kBufferCap);  // once: the buffer never grows past it
  } catch (const std::bad_alloc&) {
    return false;
  }
  b.bytes.insert(b.bytes.end(), p, p + n);
  return true;
}

int wal_write(ShimFile* f, const void* data, int amt, sqlite3_int64 offset) {
  WalBuffer& b = *f->buffer;
  const auto* p = static_cast<const unsigned char*>(data);
  const auto n = static_cast<size_t>(amt);
  const bool frame_header = amt == kFrameHeaderBytes;
  const bool commit_header = frame_header && (p[4] | p[5] | p[6] | p[7]) != 0;
  if (!b.bytes.empty()) {
    // (The capacity is reserved already: appending to a non-empty buffer allocates nothing.)
    if (offset == b.offset + static_cast<sqlite3_int64>(b.bytes.size()) && b.bytes.size() + n <= kBufferCap &&
        append(b, p, n)) {
      if (b.commit_pending) return flush(f);  // the commit frame is complete: in the file before it is published
      b.commit_pending = commit_header;
      return SQLITE_OK;
    }
    if (int rc = flush(f); rc != SQLITE_OK) return rc;
  }
  if (((amt == kWalHeaderBytes && offset == 0) || (frame_header && !commit_header)) && append(b, p, n)) {
    b.offset = offset;
    return SQLITE_OK;
  }
  return write_through(f, data, amt, offset);
}

// The file whose buffer an operation on f must write first: f's own (a WAL file), or its WAL's (a database).
ShimFile* buffered(ShimFile* f) {
  if (f->buffer) return f;
  if (f->wal && f->wal->buffer) return f->wal;
  return nullptr;
}

int x_close(sqlite3_file* file) {
  ShimFile* f = shim(file);
  int flushed = SQLITE_OK;
  if (f->buffer) flushed = flush_or_drop(f);
  if (f->db) f->db->wal = nullptr;
  if (f->wal) {
    // The database closes before its WAL (SQLite closes them the other way round): its locks go with it, so
    // the WAL is not written through a buffer any more.
    flushed = flush_or_drop(f->wal);
    f->wal->buffer.reset();
    f->wal->db = nullptr;
  }
  int rc = real_methods(f).xClose ? real_methods(f).xClose(f->real) : SQLITE_OK;
  std::destroy_at(f);
  return rc != SQLITE_OK ? rc : flushed;
}

int x_read(sqlite3_file* file, void* data, int amt, sqlite3_int64 offset) {
  ShimFile* f = shim(file);
  // Only a read of what is buffered needs it written: reads of older frames (a transaction that spilled
  // pages reads others back) leave the appends together.
  const WalBuffer* b = f->buffer.get();
  if (b && !b->bytes.empty() && offset + amt > b->offset &&
      offset < b->offset + static_cast<sqlite3_int64>(b->bytes.size())) {
    if (int rc = flush(f); rc != SQLITE_OK) return rc;
  }
  return real_methods(f).xRead(f->real, data, amt, offset);
}

int x_write(sqlite3_file* file, const void* data, int amt, sqlite3_int64 offset) {
  ShimFile* f = shim(file);
  if (!f->is_wal) return real_methods(f).xWrite(f->real, data, amt, offset);
  g_sqlite_writes.fetch_add(1, std::memory_order_relaxed);
  if (f->buffer && amt > 0) return wal_write(f, data, amt, offset);
  return write_through(f, data, amt, offset);
}

int x_truncate(sqlite3_file* file, sqlite3_int64 size) {
  ShimFile* f = shim(file);
  if (int rc = flush(f); rc != SQLITE_OK) return rc;
  return real_methods(f).xTruncate(f->real, size);
}

int x_sync(sqlite3_file* file, int flags) {
  ShimFile* f = shim(file);
  if (int rc = flush(f); rc != SQLITE_OK) return rc;
  return real_methods(f).xSync(f->real, flags);
}

int x_file_size(sqlite3_file* file, sqlite3_int64* size) {
  ShimFile* f = shim(file);
  if (int rc = flush(f); rc != SQLITE_OK) return rc;
  return real_methods(f).xFileSize(f->real, size);
}

int x_lock(sqlite3_file* file, int level) {
  ShimFile* f = shim(file);
  if (int rc = flush(f); rc != SQLITE_OK) return rc;
  return real_methods(f).xLock(f->real, level);
}

int x_unlock(sqlite3_file* file, int level) {
  ShimFile* f = shim(file);
  int flushed = flush(f);  // a lock is released even if the write failed
  int rc = real_methods(f).xUnlock(f->real, level);
  return rc != SQLITE_OK ? rc : flushed;
}

int x_check_reserved_lock(sqlite3_file* file, int* out) {
  ShimFile* f = shim(file);
  if (int rc = flush(f); rc != SQLITE_OK) return rc;
  return real_methods(f).xCheckReservedLock(f->real, out);
}

int x_file_control(sqlite3_file* file, int op, void* arg) {
  ShimFile* f = shim(file);
  if (int rc = flush(f); rc != SQLITE_OK) return rc;
  return real_methods(f).xFileControl(f->real, op, arg);
}

int x_sector_size(sqlite3_file* file) {
  ShimFile* f = shim(file);
  return real_methods(f).xSectorSize(f->real);
}

int x_device_characteristics(sqlite3_file* file) {
  ShimFile* f = shim(file);
  return real_methods(f).xDeviceCharacteristics(f->real);
}

int x_shm_map(sqlite3_file* file, int region, int size, int extend, void volatile** out) {
  ShimFile* f = shim(file);
  if (int rc = flush(f); rc != SQLITE_OK) return rc;
  return real_methods(f).xShmMap(f->real, region, size, extend, out);
}

int x_shm_lock(sqlite3_file* file, int offset, int n, int flags) {
  ShimFile* f = shim(file);
  if (ShimFile* w = buffered(f)) {
    if ((flags & SQLITE_SHM_UNLOCK) == 0) {
      if (int rc = flush(w); rc != SQLITE_OK) return rc;  // not locked: the caller fails
    } else if (offset <= kWalWriteLock && kWalWriteLock < offset + n) {
      flush_or_drop(w);  // the write lock goes: nothing of ours may be written after it
    } else {
      flush(w);  // an unlock reports nothing; what failed is written (or fails) with the next operation
    }
  }
  return real_methods(f).xShmLock(f->real, offset, n, flags);
}

void x_shm_barrier(sqlite3_file* file) {
  ShimFile* f = shim(file);
  if (ShimFile* w = buffered(f)) flush(w);  // cannot report: kept for the next operation (see the top)
  real_methods(f).xShmBarrier(f->real);
}

int x_shm_unmap(sqlite3_file* file, int delete_flag) {
  ShimFile* f = shim(file);
  if (ShimFile* w = buffered(f)) flush_or_drop(w);  // every shm lock goes with the mapping
  return real_methods(f).xShmUnmap(f->real, delete_flag);
}

int x_fetch(sqlite3_file* file, sqlite3_int64 offset, int amt, void** out) {
  ShimFile* f = shim(file);
  if (int rc = flush(f); rc != SQLITE_OK) return rc;
  return real_methods(f).xFetch(f->real, offset, amt, out);
}

int x_unfetch(sqlite3_file* file, sqlite3_int64 offset, void* p) {
  ShimFile* f = shim(file);
  return real_methods(f).xUnfetch(f->real, offset, p);
}

// Our methods for the ones the real file has (a missing one means something to SQLite, e.g. no xShmMap = no
// shared memory), at no higher a version than the real file's.
void wrap_methods(ShimFile* f) {
  const sqlite3_io_methods& r = real_methods(f);
  sqlite3_io_methods& m = f->methods;
  m = {};
  m.iVersion = std::min(r.iVersion, 3);
  m.xClose = x_close;
  m.xRead = r.xRead ? x_read : nullptr;
  m.xWrite = r.xWrite ? x_write : nullptr;
  m.xTruncate = r.xTruncate ? x_truncate : nullptr;
  m.xSync = r.xSync ? x_sync : nullptr;
  m.xFileSize = r.xFileSize ? x_file_size : nullptr;
  m.xLock = r.xLock ? x_lock : nullptr;
  m.xUnlock = r.xUnlock ? x_unlock : nullptr;
  m.xCheckReservedLock = r.xCheckReservedLock ? x_check_reserved_lock : nullptr;
  m.xFileControl = r.xFileControl ? x_file_control : nullptr;
  m.xSectorSize = r.xSectorSize ? x_sector_size : nullptr;
  m.xDeviceCharacteristics = r.xDeviceCharacteristics ? x_device_characteristics : nullptr;
  if (m.iVersion >= 2) {
    m.xShmMap = r.xShmMap ? x_shm_map : nullptr;
    m.xShmLock = r.xShmLock ? x_shm_lock : nullptr;
    m.xShmBarrier = r.xShmBarrier ? x_shm_barrier : nullptr;
    m.xShmUnmap = r.xShmUnmap ? x_shm_unmap : nullptr;
  }
  if (m.iVersion >= 3) {
    m.xFetch = r.xFetch ? x_fetch : nullptr;
    m.xUnfetch = r.xUnfetch ? x_unfetch : nullptr;
  }
}

// A WAL file buffers its appends when it can flush before SQLite releases the WAL write lock (it knows its
// database file, ours) and when no sync point falls inside a frame (powersafe overwrite: no sector padding;
// SQLite reads the same flag from the same file right after opening the WAL, in sqlite3WalOpen).
void link_wal(ShimFile* f, const char* name) {
  sqlite3_file* dbf = sqlite3_database_file_object(name);
  if (!dbf || !dbf->pMethods || dbf->pMethods->xClose != x_close) return;
  ShimFile* db = shim(dbf);
  const sqlite3_io_methods& dm = real_methods(db);
  if (db->wal || dm.iVersion < 2 || !dm.xShmLock || !dm.xDeviceCharacteristics) return;
  if ((dm.xDeviceCharacteristics(db->real) & SQLITE_IOCAP_POWERSAFE_OVERWRITE) == 0) return;
  f->buffer = std::make_unique<WalBuffer>();
  f->db = db;
  db->wal = f;
}

int x_open(sqlite3_vfs* vfs, const char* name, sqlite3_file* file, int flags, int* out_flags) {
  sqlite3_vfs* rv = real_vfs(vfs);
  ShimFile* f = std::construct_at(reinterpret_cast<ShimFile*>(file));
  f->real = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(file) + kRealOffset);
  std::memset(f->real, 0, static_cast<size_t>(rv->szOsFile));
  int rc = rv->xOpen(rv, name, f->real, flags, out_flags);
  if (rc != SQLITE_OK || !f->real->pMethods) {
    // SQLite closes a file whose open failed only if pMethods is set; ours is not, so close the real one here.
    if (f->real->pMethods && f->real->pMethods->xClose) f->real->pMethods->xClose(f->real);
    std::destroy_at(f);
    file->pMethods = nullptr;
    return rc != SQLITE_OK ? rc : SQLITE_CANTOPEN;
  }
  wrap_methods(f);
  f->is_wal = (flags & SQLITE_OPEN_WAL) != 0;
  if (f->is_wal && name) {
    try {
      link_wal(f, name);
    } catch (const std::bad_alloc&) {
      f->buffer.reset();  // written through, as by the default VFS
    }
  }
  file->pMethods = &f->methods;
  return SQLITE_OK;
}

void register_vfs() {
  if (sqlite3_vfs_find(kVfsName)) {  // another copy of this library registered it: the same VFS
    g_name = kVfsName;
    return;
  }
  // Only over SQLite's own unix VFS, whose writes are what this file relies on (one pwrite per xWrite, up to
  // kBufferCap bytes). Another default (a host's, e.g. one that encrypts page by page) may expect SQLite's
  // write shapes: the store then opens with it, as it is.
  sqlite3_vfs* dflt = sqlite3_vfs_find(nullptr);
  if (!dflt || !dflt->xOpen || !dflt->zName || std::strncmp(dflt->zName, "unix", 4) != 0) return;
  sqlite3_vfs& v = g_vfs;
  v = {};
  v.iVersion = std::min(dflt->iVersion, 3);
  v.szOsFile = static_cast<int>(kRealOffset) + dflt->szOsFile;
  v.mxPathname = dflt->mxPathname;
  v.zName = kVfsName;
  v.pAppData = dflt;
  v.xOpen = x_open;
  // Everything else is the default VFS's, called with its own sqlite3_vfs (it may keep state in pAppData).
  if (dflt->xDelete)
    v.xDelete = [](sqlite3_vfs* s, const char* z, int sync) { return real_vfs(s)->xDelete(real_vfs(s), z, sync); };
  if (dflt->xAccess)
    v.xAccess = [](sqlite3_vfs* s, const char* z, int flags, int* out) {
      return real_vfs(s)->xAccess(real_vfs(s), z, flags, out);
    };
  if (dflt->xFullPathname)
    v.xFullPathname = [](sqlite3_vfs* s, const char* z, int n, char* out) {
      return real_vfs(s)->xFullPathname(real_vfs(s), z, n, out);
    };
  if (dflt->xDlOpen) v.xDlOpen = [](sqlite3_vfs* s, const char* z) { return real_vfs(s)->xDlOpen(real_vfs(s), z); };
  if (dflt->xDlError) v.xDlError = [](sqlite3_vfs* s, int n, char* out) { real_vfs(s)->xDlError(real_vfs(s), n, out); };
  if (dflt->xDlSym)
    v.xDlSym = [](sqlite3_vfs* s, void* h, const char* z) -> void (*)(void) {
      return real_vfs(s)->xDlSym(real_vfs(s), h, z);
    };
  if (dflt->xDlClose) v.xDlClose = [](sqlite3_vfs* s, void* h) { real_vfs(s)->xDlClose(real_vfs(s), h); };
  if (dflt->xRandomness)
    v.xRandomness = [](sqlite3_vfs* s, int n, char* out) { return real_vfs(s)->xRandomness(real_vfs(s), n, out); };
  if (dflt->xSleep) v.xSleep = [](sqlite3_vfs* s, int us) { return real_vfs(s)->xSleep(real_vfs(s), us); };
  if (dflt->xCurrentTime)
    v.xCurrentTime = [](sqlite3_vfs* s, double* out) { return real_vfs(s)->xCurrentTime(real_vfs(s), out); };
  if (dflt->xGetLastError)
    v.xGetLastError = [](sqlite3_vfs* s, int n, char* out) { return real_vfs(s)->xGetLastError(real_vfs(s), n, out); };
  if (v.iVersion >= 2 && dflt->xCurrentTimeInt64)
    v.xCurrentTimeInt64 = [](sqlite3_vfs* s, sqlite3_int64* out) {
      return real_vfs(s)->xCurrentTimeInt64(real_vfs(s), out);
    };
  if (v.iVersion >= 3) {
    if (dflt->xSetSystemCall)
      v.xSetSystemCall = [](sqlite3_vfs* s, const char* z, sqlite3_syscall_ptr p) {
        return real_vfs(s)->xSetSystemCall(real_vfs(s), z, p);
      };
    if (dflt->xGetSystemCall)
      v.xGetSystemCall = [](sqlite3_vfs* s, const char* z) { return real_vfs(s)->xGetSystemCall(real_vfs(s), z); };
    if (dflt->xNextSystemCall)
      v.xNextSystemCall = [](sqlite3_vfs* s, const char* z) { return real_vfs(s)->xNextSystemCall(real_vfs(s), z); };
  }
  if (sqlite3_vfs_register(&v, 0) == SQLITE_OK) g_name = kVfsName;
}

}  // namespace

const char* wal_vfs_name() {
  std::call_once(g_once, register_vfs);
  return g_name;
}

WalWriteCounts wal_write_counts() {
  return {g_sqlite_writes.load(std::memory_order_relaxed), g_file_writes.load(std::memory_order_relaxed)};
}

}  // namespace v1
}  // namespace agentrt
