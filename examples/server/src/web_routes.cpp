// The web page's static files: GET of a path outside /api/ answered from the configured web_root, with their
// types, cache headers and a content security policy; nothing outside the folder is reachable.
#include "routes.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace agentrt::server {

namespace {

namespace fs = std::filesystem;

// The largest file served (a built page's files are far smaller).
constexpr uintmax_t kMaxWebFileBytes = 32u << 20;

// Same-origin only: scripts, styles (inline styles too: React sets them), media the page made (blob:), images from
// data: and blob: URLs, the API and its objects on this origin.
constexpr std::string_view kPagePolicy =
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
    "media-src 'self' blob:; font-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'self'; "
    "frame-ancestors 'none'; form-action 'self'";

std::string_view content_type(std::string_view ext) {
  static constexpr std::pair<std::string_view, std::string_view> kTypes[] = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},
      {".map", "application/json"},
      {".txt", "text/plain; charset=utf-8"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".jpg", "image/jpeg"},
      {".jpeg", "image/jpeg"},
      {".gif", "image/gif"},
      {".webp", "image/webp"},
      {".ico", "image/x-icon"},
      {".woff", "font/woff"},
      {".woff2", "font/woff2"},
      {".ttf", "font/ttf"},
      {".wasm", "application/wasm"},
  };
  for (const auto& [e, type] : kTypes)
    if (e == ext) return type;
  return "application/octet-stream";
}

// A request path a file may answer: "/", or segments of [A-Za-z0-9._~@+-] that are not empty and do not start with
// '.' (no "..", no hidden files, nothing percent-encoded), at most 512 bytes.
bool plain_path(std::string_view path) {
  if (path.empty() || path.front() != '/' || path.size() > 512) return false;
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view seg = path.substr(start, end - start);
    if (seg.empty()) return end == path.size();  // only a trailing '/' (a folder's index.html)
    if (seg.front() == '.') return false;
    for (char ch : seg)
      if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-' || ch == '~' ||
            ch == '@' || ch == '+'))
        return false;
    start = end + 1;
  }
  return true;
}

[[noreturn]] void not_found() { throw ApiError{404, "not_found", "no such file"}; }

}  // namespace

bool is_web_request(const ServerConfig& cfg, const HttpRequest& req) {
  return !cfg.web_root.empty() && req.method == "GET" && req.path != kApi &&
         req.path.rfind(std::string(kApi) + "/", 0) != 0 && req.path != "/health";
}

void get_web(ServerContext& s, ApiCall& c) {
  const std::string& path = c.req.path;
  if (!plain_path(path)) not_found();
  std::error_code ec;
  const fs::path root = fs::canonical(s.cfg.web_root, ec);
  if (ec) not_found();
  fs::path file = root / fs::path(path.substr(1));
  if (path.back() == '/') file /= "index.html";
  // Symbolic links are followed only within the folder.
  const fs::path real = fs::canonical(file, ec);
  if (ec || !fs::is_regular_file(real, ec)) not_found();
  const std::string prefix = root.string() + "/";
  if (real.string().rfind(prefix, 0) != 0) not_found();
  const uintmax_t size = fs::file_size(real, ec);
  if (ec || size > kMaxWebFileBytes) not_found();
  const auto mtime = static_cast<uint64_t>(fs::last_write_time(real, ec).time_since_epoch().count());
  const std::string etag = fmt::format("\"{:x}-{:x}\"", size, mtime);

  HttpResponse r;
  const std::string ext = real.extension().string();
  const bool html = ext == ".html";
  r.content_type = std::string(content_type(ext));
  r.headers = {{"ETag", etag},
               {"X-Content-Type-Options", "nosniff"},
               {"Referrer-Policy", "no-referrer"},
               // The page is looked at again each time; Vite's hashed assets never change under their name.
               {"Cache-Control", html                             ? "no-cache"
                                 : path.rfind("/assets/", 0) == 0 ? "public, max-age=31536000, immutable"
                                                                  : "public, max-age=300"}};
  if (html) r.headers.emplace_back("Content-Security-Policy", std::string(kPagePolicy));
  if (c.req.header("If-None-Match") == etag) {
    r.status = 304;
    r.content_type.clear();
    c.send(std::move(r));
    return;
  }
  std::ifstream in(real, std::ios::binary);
  r.body.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) not_found();
  c.send(std::move(r));
}

}  // namespace agentrt::server
