// The one translation unit that includes Boost.Beast (it is slow to compile).
#include "http_server.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <deque>
#include <limits>
#include <list>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "agentrt/error.hpp"

namespace agentrt::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
using Headers = std::vector<std::pair<std::string, std::string>>;

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Finds `name` in a raw query string; nullopt when absent.
std::optional<std::string> query_param(std::string_view query, std::string_view name) {
  size_t pos = 0;
  while (pos <= query.size()) {
    size_t end = query.find('&', pos);
    if (end == std::string_view::npos) end = query.size();
    std::string_view pair = query.substr(pos, end - pos);
    const size_t eq = pair.find('=');
    if (percent_decode(pair.substr(0, eq)) == name)
      return eq == std::string_view::npos ? std::string() : percent_decode(pair.substr(eq + 1));
    pos = end + 1;
  }
  return std::nullopt;
}

const SharedChunk& keepalive_chunk() {
  static const SharedChunk chunk = std::make_shared<const StreamChunk>(StreamChunk{": keep-alive\n\n", 0, {}, false});
  return chunk;
}

}  // namespace

std::string_view HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (iequals(k, name)) return v;
  return {};
}

bool HttpRequest::has_header(std::string_view name) const {
  return std::any_of(headers.begin(), headers.end(), [&](const auto& h) { return iequals(h.first, name); });
}

std::string HttpRequest::param(std::string_view name) const { return query_param(query, name).value_or(""); }
bool HttpRequest::has_param(std::string_view name) const { return query_param(query, name).has_value(); }

// ------------------------------------------------------------------------------------------------ Impl

class Connection;

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
  std::list<std::weak_ptr<Connection>> all;      // every open connection (for stop)
  std::list<std::weak_ptr<Connection>> waiting;  // oldest first: connections waiting for a request header
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

