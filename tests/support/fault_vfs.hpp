// Test support: a SQLite VFS over the unix VFS that injects storage faults, in the style of SQLite's own crash
// tests. It counts every read, write (and truncate) and sync of the files opened through it, and can
//  - fail the Nth I/O of a kind once (or every write while "the disk is full") with an SQLite error code,
//    writing nothing;
//  - "crash" the process after the Nth I/O: every later I/O fails without touching the files, as if the
//    process had been killed at that instant (what it wrote is in the OS's cache and survives);
//  - simulate a power loss on top of a crash: every write since its file's last sync is undone.
// ObjectStore operations can be counted and failed with the same counters (FaultyObjects).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agentrt/storage.hpp"

namespace agentrt::testing {

enum class IoKind { read, write, sync };

// Process-wide, as a VFS is. Thread-safe. One test at a time arms it (reset() between uses).
class FaultVfs {
 public:
  static constexpr const char* kName = "agentrt-fault";
  static FaultVfs& instance();  // registers the VFS (never as the default) on first use

  void reset();  // counters to zero, nothing armed, no crash, no undo log
  // The nth I/O of `kind` from now (1-based) fails once with `sqlite_error` (SQLITE_FULL, SQLITE_IOERR_...).
  void fail_nth(IoKind kind, int64_t n, int sqlite_error);
  // While set, every write and sync fails with SQLITE_FULL (a full disk), reads still work.
  void set_disk_full(bool full);
  // After the nth I/O of any kind from now (1-based), the process is dead: every later I/O fails, touching
  // nothing. 0 = never.
  void crash_after(int64_t n);
  // Keeps the undo log that power_loss() needs (reads each region before it is overwritten).
  void track_unsynced(bool on);
  // After a crash and once every connection is closed: undoes every write made since its file's last sync.
  void power_loss();

  bool crashed() const { return crashed_.load(); }
  bool fault_fired() const { return fired_.load(); }
  int64_t count(IoKind k) const { return counts_[static_cast<int>(k)].load(); }
  int64_t total() const { return total_.load(); }

  // The hooks: what the VFS (and FaultyObjects) call before an I/O. Returns the SQLite error to answer with
  // instead of doing it, or 0 to go on.
  int before_io(IoKind kind);
  // Undo log (track_unsynced): the region [offset, offset+len) of `path` is about to be overwritten, or the
  // file truncated to `offset` (len < 0).
  void note_write(const std::string& path, int64_t offset, int64_t len, int64_t size_before,
                  const std::string& old_bytes);
  void note_sync(const std::string& path);
  bool tracking() const { return tracking_.load(); }

 private:
  FaultVfs() = default;
  std::atomic<int64_t> counts_[3]{};
  std::atomic<int64_t> total_{0};
  std::atomic<bool> crashed_{false}, fired_{false}, disk_full_{false}, tracking_{false};
  std::mutex mutex_;
  IoKind fail_kind_ = IoKind::write;
  int64_t fail_at_ = 0;  // count of fail_kind_ that fails; 0 = none
  int fail_error_ = 0;
  int64_t crash_at_ = 0;  // total that is the last I/O done; 0 = never
  struct Undo {
    int64_t offset;
    int64_t size_before;  // the file's size before the write
    std::string old_bytes;
  };
  std::map<std::string, std::vector<Undo>> undo_;  // by path, in write order, since the last sync
};

// An ObjectStore whose operations count as I/O of the FaultVfs (put/remove: writes; get/head/list: reads) and
// fail (Error io) or do nothing once crashed, like the database's.
class FaultyObjects final : public ObjectStore {
 public:
  explicit FaultyObjects(std::shared_ptr<ObjectStore> inner) : inner_(std::move(inner)) {}
  std::string bucket() const override { return inner_->bucket(); }
  void put(std::string_view key, std::string_view bytes, std::string_view content_type) override;
  bool put_if_absent(std::string_view key, std::string_view bytes, std::string_view content_type) override;
  std::optional<std::string> get(std::string_view key) override;
  std::optional<ObjectInfo> head(std::string_view key) override;
  bool remove(std::string_view key) override;
  std::vector<ObjectInfo> list(std::string_view prefix) override;
  std::string sign_url(std::string_view key, int64_t expires_at_ms) const override {
    return inner_->sign_url(key, expires_at_ms);
  }
  std::string verify_url(std::string_view url, int64_t now_ms) const override {
    return inner_->verify_url(url, now_ms);
  }

 private:
  void io(IoKind kind, std::string_view key);  // throws Error(io) when the VFS says so
  std::shared_ptr<ObjectStore> inner_;
};

}  // namespace agentrt::testing
