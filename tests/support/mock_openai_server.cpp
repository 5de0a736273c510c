// MockOpenAIServer on Boost.Beast/Asio: one I/O thread serves every connection, event-driven (a delay or a stall
// is a timer, not a sleeping thread). Beast is included here only (it is slow to compile).
#include "support/mock_openai_server.hpp"

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "agentrt/error.hpp"
#include "multipart_form.hpp"  // examples/server/src: the server's own multipart/form-data parser

namespace agentrt::testing {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

MockResponse MockResponse::json(int status, const agentrt::json& body,
                                std::vector<std::pair<std::string, std::string>> headers) {
  MockResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.body = body.dump();
  r.headers = std::move(headers);
  return r;
}

MockResponse MockResponse::stream(std::vector<std::string> chunks) {
  MockResponse r;
  r.chunks = std::move(chunks);
  return r;
}

std::optional<std::string> RecordedRequest::header(const std::string& name) const {
  for (const auto& [k, v] : headers) {
    if (k.size() == name.size() && std::equal(k.begin(), k.end(), name.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
        })) {
      return v;
    }
  }
  return std::nullopt;
}

agentrt::json RecordedRequest::json_body() const { return agentrt::json::parse(body); }

namespace {

// A keep-alive connection waits 2 s for its next request (as the mock always has); reading a request and
// writing one piece of an answer each have their own deadline, so a client that vanishes frees its connection.
constexpr auto kKeepAlive = std::chrono::seconds(2);
constexpr auto kReadTimeout = std::chrono::seconds(30);
constexpr auto kWriteTimeout = std::chrono::seconds(5);
constexpr auto kKeepSendingFor = std::chrono::seconds(10);

enum class Route { chat, transcriptions, messages };

// The scripted answers and what arrived. Thread-safe (one mutex): scripted and read by the test's threads,
// taken and recorded by the I/O thread.
class Script {
 public:
  void push(Route route, MockResponse r) {
    std::lock_guard<std::mutex> lock(mutex_);
    queue(route).push_back(std::move(r));
  }

  // Records the request and takes the next answer scripted for its route (nullopt: none is left).
  std::optional<MockResponse> arrive(Route route, RecordedRequest rec) {
    std::optional<MockResponse> scripted;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      requests_.push_back(std::move(rec));
      auto& q = queue(route);
      if (!q.empty()) {
        scripted = std::move(q.front());
        q.pop_front();
      }
    }
    cv_.notify_all();  // wait_requests()
    return scripted;
  }

  void mark_client_gone() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!client_gone_) client_gone_ = Clock::now();
    }
    cv_.notify_all();
  }

  std::vector<RecordedRequest> requests() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
  }

  size_t request_count() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_.size();
  }

  std::optional<Clock::time_point> client_gone_at() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return client_gone_;
  }

  bool wait_requests(size_t n, std::chrono::milliseconds timeout) const {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return requests_.size() >= n; });
  }

  bool wait_client_gone(std::chrono::milliseconds timeout) const {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return client_gone_.has_value(); });
  }

 private:
  std::deque<MockResponse>& queue(Route route) {
    if (route == Route::messages) return messages_;
    return route == Route::chat ? chat_ : transcriptions_;
  }

  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  std::deque<MockResponse> chat_, transcriptions_, messages_;
  std::vector<RecordedRequest> requests_;
  std::optional<Clock::time_point> client_gone_;
};

