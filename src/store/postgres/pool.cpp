#include "store/postgres/pool.hpp"

namespace agentrt {
inline namespace v1 {
namespace pg {

Pool::Pool(std::string url, std::string target, int size, int connect_timeout_s)
    : url_(std::move(url)), target_(std::move(target)), size_(size), connect_timeout_s_(connect_timeout_s) {}

Pool::~Pool() = default;

Pool::Lease::~Lease() {
  if (conn_) pool_->release(std::move(conn_));
}

Pool::Lease Pool::acquire(bool fresh) {
  std::vector<std::unique_ptr<Connection>> dropped;  // closed after the lock is released
  std::unique_lock<std::mutex> lock(mutex_);
  if (fresh) {
    for (auto& c : idle_) pids_.erase(c->backend_pid());
    open_ -= static_cast<int>(idle_.size());
    dropped.swap(idle_);
  }
  cv_.wait(lock, [&] { return !idle_.empty() || open_ < size_; });
  if (!idle_.empty()) {
    auto c = std::move(idle_.back());
    idle_.pop_back();
    return Lease(*this, std::move(c), true);
  }
  ++open_;  // the slot is ours while we connect, outside the lock
  lock.unlock();
  try {
    auto c = std::make_unique<Connection>(url_, target_, connect_timeout_s_);
    lock.lock();
    pids_.insert(c->backend_pid());
    return Lease(*this, std::move(c), false);
  } catch (...) {
    if (!lock.owns_lock()) lock.lock();
    --open_;
    cv_.notify_one();
    throw;
  }
}

void Pool::release(std::unique_ptr<Connection> c) {
  if (c->broken()) c->rollback();  // an exception between BEGIN and its end: the transaction goes
  std::unique_lock<std::mutex> lock(mutex_);
  if (c->broken()) {
    pids_.erase(c->backend_pid());
    --open_;
    lock.unlock();
    c.reset();  // closes it outside the lock
  } else {
    idle_.push_back(std::move(c));
  }
  cv_.notify_one();
}

bool Pool::owns_backend(int pid) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pids_.count(pid) != 0;
}

}  // namespace pg
}  // namespace v1
}  // namespace agentrt
