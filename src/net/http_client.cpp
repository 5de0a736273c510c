#include "net/http_client.hpp"

#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <mutex>

#include "agentrt/error.hpp"

namespace agentrt {
inline namespace v1 {
namespace net {
namespace {

// How long one poll may sleep: the bound on how late a cancellation or an idle timeout is noticed,
// since CancelToken cannot wake a poll itself.
constexpr std::chrono::milliseconds kPollSlice{25};

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Never cleaned up: other libraries in the host may use libcurl after we are gone.
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
      throw Error(ErrorCode::internal, "curl_global_init failed");
    }
  });
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// "host:port" of a URL for error messages: never the user info, path or query, which may hold secrets.
std::string describe_url(const std::string& url) {
  CURLU* u = curl_url();
  if (!u) return "the server";
  std::string out = "the server";
  if (curl_url_set(u, CURLUPART_URL, url.c_str(), 0) == CURLUE_OK) {
    char* host = nullptr;
    char* port = nullptr;
    curl_url_get(u, CURLUPART_HOST, &host, 0);
    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT);
    if (host) out = port ? fmt::format("{}:{}", host, port) : std::string(host);
    curl_free(host);
    curl_free(port);
  }
  curl_url_cleanup(u);
  return out;
}

struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
struct MimeDeleter {
  void operator()(curl_mime* m) const { curl_mime_free(m); }
};

using Clock = std::chrono::steady_clock;

// The state of one transfer, shared with libcurl's callbacks through their user-data pointer.
struct Transfer {
  const HttpRequest* request = nullptr;
  const CancelToken* cancel = nullptr;
  CURL* easy = nullptr;
  HttpResponse response;
  bool head_done = false;
  bool streaming = false;
  std::exception_ptr error;
  Clock::time_point last_activity = Clock::now();
  curl_off_t last_dl = 0, last_ul = 0;

  void capture_head() {
    head_done = true;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &response.status);
    response.headers.clear();
    // origin CURLH_HEADER, request -1: the headers of the last response, i.e. the final one.
    curl_header* prev = nullptr;
    while (curl_header* h = curl_easy_nextheader(easy, CURLH_HEADER, -1, prev)) {
      response.headers.emplace_back(h->name, h->value);
      prev = h;
    }
    if (request->on_headers) streaming = request->on_headers(response) && static_cast<bool>(request->on_body);
  }
};

size_t on_write(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  t->last_activity = Clock::now();
  try {
    if (!t->head_done) t->capture_head();
    if (t->streaming) {
      t->request->on_body(std::string_view(data, n));
    } else {
      if (t->response.body.size() + n > t->request->max_body_bytes) {
        throw Error(ErrorCode::too_large,
                    fmt::format("the HTTP response body is over {} bytes", t->request->max_body_bytes));
      }
      t->response.body.append(data, n);
    }
  } catch (...) {
    t->error = std::current_exception();
    return CURL_WRITEFUNC_ERROR;
  }
  return n;
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  t->last_activity = Clock::now();
  // The blank line that ends the final response's headers: the head is complete before any body byte, so a
  // streaming caller sees it even when the body never comes (an empty or cut one).
  const std::string_view line(data, n);
  if (!t->head_done && (line == "\r\n" || line == "\n")) {
    long status = 0;
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 200) {
      try {
        t->capture_head();
      } catch (...) {
        t->error = std::current_exception();
        return 0;  // aborts the transfer; the error is rethrown
      }
    }
  }
  return n;
}

int on_progress(void* user, curl_off_t, curl_off_t dlnow, curl_off_t, curl_off_t ulnow) {
  auto* t = static_cast<Transfer*>(user);
  // An upload in progress is activity too: a large audio file may take long before any byte comes back.
  if (dlnow != t->last_dl || ulnow != t->last_ul) {
    t->last_dl = dlnow;
    t->last_ul = ulnow;
    t->last_activity = Clock::now();
  }
  return t->cancel->cancelled() ? 1 : 0;
}

}  // namespace

