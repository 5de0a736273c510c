#include "store/postgres/listener.hpp"

#include <libpq-fe.h>

#include <fmt/format.h>

namespace agentrt {
inline namespace v1 {
namespace pg {

Listener::Listener(std::string url, std::string target, int connect_timeout_s)
    : url_(std::move(url)), target_(std::move(target)), connect_timeout_s_(connect_timeout_s) {}

Listener::~Listener() = default;

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
