#include "store/postgres/listener.hpp"

#include <libpq-fe.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <fmt/format.h>

namespace agentrt {
inline namespace v1 {
namespace pg {

Listener::Listener(std::string url, std::string target, int connect_timeout_s)
    : url_(std::move(url)),
      target_(std::move(target)),
      connect_timeout_s_(connect_timeout_s),
      wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (wake_fd_ < 0) throw Error(ErrorCode::io, "postgres: cannot create the listener's eventfd");
}

Listener::~Listener() { close(wake_fd_); }

void Listener::interrupt() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
}

bool Listener::wait(std::chrono::milliseconds timeout) {
  int fd = -1;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (conn_) fd = PQsocket(conn_->get());
  }
  // The socket may be closed and its number reused by a concurrent reconnection in version(): then this wait
  // is on the wrong descriptor for at most `timeout`, and the caller's next version() sees the reconnection.
  pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {fd, POLLIN, 0}};
  const int n = poll(fds, fd >= 0 ? 2 : 1, static_cast<int>(timeout.count()));
  if (n <= 0) return false;
  if (fds[0].revents & POLLIN) {
    uint64_t count = 0;
    (void)!read(wake_fd_, &count, sizeof count);  // one interrupt ends the waits in progress, not later ones
    return false;
  }
  return fd >= 0 && fds[1].revents != 0;
}

int64_t Listener::version(const std::function<bool(int)>& own) {
  std::lock_guard<std::mutex> lock(mutex_);
  // The server went away (or ended the session): listen anew.
  if (conn_ && (PQconsumeInput(conn_->get()) == 0 || PQstatus(conn_->get()) != CONNECTION_OK)) conn_.reset();
  if (!conn_) {
    try {
      auto c = std::make_unique<Connection>(url_, target_, connect_timeout_s_);
      c->run(fmt::format("LISTEN {}", kEventsChannel).c_str(), "listen for commits");
      conn_ = std::move(c);
    } catch (const Error&) {
      return -1;
    }
    ++version_;
  }
  while (PGnotify* n = PQnotifies(conn_->get())) {
    if (!own(n->be_pid)) ++version_;
    PQfreemem(n);
  }
  return version_;
}

}  // namespace pg
}  // namespace v1
}  // namespace agentrt
