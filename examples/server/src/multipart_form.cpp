#include "multipart_form.hpp"

#include <algorithm>
#include <cctype>

#include "agentrt/error.hpp"

namespace agentrt::server {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// `key=value` or `key="value"` parameters after the first ';' of a header value.
std::optional<std::string> header_param(std::string_view value, std::string_view key) {
  size_t pos = value.find(';');
  while (pos != std::string_view::npos) {
    std::string_view rest = value.substr(pos + 1);
    size_t end = 0;
    bool quoted = false;
    // A parameter ends at the next ';' outside quotes.
    for (; end < rest.size(); ++end) {
      if (rest[end] == '"') quoted = !quoted;
      if (rest[end] == ';' && !quoted) break;
    }
    std::string_view param = trim(rest.substr(0, end));
    const size_t eq = param.find('=');
    if (eq != std::string_view::npos && lower(trim(param.substr(0, eq))) == key) {
      std::string_view v = trim(param.substr(eq + 1));
      if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
      return std::string(v);
    }
    pos = end < rest.size() ? pos + 1 + end : std::string_view::npos;
  }
  return std::nullopt;
}

[[noreturn]] void bad(const char* what) {
  throw Error(ErrorCode::invalid_argument, std::string("multipart body: ") + what);
}

}  // namespace

std::optional<std::string> multipart_boundary(std::string_view content_type) {
  const std::string_view type = trim(content_type.substr(0, content_type.find(';')));
  if (lower(type) != "multipart/form-data") return std::nullopt;
  auto b = header_param(content_type, "boundary");
  if (!b || b->empty() || b->size() > 200) return std::nullopt;
  return b;
}

std::vector<FormPart> parse_multipart_form(std::string_view body, std::string_view boundary) {
  const std::string delim = "--" + std::string(boundary);
  std::vector<FormPart> parts;
  size_t pos = 0;
  if (body.substr(0, delim.size()) != delim) {
    pos = body.find("\r\n" + delim);
    if (pos == std::string_view::npos) bad("no opening boundary");
    pos += 2;
  }
  pos += delim.size();
  for (;;) {
    if (body.substr(pos, 2) == "--") return parts;  // the closing delimiter
    if (body.substr(pos, 2) != "\r\n") bad("a boundary is not followed by a line end");
    pos += 2;
    const size_t head_end = body.find("\r\n\r\n", pos);
    if (head_end == std::string_view::npos) bad("a part has no header block");
    FormPart part;
    std::string_view head = body.substr(pos, head_end - pos);
    while (!head.empty()) {
      const size_t eol = head.find("\r\n");
      std::string_view line = head.substr(0, eol);
      head = eol == std::string_view::npos ? std::string_view() : head.substr(eol + 2);
      const size_t colon = line.find(':');
      if (colon == std::string_view::npos) bad("a part header has no ':'");
      const std::string name = lower(trim(line.substr(0, colon)));
      const std::string_view value = trim(line.substr(colon + 1));
      if (name == "content-disposition") {
        part.name = header_param(value, "name").value_or("");
        part.filename = header_param(value, "filename").value_or("");
      } else if (name == "content-type") {
        part.content_type = std::string(value);
      }
    }
    pos = head_end + 4;
    const size_t next = body.find("\r\n" + delim, pos);
    if (next == std::string_view::npos) bad("no closing boundary");
    part.data = std::string(body.substr(pos, next - pos));
    parts.push_back(std::move(part));
    pos = next + 2 + delim.size();
  }
}

}  // namespace agentrt::server
