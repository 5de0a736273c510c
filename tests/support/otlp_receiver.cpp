// OtlpReceiver on Boost.Beast/Asio: one I/O thread serves every connection (Beast is included here only).
#include "support/otlp_receiver.hpp"

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <condition_variable>
#include <csignal>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace agentrt::testing {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

std::optional<std::string> OtlpRequest::header(const std::string& name) const {
  for (const auto& [k, v] : headers)
    if (k.size() == name.size() && std::equal(k.begin(), k.end(), name.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
        }))
      return v;
  return std::nullopt;
}

namespace {

// What the connections share: the record and how to answer. Thread-safe.
class Record {
 public:
  // Records a request; returns the status to answer (0: never answer).
  explicit Record(bool keep) : keep_(keep) {}
  bool keeps() const { return keep_; }
  int arrive(OtlpRequest r) {
    int status = 200;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!keep_) r = OtlpRequest{};
      if (r.body.is_object() && r.body.contains("resourceSpans"))
        for (const auto& rs : r.body["resourceSpans"])
          for (const auto& ss : rs.value("scopeSpans", json::array()))
            for (const auto& s : ss.value("spans", json::array())) spans_.push_back(s);
      requests_.push_back(std::move(r));
      if (never_) {
        status = 0;
      } else if (status_times_left_ != 0) {
        status = status_;
        if (status_times_left_ > 0) --status_times_left_;
      }
    }
    cv_.notify_all();
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return !held_; });  // on the I/O thread: no answer goes out while answers are held
    return status;
  }
  void hold(bool held) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      held_ = held;
    }
    cv_.notify_all();
  }
  void answer_status(int status, int times) {
    std::lock_guard<std::mutex> lock(mutex_);
    status_ = status;
    status_times_left_ = times > 0 ? times : -1;
  }
  void never_answer() {
    std::lock_guard<std::mutex> lock(mutex_);
    never_ = true;
  }
  std::vector<OtlpRequest> requests() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
  }
  std::vector<json> spans() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return spans_;
  }
  bool wait(size_t n, std::chrono::milliseconds timeout, bool count_spans) const {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return (count_spans ? spans_.size() : requests_.size()) >= n; });
  }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  std::vector<OtlpRequest> requests_;
  std::vector<json> spans_;
  int status_ = 200;
  int status_times_left_ = 0;  // > 0: answers left with status_; -1: for good; 0: answer 200
  bool never_ = false;
  bool held_ = false;
  const bool keep_;
};

// One client connection (keep-alive). Not thread-safe: lives on the server's one I/O thread.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, Record& record) : stream_(std::move(socket)), record_(&record) {}
  void start() { read(); }
  void close() {
    auto keep = std::move(hung_);  // a hung connection dies when this returns, not in the middle of it
    if (closed_) return;
    closed_ = true;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
  }

 private:
  void read() {
    if (closed_) return;
    parser_.emplace();
    parser_->body_limit(64 << 20);
    stream_.expires_never();
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec || self->closed_) return self->close();
      self->on_request();
    });
  }

  void on_request() {
    auto& req = parser_->get();
    OtlpRequest r;
    const std::string_view target = req.target();
    r.path = std::string(target.substr(0, target.find('?')));
    for (const auto& field : req) r.headers.emplace(std::string(field.name_string()), std::string(field.value()));
    if (record_->keeps()) {
      r.body = json::parse(req.body(), nullptr, false);
      if (r.body.is_discarded()) r.body = nullptr;
    }
    const bool keep_alive = req.keep_alive();
    const int status = record_->arrive(std::move(r));
    if (status == 0) {
      // Never answered: the connection stays open (it keeps itself) until the client or the server ends it.
      hung_ = shared_from_this();
      return read();  // a client that gives up closes the connection: the read fails and close() lets it go
    }
    auto res = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(status), 11);
    res->set(http::field::content_type, "application/json");
    res->body() = "{}";
    res->keep_alive(keep_alive);
    res->prepare_payload();
    http::async_write(stream_, *res, [self = shared_from_this(), res, keep_alive](beast::error_code ec, size_t) {
      if (ec || !keep_alive) return self->close();
      self->read();
    });
  }

  beast::tcp_stream stream_;
  Record* record_;
  std::shared_ptr<Connection> hung_;  // itself, while it holds a request it never answers
  bool closed_ = false;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
};

}  // namespace

struct OtlpReceiver::Impl {
  explicit Impl(bool keep) : record(keep) {}
  Record record;
  net::io_context io{1};
  tcp::acceptor acceptor{io};
  std::thread thread;
  int port = 0;
  std::vector<std::weak_ptr<Connection>> connections;  // the I/O thread's
  bool stopping = false;                               // the I/O thread's

  void accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (stopping || ec == net::error::operation_aborted) return;
      if (!ec) {
        auto c = std::make_shared<Connection>(std::move(socket), record);
        std::erase_if(connections, [](const std::weak_ptr<Connection>& w) { return w.expired(); });
        connections.push_back(c);
        c->start();
      }
      accept();
    });
  }

  void stop() {
    stopping = true;
    beast::error_code ec;
    acceptor.close(ec);
    for (auto& w : connections)
      if (auto c = w.lock()) c->close();
  }
};

OtlpReceiver::OtlpReceiver(bool keep) : impl_(std::make_unique<Impl>(keep)) {
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
    throw std::runtime_error(std::string("OTLP receiver: could not bind 127.0.0.1: ") + e.what());
  }
  s.accept();
  s.thread = std::thread([&s] { s.io.run(); });
}

OtlpReceiver::~OtlpReceiver() {
  Impl& s = *impl_;
  s.record.hold(false);  // a held answer goes out, so that the I/O thread can stop
  net::post(s.io, [&s] { s.stop(); });
  s.thread.join();
}

std::string OtlpReceiver::endpoint() const { return "http://127.0.0.1:" + std::to_string(impl_->port) + "/v1/traces"; }
void OtlpReceiver::answer_status(int status, int times) { impl_->record.answer_status(status, times); }
void OtlpReceiver::never_answer() { impl_->record.never_answer(); }
void OtlpReceiver::hold_answers() { impl_->record.hold(true); }
void OtlpReceiver::release_answers() { impl_->record.hold(false); }
std::vector<OtlpRequest> OtlpReceiver::requests() const { return impl_->record.requests(); }
std::vector<json> OtlpReceiver::spans() const { return impl_->record.spans(); }
bool OtlpReceiver::wait_spans(size_t n, std::chrono::milliseconds timeout) const {
  return impl_->record.wait(n, timeout, true);
}
bool OtlpReceiver::wait_requests(size_t n, std::chrono::milliseconds timeout) const {
  return impl_->record.wait(n, timeout, false);
}

std::optional<json> find_span(const std::vector<json>& spans, const std::string& name) {
  for (const auto& s : spans)
    if (s.value("name", "") == name) return s;
  return std::nullopt;
}

json span_attr(const json& span, const std::string& key) {
  for (const auto& a : span.value("attributes", json::array())) {
    if (a.value("key", "") != key) continue;
    const json& v = a["value"];
    if (v.contains("stringValue")) return v["stringValue"];
    if (v.contains("intValue")) return std::stoll(v["intValue"].get<std::string>());
    if (v.contains("doubleValue")) return v["doubleValue"];
    if (v.contains("boolValue")) return v["boolValue"];
    if (v.contains("arrayValue")) {
      json out = json::array();
      for (const auto& x : v["arrayValue"].value("values", json::array())) out.push_back(x.value("stringValue", ""));
      return out;
    }
  }
  return nullptr;
}

}  // namespace agentrt::testing
