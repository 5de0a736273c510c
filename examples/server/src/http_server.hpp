// HttpServer: HTTP/1.1 over Boost.Beast/Asio for agentrt-server — a few I/O threads serve every connection,
// limits are enforced while reading (header size, count and deadline before anything else; the body only
// once the application has seen the header), and long answers (SSE streams, objects) are written piece by
// piece from bounded buffers. Knows nothing of agentrt: the application is an HttpApp.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace agentrt::server {

// What the server enforces by itself. Plain data.
struct HttpLimits {
  size_t max_header_bytes = 16 << 10;               // request line and headers together; more: 431
  size_t max_header_fields = 64;                    // header lines; more: 431
  std::chrono::milliseconds header_timeout{10000};  // the whole request header, from its first byte
  std::chrono::milliseconds idle_timeout{30000};    // a connection waiting for its (next) request
  std::chrono::milliseconds body_timeout{60000};    // the whole body, once the header is in
  std::chrono::milliseconds write_timeout{30000};   // one write to a client (a stream's too)
  size_t max_connections = 20000;                   // open connections; one more: 503 and close
  size_t max_connections_per_client = 20000;        // per client address; one more: 429 and close
  size_t reserve_connections = 64;                  // slots that connections waiting for a request never hold
  int listen_backlog = 1024;                        // the kernel's accept queue (capped by somaxconn)
  size_t stream_buffer_bytes = 1 << 20;             // queued and unwritten bytes of a stream; more: dropped
  int io_threads = 2;                               // threads running the connections
};

// A request as the application sees it: the header first (HttpApp::on_header), then the body.
struct HttpRequest {
  std::string method;                                        // "GET", ...
  std::string target;                                        // as sent: path and query
  std::string path;                                          // decoded of nothing: the target up to '?'
  std::string query;                                         // after '?', raw
  std::vector<std::pair<std::string, std::string>> headers;  // in order, names as sent
  std::string body;
  std::string client;  // the peer's address
  bool head = false;   // sent as HEAD: `method` is "GET", and only the answer's header is written

  // The first header of that name (case-insensitive), or "".
  std::string_view header(std::string_view name) const;
  bool has_header(std::string_view name) const;
  // The token of `Authorization: Bearer <token>` (the scheme's case is free, RFC 9110 11.1; the spaces after it
  // are not the token's), or nullopt for none, another scheme or no token.
  std::optional<std::string_view> bearer_token() const;
  // A query parameter, percent-decoded ("" when absent).
  std::string param(std::string_view name) const;
  bool has_param(std::string_view name) const;
};

// `s` with its %XX escapes decoded (RFC 3986 2.1); an escape that is not two hex digits stays as it is. A '+'
// is a space in a query (`plus_is_space`), itself in a path.
std::string percent_decode(std::string_view s, bool plus_is_space);

// A whole answer. `close`: the connection ends after it.
struct HttpResponse {
  int status = 200;
  std::string content_type;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  bool close = false;
};

// One SSE frame (or comment) as bytes, shared by every stream that writes it: serialized once.
struct StreamChunk {
  std::string bytes;
  int64_t seq = 0;                         // 0: not an event (a comment)
  std::shared_ptr<const std::string> run;  // the event's run (shared by a run's frames; null: none)
  bool terminal = false;                   // RUN_FINISHED or RUN_ERROR
  std::string_view run_id() const { return run ? std::string_view(*run) : std::string_view(); }
};
using SharedChunk = std::shared_ptr<const StreamChunk>;

// The writing end of an open event stream (200 text/event-stream, chunked). Thread-safe: push() and finish()
// from any thread. Bytes queue up to HttpLimits::stream_buffer_bytes; a stream whose client does not read
// fast enough to stay under it is dropped (the connection closes; the client reconnects with Last-Event-ID).
class EventStreamWriter {
 public:
  virtual ~EventStreamWriter() = default;
  // Queues chunks (one lock, one wake-up for all); false when the stream has ended (closed, dropped, finished).
  virtual bool push(const SharedChunk* chunks, size_t n) = 0;
  bool push(const SharedChunk& chunk) { return push(&chunk, 1); }
  // Ends the stream once what is queued is written (with a last keep-alive when `keepalive`).
  virtual void finish(bool keepalive = false) = 0;
  virtual bool ended() const = 0;
  // False while more than half the buffer is queued; the listener's on_drained() says when it is not any more.
  // For writers that go at the client's pace (a replay) rather than drop it (the live tail).
  virtual bool has_room() = 0;
};

