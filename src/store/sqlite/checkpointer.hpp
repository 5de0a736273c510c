// The SQLite store's checkpointer (see below). Included by the store's constructor only.
#pragma once

#include <sqlite3.h>

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
struct SqliteStore::Checkpointer {
  Checkpointer(const std::string& path, const SqliteStoreOptions& o)
      : pages(o.wal_autocheckpoint), db(path, o.busy_timeout_ms, false, o.vfs) {
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

  void run() {
    name_this_thread("agentrt-ckpt");
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      cv.wait(lock, [&] { return due || stop; });
      if (stop) return;
      due = false;
      lock.unlock();
      {
        std::lock_guard<std::mutex> busy(running);
        sqlite3_wal_checkpoint_v2(db.get(), nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
      }
      lock.lock();
    }
  }

  const int pages;
  sqlite::Connection db;
  std::mutex mutex;
  std::condition_variable cv;
  bool due = false, stop = false;
  static constexpr int kRestartMarks = 4;
  int next_mark = 0;   // the WAL size (frames) that wakes the thread next (committing thread only)
  std::mutex running;  // held while a checkpoint runs (checkpoint() waits for it)
  std::thread thread;
};

}  // namespace v1
}  // namespace agentrt