// One client connection: reads requests one after another (keep-alive) and writes each answer, a streamed one
// chunk by chunk with its delays. Not thread-safe: lives on the server's one I/O thread.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, Script& script)
      : stream_(std::move(socket)), timer_(stream_.get_executor()), script_(&script) {
    beast::error_code ec;
    remote_port_ = stream_.socket().remote_endpoint(ec).port();
  }

  void start() { read_header(); }

  // Ends the connection at once (no final chunk): pending reads, writes and waits complete with an error.
  void close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
    timer_.cancel();
  }

 private:
  using Next = std::function<void()>;

  void read_header() {
    if (closed_) return;
    parser_.emplace();
    parser_->header_limit(1 << 20);
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    stream_.expires_after(kKeepAlive);
    http::async_read_header(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec || self->closed_) return self->close();
      self->on_header();
    });
  }

  void on_header() {
    stream_.expires_after(kReadTimeout);
    // libcurl asks before sending a larger body and waits a second for the answer unless it gets one.
    if (beast::iequals(parser_->get()[http::field::expect], "100-continue")) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      net::async_write(stream_, net::buffer(kContinue), [self = shared_from_this()](beast::error_code ec, size_t) {
        if (ec || self->closed_) return self->close();
        self->read_body();
      });
      return;
    }
    read_body();
  }

  void read_body() {
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec || self->closed_) return self->close();
      self->on_request();
    });
  }

  void on_request() {
    auto& req = parser_->get();
    keep_alive_ = req.keep_alive();
    RecordedRequest rec;
    rec.method = std::string(req.method_string());
    const std::string_view target = req.target();
    rec.path = std::string(target.substr(0, target.find('?')));
    for (const auto& field : req) rec.headers.emplace(std::string(field.name_string()), std::string(field.value()));
    rec.body = std::move(req.body());
    rec.remote_port = remote_port_;
    if (auto boundary = server::multipart_boundary(req[http::field::content_type])) {
      try {
        for (auto& part : server::parse_multipart_form(rec.body, *boundary)) {
          rec.form[part.name] = {std::move(part.filename), std::move(part.content_type), std::move(part.data)};
        }
      } catch (const agentrt::Error&) {
        return send_whole(400, "", {}, "");  // a malformed form never reaches the script
      }
    }
    rec.received = Clock::now();

    std::optional<Route> route;
    if (rec.method == "POST" && rec.path == "/v1/chat/completions") route = Route::chat;
    if (rec.method == "POST" && rec.path == "/v1/audio/transcriptions") route = Route::transcriptions;
    if (rec.method == "POST" && rec.path == "/v1/messages") route = Route::messages;
    if (!route) return send_whole(404, "", {}, "");
    std::optional<MockResponse> scripted = script_->arrive(*route, std::move(rec));
    if (!scripted) {
      return send_whole(500, "application/json", {{"x-should-retry", "false"}},
                        R"({"error":{"message":"mock: no scripted response","type":"mock_error"}})");
    }
    response_ = std::make_shared<MockResponse>(std::move(*scripted));
    if (response_->chunks.empty() && !response_->keep_sending) {
      return send_whole(response_->status, response_->content_type, response_->headers, response_->body);
    }
    send_head();
  }

  template <class Body>
  void head_fields(http::response<Body>& res, int status, const std::string& content_type,
                   const std::vector<std::pair<std::string, std::string>>& headers) {
    res.version(11);
    res.result(static_cast<unsigned>(status));
    res.keep_alive(keep_alive_);
    if (!content_type.empty()) res.set(http::field::content_type, content_type);
    for (const auto& [k, v] : headers) res.insert(k, v);
  }

  void send_whole(int status, const std::string& content_type,
                  const std::vector<std::pair<std::string, std::string>>& headers, std::string body) {
    auto res = std::make_shared<http::response<http::string_body>>();
    head_fields(*res, status, content_type, headers);
    res->body() = std::move(body);
    res->prepare_payload();
    stream_.expires_after(kWriteTimeout);
    http::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, size_t) {
      if (ec || self->closed_) return self->close();
      self->next_request();
    });
  }

  // A streamed answer: the head with Transfer-Encoding: chunked, then one chunk per write.
  void send_head() {
    head_ = std::make_shared<http::response<http::empty_body>>();
    head_fields(*head_, response_->status, response_->content_type, response_->headers);
    head_->chunked(true);
    serializer_ = std::make_shared<http::response_serializer<http::empty_body>>(*head_);
    stream_.expires_after(kWriteTimeout);
    http::async_write_header(stream_, *serializer_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec || self->closed_) return self->close();
      self->send_chunk(0);
    });
  }

  void send_chunk(size_t i) {
    const MockResponse& r = *response_;
    if (i == r.chunks.size()) {
      keep_sending_until_ = Clock::now() + kKeepSendingFor;
      return r.keep_sending ? keep_sending() : end_body();
    }
    auto write = [this, i] {
      write_chunk(response_->chunks[i], [self = shared_from_this(), i] { self->send_chunk(i + 1); });
    };
    if (i > 0 && r.delay_between.count() > 0) return wait(r.delay_between, write);
    write();
  }

  // After the chunks, the same bytes again every keep_sending_every until the client goes away (at most 10 s).
  void keep_sending() {
    if (Clock::now() >= keep_sending_until_) return end_body();
    wait(response_->keep_sending_every,
         [this] { write_chunk(*response_->keep_sending, [self = shared_from_this()] { self->keep_sending(); }); });
  }

  void end_body() {
    auto end = [this] {
      if (response_->cut_connection) return close();  // the socket closes without the final empty chunk
      stream_.expires_after(kWriteTimeout);
      net::async_write(stream_, http::make_chunk_last(), [self = shared_from_this()](beast::error_code ec, size_t) {
        if (ec || self->closed_) return self->close();
        self->next_request();
      });
    };
    if (response_->stall_after.count() > 0) return wait(response_->stall_after, end);
    end();
  }

  // Writes one chunk; a write that fails means the client has gone (cancellation tests ask when).
  void write_chunk(const std::string& bytes, Next next) {
    if (bytes.empty()) return next();  // an empty write sends nothing (an empty chunk would end the body)
    stream_.expires_after(kWriteTimeout);
    net::async_write(stream_, http::make_chunk(net::buffer(bytes)),
                     [self = shared_from_this(), next = std::move(next)](beast::error_code ec, size_t) {
                       if (self->closed_) return;
                       if (ec) {
                         self->script_->mark_client_gone();
                         return self->close();
                       }
                       next();
                     });
  }

  // Runs `next` after `d` unless the connection is closed meanwhile (the server stopping cancels the timer).
  void wait(std::chrono::milliseconds d, Next next) {
    timer_.expires_after(d);
    timer_.async_wait([self = shared_from_this(), next = std::move(next)](beast::error_code ec) {
      if (ec || self->closed_) return self->close();
      next();
    });
  }

  void next_request() {
    response_.reset();
    serializer_.reset();
    head_.reset();
    if (!keep_alive_) return close();
    read_header();
  }

  beast::tcp_stream stream_;
  net::steady_timer timer_;
  Script* script_ = nullptr;
  int remote_port_ = 0;
  bool closed_ = false;
  bool keep_alive_ = true;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<MockResponse> response_;
  std::shared_ptr<http::response<http::empty_body>> head_;
  std::shared_ptr<http::response_serializer<http::empty_body>> serializer_;
  Clock::time_point keep_sending_until_{};
};

}  // namespace

