// pg::Pool: the PostgreSQL store's connections, lent one caller at a time.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "store/postgres/connection.hpp"

namespace agentrt {
inline namespace v1 {
namespace pg {

// Thread-safe. At most `size` connections, opened when first needed; a caller waits while all are lent. A
// connection returned broken (lost, or inside a transaction) is closed, and the next caller opens a new one: a
// server that went away and came back is reconnected to on the next call.
class Pool {
 public:
  Pool(std::string url, std::string target, int size, int connect_timeout_s);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // A connection lent until this object ends (then given back, or closed when broken). Not thread-safe.
  class Lease {
   public:
    Lease(Pool& pool, std::unique_ptr<Connection> c, bool reused)
        : pool_(&pool), conn_(std::move(c)), reused_(reused) {}
    ~Lease();
    Lease(Lease&& o) noexcept : pool_(o.pool_), conn_(std::move(o.conn_)), reused_(o.reused_) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Connection& operator*() const { return *conn_; }
    Connection* operator->() const { return conn_.get(); }
    // It was lent before (it may have been closed by the server since), not opened for this caller.
    bool reused() const { return reused_; }

   private:
    Pool* pool_;
    std::unique_ptr<Connection> conn_;
    bool reused_;
  };

  // Waits for a free connection. `fresh`: open a new one (dropping the idle ones, all likely as dead as the one
  // that just failed). Error(io) when it cannot connect.
  Lease acquire(bool fresh = false);
  // Runs `fn` on a connection. When a reused connection is found lost (DbError::lost: the server closed it while
  // it was idle, or went away), it is dropped with the idle ones and `fn` runs once more on a new one; what `fn`
  // sent on the lost one was rolled back with it. (A caller that cannot know that, one whose COMMIT got no
  // answer, throws something other than a lost DbError.)
  template <class Fn>
  auto with(Fn&& fn) {
    bool retried = false;
    for (;;) {
      Lease c = acquire(retried);
      try {
        return fn(*c);
      } catch (const DbError& e) {
        if (!e.lost() || retried || !c.reused()) throw;
        retried = true;
      }
    }
  }
  // Whether a backend process id is one of this pool's connections (its own notifications).
  bool owns_backend(int pid) const;
  const std::string& target() const { return target_; }

 private:
  void release(std::unique_ptr<Connection> c);

  const std::string url_;
  const std::string target_;
  const int size_;
  const int connect_timeout_s_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Connection>> idle_;
  int open_ = 0;  // connections lent or idle, and slots reserved by a caller that is connecting
  std::set<int> pids_;
};

}  // namespace pg
}  // namespace v1
}  // namespace agentrt
