// HttpServer internals: the listener and the count of open connections, shared by the accept path
// (http_server.cpp) and every HttpConnection (http_connection.cpp).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/error.hpp>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "http_server.hpp"

namespace agentrt::server {

namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;

class HttpConnection;

// The server's state: the acceptor and the connection accounting the limits are enforced on. Thread-safe: the
// counts and lists under `mutex`; the acceptor and the retry timer are used on the I/O threads only.
struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  Impl(HttpLimits l, HttpApp& a) : limits(l), app(a), acceptor(ioc), retry_timer(ioc) {}

  HttpLimits limits;
  HttpApp& app;
  net::io_context ioc;
  tcp::acceptor acceptor;
  net::steady_timer retry_timer;  // accept after EMFILE/ENFILE
  int bound_port = 0;
  std::string refuse_busy;        // canned 503 (every connection slot taken)
  std::string refuse_per_client;  // canned 429 (this address has too many)

  mutable std::mutex mutex;
  std::list<std::weak_ptr<HttpConnection>> all;      // every open connection (for stop)
  std::list<std::weak_ptr<HttpConnection>> waiting;  // oldest first: connections waiting for a request header
  std::unordered_map<std::string, size_t> per_client;
  size_t connections = 0;
  size_t streams = 0;
  uint64_t refused = 0;
  uint64_t evicted = 0;
  bool stopping = false;
  std::function<void(std::string_view)> log;

  void log_line(std::string_view line) {
    std::function<void(std::string_view)> l;
    {
      std::lock_guard<std::mutex> lock(mutex);
      l = log;
    }
    if (l) l(line);
  }

  void accept();
  void on_accept(const beast::error_code& ec, tcp::socket socket);
  void stop_all(bool force);
};

}  // namespace agentrt::server