struct MockOpenAIServer::Impl {
  Script script;
  net::io_context io{1};
  tcp::acceptor acceptor{io};
  std::thread thread;
  int port = 0;
  // The I/O thread's own: the connections to close when the server stops, and whether it is stopping.
  std::vector<std::weak_ptr<Connection>> connections;
  bool stopping = false;

  void accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (stopping || ec == net::error::operation_aborted) return;
      if (!ec) {
        // Like real SSE servers: without it Nagle holds each small event until the client's delayed ACK, and
        // streams stall for 40 ms at random.
        socket.set_option(tcp::no_delay(true), ec);
        auto c = std::make_shared<Connection>(std::move(socket), script);
        std::erase_if(connections, [](const std::weak_ptr<Connection>& w) { return w.expired(); });
        connections.push_back(c);
        c->start();
      }
      accept();
    });
  }

  // On the I/O thread: nothing new is accepted, every connection ends; run() returns once their handlers have.
  void stop() {
    stopping = true;
    beast::error_code ec;
    acceptor.close(ec);
    for (auto& w : connections) {
      if (auto c = w.lock()) c->close();
    }
  }
};

MockOpenAIServer::MockOpenAIServer() : impl_(std::make_unique<Impl>()) {
  // The tests that use the mock have relied on this since its first version (a write to a peer that left
  // fails instead of killing the process); Asio's own writes need it not.
  std::signal(SIGPIPE, SIG_IGN);
  Impl& s = *impl_;
  try {
    const tcp::endpoint at(net::ip::make_address("127.0.0.1"), 0);
    s.acceptor.open(at.protocol());
    s.acceptor.set_option(net::socket_base::reuse_address(true));
    s.acceptor.bind(at);
    s.acceptor.listen(net::socket_base::max_listen_connections);
    s.port = s.acceptor.local_endpoint().port();
  } catch (const boost::system::system_error& e) {
    throw std::runtime_error(std::string("mock server: could not bind 127.0.0.1: ") + e.what());
  }
  s.accept();
  s.thread = std::thread([&s] {
    for (;;) {
      try {
        s.io.run();
        return;
      } catch (const std::exception& e) {  // a failed handler ends its connection, never the test process
        std::fprintf(stderr, "mock server: %s\n", e.what());
      }
    }
  });
}

