// The one translation unit that includes httplib.h (it is slow to compile).
// Debian's libcpp-httplib.so is built with these; the header must see the same class layouts.
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#ifndef CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#endif
#ifndef CPPHTTPLIB_BROTLI_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#endif
#include "support/mock_openai_server.hpp"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <csignal>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace agentrt::testing {

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

struct MockOpenAIServer::Impl {
  httplib::Server server;
  std::thread thread;
  std::atomic<bool> listen_returned{false};
  int port = 0;

  mutable std::mutex mutex;
  mutable std::condition_variable cv;
  bool stopping = false;
  std::deque<MockResponse> chat, transcriptions;
  std::vector<RecordedRequest> requests;
  std::optional<Clock::time_point> client_gone;

  // Sleeps up to `d`; false when the server is stopping.
  bool pause(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(mutex);
    return !cv.wait_for(lock, d, [&] { return stopping; });
  }

  void mark_client_gone() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!client_gone) client_gone = Clock::now();
    }
    cv.notify_all();
  }

  void serve(std::deque<MockResponse>& queue, const httplib::Request& req, httplib::Response& res) {
    RecordedRequest rec;
    rec.method = req.method;
    rec.path = req.path;
    for (const auto& [k, v] : req.headers) rec.headers.emplace(k, v);
    rec.body = req.body;
    for (const auto& [name, file] : req.files) rec.form[name] = {file.filename, file.content_type, file.content};
    rec.remote_port = req.remote_port;
    rec.received = Clock::now();

    std::optional<MockResponse> scripted;
    {
      std::lock_guard<std::mutex> lock(mutex);
      requests.push_back(std::move(rec));
      if (!queue.empty()) {
        scripted = std::move(queue.front());
        queue.pop_front();
      }
    }
    cv.notify_all();  // wait_requests()
    if (!scripted) {
      res.status = 500;
      res.set_header("x-should-retry", "false");
      res.set_content(R"({"error":{"message":"mock: no scripted response","type":"mock_error"}})", "application/json");
      return;
    }
    auto r = std::make_shared<MockResponse>(std::move(*scripted));
    res.status = r->status;
    for (const auto& [k, v] : r->headers) res.set_header(k, v);
    if (r->chunks.empty() && !r->keep_sending) {
      res.set_content(r->body, r->content_type);
      return;
    }
    res.set_chunked_content_provider(r->content_type, [this, r](size_t, httplib::DataSink& sink) {
      for (size_t i = 0; i < r->chunks.size(); ++i) {
        if (i > 0 && r->delay_between.count() > 0 && !pause(r->delay_between)) return false;
        if (!sink.write(r->chunks[i].data(), r->chunks[i].size())) {
          mark_client_gone();
          return false;
        }
      }
      if (r->keep_sending) {
        const auto until = Clock::now() + std::chrono::seconds(10);
        while (Clock::now() < until) {
          if (!pause(r->keep_sending_every)) return false;
          if (!sink.write(r->keep_sending->data(), r->keep_sending->size())) {
            mark_client_gone();
            return false;
          }
        }
      }
      if (r->stall_after.count() > 0 && !pause(r->stall_after)) return false;
      if (r->cut_connection) return false;  // httplib closes the socket without the final empty chunk
      sink.done();
      return true;
    });
  }
};

MockOpenAIServer::MockOpenAIServer() : impl_(std::make_unique<Impl>()) {
  // A client that hangs up mid-stream must make a write fail, not kill the test process.
  std::signal(SIGPIPE, SIG_IGN);
  Impl& s = *impl_;
  s.server.set_keep_alive_timeout(2);
  // Like real SSE servers: without it Nagle holds each small event until the client's delayed ACK, and
  // streams stall for 40 ms at random.
  s.server.set_tcp_nodelay(true);
  s.server.Post("/v1/chat/completions",
                [&s](const httplib::Request& req, httplib::Response& res) { s.serve(s.chat, req, res); });
  s.server.Post("/v1/audio/transcriptions",
                [&s](const httplib::Request& req, httplib::Response& res) { s.serve(s.transcriptions, req, res); });
  s.port = s.server.bind_to_any_port("127.0.0.1");
  if (s.port <= 0) throw std::runtime_error("mock server: could not bind 127.0.0.1");
  s.thread = std::thread([&s] {
    s.server.listen_after_bind();
    s.listen_returned = true;
  });
  // Connections queue on the bound socket meanwhile; but a stop() before listen_after_bind() has marked the
  // server running would be lost (and the destructor would wait for ever): wait for it, however long it takes.
  while (!s.server.is_running() && !s.listen_returned) std::this_thread::yield();
}

MockOpenAIServer::~MockOpenAIServer() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

int MockOpenAIServer::port() const { return impl_->port; }

std::string MockOpenAIServer::base_url() const { return "http://127.0.0.1:" + std::to_string(impl_->port) + "/v1"; }

void MockOpenAIServer::push_chat(MockResponse r) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->chat.push_back(std::move(r));
}

void MockOpenAIServer::push_transcription(MockResponse r) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->transcriptions.push_back(std::move(r));
}

std::vector<RecordedRequest> MockOpenAIServer::requests() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->requests;
}

size_t MockOpenAIServer::request_count() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->requests.size();
}

std::optional<Clock::time_point> MockOpenAIServer::client_gone_at() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->client_gone;
}

bool MockOpenAIServer::wait_requests(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(impl_->mutex);
  return impl_->cv.wait_for(lock, timeout, [&] { return impl_->requests.size() >= n; });
}

bool MockOpenAIServer::wait_client_gone(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(impl_->mutex);
  return impl_->cv.wait_for(lock, timeout, [&] { return impl_->client_gone.has_value(); });
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