bool header_name_equals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
           return lower(x) == lower(y);
         });
}

std::optional<std::string> find_header(const HttpHeaders& headers, std::string_view name) {
  for (const auto& [k, v] : headers) {
    if (header_name_equals(k, name)) return v;
  }
  return std::nullopt;
}

struct HttpClient::Handle {
  // Each handle has its own multi handle, whose connection cache keeps the connection open between
  // requests; the multi interface also lets send() poll in short slices and notice cancellation.
  CURLM* multi = nullptr;
  CURL* easy = nullptr;
  Handle() : multi(curl_multi_init()), easy(curl_easy_init()) {
    if (!multi || !easy) {
      cleanup();
      throw Error(ErrorCode::internal, "could not create a libcurl handle");
    }
  }
  ~Handle() { cleanup(); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

 private:
  void cleanup() {
    if (easy) curl_easy_cleanup(easy);
    if (multi) curl_multi_cleanup(multi);
    easy = nullptr;
    multi = nullptr;
  }
};

HttpClient::HttpClient() : HttpClient(Options{}) {}

HttpClient::HttpClient(Options options) : options_(std::move(options)) {
  global_init();
  // libcurl itself reads the proxy variables (http_proxy, HTTPS_PROXY, NO_PROXY, ...) but not these:
  // only the curl tool reads CURL_CA_BUNDLE, and SSL_CERT_FILE/SSL_CERT_DIR depend on the TLS backend.
  ca_file_ = env_or_empty("CURL_CA_BUNDLE");
  if (ca_file_.empty()) ca_file_ = env_or_empty("SSL_CERT_FILE");
  ca_path_ = env_or_empty("SSL_CERT_DIR");
}

HttpClient::~HttpClient() = default;

std::unique_ptr<HttpClient::Handle> HttpClient::acquire() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idle_.empty()) {
      auto h = std::move(idle_.back());
      idle_.pop_back();
      return h;
    }
  }
  return std::make_unique<Handle>();
}

void HttpClient::release(std::unique_ptr<Handle> handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (idle_.size() < options_.max_idle_handles) idle_.push_back(std::move(handle));
}

