// HttpConnection: one client connection of HttpServer — reads each request under the limits (header size,
// count and deadline first; the body only once the application has seen the header), writes the answer, an
// event stream or a body read in pieces, and closes without losing the last answer.
#pragma once

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http_server.hpp"
#include "http_server_impl.hpp"
#include "stream_queue.hpp"

namespace agentrt::server {

namespace http = beast::http;

// One client connection. Lives on its strand (the socket's executor); other threads reach it through the
// *_async() calls, its Responder and its StreamQueue, which post to the strand. Thread-safe only through those.
class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  enum class State { waiting, reading_body, processing, writing, streaming, closed };

  HttpConnection(std::shared_ptr<HttpServer::Impl> server, tcp::socket socket, std::string client);
  ~HttpConnection();

  // Gives back the connection's slot (once): when it is gone, or at once when it is evicted, so that the
  // newcomer that evicted it is not refused for a slot that is only waiting for its strand to close.
  void release_locked();
  // Called once, under the server's mutex, right after it was counted.
  void register_locked();

  void start();
  // From any thread: close now (eviction, forced stop).
  void close_async();
  // From any thread: the server is stopping.
  void stop_async();
  // From any thread: write what the stream's queue holds.
  void pump_async();
  // From any thread: the same for many connections, in one job per I/O thread (each writes its share of them in
  // turn, on their strands) instead of one wake-up each. Never throws: a connection it cannot reach is closed.
  static void pump_all(std::vector<std::shared_ptr<HttpConnection>> connections) noexcept;

  // How the application answers one request: exactly one of send / start_stream / stream_body, from any
  // thread. Thread-safe.
  class Responder final : public HttpResponder {
   public:
    explicit Responder(std::shared_ptr<HttpConnection> c) : conn_(std::move(c)) {}
    ~Responder() override;
    void send(HttpResponse response) override;
    std::shared_ptr<EventStreamWriter> start_stream(std::vector<std::pair<std::string, std::string>> headers,
                                                    std::shared_ptr<EventStreamListener> listener,
                                                    std::chrono::milliseconds keepalive,
                                                    std::chrono::milliseconds tick) override;
    void stream_body(HttpResponse head, uint64_t offset, uint64_t length, BodyReader read, Executor on,
                     size_t piece) override;

   private:
    std::shared_ptr<HttpConnection> conn_;
    std::atomic<bool> used_{false};
  };

 private:
  friend struct HttpServer::Impl;

  struct BodyJob {
    uint64_t offset;
    uint64_t left;
    BodyReader read;
    Executor on;
    size_t piece;
    bool keep;
    std::string bytes;
  };

  // Deadlines.
  void arm(std::chrono::milliseconds d);
  void disarm();
  void set_waiting(bool on);

  // Reading.
  void read_header();
  void wait_next_request();
  void on_header(const beast::error_code& ec);
  void read_body();
  void on_body(const beast::error_code& ec);
  void dispatch();

  // Plain answers.
  void answer_and_close(int status, std::string_view code, std::string message);
  void post_response(HttpResponse r);
  void write_response(HttpResponse r);
  bool stopping() const;

  // Event streams.
  void begin_stream(std::shared_ptr<StreamQueue> stream, std::vector<std::pair<std::string, std::string>> headers,
                    std::shared_ptr<EventStreamListener> listener, std::chrono::milliseconds keepalive,
                    std::chrono::milliseconds tick);
  void watch_for_close();
  void schedule_ticker();
  void pump_stream();
  void end_stream();
  void notify_closed();

  // Streamed bodies.
  void begin_body(HttpResponse head, uint64_t offset, uint64_t length, BodyReader read, Executor on, size_t piece);
  void next_piece(const std::shared_ptr<BodyJob>& job);

  // Closing.
  void close_gracefully();
  void close();

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
  bool head_ = false;  // the request is a HEAD: its answer is a GET's header alone

  // Streaming.
  std::shared_ptr<StreamQueue> stream_;
  std::shared_ptr<EventStreamListener> listener_;
  std::vector<SharedChunk> in_flight_;
  std::vector<net::const_buffer> buffers_;
  std::string stream_head_;  // the answer's header until its first write
  std::string chunk_size_;   // the written chunk's size line
  bool writing_ = false;
  bool streaming_counted_ = false;
  std::chrono::milliseconds keepalive_{15000};
  std::chrono::milliseconds tick_{0};
  std::chrono::steady_clock::time_point last_write_{};
  std::chrono::steady_clock::time_point next_tick_{};
  bool resume_after_stream_ = false;
  bool lingering_ = false;
  size_t lingered_ = 0;

  // Accounting (under server_->mutex).
  std::list<std::weak_ptr<HttpConnection>>::iterator all_it_;
  std::list<std::weak_ptr<HttpConnection>>::iterator waiting_it_;
  bool in_all_ = false;
  bool in_waiting_ = false;
  bool counted_ = true;
};

}  // namespace agentrt::server
