// The WAL write buffer: a SQLite VFS over another that writes a transaction's WAL frames in one write.
//
// SQLite appends a commit to the WAL one frame at a time, each as two writes (its 24-byte header, then the page):
// the 17-20 frames of a W2 commit were 35-40 pwrite calls, a fifth of the run thread's time on this VM. Over the VFS it
// wraps, this one keeps a WAL file's consecutive frames in memory and writes them as one pwrite (a commit of over 128
// KiB in pieces of up to that) when the commit frame (a frame whose header carries the database size) is complete,
// returning that write's error as the commit frame's: SQLite then fails the commit, whose frames it has not made
// visible. Frames reach the file before SQLite publishes them in the WAL index (it does so only after the commit
// frame's write returns), so other connections and processes read the same file as without it, and a commit that
// returned is in the OS's cache as before: a process that dies after it loses nothing. Durability is SQLite's own
// (synchronous NORMAL or FULL syncs the same writes).
//
// What is held and when it goes (each rule has a test in tests/store/test_sqlite_durability.cpp):
//  - anything else on the WAL file (a read, a sync, its size, a truncate, a write that is not the next frame)
//    first writes what is held, in SQLite's order;
//  - a commit frame's header never starts holding: after a commit that changed pages it had spilled to the WAL,
//    SQLite rewrites its frames' checksums in place, the commit frame's header last, and publishes the commit
//    right after;
//  - frames still held when the WAL's write lock is released (xShmLock on the database file) belong to a
//    transaction that did not commit: they are dropped, never written, as another writer may then put its
//    frames where they would go. So the database file goes through this VFS too (its methods the wrapped
//    VFS's, but for that lock), and a WAL whose database file is not ours is not held at all.
// Other files (journals, temporary files) are the wrapped VFS's own.
#pragma once

#include <string>

namespace agentrt {
inline namespace v1 {
namespace sqlite {

// The name of the buffering VFS over `base` ("": SQLite's default), registered on first use (never as the
// default). Thread-safe. Error(io) when there is no VFS named `base`.
const char* wal_buffer_vfs(const std::string& base);

}  // namespace sqlite
}  // namespace v1
}  // namespace agentrt
