// S3FaultProxy: a small HTTP/1.1 proxy on 127.0.0.1 in front of the tests' s3rver. It relays every request
// byte for byte (one request per connection) unless told to answer with an S3 error instead (a fault), or to
// relay a request and then replace its answer (a lost response). It can also do what s3rver does not:
// refuse a PUT carrying If-None-Match: * with 412 when the key exists (checked and written under one lock, so
// it is exact for every client that goes through the proxy), which lets the native conditional-write path of
// S3ObjectStore run against real storage.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace agentrt::testing {

// Thread-safe: configure and inspect from the test thread while the proxy's threads relay.
class S3FaultProxy {
 public:
  // Relays to the s3rver at upstream_port on 127.0.0.1.
  explicit S3FaultProxy(int upstream_port);
  ~S3FaultProxy();
  S3FaultProxy(const S3FaultProxy&) = delete;
  S3FaultProxy& operator=(const S3FaultProxy&) = delete;

  int port() const { return port_; }
  std::string endpoint() const;        // "http://127.0.0.1:<port>"
  std::string vhost_endpoint() const;  // "http://s3.localhost:<port>"

  // The next `count` requests with this method ("" = any; -1 = every one from now on) are answered with
  // `status` and an S3 error body of `code`, without reaching s3rver.
  void fail_next(int count, int status, std::string code, std::string method = "");
  // The next request with this method is relayed, and its answer replaced by `status` `code` (s3rver did it;
  // the client never learns).
  void lose_next_answer(int status, std::string code, std::string method);
  void clear_faults();
  void enforce_if_none_match(bool on) { if_none_match_ = on; }

  int requests() const { return requests_; }  // received
  int relayed() const { return relayed_; }    // reached s3rver

 private:
  struct Rule {
    int count;
    int status;
    std::string code;
    std::string method;
    bool lose_answer;
  };
  void accept_loop();
  void serve(int client);

  int upstream_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  std::mutex mutex_;
  std::deque<Rule> rules_;
  std::vector<std::thread> workers_;
  std::mutex write_mutex_;  // serialises conditional PUTs (check and write)
  std::atomic<bool> if_none_match_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<int> requests_{0};
  std::atomic<int> relayed_{0};
};

}  // namespace agentrt::testing
