// HttpServer: listening, accepting under the connection limits (the caps, the reserve that waiting connections
// never hold), stopping. Each connection is an HttpConnection.
#include "http_server.hpp"

#include <pthread.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "http_connection.hpp"
#include "http_server_impl.hpp"

namespace agentrt::server {

// ------------------------------------------------------------------------------------------------ accepting

void HttpServer::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc),
                        [self = shared_from_this()](const beast::error_code& ec, tcp::socket socket) {
                          self->on_accept(ec, std::move(socket));
                        });
}

void HttpServer::Impl::on_accept(const beast::error_code& ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
  if (ec) {
    // Out of descriptors (EMFILE/ENFILE) or a transient failure: wait a little rather than spin.
    log_line(fmt::format("accept: {}", ec.message()));
    retry_timer.expires_after(std::chrono::milliseconds(50));
    retry_timer.async_wait([self = shared_from_this()](const beast::error_code& e) {
      if (!e) self->accept();
    });
    return;
  }
  beast::error_code e2;
  auto peer = socket.remote_endpoint(e2);
  std::string client = e2 ? std::string("?") : peer.address().to_string();
  socket.set_option(tcp::no_delay(true), e2);
  const std::string* refusal = nullptr;
  std::shared_ptr<HttpConnection> conn;
  std::shared_ptr<HttpConnection> evict;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (stopping) return;  // the acceptor is closing; `socket` closes with this scope
    if (connections >= limits.max_connections) {
      refusal = &refuse_busy;
    } else if (per_client[client] >= limits.max_connections_per_client) {
      refusal = &refuse_per_client;
    }
    if (refusal) {
      ++refused;
      if (per_client[client] == 0) per_client.erase(client);
    } else {
      ++connections;
      ++per_client[client];
      conn = std::make_shared<HttpConnection>(shared_from_this(), std::move(socket), client);
      conn->register_locked();
      // Connections waiting for a request never hold the reserve: over their share, the oldest one goes.
      const size_t share =
          limits.max_connections > limits.reserve_connections ? limits.max_connections - limits.reserve_connections : 1;
      while (waiting.size() + 1 > share && !waiting.empty()) {
        evict = waiting.front().lock();
        waiting.pop_front();
        if (evict) {
          evict->in_waiting_ = false;
          evict->release_locked();
          ++evicted;
          evict->close_async();
        }
      }
    }
  }
  if (refusal) {
    // Answered at once and closed: a short write that fits the socket's buffer, never waited for.
    socket.non_blocking(true, e2);
    (void)::send(socket.native_handle(), refusal->data(), refusal->size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    socket.shutdown(tcp::socket::shutdown_both, e2);
    socket.close(e2);
  } else {
    conn->start();
  }
  accept();
}

void HttpServer::Impl::stop_all(bool force) {
  std::vector<std::shared_ptr<HttpConnection>> open;
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& w : all)
      if (auto c = w.lock()) open.push_back(std::move(c));
  }
  for (auto& c : open) force ? c->close_async() : c->stop_async();
}

// ------------------------------------------------------------------------------------------------ HttpServer

namespace {

std::string canned(HttpApp& app, int status, std::string_view code, std::string_view message) {
  HttpResponse r = app.error_response(status, code, message);
  http::response<http::string_body> res{static_cast<http::status>(status), 11};
  res.set(http::field::content_type, r.content_type);
  for (auto& [k, v] : r.headers) res.insert(k, v);
  res.body() = r.body;
  res.keep_alive(false);
  res.prepare_payload();
  std::ostringstream out;
  out << res;
  return out.str();
}

}  // namespace

HttpServer::HttpServer(std::string host, int port, HttpLimits limits, HttpApp& app)
    : impl_(std::make_shared<Impl>(limits, app)) {
  auto& d = *impl_;
  d.refuse_busy = canned(app, 503, "unavailable", "the server has no free connection; retry later");
  d.refuse_per_client = canned(app, 429, "too_many_connections", "too many connections from this address");
  beast::error_code ec;
  auto address = net::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec) throw Error(ErrorCode::invalid_argument, fmt::format("listen address '{}' is not an IP address", host));
  tcp::endpoint ep(address, static_cast<unsigned short>(port));
  d.acceptor.open(ep.protocol(), ec);
  if (!ec) d.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) d.acceptor.bind(ep, ec);
  if (!ec) d.acceptor.listen(limits.listen_backlog, ec);
  if (ec) throw Error(ErrorCode::io, fmt::format("cannot listen on {}:{}: {}", host, port, ec.message()));
  d.bound_port = d.acceptor.local_endpoint().port();
}

HttpServer::~HttpServer() { stop(std::chrono::milliseconds(0)); }

int HttpServer::port() const { return impl_->bound_port; }

void HttpServer::set_log(std::function<void(std::string_view)> log) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->log = std::move(log);
}

void HttpServer::run() {
  impl_->accept();
  auto body = [this] {
    pthread_setname_np(pthread_self(), "server-io");
    for (;;) {
      try {
        impl_->ioc.run();
        return;
      } catch (const std::exception& e) {
        impl_->log_line(fmt::format("I/O thread: {}", e.what()));  // a handler threw: that one is lost, go on
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < std::max(1, impl_->limits.io_threads); ++i) threads.emplace_back(body);
  body();
  for (auto& t : threads) t.join();
}

void HttpServer::stop(std::chrono::milliseconds grace) {
  auto d = impl_;
  {
    std::lock_guard<std::mutex> lock(d->mutex);
    if (d->stopping) {
      if (grace.count() > 0) return;
    }
    d->stopping = true;
  }
  net::post(d->ioc, [d, grace] {
    beast::error_code ec;
    d->acceptor.close(ec);
    d->retry_timer.cancel();
    d->stop_all(grace.count() == 0);
    if (grace.count() == 0) return;
    auto t = std::make_shared<net::steady_timer>(d->ioc, grace);
    t->async_wait([d, t](const beast::error_code&) { d->stop_all(true); });
    // Everything has ended by itself before the grace passed: the timer must not keep run() waiting.
    auto poll = std::make_shared<net::steady_timer>(d->ioc);
    auto check = std::make_shared<std::function<void()>>();
    *check = [d, t, poll, check] {
      {
        std::lock_guard<std::mutex> lock(d->mutex);
        if (d->connections == 0) {
          t->cancel();
          *check = nullptr;  // breaks the cycle
          return;
        }
      }
      poll->expires_after(std::chrono::milliseconds(20));
      poll->async_wait([check](const beast::error_code&) {
        if (*check) (*check)();
      });
    };
    (*check)();
  });
}

HttpServerStats HttpServer::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return HttpServerStats{impl_->connections, impl_->waiting.size(), impl_->streams, impl_->refused, impl_->evicted};
}

}  // namespace agentrt::server
