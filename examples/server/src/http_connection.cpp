// HttpConnection's reading, answering, streaming and closing (Boost.Beast on the connection's strand).
#include "http_connection.hpp"

#include <algorithm>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <iterator>
#include <limits>
#include <optional>

#include <fmt/format.h>

namespace agentrt::server {

using Clock = std::chrono::steady_clock;
using Headers = std::vector<std::pair<std::string, std::string>>;

namespace {

struct Refusal {
  int status;
  std::string_view code;
  std::string message;
};

// What a request the parser refused is answered before the connection closes; nothing for a client that left
// or stopped mid-message (there is nobody to answer, or the deadline closes it).
std::optional<Refusal> parse_refusal(const beast::error_code& ec) {
  if (ec.category() != make_error_code(http::error::bad_method).category()) return std::nullopt;
  switch (static_cast<http::error>(ec.value())) {
    case http::error::end_of_stream:
    case http::error::partial_message:
    case http::error::need_more:
    case http::error::need_buffer:
    case http::error::short_read:
    case http::error::stale_parser: return std::nullopt;
    default:  // bad_version too: the parser reads HTTP/1.0 and HTTP/1.1 only
      return Refusal{400, "bad_request", fmt::format("malformed HTTP request: {}", ec.message())};
  }
}

// The rules of RFC 9112 a parsed header can still break: one Host (required in HTTP/1.1), and no transfer
// coding but chunked (another, such as gzip, would hand the application encoded bytes).
std::optional<Refusal> header_refusal(const http::request<http::empty_body>& h) {
  const size_t hosts = h.count(http::field::host);
  if (hosts > 1 || (h.version() == 11 && hosts == 0))
    return Refusal{400, "bad_request", "an HTTP/1.1 request needs exactly one Host header field"};
  const size_t codings = h.count(http::field::transfer_encoding);
  if (codings == 0) return std::nullopt;
  if (h.version() == 10) return Refusal{400, "bad_request", "Transfer-Encoding in an HTTP/1.0 request"};
  if (codings > 1 || !beast::iequals(h[http::field::transfer_encoding], "chunked"))
    return Refusal{501, "unsupported_transfer_encoding", "the only transfer coding accepted is chunked"};
  return std::nullopt;
}

}  // namespace

HttpConnection::HttpConnection(std::shared_ptr<HttpServer::Impl> server, tcp::socket socket, std::string client)
    : server_(std::move(server)),
      socket_(std::move(socket)),
      client_(std::move(client)),
      deadline_(socket_.get_executor()),
      ticker_(socket_.get_executor()),
      buffer_(server_->limits.max_header_bytes + (64 << 10)) {}

HttpConnection::~HttpConnection() {
  std::lock_guard<std::mutex> lock(server_->mutex);
  if (in_all_) server_->all.erase(all_it_);
  if (in_waiting_) server_->waiting.erase(waiting_it_);
  if (streaming_counted_) --server_->streams;
  release_locked();
}

void HttpConnection::release_locked() {
  if (!counted_) return;
  counted_ = false;
  --server_->connections;
  auto it = server_->per_client.find(client_);
  if (it != server_->per_client.end() && --it->second == 0) server_->per_client.erase(it);
}

void HttpConnection::register_locked() {
  all_it_ = server_->all.insert(server_->all.end(), weak_from_this());
  in_all_ = true;
}

void HttpConnection::start() {
  net::dispatch(socket_.get_executor(), [self = shared_from_this()] {
    self->arm(self->server_->limits.header_timeout);
    self->read_header();
  });
}

void HttpConnection::close_async() {
  net::post(socket_.get_executor(), [self = shared_from_this()] { self->close(); });
}

void HttpConnection::stop_async() {
  net::post(socket_.get_executor(), [self = shared_from_this()] {
    self->keep_alive_ = false;
    if (self->state_ == State::waiting) self->close();
    if (self->state_ == State::streaming && self->stream_) self->stream_->finish(true);
  });
}

void HttpConnection::pump_async() {
  net::post(socket_.get_executor(), [self = shared_from_this()] { self->pump_stream(); });
}

void HttpConnection::pump_all(std::vector<std::shared_ptr<HttpConnection>> connections) noexcept {
  if (connections.empty()) return;
  HttpServer::Impl& server = *connections.front()->server_;  // a feed's streams are one server's
  const size_t jobs = std::min(connections.size(), static_cast<size_t>(std::max(1, server.limits.io_threads)));
  const size_t share = (connections.size() + jobs - 1) / jobs;
  for (size_t first = 0; first < connections.size(); first += share) {
    std::vector<std::shared_ptr<HttpConnection>> part(
        std::make_move_iterator(connections.begin() + static_cast<std::ptrdiff_t>(first)),
        std::make_move_iterator(connections.begin() +
                                static_cast<std::ptrdiff_t>(std::min(first + share, connections.size()))));
    try {
      // On an I/O thread, a dispatch to a strand that runs nowhere else runs at once: no queue, no wake-up.
      net::post(server.ioc, [part = std::move(part)] {
        for (const auto& c : part) net::dispatch(c->socket_.get_executor(), [c] { c->pump_stream(); });
      });
    } catch (...) {
      for (const auto& c : part)
        if (c) c->close_async();
    }
  }
}

void HttpConnection::arm(std::chrono::milliseconds d) {
  deadline_.expires_after(d);
  deadline_.async_wait([self = shared_from_this(), gen = ++deadline_gen_](const beast::error_code& ec) {
    if (ec || gen != self->deadline_gen_) return;
    self->close();  // the deadline passed with the read or write still pending
  });
}

void HttpConnection::disarm() {
  ++deadline_gen_;
  deadline_.cancel();
}

void HttpConnection::set_waiting(bool on) {
  std::lock_guard<std::mutex> lock(server_->mutex);
  if (on && !in_waiting_) {
    waiting_it_ = server_->waiting.insert(server_->waiting.end(), weak_from_this());
    in_waiting_ = true;
  } else if (!on && in_waiting_) {
    server_->waiting.erase(waiting_it_);
    in_waiting_ = false;
  }
}

void HttpConnection::read_header() {
  state_ = State::waiting;
  set_waiting(true);
  head_ = false;  // until this request's header says HEAD: a refusal before that has its body
  header_.emplace();
  header_->header_limit(static_cast<std::uint32_t>(server_->limits.max_header_bytes));
  header_->body_limit(std::numeric_limits<std::uint64_t>::max());  // the application's, once it saw the header
  header_->eager(false);
  http::async_read_header(socket_, buffer_, *header_,
                          [self = shared_from_this()](const beast::error_code& ec, size_t) { self->on_header(ec); });
}

// A keep-alive connection between requests: wait (idle_timeout) for the next request's first byte, then
// give the whole header header_timeout.
void HttpConnection::wait_next_request() {
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

void HttpConnection::on_header(const beast::error_code& ec) {
  if (state_ == State::closed) return;
  set_waiting(false);
  if (ec == http::error::body_limit) return answer_and_close(413, "too_large", "the body is over the limit");
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow)
    return answer_and_close(431, "header_too_large",
                            fmt::format("the request header is over {} bytes", server_->limits.max_header_bytes));
  if (ec) {
    if (auto r = parse_refusal(ec)) return answer_and_close(r->status, r->code, std::move(r->message));
    return close();  // the client left
  }
  state_ = State::processing;
  disarm();
  auto& h = header_->get();
  if (auto r = header_refusal(h)) return answer_and_close(r->status, r->code, std::move(r->message));
  req_ = HttpRequest{};
  head_ = h.method() == http::verb::head;
  req_.head = head_;
  req_.method = head_ ? std::string("GET") : std::string(h.method_string());
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
  if (beast::iequals(body_->get()[http::field::expect], "100-continue")) {
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

void HttpConnection::read_body() {
  state_ = State::reading_body;
  arm(server_->limits.body_timeout);
  http::async_read(socket_, buffer_, *body_,
                   [self = shared_from_this()](const beast::error_code& ec, size_t) { self->on_body(ec); });
}

void HttpConnection::on_body(const beast::error_code& ec) {
  if (state_ == State::closed) return;
  if (ec == http::error::body_limit)
    return answer_and_close(413, "too_large", fmt::format("the body is over the limit of {} bytes", body_limit_));
  if (ec == http::error::buffer_overflow)  // a chunk header (its extensions) longer than the buffer
    return answer_and_close(400, "bad_request", "a chunk header is over the buffer's size");
  if (ec) {
    if (auto r = parse_refusal(ec)) return answer_and_close(r->status, r->code, std::move(r->message));
    return close();  // the client left, or the deadline passed
  }
  disarm();
  req_.body = std::move(body_->get().body());
  body_.reset();
  dispatch();
}

void HttpConnection::dispatch() {
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

void HttpConnection::answer_and_close(int status, std::string_view code, std::string message) {
  HttpResponse r = server_->app.error_response(status, code, message);
  r.close = true;
  write_response(std::move(r));
}

void HttpConnection::post_response(HttpResponse r) {
  net::post(socket_.get_executor(),
            [self = shared_from_this(), r = std::move(r)]() mutable { self->write_response(std::move(r)); });
}

void HttpConnection::write_response(HttpResponse r) {
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
  auto done = [self = shared_from_this(), res, keep](const beast::error_code& ec, size_t) {
    if (ec || !keep) return self->close_gracefully();
    self->disarm();
    self->wait_next_request();
  };
  if (head_) {  // the header a GET gets, its Content-Length included, and no body
    auto sr = std::make_shared<http::response_serializer<http::string_body>>(*res);
    return http::async_write_header(socket_, *sr, [sr, done](const beast::error_code& ec, size_t n) { done(ec, n); });
  }
  http::async_write(socket_, *res, std::move(done));
}

bool HttpConnection::stopping() const {
  std::lock_guard<std::mutex> lock(server_->mutex);
  return server_->stopping;
}

void HttpConnection::begin_stream(std::shared_ptr<StreamQueue> stream, Headers headers,
                                  std::shared_ptr<EventStreamListener> listener, std::chrono::milliseconds keepalive,
                                  std::chrono::milliseconds tick) {
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
  // Written with the first frames that are there by then (one write, not two): pump_stream.
  // Beast's serializer of a header's start line and fields (what its ostream output writes), into one string.
  http::fields::writer fields(head->base(), head->version(), head->result_int());
  for (const auto& b : fields.get()) stream_head_.append(static_cast<const char*>(b.data()), b.size());
  pump_stream();
}

// A read pending for the stream's whole life: the client leaving is noticed at once, not at the next write.
// What a client sends meanwhile is kept for the next request (keep-alive), up to the buffer's size. Also
// the lingering close's reader: after our last byte, read (and drop) until the client closes.
void HttpConnection::watch_for_close() {
  // A stream's client seldom sends anything; a lingering close may drop up to a megabyte of an unread body, read in
  // pieces that do not cost a system call and a handler per 512 bytes.
  const size_t piece = lingering_ ? std::min<size_t>(64u << 10, buffer_.max_size()) : 512;
  if (buffer_.size() + piece > buffer_.max_size()) {
    if (!lingering_) return close();
    buffer_.consume(buffer_.size());
  }
  socket_.async_read_some(buffer_.prepare(piece), [self = shared_from_this()](const beast::error_code& ec, size_t n) {
    self->buffer_.commit(n);
    // The stream ended (end_stream cancelled this read): the connection goes on. The read may also have completed
    // with the client's next request before the cancel could stop it (a client that sends it the moment the last
    // chunk arrives): that request is in the buffer, and reading again would wait for bytes that never come.
    if (self->resume_after_stream_ && self->state_ != State::closed && (!ec || ec == net::error::operation_aborted)) {
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

void HttpConnection::schedule_ticker() {
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

void HttpConnection::pump_stream() {
  if (state_ != State::streaming || writing_ || !stream_) return;
  bool last = false;
  in_flight_ = stream_->take(last);
  const bool first = !stream_head_.empty();
  if (!first && in_flight_.empty() && !last) return;
  writing_ = true;
  arm(server_->limits.write_timeout);
  auto done = [self = shared_from_this(), last, first](const beast::error_code& ec, size_t) {
    self->writing_ = false;
    self->in_flight_.clear();
    if (ec) return self->close();
    self->disarm();
    self->last_write_ = Clock::now();
    if (first) {  // the answer has begun: keep-alives, ticks and the client's leaving from now on
      std::string().swap(self->stream_head_);  // its memory too (10,000 streams hold 2 MB of headers otherwise)
      self->next_tick_ = self->last_write_ + self->tick_;
      self->schedule_ticker();
      self->watch_for_close();
    }
    if (last) return self->end_stream();
    if (self->stream_->drained() && self->listener_) self->listener_->on_drained();
    self->pump_stream();
  };
  // One write: the answer's header (the first time), what is queued as one chunk, the last chunk (at the end).
  buffers_.clear();
  if (first) buffers_.emplace_back(stream_head_.data(), stream_head_.size());
  size_t size = 0;
  for (const auto& c : in_flight_) size += c->bytes.size();
  if (size > 0) {
    chunk_size_ = fmt::format("{:x}\r\n", size);
    buffers_.emplace_back(chunk_size_.data(), chunk_size_.size());
    for (const auto& c : in_flight_) buffers_.emplace_back(c->bytes.data(), c->bytes.size());
    buffers_.emplace_back("\r\n", 2);
  }
  if (last) buffers_.emplace_back("0\r\n\r\n", 5);
  net::async_write(socket_, buffers_, std::move(done));
}

// The stream ended properly: the connection goes on (keep-alive) or closes. The close watcher's read is
// pending: cancelled to go on, or left to read until the client closes (lingering).
void HttpConnection::end_stream() {
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

void HttpConnection::notify_closed() {
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

void HttpConnection::begin_body(HttpResponse head, uint64_t offset, uint64_t length, BodyReader read, Executor on,
                                size_t piece) {
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
  // A HEAD gets the header alone: no piece is read.
  auto job =
      std::make_shared<BodyJob>(BodyJob{offset, head_ ? 0 : length, std::move(read), std::move(on), piece, keep, {}});
  http::async_write_header(socket_, *sr,
                           [self = shared_from_this(), res, sr, job](const beast::error_code& ec, size_t) {
                             if (ec) return self->close();
                             self->next_piece(job);
                           });
}

void HttpConnection::next_piece(const std::shared_ptr<BodyJob>& job) {
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

// After our last byte: stop sending, then read and drop what the client still sends (a body that was never
// read) until it closes, for at most a second and 1 MiB. Closing at once with unread bytes would reset the
// connection, and the client could lose the answer.
void HttpConnection::close_gracefully() {
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

void HttpConnection::close() {
  if (state_ == State::closed) return;
  state_ = State::closed;
  set_waiting(false);
  disarm();
  ticker_.cancel();
  beast::error_code ignored;
  socket_.close(ignored);
  notify_closed();
}

// ------------------------------------------------------------------------------------------------ Responder

HttpConnection::Responder::~Responder() {
  if (!used_.exchange(true) && conn_)  // an application that never answered: the connection must not hang
    conn_->post_response(conn_->server_->app.error_response(500, "internal", "the request was not answered"));
}

void HttpConnection::Responder::send(HttpResponse response) {
  if (used_.exchange(true)) return;
  conn_->post_response(std::move(response));
}

std::shared_ptr<EventStreamWriter> HttpConnection::Responder::start_stream(
    Headers headers, std::shared_ptr<EventStreamListener> listener, std::chrono::milliseconds keepalive,
    std::chrono::milliseconds tick) {
  if (used_.exchange(true)) return nullptr;
  auto stream = std::make_shared<StreamQueue>(conn_, conn_->server_->limits.stream_buffer_bytes);
  net::post(conn_->socket_.get_executor(), [c = conn_, stream, headers = std::move(headers),
                                            listener = std::move(listener), keepalive, tick]() mutable {
    c->begin_stream(std::move(stream), std::move(headers), std::move(listener), keepalive, tick);
  });
  return stream;
}

void HttpConnection::Responder::stream_body(HttpResponse head, uint64_t offset, uint64_t length, BodyReader read,
                                            Executor on, size_t piece) {
  if (used_.exchange(true)) return;
  net::post(conn_->socket_.get_executor(), [c = conn_, head = std::move(head), offset, length, read = std::move(read),
                                            on = std::move(on), piece]() mutable {
    c->begin_body(std::move(head), offset, length, std::move(read), std::move(on), piece);
  });
}

}  // namespace agentrt::server
