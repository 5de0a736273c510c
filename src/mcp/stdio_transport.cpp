// The stdio transport: the server is a child process speaking newline-delimited JSON-RPC on its stdin/stdout;
// its stderr goes to the log.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "agentrt/json_limits.hpp"
#include "mcp/mcp_transport.hpp"

extern char** environ;

namespace agentrt {
inline namespace v1 {
namespace mcp {
namespace {

constexpr size_t kMaxStderrLine = 4096;

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

std::string exit_reason(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("was killed by signal {}", WTERMSIG(status));
  return "stopped";
}

// Thread-safe as McpTransport says. The process runs in its own process group, so that what it starts (npx starts
// node) is stopped with it.
class StdioTransport final : public McpTransport {
 public:
  StdioTransport(McpServerConfig config, size_t max_depth) : cfg_(std::move(config)), max_depth_(max_depth) {}
  ~StdioTransport() override { close(); }

  std::string kind() const override { return "stdio"; }

  void open(TransportEvents events) override {
    events_ = std::move(events);
    // Everything the child needs is built before fork(): after it, only async-signal-safe calls.
    std::vector<std::string> env_strings;
    for (char** e = environ; e && *e; ++e) {
      std::string_view kv(*e);
      auto eq = kv.find('=');
      if (eq != std::string_view::npos && cfg_.env.count(std::string(kv.substr(0, eq)))) continue;
      env_strings.emplace_back(kv);
    }
    for (const auto& [k, v] : cfg_.env) env_strings.push_back(k + "=" + v);
    std::vector<char*> envp, argv;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = cfg_.command;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    int in[2], out[2], err[2], status[2];
    // stdin is a socket, so that writing to a server that died is an error (MSG_NOSIGNAL), not SIGPIPE.
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0)
      throw Error(ErrorCode::io, fmt::format("MCP server {}: socketpair: {}", cfg_.name, std::strerror(errno)));
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 || ::pipe2(status, O_CLOEXEC) != 0)
      throw Error(ErrorCode::io, fmt::format("MCP server {}: pipe: {}", cfg_.name, std::strerror(errno)));
    const char* cwd = cfg_.cwd.empty() ? nullptr : cfg_.cwd.c_str();
    pid_t pid = ::fork();
    if (pid < 0) throw Error(ErrorCode::io, fmt::format("MCP server {}: fork: {}", cfg_.name, std::strerror(errno)));
    if (pid == 0) {
      ::setpgid(0, 0);
      ::dup2(in[1], 0);
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      int e = 0;
      if (cwd && ::chdir(cwd) != 0) {
        e = errno;
      } else {
        ::execvpe(argv[0], argv.data(), envp.data());
        e = errno;
      }
      ssize_t w = ::write(status[1], &e, sizeof e);
      (void)w;
      ::_exit(127);
    }
    ::close(in[1]);
    ::close(out[1]);
    ::close(err[1]);
    ::close(status[1]);
    int child_errno = 0;
    ssize_t n;
    do n = ::read(status[0], &child_errno, sizeof child_errno);
    while (n < 0 && errno == EINTR);
    ::close(status[0]);
    if (n == static_cast<ssize_t>(sizeof child_errno)) {
      ::close(in[0]);
      ::close(out[0]);
      ::close(err[0]);
      int st = 0;
      ::waitpid(pid, &st, 0);
      throw Error(ErrorCode::io, fmt::format("MCP server {}: cannot start {}{}: {}", cfg_.name, cfg_.command[0],
                                             cwd ? fmt::format(" in {}", cfg_.cwd) : "", std::strerror(child_errno)));
    }
    pid_ = pid;
    in_fd_ = in[0];
    out_fd_ = out[0];
    err_fd_ = err[0];
    reader_ = std::thread([this] { read_stdout(); });
    err_reader_ = std::thread([this] { read_stderr(); });
  }

  void send(const json& message) override {
    std::string line = message.dump(-1, ' ', false, json::error_handler_t::replace);
    line.push_back('\n');
    std::lock_guard<std::mutex> lock(write_mutex_);
    if (in_fd_ < 0) throw Error(ErrorCode::io, fmt::format("MCP server {} is not running", cfg_.name));
    size_t off = 0;
    while (off < line.size()) {
      ssize_t w = ::send(in_fd_, line.data() + off, line.size() - off, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0)
        throw Error(ErrorCode::io, fmt::format("MCP server {}: write failed: {}", cfg_.name, std::strerror(errno)));
      off += static_cast<size_t>(w);
    }
  }

  void close() override {
    if (closing_.exchange(true)) {
      join();
      return;
    }
    {
      std::lock_guard<std::mutex> lock(write_mutex_);
      if (in_fd_ >= 0) ::shutdown(in_fd_, SHUT_RDWR);  // the server sees the end of its input
    }
    if (pid_ > 0) {
      ::kill(-pid_, SIGTERM);
      std::unique_lock<std::mutex> lock(exit_mutex_);
      if (!exit_cv_.wait_for(lock, std::chrono::seconds(2), [&] { return exited_; })) {
        ::kill(-pid_, SIGKILL);
        killed_ = true;
      }
    }
    join();
  }

 private:
  void join() {
    if (reader_.joinable()) reader_.join();
    if (err_reader_.joinable()) err_reader_.join();
    std::lock_guard<std::mutex> lock(write_mutex_);
    close_fd(in_fd_);
    close_fd(out_fd_);
    close_fd(err_fd_);
  }

  void read_stdout() {
    std::string buf;
    bool skipping = false;  // inside a line past the limit: dropped up to its end
    char chunk[65536];
    for (;;) {
      // A process that left a descendant holding its stdout open must not keep this thread: once close() has
      // killed the group, the reader stops waiting.
      pollfd p{out_fd_, POLLIN, 0};
      int ready = ::poll(&p, 1, 250);
      if (ready == 0) {
        if (killed_) break;
        continue;
      }
      if (ready < 0 && errno == EINTR) continue;
      ssize_t n = ::read(out_fd_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      std::string_view data(chunk, static_cast<size_t>(n));
      while (!data.empty()) {
        auto nl = data.find('\n');
        std::string_view part = data.substr(0, nl);
        if (!skipping) {
          if (buf.size() + part.size() > cfg_.max_message_bytes) {
            buf.clear();
            skipping = true;
            events_.on_message(json(fmt::format("a message of more than {} bytes", cfg_.max_message_bytes)));
          } else {
            buf.append(part);
          }
        }
        if (nl == std::string_view::npos) break;
        data.remove_prefix(nl + 1);
        if (!skipping) {
          if (!buf.empty() && buf.back() == '\r') buf.pop_back();
          if (buf.find_first_not_of(" \t") != std::string::npos)
            events_.on_message(parse_server_message(buf, cfg_.max_message_bytes, max_depth_));
        }
        buf.clear();
        skipping = false;
      }
    }
    int status = 0;
    pid_t r;
    do r = ::waitpid(pid_, &status, 0);
    while (r < 0 && errno == EINTR);
    {
      std::lock_guard<std::mutex> lock(exit_mutex_);
      exited_ = true;
    }
    exit_cv_.notify_all();
    if (!closing_) events_.on_closed(fmt::format("the process {}", r == pid_ ? exit_reason(status) : "ended"));
  }

  bool exited_flag() {
    std::lock_guard<std::mutex> lock(exit_mutex_);
    return exited_ && closing_;
  }

  void read_stderr() {
    std::string line;
    char chunk[4096];
    for (;;) {
      pollfd p{err_fd_, POLLIN, 0};
      int ready = ::poll(&p, 1, 250);
      if (ready == 0) {
        if (killed_ || exited_flag()) break;
        continue;
      }
      if (ready < 0 && errno == EINTR) continue;
      ssize_t n = ::read(err_fd_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      for (ssize_t i = 0; i < n; ++i) {
        if (chunk[i] == '\n') {
          if (!line.empty()) events_.on_log(LogLevel::info, line);
          line.clear();
        } else if (line.size() < kMaxStderrLine) {
          line.push_back(chunk[i]);
        }
      }
    }
    if (!line.empty()) events_.on_log(LogLevel::info, line);
  }

  McpServerConfig cfg_;
  size_t max_depth_;
  TransportEvents events_;
  pid_t pid_ = -1;
  int in_fd_ = -1, out_fd_ = -1, err_fd_ = -1;
  std::mutex write_mutex_;
  std::atomic<bool> closing_{false};
  std::atomic<bool> killed_{false};
  std::mutex exit_mutex_;
  std::condition_variable exit_cv_;
  bool exited_ = false;
  std::thread reader_, err_reader_;
};

}  // namespace

std::unique_ptr<McpTransport> make_stdio_transport(const McpServerConfig& config, size_t max_json_depth) {
  return std::make_unique<StdioTransport>(config, max_json_depth);
}

json parse_server_message(std::string_view text, size_t max_bytes, size_t max_depth) {
  if (text.size() > max_bytes) return json(fmt::format("a message of more than {} bytes", max_bytes));
  try {
    json j = parse_json_text(text, max_depth, "the message");
    if (!j.is_object()) return json(std::string("a message that is not a JSON object"));
    return j;
  } catch (const Error& e) {
    // "the message is not valid JSON: ..." / "the message is nested deeper than N levels"
    std::string why = e.message();
    if (why.rfind("the message ", 0) == 0) why = "a message that " + why.substr(12);
    return json(why);
  }
}

}  // namespace mcp
}  // namespace v1
}  // namespace agentrt
