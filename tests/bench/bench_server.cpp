// agentrt-bench-server: the load client of scripts/load_server's fan-out and turns phases and its /health probe,
// on Boost.Asio and Beast, one thread (the fan-out's followers on a bare epoll loop), so that the client costs the
// machine it shares with the server little CPU. Only 127.0.0.1 is contacted; every loop is bounded in count and
// time. Prints one JSON line.
//
//   agentrt-bench-server fanout PORT TOKEN FOLLOWERS [SERVER_PID [TURNS]]
//     One turn on a new thread; FOLLOWERS streams of that thread (?follow=1) read its replay; then TURNS (1) more
//     turns, each once every follower has read the last one's end, and each of their events is stamped on arrival
//     at each follower: the delay from the event's timestamp (set before its commit: an upper bound of the delay
//     after commit), from its first arrival at any follower (the fan-out's spread: a lower bound), and the first
//     arrival's own delay.
//   agentrt-bench-server turns PORT TOKEN CLIENTS SECONDS [SERVER_PID]
//     CLIENTS loops that each POST /agent/runs on a new thread and read its stream to RUN_FINISHED (a new
//     connection per turn), back to back, for SECONDS: turns per second and latency percentiles.
//   agentrt-bench-server health PORT TOKEN COUNT
//     COUNT sequential GET /api/v1/health, each on a new connection, 20 ms apart: p50/p99 of connect to the whole
//     answer; one that takes over 5 s counts as failed (the probe scripts/load_server runs beside its flood, in a
//     process of its own so that its figures are not the flooding client's waits).
// With SERVER_PID, the server process's CPU time over the measured part is reported too (from /proc), beside the
// client's own. AGENTRT_BENCH_DEBUG=1: the fan-out also prints each event's spread and each turn's CPU on stderr.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "agentrt/json.hpp"

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using agentrt::json;
using Clock = std::chrono::steady_clock;

double wall_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double cpu_ms() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return (static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e3 +
          static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e3);
}

// The user + system CPU time of process `pid` so far (ms, in clock ticks), or 0 without one.
double process_cpu_ms(int pid) {
  if (pid <= 0) return 0;
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (!f) return 0;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char* p = std::strrchr(buf, ')');  // the name may hold spaces; the fields follow its ')'
  unsigned long long utime = 0, stime = 0;
  if (!p || std::sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2) return 0;
  return static_cast<double>(utime + stime) * 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double pct(std::vector<double> v, double p) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return std::round(v[i] * 100) / 100;
}

std::string new_id() {
  static std::mt19937_64 rng{std::random_device{}()};
  char out[33];
  std::snprintf(out, sizeof out, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return out;
}

// The number after `key` in `text`, or -1.
int64_t number_after(std::string_view text, std::string_view key) {
  const size_t at = text.find(key);
  if (at == std::string_view::npos) return -1;
  int64_t v = 0;
  bool any = false;
  for (size_t i = at + key.size(); i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    v = v * 10 + (text[i] - '0');
    any = true;
  }
  return any ? v : -1;
}

// The sequence number of an event frame ("id: <seq>" first), or -1 (a comment such as a keep-alive).
int64_t seq_of(std::string_view frame) { return frame.rfind("id: ", 0) == 0 ? number_after(frame, "id: ") : -1; }

// One SSE frame as it arrived.
struct Frame {
  std::string_view text;  // without the blank line that ends it
  double arrived_ms;      // wall clock, when the read that completed it returned
};

// One HTTP request whose answer is read as SSE frames (Beast decodes the chunked body). on_frame returns false to
// stop reading; on_end is called once with the status (0: the connection failed) and whether the body ended.
// Not thread-safe: lives on the one I/O thread.
class SseCall : public std::enable_shared_from_this<SseCall> {
 public:
  using OnFrame = std::function<bool(const Frame&)>;
  using OnEnd = std::function<void(int status, bool ended)>;

  SseCall(net::io_context& io, int port, std::string request, OnFrame on_frame, OnEnd on_end)
      : socket_(io),
        port_(port),
        request_(std::move(request)),
        on_frame_(std::move(on_frame)),
        on_end_(std::move(on_end)) {
    parser_.body_limit(std::numeric_limits<std::uint64_t>::max());
  }

  void start() {
    const tcp::endpoint at(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port_));
    socket_.async_connect(at, [self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->end(0, false);
      self->socket_.set_option(tcp::no_delay(true), ec);
      net::async_write(self->socket_, net::buffer(self->request_), [self](beast::error_code ec2, size_t) {
        if (ec2) return self->end(0, false);
        http::async_read_header(self->socket_, self->buffer_, self->parser_, [self](beast::error_code ec3, size_t) {
          if (ec3) return self->end(0, false);
          self->status_ = static_cast<int>(self->parser_.get().result_int());
          self->read();
        });
      });
    });
  }

  void close() {
    beast::error_code ec;
    socket_.close(ec);
  }

 private:
  void read() {
    if (parser_.is_done()) return end(status_, true);
    http::async_read_some(socket_, buffer_, parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (!self->frames()) return self->end(self->status_, false);
      if (ec) return self->end(self->status_, ec == http::error::end_of_stream);
      self->read();
    });
  }

  // Hands over the complete frames the body holds; false when on_frame said stop.
  bool frames() {
    std::string& body = parser_.get().body();
    const double now = wall_ms();
    size_t start = 0;
    for (size_t end = body.find("\n\n"); end != std::string::npos; end = body.find("\n\n", start)) {
      const bool go_on = on_frame_(Frame{std::string_view(body).substr(start, end - start), now});
      start = end + 2;
      if (!go_on) return false;
    }
    body.erase(0, start);
    return true;
  }

  void end(int status, bool ended) {
    close();
    if (auto f = std::move(on_end_)) f(status, ended);
  }

  tcp::socket socket_;
  int port_;
  std::string request_;
  OnFrame on_frame_;
  OnEnd on_end_;
  beast::flat_buffer buffer_{1 << 16};
  http::response_parser<http::string_body> parser_;
  int status_ = 0;
};

