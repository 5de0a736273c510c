// A listening TCP socket on 127.0.0.1 at a free port, for the tests' own servers (blocking sockets, no library).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace agentrt::testing {

struct LoopbackListener {
  int fd = -1;
  int port = 0;
};

// Throws std::runtime_error naming `who` and the system's reason when it cannot listen.
inline LoopbackListener listen_on_loopback(const std::string& who, int backlog) {
  LoopbackListener l;
  l.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (l.fd < 0 || ::bind(l.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(l.fd, backlog) != 0 ||
      ::getsockname(l.fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = std::strerror(errno);
    if (l.fd >= 0) ::close(l.fd);
    throw std::runtime_error(who + ": cannot listen on 127.0.0.1: " + why);
  }
  l.port = ntohs(addr.sin_port);
  return l;
}

}  // namespace agentrt::testing