// One client connection. Lives on its strand (the socket's executor); other threads reach it by posting.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  enum class State { waiting, reading_body, processing, writing, streaming, closed };

  Connection(std::shared_ptr<HttpServer::Impl> server, tcp::socket socket, std::string client)
      : server_(std::move(server)),
        socket_(std::move(socket)),
        client_(std::move(client)),
        deadline_(socket_.get_executor()),
        ticker_(socket_.get_executor()),
        buffer_(server_->limits.max_header_bytes + (64 << 10)) {}

  ~Connection() {
    std::lock_guard<std::mutex> lock(server_->mutex);
    if (in_all_) server_->all.erase(all_it_);
    if (in_waiting_) server_->waiting.erase(waiting_it_);
    if (streaming_counted_) --server_->streams;
    release_locked();
  }

  // Gives back the connection's slot (once): when it is gone, or at once when it is evicted, so that the
  // newcomer that evicted it is not refused for a slot that is only waiting for its strand to close.
  void release_locked() {
    if (!counted_) return;
    counted_ = false;
    --server_->connections;
    auto it = server_->per_client.find(client_);
    if (it != server_->per_client.end() && --it->second == 0) server_->per_client.erase(it);
  }

  // Called once, under the server's mutex, right after it was counted.
  void register_locked() {
    all_it_ = server_->all.insert(server_->all.end(), weak_from_this());
    in_all_ = true;
  }

  void start() {
    net::dispatch(socket_.get_executor(), [self = shared_from_this()] {
      self->arm(self->server_->limits.header_timeout);
      self->read_header();
    });
  }

  // From any thread: close now (eviction, forced stop).
  void close_async() {
    net::post(socket_.get_executor(), [self = shared_from_this()] { self->close(); });
  }

  // From any thread: the server is stopping.
  void stop_async() {
    net::post(socket_.get_executor(), [self = shared_from_this()] {
      self->keep_alive_ = false;
      if (self->state_ == State::waiting) self->close();
      if (self->state_ == State::streaming && self->stream_) self->stream_->finish(true);
    });
  }

  // ------------------------------------------------------------------ event stream state (any thread)

  class Stream final : public EventStreamWriter {
   public:
    Stream(std::weak_ptr<Connection> c, size_t limit) : conn_(std::move(c)), limit_(limit) {}

    using EventStreamWriter::push;
    bool push(const SharedChunk* chunks, size_t n) override {
      bool drop = false;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (ended_ || finishing_) return false;
        for (size_t i = 0; i < n && !drop; ++i) {
          const size_t size = chunks[i]->bytes.size();
          if (queued_bytes_ > 0 && queued_bytes_ + size > limit_) {  // one frame always fits
            ended_ = true;
            drop = true;
          } else {
            queued_bytes_ += size;
            queue_.push_back(chunks[i]);
          }
        }
      }
      if (drop) {
        if (auto c = conn_.lock()) c->close_async();
        return false;
      }
      schedule();
      return true;
    }

    void finish(bool keepalive) override {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (ended_ || finishing_) return;
        if (keepalive) {
          queue_.push_back(keepalive_chunk());
          queued_bytes_ += keepalive_chunk()->bytes.size();
        }
        finishing_ = true;
      }
      schedule();
    }

    bool ended() const override {
      std::lock_guard<std::mutex> lock(mutex_);
      return ended_;
    }

    bool has_room() override {
      std::lock_guard<std::mutex> lock(mutex_);
      if (queued_bytes_ < limit_ / 2) return true;
      want_drain_ = true;
      return false;
    }

    // After a write: true once when has_room() said false and there is room again.
    bool drained() {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!want_drain_ || queued_bytes_ >= limit_ / 2) return false;
      want_drain_ = false;
      return true;
    }

    // On the strand: takes what is queued (up to a write's worth); `last`: the stream is finished and empty.
    std::vector<SharedChunk> take(bool& last) {
      std::lock_guard<std::mutex> lock(mutex_);
      scheduled_ = false;
      std::vector<SharedChunk> out;
      size_t bytes = 0;
      while (!queue_.empty() && out.size() < 256 && bytes < (256u << 10)) {
        bytes += queue_.front()->bytes.size();
        out.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      queued_bytes_ -= bytes;
      last = out.empty() && finishing_ && !ended_;
      if (last) ended_ = true;
      return out;
    }

    bool idle() const {
      std::lock_guard<std::mutex> lock(mutex_);
      return queue_.empty();
    }

    void mark_ended() {
      std::lock_guard<std::mutex> lock(mutex_);
      ended_ = true;
      queue_.clear();
      queued_bytes_ = 0;
    }

   private:
    void schedule() {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (scheduled_) return;
        scheduled_ = true;
      }
      if (auto c = conn_.lock()) net::post(c->socket_.get_executor(), [c] { c->pump_stream(); });
    }

    std::weak_ptr<Connection> conn_;
    const size_t limit_;
    mutable std::mutex mutex_;
    std::deque<SharedChunk> queue_;
    size_t queued_bytes_ = 0;
    bool ended_ = false;
    bool finishing_ = false;
    bool scheduled_ = false;
    bool want_drain_ = false;
  };

  class Responder final : public HttpResponder {
   public:
    explicit Responder(std::shared_ptr<Connection> c) : conn_(std::move(c)) {}
    ~Responder() override {
      if (!used_.exchange(true) && conn_)  // an application that never answered: the connection must not hang
        conn_->post_response(conn_->server_->app.error_response(500, "internal", "the request was not answered"));
    }

    void send(HttpResponse response) override {
      if (used_.exchange(true)) return;
      conn_->post_response(std::move(response));
    }

    std::shared_ptr<EventStreamWriter> start_stream(Headers headers, std::shared_ptr<EventStreamListener> listener,
                                                    std::chrono::milliseconds keepalive,
                                                    std::chrono::milliseconds tick) override {
      if (used_.exchange(true)) return nullptr;
      auto stream = std::make_shared<Stream>(conn_, conn_->server_->limits.stream_buffer_bytes);
      net::post(conn_->socket_.get_executor(), [c = conn_, stream, headers = std::move(headers),
                                                listener = std::move(listener), keepalive, tick]() mutable {
        c->begin_stream(std::move(stream), std::move(headers), std::move(listener), keepalive, tick);
      });
      return stream;
    }

    void stream_body(HttpResponse head, uint64_t offset, uint64_t length, BodyReader read, Executor on,
                     size_t piece) override {
      if (used_.exchange(true)) return;
      net::post(conn_->socket_.get_executor(), [c = conn_, head = std::move(head), offset, length,
                                                read = std::move(read), on = std::move(on), piece]() mutable {
        c->begin_body(std::move(head), offset, length, std::move(read), std::move(on), piece);
      });
    }

   private:
    std::shared_ptr<Connection> conn_;
    std::atomic<bool> used_{false};
  };

 private:
  friend struct HttpServer::Impl;

  // ------------------------------------------------------------------ deadlines

  void arm(std::chrono::milliseconds d) {
    deadline_.expires_after(d);
    deadline_.async_wait([self = shared_from_this(), gen = ++deadline_gen_](const beast::error_code& ec) {
      if (ec || gen != self->deadline_gen_) return;
      self->close();  // the deadline passed with the read or write still pending
    });
  }
  void disarm() {
    ++deadline_gen_;
    deadline_.cancel();
  }

  void set_waiting(bool on) {
    std::lock_guard<std::mutex> lock(server_->mutex);
    if (on && !in_waiting_) {
      waiting_it_ = server_->waiting.insert(server_->waiting.end(), weak_from_this());
      in_waiting_ = true;
    } else if (!on && in_waiting_) {
      server_->waiting.erase(waiting_it_);
      in_waiting_ = false;
    }
  }

  // ------------------------------------------------------------------ reading

  void read_header() {
    state_ = State::waiting;
    set_waiting(true);
    header_.emplace();
    header_->header_limit(static_cast<std::uint32_t>(server_->limits.max_header_bytes));
    header_->body_limit(std::numeric_limits<std::uint64_t>::max());  // the application's, once it saw the header
    header_->eager(false);
    http::async_read_header(socket_, buffer_, *header_,
                            [self = shared_from_this()](const beast::error_code& ec, size_t) { self->on_header(ec); });
  }

  // A keep-alive connection between requests: wait (idle_timeout) for the next request's first byte, then
  // give the whole header header_timeout.
  void wait_next_request() {
    state_ = State::waiting;
    set_waiting(true);
    if (buffer_.size() > 0) {
      arm(server_->limits.header_timeout);
      read_header();
      return;
    }
    arm(server_->limits.idle_timeout);
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](const beast::error_code& ec) {
      if (ec || self->state_ == State::closed) return self->close();
      self->arm(self->server_->limits.header_timeout);
      self->read_header();
    });
  }

  void on_header(const beast::error_code& ec) {
    if (state_ == State::closed) return;
    set_waiting(false);
    if (ec == http::error::body_limit) return answer_and_close(413, "too_large", "the body is over the limit");
    if (ec == http::error::header_limit || ec == http::error::buffer_overflow)
      return answer_and_close(431, "header_too_large",
                              fmt::format("the request header is over {} bytes", server_->limits.max_header_bytes));
    if (ec) return close();  // the client left, sent garbage, or the deadline passed
    state_ = State::processing;
    disarm();
    auto& h = header_->get();
    req_ = HttpRequest{};
    req_.method = std::string(h.method_string());
    req_.target = std::string(h.target());
    const size_t q = req_.target.find('?');
    req_.path = req_.target.substr(0, q);
    req_.query = q == std::string::npos ? std::string() : req_.target.substr(q + 1);
    req_.client = client_;
    size_t fields = 0;
    for (const auto& f : h) {
      if (++fields > server_->limits.max_header_fields)
        return answer_and_close(
            431, "header_too_large",
            fmt::format("the request has more than {} header fields", server_->limits.max_header_fields));
      req_.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    }
    keep_alive_ = header_->keep_alive();
    HeaderVerdict verdict;
    try {
      verdict = server_->app.on_header(req_);
    } catch (const std::exception& e) {
      server_->log_line(fmt::format("{} {}: {}", req_.method, req_.path, e.what()));
      return answer_and_close(500, "internal", "internal error");
    }
    if (verdict.answer) {
      // Answered from the header alone: the body (if any) is never read, so the connection cannot go on.
      verdict.answer->close = verdict.answer->close || !header_->is_done();
      return write_response(std::move(*verdict.answer));
    }
    if (header_->is_done()) return dispatch();
    const auto declared = header_->content_length();
    if (declared && *declared > verdict.body_limit)
      return answer_and_close(413, "too_large",
                              fmt::format("the body is {} bytes; the limit is {}", *declared, verdict.body_limit));
    body_limit_ = verdict.body_limit;
    body_.emplace(std::move(*header_));
    body_->body_limit(verdict.body_limit);
    if (iequals(std::string(body_->get()[http::field::expect]), "100-continue")) {
      auto cont = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
      arm(server_->limits.write_timeout);
      return net::async_write(socket_, net::buffer(*cont),
                              [self = shared_from_this(), cont](const beast::error_code& ec2, size_t) {
                                if (ec2) return self->close();
                                self->read_body();
                              });
    }
    read_body();
  }

  void read_body() {
    state_ = State::reading_body;
    arm(server_->limits.body_timeout);
    http::async_read(socket_, buffer_, *body_,
                     [self = shared_from_this()](const beast::error_code& ec, size_t) { self->on_body(ec); });
  }

  void on_body(const beast::error_code& ec) {
    if (state_ == State::closed) return;
    if (ec == http::error::body_limit)
      return answer_and_close(413, "too_large", fmt::format("the body is over the limit of {} bytes", body_limit_));
    if (ec) return close();
    disarm();
    req_.body = std::move(body_->get().body());
    body_.reset();
    dispatch();
  }

  void dispatch() {
    header_.reset();
    state_ = State::processing;
    auto responder = std::make_shared<Responder>(shared_from_this());
    try {
      server_->app.on_request(std::move(req_), responder);
    } catch (const std::exception& e) {
      server_->log_line(fmt::format("request handler: {}", e.what()));
      responder->send(server_->app.error_response(500, "internal", "internal error"));
    }
  }

  // ------------------------------------------------------------------ plain answers

  void answer_and_close(int status, std::string_view code, std::string message) {
    HttpResponse r = server_->app.error_response(status, code, message);
    r.close = true;
    write_response(std::move(r));
  }

  void post_response(HttpResponse r) {
    net::post(socket_.get_executor(),
              [self = shared_from_this(), r = std::move(r)]() mutable { self->write_response(std::move(r)); });
  }

  void write_response(HttpResponse r) {
    if (state_ == State::closed) return;
    state_ = State::writing;
    auto res = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(r.status), 11);
    if (!r.content_type.empty()) res->set(http::field::content_type, r.content_type);
    for (auto& [k, v] : r.headers) res->insert(k, v);
    res->body() = std::move(r.body);
    const bool keep = keep_alive_ && !r.close && !stopping();
    res->keep_alive(keep);
    res->prepare_payload();
    arm(server_->limits.write_timeout);
    http::async_write(socket_, *res, [self = shared_from_this(), res, keep](const beast::error_code& ec, size_t) {
      if (ec || !keep) return self->close_gracefully();
      self->disarm();
      self->wait_next_request();
    });
  }

  bool stopping() const {
    std::lock_guard<std::mutex> lock(server_->mutex);
    return server_->stopping;
  }

  // ------------------------------------------------------------------ event streams

  void begin_stream(std::shared_ptr<Stream> stream, Headers headers, std::shared_ptr<EventStreamListener> listener,
                    std::chrono::milliseconds keepalive, std::chrono::milliseconds tick) {
    stream_ = std::move(stream);
    listener_ = std::move(listener);
    if (state_ == State::closed) return notify_closed();
    state_ = State::streaming;
    {
      std::lock_guard<std::mutex> lock(server_->mutex);
      ++server_->streams;
      streaming_counted_ = true;
    }
    keepalive_ = keepalive;
    tick_ = tick;
    // The kernel's send buffer counts too: without a cap it grows to megabytes per stream (autotuning).
    beast::error_code ignored;
    socket_.set_option(net::socket_base::send_buffer_size(
                           static_cast<int>(std::min<size_t>(server_->limits.stream_buffer_bytes, 256u << 10))),
                       ignored);
    auto head = std::make_shared<http::response<http::empty_body>>(http::status::ok, 11);
    head->set(http::field::content_type, "text/event-stream");
    for (auto& [k, v] : headers) head->insert(k, v);
    head->keep_alive(keep_alive_);
    head->chunked(true);
    auto sr = std::make_shared<http::response_serializer<http::empty_body>>(*head);
    writing_ = true;
    arm(server_->limits.write_timeout);
    http::async_write_header(socket_, *sr, [self = shared_from_this(), head, sr](const beast::error_code& ec, size_t) {
      self->writing_ = false;
      if (ec) return self->close();
      self->disarm();
      self->last_write_ = Clock::now();
      self->next_tick_ = self->last_write_ + self->tick_;
      self->schedule_ticker();
      self->watch_for_close();
      self->pump_stream();
    });
  }

  // A read pending for the stream's whole life: the client leaving is noticed at once, not at the next write.
  // What a client sends meanwhile is kept for the next request (keep-alive), up to the buffer's size. Also
  // the lingering close's reader: after our last byte, read (and drop) until the client closes.
  void watch_for_close() {
    if (buffer_.size() + 512 > buffer_.max_size()) {
      if (!lingering_) return close();
      buffer_.consume(buffer_.size());
    }
    socket_.async_read_some(buffer_.prepare(512), [self = shared_from_this()](const beast::error_code& ec, size_t n) {
      self->buffer_.commit(n);
      if (ec == net::error::operation_aborted && self->resume_after_stream_ && self->state_ != State::closed) {
        self->resume_after_stream_ = false;
        return self->wait_next_request();
      }
      if (ec || self->state_ == State::closed) return self->close();
      if (self->lingering_) {
        self->lingered_ += n;
        self->buffer_.consume(self->buffer_.size());
        if (self->lingered_ > (1u << 20)) return self->close();
      }
      self->watch_for_close();
    });
  }

  void schedule_ticker() {
    auto next = last_write_ + keepalive_;
    if (tick_.count() > 0) next = std::min(next, next_tick_);
    ticker_.expires_at(std::max(next, Clock::now() + std::chrono::milliseconds(20)));  // never a busy loop
    ticker_.async_wait([self = shared_from_this()](const beast::error_code& ec) {
      if (ec || self->state_ != State::streaming) return;
      const auto now = Clock::now();
      if (now - self->last_write_ >= self->keepalive_ && !self->writing_ && self->stream_->idle()) {
        self->stream_->push(&keepalive_chunk(), 1);
        self->last_write_ = now;  // counted as written: the keep-alive is queued
      }
      if (self->tick_.count() > 0 && now >= self->next_tick_) {
        self->next_tick_ = now + self->tick_;
        if (self->listener_) self->listener_->on_tick();
      }
      self->schedule_ticker();
    });
  }

  void pump_stream() {
    if (state_ != State::streaming || writing_ || !stream_) return;
    bool last = false;
    in_flight_ = stream_->take(last);
    if (in_flight_.empty() && !last) return;
    writing_ = true;
    arm(server_->limits.write_timeout);
    auto done = [self = shared_from_this(), last](const beast::error_code& ec, size_t) {
      self->writing_ = false;
      self->in_flight_.clear();
      if (ec) return self->close();
      self->disarm();
      self->last_write_ = Clock::now();
      if (last) return self->end_stream();
      if (self->stream_->drained() && self->listener_) self->listener_->on_drained();
      self->pump_stream();
    };
    if (last) return net::async_write(socket_, http::make_chunk_last(), std::move(done));
    buffers_.clear();
    for (const auto& c : in_flight_) buffers_.emplace_back(c->bytes.data(), c->bytes.size());
    net::async_write(socket_, http::make_chunk(buffers_), std::move(done));
  }

  // The stream ended properly: the connection goes on (keep-alive) or closes. The close watcher's read is
  // pending: cancelled to go on, or left to read until the client closes (lingering).
  void end_stream() {
    ticker_.cancel();
    notify_closed();
    {
      std::lock_guard<std::mutex> lock(server_->mutex);
      if (streaming_counted_) --server_->streams;
      streaming_counted_ = false;
    }
    state_ = State::writing;
    beast::error_code ignored;
    if (keep_alive_ && !stopping()) {
      resume_after_stream_ = true;
      socket_.cancel(ignored);
      return;
    }
    lingering_ = true;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    arm(std::chrono::milliseconds(1000));
  }

  void notify_closed() {
    if (stream_) stream_->mark_ended();
    if (auto l = std::move(listener_)) {
      listener_.reset();
      try {
        l->on_closed();
      } catch (const std::exception& e) {
        server_->log_line(fmt::format("stream listener: {}", e.what()));
      }
    }
  }

  // ------------------------------------------------------------------ streamed bodies

  void begin_body(HttpResponse head, uint64_t offset, uint64_t length, BodyReader read, Executor on, size_t piece) {
    if (state_ == State::closed) return;
    state_ = State::writing;
    auto res = std::make_shared<http::response<http::empty_body>>(static_cast<http::status>(head.status), 11);
    if (!head.content_type.empty()) res->set(http::field::content_type, head.content_type);
    for (auto& [k, v] : head.headers) res->insert(k, v);
    res->content_length(length);
    const bool keep = keep_alive_ && !head.close && !stopping();
    res->keep_alive(keep);
    auto sr = std::make_shared<http::response_serializer<http::empty_body>>(*res);
    arm(server_->limits.write_timeout);
    auto job = std::make_shared<BodyJob>(BodyJob{offset, length, std::move(read), std::move(on), piece, keep, {}});
    http::async_write_header(socket_, *sr,
                             [self = shared_from_this(), res, sr, job](const beast::error_code& ec, size_t) {
                               if (ec) return self->close();
                               self->next_piece(job);
                             });
  }

  struct BodyJob {
    uint64_t offset;
    uint64_t left;
    BodyReader read;
    Executor on;
    size_t piece;
    bool keep;
    std::string bytes;
  };

  void next_piece(const std::shared_ptr<BodyJob>& job) {
    if (state_ == State::closed) return;
    if (job->left == 0) {
      disarm();
      if (!job->keep) return close_gracefully();
      return wait_next_request();
    }
    disarm();
    auto self = shared_from_this();
    job->on([self, job] {
      bool ok = true;
      try {
        job->bytes = job->read(job->offset, static_cast<size_t>(std::min<uint64_t>(job->left, job->piece)));
      } catch (const std::exception& e) {
        self->server_->log_line(fmt::format("body reader: {}", e.what()));
        ok = false;
      }
      net::post(self->socket_.get_executor(), [self, job, ok] {
        if (!ok || job->bytes.empty() || job->bytes.size() > job->left) return self->close();
        self->arm(self->server_->limits.write_timeout);
        net::async_write(self->socket_, net::buffer(job->bytes), [self, job](const beast::error_code& ec, size_t n) {
          if (ec) return self->close();
          job->offset += n;
          job->left -= n;
          job->bytes.clear();
          self->next_piece(job);
        });
      });
    });
  }

  // ------------------------------------------------------------------ closing

  // After our last byte: stop sending, then read and drop what the client still sends (a body that was never
  // read) until it closes, for at most a second and 1 MiB. Closing at once with unread bytes would reset the
  // connection, and the client could lose the answer.
  void close_gracefully() {
    if (state_ == State::closed) return;
    state_ = State::writing;
    set_waiting(false);
    lingering_ = true;
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    arm(std::chrono::milliseconds(1000));
    buffer_.consume(buffer_.size());
    watch_for_close();
  }

  void close() {
    if (state_ == State::closed) return;
    state_ = State::closed;
    set_waiting(false);
    disarm();
    ticker_.cancel();
    beast::error_code ignored;
    socket_.close(ignored);
    notify_closed();
  }

  std::shared_ptr<HttpServer::Impl> server_;
  tcp::socket socket_;
  std::string client_;
  net::steady_timer deadline_;
  net::steady_timer ticker_;
  uint64_t deadline_gen_ = 0;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::empty_body>> header_;
  std::optional<http::request_parser<http::string_body>> body_;
  uint64_t body_limit_ = 0;
  HttpRequest req_;
  State state_ = State::waiting;
  bool keep_alive_ = true;

  // Streaming.
  std::shared_ptr<Stream> stream_;
  std::shared_ptr<EventStreamListener> listener_;
  std::vector<SharedChunk> in_flight_;
  std::vector<net::const_buffer> buffers_;
  bool writing_ = false;
  bool streaming_counted_ = false;
  std::chrono::milliseconds keepalive_{15000};
  std::chrono::milliseconds tick_{0};
  Clock::time_point last_write_{};
  Clock::time_point next_tick_{};
  bool resume_after_stream_ = false;
  bool lingering_ = false;
  size_t lingered_ = 0;

  // Accounting (under server_->mutex).
  std::list<std::weak_ptr<Connection>>::iterator all_it_;
  std::list<std::weak_ptr<Connection>>::iterator waiting_it_;
  bool in_all_ = false;
  bool in_waiting_ = false;
  bool counted_ = true;
};

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
  std::shared_ptr<Connection> conn;
  std::shared_ptr<Connection> evict;
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
      conn = std::make_shared<Connection>(shared_from_this(), std::move(socket), client);
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
  std::vector<std::shared_ptr<Connection>> open;
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