std::string post_run(const std::string& token, const std::string& thread, const std::string& run,
                     const std::string& text) {
  const std::string body = json{{"threadId", thread},
                                {"runId", run},
                                {"messages", json::array({{{"id", new_id()}, {"role", "user"}, {"content", text}}})}}
                               .dump();
  return "POST /api/v1/agent/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token +
         "\r\nAccept: text/event-stream\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

bool is_run_end(std::string_view frame) {
  return frame.find("\"type\":\"RUN_FINISHED\"") != std::string_view::npos ||
         frame.find("\"type\":\"RUN_ERROR\"") != std::string_view::npos;
}

// ------------------------------------------------------------------------------------------------ fanout

// One follower of the fan-out: a non-blocking socket read straight from epoll, its bytes given to Beast's parser by
// hand — no Asio operation per read: this loop reads every follower for each batch the server writes, and must
// cost less than the server does to write them. Not thread-safe.
struct Follower {
  int fd = -1;
  http::response_parser<http::string_body> parser;
  std::string in;     // received, not yet parsed
  int ends = 0;       // run ends read: the first turn's (its replay), then one per measured turn
  bool gone = false;  // refused, or the stream broke
  Follower() {
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    parser.eager(true);
    // Touched once here: a first turn whose reads fault in each follower's buffers costs the client (not the
    // server) twice the CPU of the next ones, and would be measured as the server's delay.
    in.resize(16 << 10);
    in.clear();
    parser.get().body().resize(16 << 10);
    parser.get().body().clear();
  }
};

struct Arrival {
  int64_t seq;
  double ms;
  uint32_t follower;
};

// Opens a blocking connection to 127.0.0.1:port and sends `request`; -1 when it fails.
int connect_and_send(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(static_cast<uint16_t>(port));
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 ||
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads what the follower's socket holds and hands its complete frames' sequence numbers to `arrived` (stamped
// after the read that completed them); counts run ends. False once the stream is over.
bool read_follower(Follower& f, uint32_t index, std::vector<Arrival>& arrived, bool record) {
  char buf[64 << 10];
  for (;;) {
    const ssize_t n = ::recv(f.fd, buf, sizeof buf, 0);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    const double now = wall_ms();
    f.in.append(buf, static_cast<size_t>(n));
    beast::error_code ec;
    size_t used = 0;
    while (used < f.in.size() && !f.parser.is_done()) {
      const size_t k = f.parser.put(net::buffer(f.in.data() + used, f.in.size() - used), ec);
      used += k;
      if (ec == http::error::need_more) break;
      if (ec) return false;
      if (k == 0) break;
    }
    f.in.erase(0, used);
    if (!f.parser.is_header_done()) continue;
    if (f.parser.get().result_int() != 200) return false;
    std::string& body = f.parser.get().body();
    size_t start = 0;
    for (size_t end = body.find("\n\n"); end != std::string::npos; end = body.find("\n\n", start)) {
      const std::string_view frame = std::string_view(body).substr(start, end - start);
      start = end + 2;
      const int64_t seq = seq_of(frame);
      if (seq < 0) continue;  // a keep-alive
      if (record && f.ends > 0) arrived.push_back(Arrival{seq, now, index});
      if (is_run_end(frame)) ++f.ends;
    }
    body.erase(0, start);
    if (f.parser.is_done()) return false;
    if (static_cast<size_t>(n) < sizeof buf) return true;  // drained (a short read): wait for epoll again
  }
}

json fanout(int port, const std::string& token, int followers, int server_pid, int turns) {
  const std::string thread = "fan-" + new_id();
  // 1. A first turn makes the thread.
  {
    net::io_context io{1};
    bool made = false;
    std::make_shared<SseCall>(
        io, port, post_run(token, thread, new_id(), "hi"),
        [&](const Frame& f) {
          made = made || is_run_end(f.text);
          return !made;
        },
        [](int, bool) {})
        ->start();
    io.run_for(std::chrono::seconds(60));
    if (!made) return json{{"error", "the first turn did not finish"}};
  }

  // 2. The followers read its replay.
  const std::string request = "GET /api/v1/agent/runs/" + thread +
                              "/events?follow=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token +
                              "\r\nAccept: text/event-stream\r\n\r\n";
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  std::vector<std::unique_ptr<Follower>> fs;
  std::vector<Arrival> arrived(static_cast<size_t>(followers) * 64 * static_cast<size_t>(turns));
  arrived.clear();  // its pages touched before anything is measured (see Follower)
  int refused = 0;
  for (int i = 0; i < followers; ++i) {
    auto f = std::make_unique<Follower>();
    f->fd = connect_and_send(port, request);
    if (f->fd < 0) {
      ++refused;
      f->gone = true;
    } else {
      ::fcntl(f->fd, F_SETFL, ::fcntl(f->fd, F_GETFL) | O_NONBLOCK);
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u32 = static_cast<uint32_t>(i);
      ::epoll_ctl(ep, EPOLL_CTL_ADD, f->fd, &ev);
    }
    fs.push_back(std::move(f));
  }
  // Reads until every follower still there has read `ends` run ends (or the deadline passes).
  auto read_until = [&](int ends, bool record, Clock::time_point deadline) {
    epoll_event events[256];
    auto behind = [&] {
      for (const auto& f : fs)
        if (!f->gone && f->ends < ends) return true;
      return false;
    };
    while (behind() && Clock::now() < deadline) {
      const int n = ::epoll_wait(ep, events, 256, 100);
      for (int i = 0; i < n; ++i) {
        const uint32_t index = events[i].data.u32;
        Follower& f = *fs[index];
        if (f.gone) continue;
        if (!read_follower(f, index, arrived, record)) {
          f.gone = true;
          if (f.ends == 0) ++refused;
          ::epoll_ctl(ep, EPOLL_CTL_DEL, f.fd, nullptr);
        }
      }
    }
  };
  read_until(1, false, Clock::now() + std::chrono::seconds(120));
  int ready = 0;
  for (const auto& f : fs) ready += !f->gone && f->ends >= 1;
  // What opening a thousand streams left to do (on both sides) is done before the first measured turn.
  const auto settle = Clock::now() + std::chrono::milliseconds(500);
  read_until(2, false, settle);

  // 3. The measured turns, one after the other; each is posted (and its stream read, for the events' timestamps)
  // on a thread of its own while this one reads the followers.
  std::map<int64_t, int64_t> stamp;  // seq -> the event's timestamp
  std::map<int64_t, int> turn_of;    // seq -> the measured turn (1..turns)
  int64_t measured_events = 0;
  const double server_before = process_cpu_ms(server_pid);
  const double cpu_before = cpu_ms();
  const double wall_before = wall_ms();
  int done_turns = 0;
  for (int t = 1; t <= turns && ready > 0; ++t) {
    std::map<int64_t, int64_t> stamps;
    std::thread poster([&] {
      net::io_context io{1};
      std::make_shared<SseCall>(
          io, port, post_run(token, thread, new_id(), "one turn for many followers"),
          [&](const Frame& fr) {
            const int64_t seq = seq_of(fr.text);
            if (seq >= 0) stamps[seq] = number_after(fr.text, "\"timestamp\":");
            return !is_run_end(fr.text);
          },
          [](int, bool) {})
          ->start();
      io.run_for(std::chrono::seconds(60));
    });
    read_until(1 + t, true, Clock::now() + std::chrono::seconds(60));
    poster.join();
    for (const auto& [seq, ts] : stamps) {
      stamp[seq] = ts;
      turn_of[seq] = t;
    }
    measured_events += static_cast<int64_t>(stamps.size());
    done_turns = t;
    if (std::getenv("AGENTRT_BENCH_DEBUG"))
      std::fprintf(stderr, "after turn %d: client cpu %.1f ms, server cpu %.1f ms, wall %.1f ms\n", t,
                   cpu_ms() - cpu_before, process_cpu_ms(server_pid) - server_before, wall_ms() - wall_before);
  }
  const double cpu = cpu_ms() - cpu_before;
  const double server_cpu = process_cpu_ms(server_pid) - server_before;
  const double wall = wall_ms() - wall_before;
  for (const auto& f : fs)
    if (f->fd >= 0) ::close(f->fd);
  ::close(ep);

  std::map<int64_t, double> first;  // seq -> first arrival at any follower
  std::vector<int64_t> per_follower(fs.size(), 0);
  for (const auto& a : arrived) {
    auto it = first.find(a.seq);
    if (it == first.end() || a.ms < it->second) first[a.seq] = a.ms;
    ++per_follower[a.follower];
  }
  std::vector<double> from_stamp, from_first, first_from_stamp;
  std::vector<std::vector<double>> per_turn(static_cast<size_t>(turns) + 1);
  for (const auto& a : arrived) {
    from_first.push_back(a.ms - first[a.seq]);
    const auto st = stamp.find(a.seq);
    if (st == stamp.end() || st->second <= 0) continue;
    from_stamp.push_back(a.ms - static_cast<double>(st->second));
    per_turn[static_cast<size_t>(turn_of[a.seq])].push_back(from_stamp.back());
  }
  for (const auto& [seq, at] : first) {
    const auto st = stamp.find(seq);
    if (st != stamp.end() && st->second > 0) first_from_stamp.push_back(at - static_cast<double>(st->second));
  }
  if (std::getenv("AGENTRT_BENCH_DEBUG")) {  // per event: the spread of its arrivals after the first
    std::map<int64_t, std::vector<double>> by_seq;
    for (const auto& a : arrived) by_seq[a.seq].push_back(a.ms - first[a.seq]);
    for (auto& [seq, v] : by_seq)
      std::fprintf(stderr, "turn %d seq %lld: first %.1f ms after its stamp, spread p50 %.1f p90 %.1f max %.1f\n",
                   turn_of[seq], static_cast<long long>(seq), first[seq] - static_cast<double>(stamp[seq]), pct(v, 0.5),
                   pct(v, 0.9), pct(v, 1.0));
  }
  int complete = 0;
  for (size_t i = 0; i < fs.size(); ++i) complete += measured_events > 0 && per_follower[i] >= measured_events;
  json per_turn_p99 = json::array();
  for (int t = 1; t <= done_turns; ++t) per_turn_p99.push_back(pct(per_turn[static_cast<size_t>(t)], 0.99));
  return json{{"followers", followers},
              {"open", ready},
              {"refused", refused},
              {"turns", done_turns},
              {"events_in_turns", measured_events},
              {"followers_with_every_event", complete},
              {"delivery_ms_p50", pct(from_stamp, 0.5)},
              {"delivery_ms_p99", pct(from_stamp, 0.99)},
              {"delivery_ms_max", pct(from_stamp, 1.0)},
              {"delivery_ms_p99_per_turn", per_turn_p99},
              {"after_first_arrival_ms_p50", pct(from_first, 0.5)},
              {"after_first_arrival_ms_p99", pct(from_first, 0.99)},
              {"after_first_arrival_ms_max", pct(from_first, 1.0)},
              {"first_arrival_ms_p50", pct(first_from_stamp, 0.5)},
              {"first_arrival_ms_max", pct(first_from_stamp, 1.0)},
              {"wall_ms", std::round(wall * 10) / 10},
              {"server_cpu_ms", std::round(server_cpu * 10) / 10},
              {"client_cpu_ms", std::round(cpu * 10) / 10}};
}

// ------------------------------------------------------------------------------------------------ turns

json turns(int port, const std::string& token, int clients, double seconds, int server_pid) {
  net::io_context io{1};
  const auto start = Clock::now();
  const auto stop_at = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::vector<double> latencies;
  std::map<std::string, int> failures;
  const double cpu_before = cpu_ms();
  const double server_before = process_cpu_ms(server_pid);
  std::function<void()> one;
  one = [&] {
    if (Clock::now() >= stop_at) return;
    const auto t0 = Clock::now();
    auto outcome = std::make_shared<std::string>("truncated");
    std::make_shared<SseCall>(
        io, port, post_run(token, "load-" + new_id(), new_id(), "hello"),
        [outcome](const Frame& f) {
          if (!is_run_end(f.text)) return true;
          *outcome = f.text.find("RUN_FINISHED") != std::string_view::npos ? "RUN_FINISHED" : "RUN_ERROR";
          return false;
        },
        [&, t0, outcome](int status, bool) {
          if (*outcome == "RUN_FINISHED")
            latencies.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
          else
            ++failures[status == 200 || status == 0 ? *outcome : std::to_string(status)];
          one();
        })
        ->start();
  };
  for (int i = 0; i < clients; ++i) one();
  io.run_for(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds + 60)));
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const double cpu = cpu_ms() - cpu_before;
  const double server_cpu = process_cpu_ms(server_pid) - server_before;
  const double n = static_cast<double>(std::max<size_t>(1, latencies.size()));
  return json{{"clients", clients},
              {"seconds", std::round(elapsed * 100) / 100},
              {"turns", latencies.size()},
              {"turns_per_second", std::round(static_cast<double>(latencies.size()) / elapsed * 10) / 10},
              {"failures", failures},
              {"server_cpu_ms_per_turn", std::round(server_cpu / n * 1000) / 1000},
              {"client_cpu_ms_per_turn", std::round(cpu / n * 1000) / 1000},
              {"latency_ms_p50", pct(latencies, 0.5)},
              {"latency_ms_p99", pct(latencies, 0.99)}};
}

// ------------------------------------------------------------------------------------------------ health

json health(int port, int count) {
  net::io_context io{1};
  std::vector<double> latencies;
  int failed = 0;
  net::steady_timer gap(io), limit(io);
  std::function<void(int)> one;
  one = [&](int left) {
    if (left == 0) return;
    const auto t0 = Clock::now();
    auto done = std::make_shared<bool>(false);
    auto next = [&, left, t0, done](int status) {
      if (*done) return;
      *done = true;
      limit.cancel();
      if (status == 200)
        latencies.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      else
        ++failed;
      gap.expires_after(std::chrono::milliseconds(20));
      gap.async_wait([&, left](beast::error_code) { one(left - 1); });
    };
    auto call = std::make_shared<SseCall>(
        io, port, "GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", [](const Frame&) { return true; },
        [next](int status, bool ended) { next(ended ? status : 0); });
    limit.expires_after(std::chrono::seconds(5));
    limit.async_wait([call, next](beast::error_code ec) {
      if (ec) return;
      call->close();
      next(0);
    });
    call->start();
  };
  one(count);
  io.run_for(std::chrono::seconds(count * 6 + 10));
  return json{{"health_ms_p50", pct(latencies, 0.5)},
              {"health_ms_p99", pct(latencies, 0.99)},
              {"health_ms_max", pct(latencies, 1.0)},
              {"health_failed", failed + (count - failed - static_cast<int>(latencies.size()))}};
}

int usage() {
  std::fprintf(stderr,
               "usage: agentrt-bench-server fanout PORT TOKEN FOLLOWERS (1..5000) [SERVER_PID [TURNS (1..20)]]\n"
               "       agentrt-bench-server turns PORT TOKEN CLIENTS (1..256) SECONDS (0..60] [SERVER_PID]\n"
               "       agentrt-bench-server health PORT TOKEN COUNT (1..1000)\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) return usage();
  const std::string mode = argv[1];
  const int port = std::atoi(argv[2]);
  const std::string token = argv[3];
  const int n = std::atoi(argv[4]);
  if (port <= 0 || port > 65535) return usage();
  json out;
  if (mode == "fanout" && argc >= 5 && argc <= 7 && n >= 1 && n <= 5000) {
    const int turns = argc == 7 ? std::atoi(argv[6]) : 1;
    if (turns < 1 || turns > 20) return usage();
    out = fanout(port, token, n, argc >= 6 ? std::atoi(argv[5]) : 0, turns);
  } else if (mode == "turns" && (argc == 6 || argc == 7) && n >= 1 && n <= 256) {
    const double seconds = std::atof(argv[5]);
    if (!(seconds > 0 && seconds <= 60)) return usage();
    out = turns(port, token, n, seconds, argc == 7 ? std::atoi(argv[6]) : 0);
  } else if (mode == "health" && argc == 5 && n >= 1 && n <= 1000) {
    out = health(port, n);
  } else {
    return usage();
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
