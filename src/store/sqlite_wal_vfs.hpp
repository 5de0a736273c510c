// The "agentrt-wal" SQLite VFS: the default VFS, except that the frames SQLite appends to a WAL file in one
// transaction reach the file as one write instead of two per frame (frame header, then page).
#pragma once

#include <cstdint>

namespace agentrt {
inline namespace v1 {

// Registers the VFS once per process (thread-safe) and returns its name for sqlite3_open_v2, or nullptr if it
// could not be registered (then open with the default VFS). It never becomes the process's default VFS: a
// host may use SQLite itself.
const char* wal_vfs_name();

// What the VFS did to WAL files so far in this process (all connections; tests and benchmarks read it).
struct WalWriteCounts {
  uint64_t sqlite_writes = 0;  // writes SQLite asked for (two per frame, one per WAL header)
  uint64_t file_writes = 0;    // writes the default VFS did for them (one per commit, usually)
};
WalWriteCounts wal_write_counts();

}  // namespace v1
}  // namespace agentrt