HttpResponse HttpClient::send(const HttpRequest& request, const CancelToken& cancel) {
  if (cancel.cancelled()) throw Error(ErrorCode::cancelled, "HTTP request cancelled before it started");

  std::unique_ptr<Handle> handle = acquire();
  CURL* easy = handle->easy;
  CURLM* multi = handle->multi;
  curl_easy_reset(easy);  // keeps the connection cache, clears every option of the previous request

  Transfer t;
  t.request = &request;
  t.cancel = &cancel;
  t.easy = easy;

  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(easy, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(easy, CURLOPT_USERAGENT, options_.user_agent.c_str());
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(request.connect_timeout.count()));
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, static_cast<long>(request.request_timeout.count()));
  if (!ca_file_.empty()) curl_easy_setopt(easy, CURLOPT_CAINFO, ca_file_.c_str());
  if (!ca_path_.empty()) curl_easy_setopt(easy, CURLOPT_CAPATH, ca_path_.c_str());
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &on_write);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, &on_header);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(easy, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, &on_progress);
  curl_easy_setopt(easy, CURLOPT_XFERINFODATA, &t);

  std::unique_ptr<curl_slist, SlistDeleter> headers;
  auto add_header = [&](const std::string& line) {
    curl_slist* next = curl_slist_append(headers.get(), line.c_str());
    if (!next) throw Error(ErrorCode::internal, "out of memory building HTTP headers");
    (void)headers.release();
    headers.reset(next);
  };
  for (const auto& [name, value] : request.headers) {
    // "Name;" is libcurl's way to send a header with an empty value ("Name:" would remove it).
    add_header(value.empty() ? name + ";" : name + ": " + value);
  }
  // Servers that do not answer 100-continue would otherwise cost every large upload a one-second wait.
  add_header("Expect:");
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers.get());

  std::unique_ptr<curl_mime, MimeDeleter> mime;
  if (!request.multipart.empty()) {
    mime.reset(curl_mime_init(easy));
    for (const auto& part : request.multipart) {
      curl_mimepart* p = curl_mime_addpart(mime.get());
      curl_mime_name(p, part.name.c_str());
      curl_mime_data(p, part.data.data(), part.data.size());
      if (!part.filename.empty()) curl_mime_filename(p, part.filename.c_str());
      if (!part.content_type.empty()) curl_mime_type(p, part.content_type.c_str());
    }
    curl_easy_setopt(easy, CURLOPT_MIMEPOST, mime.get());
    if (request.method != "POST") curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  } else if (request.method == "GET") {
    curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
  } else if (request.method == "HEAD") {
    curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
  } else {
    const std::string_view body = request.body_view ? *request.body_view : std::string_view(request.body);
    // CURLOPT_POSTFIELDS does not copy: libcurl reads the caller's buffer while it sends.
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body.empty() ? "" : body.data());
    if (request.method != "POST") curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }

  if (curl_multi_add_handle(multi, easy) != CURLM_OK) {
    throw Error(ErrorCode::internal, "could not start a libcurl transfer");
  }
  // Whatever happens below, detach the transfer (which closes its connection if it was cut short) and
  // give the handle back: libcurl never sees a request object that went out of scope.
  struct Detach {
    HttpClient* client;
    std::unique_ptr<Handle>& handle;
    ~Detach() {
      curl_multi_remove_handle(handle->multi, handle->easy);
      client->release(std::move(handle));
    }
  } detach{this, handle};

  enum class Abort { none, cancelled, idle } abort = Abort::none;
  CURLcode result = CURLE_OK;
  bool finished = false;
  for (;;) {
    int running = 0;
    CURLMcode mc = curl_multi_perform(multi, &running);
    if (mc != CURLM_OK) {
      throw Error(ErrorCode::io,
                  fmt::format("HTTP transfer to {} failed: {}", describe_url(request.url), curl_multi_strerror(mc)));
    }
    int queued = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi, &queued)) {
      if (msg->msg == CURLMSG_DONE) {
        result = msg->data.result;
        finished = true;
      }
    }
    if (finished) break;
    if (cancel.cancelled()) {
      abort = Abort::cancelled;
      break;
    }
    auto wait = kPollSlice;
    if (request.idle_timeout.count() > 0) {
      auto idle_for = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t.last_activity);
      if (idle_for >= request.idle_timeout) {
        abort = Abort::idle;
        break;
      }
      wait = std::min(wait, request.idle_timeout - idle_for);
    }
    curl_multi_poll(multi, nullptr, 0, static_cast<int>(std::max<long long>(1, wait.count())), nullptr);
  }

  if (t.error) std::rethrow_exception(t.error);
  if (abort == Abort::cancelled || result == CURLE_ABORTED_BY_CALLBACK) {
    throw Error(ErrorCode::cancelled, fmt::format("HTTP request to {} cancelled", describe_url(request.url)));
  }
  if (abort == Abort::idle) {
    throw Error(ErrorCode::timeout, fmt::format("HTTP request to {}: no data received for {} ms",
                                                describe_url(request.url), request.idle_timeout.count()));
  }
  if (result != CURLE_OK) {
    const char* detail = errbuf[0] ? errbuf : curl_easy_strerror(result);
    if (result == CURLE_OPERATION_TIMEDOUT) {
      throw Error(ErrorCode::timeout,
                  fmt::format("HTTP request to {} timed out: {}", describe_url(request.url), detail));
    }
    throw Error(ErrorCode::io, fmt::format("HTTP request to {} failed: {}", describe_url(request.url), detail));
  }
  if (!t.head_done) t.capture_head();  // a response without a body never reached on_write
  return std::move(t.response);
}

}  // namespace net
}  // namespace v1
}  // namespace agentrt