MockOpenAIServer::~MockOpenAIServer() {
  Impl& s = *impl_;
  net::post(s.io, [&s] { s.stop(); });
  s.thread.join();
}

int MockOpenAIServer::port() const { return impl_->port; }

std::string MockOpenAIServer::closed_base_url() {
  int port = 0;
  {
    MockOpenAIServer gone;
    port = gone.port();
  }
  return "http://127.0.0.1:" + std::to_string(port) + "/v1";
}

std::string MockOpenAIServer::base_url() const { return origin() + "/v1"; }

std::string MockOpenAIServer::origin() const { return "http://127.0.0.1:" + std::to_string(impl_->port); }

void MockOpenAIServer::push_chat(MockResponse r) { impl_->script.push(Route::chat, std::move(r)); }

void MockOpenAIServer::push_transcription(MockResponse r) { impl_->script.push(Route::transcriptions, std::move(r)); }

void MockOpenAIServer::push_messages(MockResponse r) { impl_->script.push(Route::messages, std::move(r)); }

std::vector<RecordedRequest> MockOpenAIServer::requests() const { return impl_->script.requests(); }

size_t MockOpenAIServer::request_count() const { return impl_->script.request_count(); }

std::optional<Clock::time_point> MockOpenAIServer::client_gone_at() const { return impl_->script.client_gone_at(); }

bool MockOpenAIServer::wait_requests(size_t n, std::chrono::milliseconds timeout) const {
  return impl_->script.wait_requests(n, timeout);
}

bool MockOpenAIServer::wait_client_gone(std::chrono::milliseconds timeout) const {
  return impl_->script.wait_client_gone(timeout);
}

std::string MockOpenAIServer::sse(const agentrt::json& chunk) { return "data: " + chunk.dump() + "\n\n"; }

std::string MockOpenAIServer::sse_done() { return "data: [DONE]\n\n"; }

agentrt::json MockOpenAIServer::chunk(const agentrt::json& delta, const agentrt::json& finish_reason,
                                      const std::string& model) {
  return {{"id", "chatcmpl-mock"},
          {"object", "chat.completion.chunk"},
          {"created", 1727346176},
          {"model", model},
          {"choices", agentrt::json::array({{{"index", 0}, {"delta", delta}, {"finish_reason", finish_reason}}})}};
}

namespace {
agentrt::json usage_chunk(int prompt_tokens, int completion_tokens) {
  return {{"id", "chatcmpl-mock"},
          {"object", "chat.completion.chunk"},
          {"model", "mock-model"},
          {"choices", agentrt::json::array()},
          {"usage",
           {{"prompt_tokens", prompt_tokens},
            {"completion_tokens", completion_tokens},
            {"total_tokens", prompt_tokens + completion_tokens}}}};
}
}  // namespace

std::vector<std::string> MockOpenAIServer::text_stream(const std::vector<std::string>& pieces, int prompt_tokens,
                                                       int completion_tokens) {
  std::vector<std::string> out;
  out.push_back(sse(chunk({{"role", "assistant"}, {"content", ""}})));
  for (const auto& p : pieces) out.push_back(sse(chunk({{"content", p}})));
  out.push_back(sse(chunk(agentrt::json::object(), "stop")));
  out.push_back(sse(usage_chunk(prompt_tokens, completion_tokens)));
  out.push_back(sse_done());
  return out;
}

std::vector<std::string> MockOpenAIServer::tool_call_stream(const std::string& id, const std::string& name,
                                                            const std::vector<std::string>& argument_pieces) {
  std::vector<std::string> out;
  out.push_back(sse(chunk(
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls",
        agentrt::json::array(
            {{{"index", 0}, {"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", ""}}}}})}})));
  for (const auto& p : argument_pieces) {
    out.push_back(
        sse(chunk({{"tool_calls", agentrt::json::array({{{"index", 0}, {"function", {{"arguments", p}}}}})}})));
  }
  out.push_back(sse(chunk(agentrt::json::object(), "tool_calls")));
  out.push_back(sse(usage_chunk(11, 9)));
  out.push_back(sse_done());
  return out;
}

}  // namespace agentrt::testing
