#include "bench/null_collector.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "support/loopback_listener.hpp"

namespace agentrt::bench {
namespace {

constexpr size_t kMaxHeader = 64 << 10;
constexpr std::string_view kOk = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
constexpr std::string_view kBad = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

// One connection's request in progress. Not thread-safe: the poll thread's.
struct Conn {
  int fd = -1;
  std::string head;      // the request's header, until its blank line
  size_t body_left = 0;  // body bytes still to read
  bool in_body = false;
  std::string body_start, body_end;  // the body's first and last bytes, for the shape check
};

bool send_all(int fd, std::string_view s) {
  while (!s.empty()) {
    const ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    s.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Content-Length of a request header, or -1.
long long content_length(std::string_view head) {
  std::string lower(head);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  const size_t at = lower.find("\r\ncontent-length:");
  if (at == std::string::npos) return -1;
  return std::atoll(lower.c_str() + at + 17);
}

}  // namespace

NullCollector::NullCollector() {
  const testing::LoopbackListener l = testing::listen_on_loopback("null collector", 16);
  listen_fd_ = l.fd;
  port_ = l.port;
  if (::pipe2(wake_, O_CLOEXEC) != 0) throw std::runtime_error(std::string("null collector: ") + std::strerror(errno));
  thread_ = std::thread([this] { serve(); });
}

NullCollector::~NullCollector() {
  if (wake_[1] >= 0) (void)!::write(wake_[1], "x", 1);
  if (thread_.joinable()) thread_.join();
  for (int fd : {listen_fd_, wake_[0], wake_[1]})
    if (fd >= 0) ::close(fd);
}

std::string NullCollector::endpoint() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1/traces"; }

void NullCollector::serve() {
  std::vector<Conn> conns;
  auto buffer = std::make_unique<char[]>(1 << 20);
  for (;;) {
    std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const auto& c : conns) fds.push_back({c.fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents) break;
    if (fds[1].revents & POLLIN) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        Conn c;
        c.fd = fd;
        conns.push_back(std::move(c));
      }
    }
    std::vector<int> gone;
    for (size_t i = 2; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      Conn& c = conns[i - 2];
      const ssize_t n = ::recv(c.fd, buffer.get(), 1 << 20, 0);
      if (n <= 0) {
        gone.push_back(c.fd);
        continue;
      }
      std::string_view in(buffer.get(), static_cast<size_t>(n));
      bool ok = true;
      while (ok && !in.empty()) {
        if (!c.in_body) {
          const size_t before = c.head.size();
          c.head.append(in);
          const size_t end = c.head.find("\r\n\r\n");
          if (end == std::string::npos) {
            ok = c.head.size() <= kMaxHeader;
            in = {};
            break;
          }
          in.remove_prefix(end + 4 - before);
          c.head.resize(end + 2);
          const long long length = content_length(c.head);
          if (length < 0) {
            ok = false;
            break;
          }
          c.body_left = static_cast<size_t>(length);
          c.in_body = true;
          c.body_start.clear();
          c.body_end.clear();
        }
        const size_t take = std::min(c.body_left, in.size());
        if (c.body_start.size() < 32) c.body_start.append(in.substr(0, std::min(take, 32 - c.body_start.size())));
        c.body_end.append(in.substr(take > 32 ? take - 32 : 0, std::min<size_t>(take, 32)));
        if (c.body_end.size() > 32) c.body_end.erase(0, c.body_end.size() - 32);
        c.body_left -= take;
        bytes_ += take;
        in.remove_prefix(take);
        if (c.body_left > 0) break;
        // A whole request: answer it.
        c.in_body = false;
        c.head.clear();
        ++requests_;
        const bool shaped = c.body_start.rfind("{\"resourceSpans\":[", 0) == 0 && c.body_end.size() >= 6 &&
                            c.body_end.compare(c.body_end.size() - 6, 6, "]}]}]}") == 0;
        if (!shaped) {
          ok = false;
          break;
        }
        if (!send_all(c.fd, kOk)) {
          gone.push_back(c.fd);
          break;
        }
      }
      if (!ok) {
        ++malformed_;
        send_all(c.fd, kBad);
        gone.push_back(c.fd);
      }
    }
    for (int fd : gone) {
      ::close(fd);
      conns.erase(std::remove_if(conns.begin(), conns.end(), [fd](const Conn& c) { return c.fd == fd; }), conns.end());
    }
  }
  for (auto& c : conns) ::close(c.fd);
}

}  // namespace agentrt::bench