// While one lives on a thread, the writes that pushes to event streams start from that thread are held back, and
// handed to the I/O threads together when the outermost one goes: a few jobs (one per I/O thread) that each write
// many streams, instead of one wake-up of an I/O thread per stream. For a feed handing one batch of frames to many
// streams. Not thread-safe: it belongs to the thread that made it (nested ones are part of the outermost).
class StreamPushBatch {
 public:
  StreamPushBatch();
  ~StreamPushBatch();
  StreamPushBatch(const StreamPushBatch&) = delete;
  StreamPushBatch& operator=(const StreamPushBatch&) = delete;
};

// The application's side of one event stream: told when the stream must say something and when it is over.
// Called on the connection's I/O thread; must not block (post runtime work elsewhere).
class EventStreamListener {
 public:
  virtual ~EventStreamListener() = default;
  virtual void on_tick() {}      // every tick_interval while open (idle checks)
  virtual void on_drained() {}   // has_room() said false, and the queue is below half the buffer again
  virtual void on_closed() = 0;  // exactly once, when the stream is over for any reason
};

// Pieces of a body read on demand (object bytes): read(offset, max) returns the next bytes (fewer than max
// only at the end). Called on the application's executor given to stream_body, never on an I/O thread.
using BodyReader = std::function<std::string(uint64_t offset, size_t max)>;
using Executor = std::function<void(std::function<void()>)>;  // runs a job on some other thread

// How one request is answered. Exactly one of send / start_stream / stream_body, once, from any thread.
class HttpResponder {
 public:
  virtual ~HttpResponder() = default;
  virtual void send(HttpResponse response) = 0;
  // 200 text/event-stream; the returned writer takes the frames. `keepalive`: a ": keep-alive" comment after
  // that much silence; `tick`: listener->on_tick() period.
  virtual std::shared_ptr<EventStreamWriter> start_stream(std::vector<std::pair<std::string, std::string>> headers,
                                                          std::shared_ptr<EventStreamListener> listener,
                                                          std::chrono::milliseconds keepalive,
                                                          std::chrono::milliseconds tick) = 0;
  // `head` (status, headers, no body) with Content-Length = length, then the bytes read by `read` from
  // `offset` in pieces of at most `piece` bytes, each written before the next is read.
  virtual void stream_body(HttpResponse head, uint64_t offset, uint64_t length, BodyReader read, Executor on,
                           size_t piece = 64 << 10) = 0;
};

// What the application decides from the header alone, before any body byte is read.
struct HeaderVerdict {
  std::optional<HttpResponse> answer;  // set: answered at once, the body is never read (the connection closes)
  uint64_t body_limit = 0;             // else: the most body bytes to read (more: 413 and close)
};

// The application. Thread-safe: called from every I/O thread at once.
class HttpApp {
 public:
  virtual ~HttpApp() = default;
  // The header is complete (`req.body` empty). Must not block.
  virtual HeaderVerdict on_header(const HttpRequest& req) = 0;
  // The whole request; answer through `responder` (now or later, from any thread). Must not block.
  virtual void on_request(HttpRequest req, std::shared_ptr<HttpResponder> responder) = 0;
  // An error answer the server makes itself (431, 413, 408, 503, ...), in the application's format.
  virtual HttpResponse error_response(int status, std::string_view code, std::string_view message) = 0;
};

struct HttpServerStats {
  size_t connections = 0;  // open
  size_t waiting = 0;      // of which waiting for (or reading) a request header
  size_t streams = 0;      // of which streaming events
  uint64_t refused = 0;    // connections answered 503/429 at accept
  uint64_t evicted = 0;    // waiting connections closed to keep the reserve free
};

// Listens on construction (throws agentrt::Error(io) when it cannot bind); serves from run() until stop().
// Thread-safe.
class HttpServer {
 public:
  HttpServer(std::string host, int port, HttpLimits limits, HttpApp& app);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  // Runs the I/O threads (io_threads - 1 of its own plus the caller's) until stop() and every connection has
  // ended. An exception in a handler is logged through `log` and ends that connection, never the process.
  void run();
  // Stops accepting, closes connections waiting for a request, lets requests in progress answer (then
  // closes), and ends every event stream with a last keep-alive. Returns at once; run() returns when done or
  // after `grace`, closing whatever is left.
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(5000));
  HttpServerStats stats() const;
  void set_log(std::function<void(std::string_view)> log);

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace agentrt::server
