// NullCollector: the benchmark's OTLP/HTTP collector — it reads each request whole (Content-Length framing, keep-alive,
// any number of connections), checks that the body is one OTLP JSON request's shape at its ends, and answers 200 with
// "{}". It keeps nothing, so what it costs this machine is little more than the loopback's: a collector elsewhere.
// Tests that look at spans use tests/support/otlp_receiver (which parses and keeps them, and costs more).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

namespace agentrt::bench {

// Thread-safe: counters from any thread; one poll thread serves the sockets.
class NullCollector {
 public:
  NullCollector();  // binds 127.0.0.1 on a free port; throws std::runtime_error when it cannot
  ~NullCollector();
  NullCollector(const NullCollector&) = delete;
  NullCollector& operator=(const NullCollector&) = delete;

  std::string endpoint() const;  // "http://127.0.0.1:<port>/v1/traces"
  uint64_t requests() const { return requests_.load(); }
  uint64_t body_bytes() const { return bytes_.load(); }
  // Requests that were not HTTP with a Content-Length, or whose body was not {"resourceSpans":[...]} (answered 400).
  uint64_t malformed() const { return malformed_.load(); }

 private:
  void serve();

  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};  // a pipe: the destructor's way to end serve()
  int port_ = 0;
  std::atomic<uint64_t> requests_{0}, bytes_{0}, malformed_{0};
  std::thread thread_;
};

}  // namespace agentrt::bench
