#include "support/s3_fault_proxy.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <stdexcept>
#include <string_view>

#include "support/loopback_listener.hpp"

namespace agentrt::testing {

namespace {

void set_timeouts(int fd) {
  timeval tv{30, 0};  // a stuck peer turns into a failed test, not a hang
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

// One HTTP request as received: its head's lines and its body.
struct Request {
  std::string method;
  std::string target;
  std::vector<std::string> header_lines;  // "Name: value", without CRLF
  std::string body;

  std::string header(const std::string& name) const {
    for (const auto& line : header_lines) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos && lower(line.substr(0, colon)) == name) {
        const size_t start = line.find_first_not_of(' ', colon + 1);
        return start == std::string::npos ? std::string() : line.substr(start);
      }
    }
    return {};
  }
  // The request as sent upstream: `method`, the same headers but Connection (and, for HEAD, the body's),
  // then Connection: close, so the answer ends where the connection does.
  std::string wire(const std::string& as_method) const {
    std::string out = as_method + " " + target + " HTTP/1.1\r\n";
    for (const auto& line : header_lines) {
      const std::string name = lower(line.substr(0, line.find(':')));
      if (name == "connection") continue;
      // The existence check of a conditional PUT: without the body's headers and the condition itself (s3rver
      // answers a HEAD with If-None-Match: * with 304).
      if (as_method == "HEAD" && (name == "content-length" || name == "content-type" || name == "if-none-match"))
        continue;
      out += line + "\r\n";
    }
    out += "Connection: close\r\n\r\n";
    if (as_method != "HEAD") out += body;
    return out;
  }
};

bool read_request(int fd, Request& out) {
  std::string buf;
  char chunk[65536];
  size_t end = std::string::npos;
  while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buf.append(chunk, static_cast<size_t>(n));
  }
  const std::string head = buf.substr(0, end);
  out.body = buf.substr(end + 4);
  size_t pos = head.find("\r\n");
  const std::string first = head.substr(0, pos);
  const size_t sp1 = first.find(' ');
  const size_t sp2 = first.find(' ', sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos) return false;
  out.method = first.substr(0, sp1);
  out.target = first.substr(sp1 + 1, sp2 - sp1 - 1);
  while (pos != std::string::npos && pos < head.size()) {
    const size_t next = head.find("\r\n", pos + 2);
    out.header_lines.push_back(head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2));
    pos = next;
  }
  const std::string length = out.header("content-length");
  const size_t want = length.empty() ? 0 : std::stoull(length);
  while (out.body.size() < want) {
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    out.body.append(chunk, static_cast<size_t>(n));
  }
  return true;
}

// Sends `request` to s3rver and returns its whole answer (it closes the connection after it).
std::string round_trip(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return {};
  set_timeouts(fd);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string answer;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && write_all(fd, request)) {
    char chunk[65536];
    while (true) {
      const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      answer.append(chunk, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return answer;
}

int status_of(const std::string& answer) {
  return answer.size() > 12 && answer.compare(0, 5, "HTTP/") == 0 ? std::stoi(answer.substr(9, 3)) : 0;
}

std::string error_answer(int status, const std::string& code, const Request& request) {
  const std::string body = request.method == "HEAD"
                               ? std::string()
                               : "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>" + code +
                                     "</Code><Message>injected by the test proxy</Message></Error>";
  return "HTTP/1.1 " + std::to_string(status) +
         " Injected\r\nContent-Type: application/xml\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

}  // namespace

S3FaultProxy::S3FaultProxy(int upstream_port) : upstream_port_(upstream_port) {
  const LoopbackListener l = listen_on_loopback("S3FaultProxy", 64);
  listen_fd_ = l.fd;
  port_ = l.port;
  acceptor_ = std::thread([this] { accept_loop(); });
}

S3FaultProxy::~S3FaultProxy() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  ::close(listen_fd_);
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& t : workers_) t.join();
}

std::string S3FaultProxy::endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
std::string S3FaultProxy::vhost_endpoint() const { return "http://s3.localhost:" + std::to_string(port_); }

void S3FaultProxy::fail_next(int count, int status, std::string code, std::string method) {
  std::lock_guard<std::mutex> lock(mutex_);
  rules_.push_back(Rule{count, status, std::move(code), std::move(method), false});
}

void S3FaultProxy::lose_next_answer(int status, std::string code, std::string method) {
  std::lock_guard<std::mutex> lock(mutex_);
  rules_.push_back(Rule{1, status, std::move(code), std::move(method), true});
}

void S3FaultProxy::clear_faults() {
  std::lock_guard<std::mutex> lock(mutex_);
  rules_.clear();
}

void S3FaultProxy::accept_loop() {
  while (!stopping_) {
    const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) {
      if (stopping_) return;
      continue;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    workers_.emplace_back([this, client] { serve(client); });
  }
}

void S3FaultProxy::serve(int client) {
  set_timeouts(client);
  Request request;
  if (!read_request(client, request)) {
    ::close(client);
    return;
  }
  ++requests_;
  std::optional<Rule> fault;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = rules_.begin(); it != rules_.end(); ++it) {
      if (!it->method.empty() && it->method != request.method) continue;
      fault = *it;
      if (it->count > 0 && --it->count == 0) rules_.erase(it);
      break;
    }
  }
  std::string answer;
  if (fault && !fault->lose_answer) {
    answer = error_answer(fault->status, fault->code, request);
  } else if (if_none_match_ && request.method == "PUT" && request.header("if-none-match") == "*") {
    std::lock_guard<std::mutex> lock(write_mutex_);
    if (status_of(round_trip(upstream_port_, request.wire("HEAD"))) == 200) {
      answer = error_answer(412, "PreconditionFailed", request);
    } else {
      answer = round_trip(upstream_port_, request.wire("PUT"));
      ++relayed_;
    }
  } else {
    answer = round_trip(upstream_port_, request.wire(request.method));
    ++relayed_;
  }
  if (fault && fault->lose_answer) answer = error_answer(fault->status, fault->code, request);
  write_all(client, answer);
  ::close(client);
}

}  // namespace agentrt::testing
