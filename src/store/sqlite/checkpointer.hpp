// The SQLite store's checkpointer (see below). Included by the store's constructor only.
#pragma once

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "store/sqlite/connection.hpp"
#include "store/sqlite_store.hpp"
#include "util/thread_name.hpp"

namespace agentrt {
inline namespace v1 {

// The WAL's automatic checkpoint, on a thread and a connection of its own: the commit that fills the WAL to
// the mark only wakes it, instead of writing the pages back and waiting for the fsyncs itself. Same mark,
// same kind of checkpoint (PASSIVE, as SQLite's own automatic one), same durability: the checkpointing
// connection has the store's synchronous level, so it fsyncs the WAL before it writes pages back and the
// database after.
//
// Starting the WAL over is the part that cannot be taken off the committing thread. SQLite starts it over
// only when a write transaction finds it wholly written back; while commits go on during a checkpoint it
// never is, so some commit has to write back the last few frames itself, fsyncs included (each fsync costs
// milliseconds on common disks: it flushes the device cache even for a file with nothing dirty). Doing that
// after every checkpoint was one stall of two fsyncs per mark. The thread therefore checkpoints at every
// mark (the database file is as up to date as with SQLite's own automatic checkpoint), and a commit starts
// the WAL over only once it has grown to kRestartMarks marks, while the thread is idle, so the WAL file
// stays under kRestartMarks x the mark (a little more while the thread is still busy there; at twice that
// the commit waits for the thread). With idle moments between commits (any real load) a write finds the WAL
// wholly written back after a thread's checkpoint and SQLite starts it over by itself, without a stall.
//
// With synchronous=NORMAL the WAL is synced only by the checkpoint, before it writes pages back: all the WAL
// written since the last one (up to kRestartMarks marks, megabytes) went to the disk at once, and the
// kernel's completion of those writes ran as one block softirq of ~0.2 ms on whichever core took the
// interrupt, inside whatever thread ran there (a history read took 30x its time). So the thread also starts
// the WAL's writeback each kWritebackFrames frames (sync_file_range, SYNC_FILE_RANGE_WRITE: it does not wait,
// and it writes nothing the checkpoint's sync would not), as PostgreSQL's wal_writer_flush_after does: the
// checkpoint's sync finds little left to write, and the completions come in small pieces. Durability is
// unchanged: the checkpoint still syncs the WAL before it writes back. Linux only; elsewhere a no-op.
struct SqliteStore::Checkpointer {
  Checkpointer(const std::string& path, const SqliteStoreOptions& o)
      : pages(o.wal_autocheckpoint),
        wal_path(path + "-wal"),
        writeback(o.synchronous == "NORMAL" && o.vfs.empty()),
        db(path, o.busy_timeout_ms, false, o.vfs) {
    db.exec(fmt::format("PRAGMA synchronous={}", o.synchronous).c_str());
    thread = std::thread([this] { run(); });
  }
  ~Checkpointer() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
    }
    cv.notify_one();
    thread.join();
  }
  // After each commit, on the committing thread (under the store's lock), with the WAL's frame count.
  static int wal_hook(void* self, sqlite3* db, const char* name, int frames) {
    auto* c = static_cast<Checkpointer*>(self);
    if (c->writeback) c->note_frames(frames);
    if (frames < c->pages) {  // the WAL was started over: a new round
      c->next_mark = c->pages;
      return SQLITE_OK;
    }
    if (frames >= kRestartMarks * c->pages) {
      std::unique_lock<std::mutex> busy(c->running, std::try_to_lock);
      if (!busy.owns_lock() && frames >= 2 * kRestartMarks * c->pages) busy.lock();
      if (busy.owns_lock()) {
        // Writes back what the thread's checkpoints left (little); the next commit starts the WAL over.
        sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
        return SQLITE_OK;
      }
    }
    if (frames >= c->next_mark) {  // past the next mark: the thread writes the pages back, commits go on
      c->next_mark = (frames / c->pages + 1) * c->pages;
      {
        std::lock_guard<std::mutex> lock(c->mutex);
        c->due = true;
      }
      c->cv.notify_one();
    }
    return SQLITE_OK;
  }

  // Wakes the thread to start the WAL's writeback each kWritebackFrames frames (committing thread).
  void note_frames(int frames) {
    if (frames < next_writeback - kWritebackFrames) next_writeback = kWritebackFrames;  // the WAL was started over
    if (frames < next_writeback) return;
    next_writeback = (frames / kWritebackFrames + 1) * kWritebackFrames;
    {
      std::lock_guard<std::mutex> lock(mutex);
      writeback_due = true;
    }
    cv.notify_one();
  }

  // Starts the writeback of the WAL's dirty pages without waiting for it (see above). The descriptor is the
  // thread's own: SQLite holds no POSIX lock on the WAL file (its locks are on the database and -shm files, which
  // closing a descriptor of theirs would release for the whole process: they are never opened here).
  void start_writeback() {
#ifdef __linux__
    const int fd = ::open(wal_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;  // no WAL (yet): nothing to write
    if (::sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE) == 0) writebacks.fetch_add(1, std::memory_order_relaxed);
    ::close(fd);
#endif
  }

  void run() {
    name_this_thread("agentrt-ckpt");
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      cv.wait(lock, [&] { return due || writeback_due || stop; });
      if (stop) return;
      const bool checkpoint = due, write = writeback_due;
      due = writeback_due = false;
      lock.unlock();
      if (write) start_writeback();
      if (checkpoint) {
        std::lock_guard<std::mutex> busy(running);
        sqlite3_wal_checkpoint_v2(db.get(), nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
      }
      lock.lock();
    }
  }

  const int pages;
  const std::string wal_path;
  const bool writeback;  // synchronous=NORMAL on SQLite's own VFS: the WAL is synced only by checkpoints
  sqlite::Connection db;
  std::mutex mutex;
  std::condition_variable cv;
  bool due = false, writeback_due = false, stop = false;
  static constexpr int kRestartMarks = 4;
  static constexpr int kWritebackFrames = 256;  // ~1 MiB of WAL with 4 KiB pages
  // The WAL sizes (frames) that wake the thread next for a checkpoint and for a writeback (committing thread only).
  int next_mark = 0;
  int next_writeback = kWritebackFrames;
  std::mutex running;                  // held while a checkpoint runs (checkpoint() waits for it)
  std::atomic<int64_t> writebacks{0};  // writebacks started (tests, stats)
  std::thread thread;
};

}  // namespace v1
}  // namespace agentrt
