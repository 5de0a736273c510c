#include "terminal_output.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace agentrt::cli {

namespace {

void escape(std::string& out, unsigned char c) {
  static const char* hex = "0123456789abcdef";
  out += "\\x";
  out += hex[c >> 4];
  out += hex[c & 15];
}

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// One filtered stream: the descriptor it writes to and a 0xC2 held back from the last piece.
struct Sink {
  int fd;
  std::string pending;
};

ssize_t sink_write(void* cookie, const char* data, size_t size) {
  auto* sink = static_cast<Sink*>(cookie);
  const std::string shown = terminal_text(std::string_view(data, size), sink->pending);
  return write_all(sink->fd, shown.data(), shown.size()) ? static_cast<ssize_t>(size) : -1;
}

int sink_close(void* cookie) {
  auto* sink = static_cast<Sink*>(cookie);
  if (!sink->pending.empty()) write_all(sink->fd, sink->pending.data(), sink->pending.size());
  delete sink;
  return 0;
}

FILE* filtered(int fd, int buffering) {
  auto* sink = new Sink{fd, {}};
  cookie_io_functions_t io{};
  io.write = sink_write;
  io.close = sink_close;
  FILE* f = fopencookie(sink, "w", io);
  if (!f) {
    delete sink;
    return nullptr;
  }
  setvbuf(f, nullptr, buffering, buffering == _IONBF ? 0 : BUFSIZ);
  return f;
}

}  // namespace

std::string terminal_text(std::string_view text, std::string& pending) {
  std::string out;
  out.reserve(text.size() + pending.size());
  std::string_view rest = text;
  if (!pending.empty() && !rest.empty()) {  // a 0xC2 ended the last piece
    pending.clear();
    if (static_cast<unsigned char>(rest[0]) >= 0x80 && static_cast<unsigned char>(rest[0]) <= 0x9f) {
      escape(out, 0xc2);
      escape(out, static_cast<unsigned char>(rest[0]));
      rest.remove_prefix(1);
    } else {
      out += '\xc2';
    }
  }
  for (size_t i = 0; i < rest.size(); ++i) {
    const auto c = static_cast<unsigned char>(rest[i]);
    if (c == '\n' || c == '\t' || (c >= 0x20 && c != 0x7f && c != 0xc2)) {
      out += static_cast<char>(c);
    } else if (c == '\r') {
      // dropped: it would move the cursor back over what the line shows
    } else if (c == 0xc2) {
      if (i + 1 == rest.size()) {
        pending.assign(1, static_cast<char>(c));
      } else if (const auto next = static_cast<unsigned char>(rest[i + 1]); next >= 0x80 && next <= 0x9f) {
        escape(out, c);
        escape(out, next);
        ++i;
      } else {
        out += static_cast<char>(c);
      }
    } else {
      escape(out, c);
    }
  }
  return out;
}

bool filter_terminal_output(FILE*& stream) {
  const bool is_err = stream == stderr;
  const int fd = is_err ? STDERR_FILENO : STDOUT_FILENO;
  FILE* f = filtered(fd, is_err ? _IONBF : (::isatty(fd) ? _IOLBF : _IOFBF));
  if (!f) return false;
  std::fflush(stream);
  stream = f;
  return true;
}

}  // namespace agentrt::cli
