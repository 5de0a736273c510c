// S3ObjectStore against a real s3rver (tests/support/s3_server): the ObjectStore conformance suite
// path-style and virtual-hosted, conditional writes, retries and give-ups through a fault proxy, errors,
// presigned URLs fetched with libcurl, list pages, and a large object read in pieces.
#include <doctest/doctest.h>
#include <malloc.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>

#include "net/http_client.hpp"
#include "store/object_store_conformance.hpp"
#include "store/s3_object_store.hpp"
#include "support/s3_fault_proxy.hpp"
#include "support/s3_server.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.message();
  }
  return "(no error)";
}

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// The process's resident set and its peak (kB); reset_peak() makes the peak the current size.
int64_t status_kb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::stoll(line.substr(std::string(field).size()));
  }
  FAIL("no " << field << " in /proc/self/status");
  return 0;
}
void reset_peak() { std::ofstream("/proc/self/clear_refs") << "5"; }

// A port on 127.0.0.1 that nobody listens on.
int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Counts the HTTP attempts a store makes, by method.
struct Attempts {
  std::mutex mutex;
  std::map<std::string, int> by_method;
  void hook(S3ObjectStoreOptions& o) {
    o.on_attempt = [this](std::string_view method, std::string_view, int) {
      std::lock_guard<std::mutex> lock(mutex);
      ++by_method[std::string(method)];
    };
  }
  int operator[](const std::string& method) {
    std::lock_guard<std::mutex> lock(mutex);
    return by_method[method];
  }
};

}  // namespace

TEST_SUITE("s3") {
  TEST_CASE("S3ObjectStore, path-style on s3rver, passes the ObjectStore conformance suite") {
    // s3rver ignores If-None-Match, so put_if_absent is emulated there: exact for serialised writers only.
    run_object_store_conformance([] { return std::make_shared<S3ObjectStore>(s3_test_options()); },
                                 ObjectStoreTraits{false});
  }

  TEST_CASE("S3ObjectStore, virtual-hosted with native conditional writes, passes the conformance suite") {
    // The proxy enforces If-None-Match: * (s3rver does not), so the native path runs against real storage.
    S3FaultProxy proxy(s3_test_server().port);
    proxy.enforce_if_none_match(true);
    std::vector<std::shared_ptr<S3ObjectStore>> made;
    run_object_store_conformance([&] {
      auto o = s3_test_options(proxy.vhost_endpoint());
      o.path_style = false;
      made.push_back(std::make_shared<S3ObjectStore>(o));
      CHECK(made.back()->endpoint().host() == "agentrt-test.s3.localhost:" + std::to_string(proxy.port()));
      return made.back();
    });
    for (const auto& store : made) {
      if (store->conditional_writes() != ConditionalWrites::probe)
        CHECK(store->conditional_writes() == ConditionalWrites::native);
    }
  }

  TEST_CASE("the probe finds that s3rver ignores If-None-Match, and put_if_absent then never overwrites") {
    auto o = s3_test_options();
    // What the probe guards against: a native If-None-Match PUT is simply overwritten by s3rver.
    o.conditional_writes = ConditionalWrites::native;
    S3ObjectStore trusting(o);
    CHECK(trusting.put_if_absent("doc", "v1", "text/plain"));
    CHECK(trusting.put_if_absent("doc", "v2", "text/plain"));  // s3rver answered 200 and overwrote
    CHECK(trusting.get("doc") == "v2");

    o = s3_test_options();
    S3ObjectStore store(o);
    CHECK(store.conditional_writes() == ConditionalWrites::probe);
    CHECK(store.put_if_absent("doc", "v1", "text/plain"));
    CHECK(store.conditional_writes() == ConditionalWrites::emulated);
    CHECK_FALSE(store.put_if_absent("doc", "v2", "text/plain"));
    CHECK(store.get("doc") == "v1");
    CHECK(keys_of(store.list("")) == std::vector<std::string>{"doc"});  // the probe's object is gone
  }

  TEST_CASE("503 SlowDown, 500 and 429 answers are retried with backoff and the request goes through") {
    S3FaultProxy proxy(s3_test_server().port);
    auto o = s3_test_options(proxy.endpoint());
    Attempts attempts;
    attempts.hook(o);
    S3ObjectStore store(o);
    proxy.fail_next(2, 503, "SlowDown");
    store.put("k", "value", "text/plain");
    CHECK(attempts["PUT"] == 3);
    CHECK(proxy.requests() == 3);
    CHECK(proxy.relayed() == 1);
    proxy.fail_next(1, 500, "InternalError");
    proxy.fail_next(1, 429, "TooManyRequests");
    proxy.fail_next(1, 400, "RequestTimeout");
    CHECK(store.get("k") == "value");
    CHECK(attempts["GET"] == 4);
    // A 4xx that is not transient is answered at once.
    proxy.fail_next(1, 400, "InvalidArgument");
    CHECK(contains(message_of([&] { store.get("k"); }), "HTTP 400 InvalidArgument"));
    CHECK(attempts["GET"] == 5);
  }

  TEST_CASE("a request that keeps failing gives up after max_attempts, in bounded time, with one clear line") {
    S3FaultProxy proxy(s3_test_server().port);
    auto o = s3_test_options(proxy.endpoint());
    o.secret_key = "TOP-SECRET-VALUE-never-in-messages";
    o.max_attempts = 3;
    S3ObjectStore store(o);
    proxy.fail_next(-1, 503, "SlowDown");
    std::string message;
    try {
      store.put("dir/k", "value", "text/plain");
      FAIL("the put succeeded");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::io);
      message = e.message();
    }
    CHECK(contains(message, "S3 PUT s3://agentrt-test/" + o.prefix + "dir/k: HTTP 503 SlowDown"));
    CHECK(contains(message, "gave up after 3 attempts"));
    CHECK_FALSE(contains(message, "TOP-SECRET"));
    CHECK(message.find('\n') == std::string::npos);
    CHECK(proxy.requests() == 3);
    CHECK(proxy.relayed() == 0);

    // The time budget stops retries before max_attempts does.
    auto slow = s3_test_options(proxy.endpoint());
    slow.max_attempts = 20;
    slow.retry_base = std::chrono::milliseconds(40);
    slow.retry_cap = std::chrono::milliseconds(400);
    slow.retry_budget = std::chrono::milliseconds(300);
    Attempts attempts;
    attempts.hook(slow);
    const auto start = std::chrono::steady_clock::now();
    CHECK(error_code_of([&] { S3ObjectStore(slow).get("k"); }) == ErrorCode::io);
    const auto took = std::chrono::steady_clock::now() - start;
    CHECK(attempts["GET"] >= 2);
    CHECK(attempts["GET"] <= 5);
    CHECK(took < std::chrono::seconds(5));
  }

  TEST_CASE("network errors are retried, then reported as io naming the object") {
    auto o = s3_test_options("http://127.0.0.1:" + std::to_string(closed_port()));
    o.max_attempts = 3;
    Attempts attempts;
    attempts.hook(o);
    S3ObjectStore store(o);
    const std::string message = message_of([&] { store.get("k"); });
    CHECK(error_code_of([&] { store.head("k"); }) == ErrorCode::io);
    CHECK(contains(message, "S3 GET s3://agentrt-test/" + o.prefix + "k: "));
    CHECK(contains(message, "gave up after 3 attempts"));
    CHECK(attempts["GET"] == 3);
    CHECK(attempts["HEAD"] == 3);
  }

  TEST_CASE("S3 errors map to codes: a missing bucket is not_found, a refused signature unauthorized") {
    auto o = s3_test_options();
    o.bucket = "agentrt-no-such-bucket";
    S3ObjectStore missing(o);
    CHECK(error_code_of([&] { missing.put("k", "v", "text/plain"); }) == ErrorCode::not_found);
    CHECK(error_code_of([&] { missing.get("k"); }) == ErrorCode::not_found);
    CHECK(contains(message_of([&] { missing.get("k"); }),
                   "s3://agentrt-no-such-bucket/" + o.prefix + "k: HTTP 404 NoSuchBucket"));

    S3FaultProxy proxy(s3_test_server().port);
    S3ObjectStore store(s3_test_options(proxy.endpoint()));
    proxy.fail_next(1, 403, "SignatureDoesNotMatch");
    const std::string message = message_of([&] { store.put("k", "v", "text/plain"); });
    CHECK(contains(message, "HTTP 403 SignatureDoesNotMatch"));
    proxy.fail_next(1, 403, "AccessDenied");
    CHECK(error_code_of([&] { store.get("k"); }) == ErrorCode::unauthorized);
  }

  TEST_CASE("a put_if_absent whose answer was lost still answers true when its own write landed") {
    S3FaultProxy proxy(s3_test_server().port);
    proxy.enforce_if_none_match(true);
    auto o = s3_test_options(proxy.endpoint());
    o.conditional_writes = ConditionalWrites::native;
    S3ObjectStore store(o);
    proxy.lose_next_answer(503, "SlowDown", "PUT");  // written, then the answer replaced
    CHECK(store.put_if_absent("doc", "v1", "text/plain"));
    CHECK(store.get("doc") == "v1");
    CHECK_FALSE(store.put_if_absent("doc", "v2", "text/plain"));  // someone else's (here: the earlier) object
    proxy.lose_next_answer(503, "SlowDown", "PUT");
    CHECK_FALSE(store.put_if_absent("doc", "v3", "text/plain"));  // 412 both times: never ours
    CHECK(store.get("doc") == "v1");
  }

  TEST_CASE("a presigned URL fetches the object with plain libcurl; tampered or expired ones are refused") {
    std::string png(8 + 5000, '\x07');  // GCC 12's -Warray-bounds misreads the concatenation of the two
    png.replace(0, 8, "\x89PNG\r\n\x1a\n", 8);
    for (const bool path_style : {true, false}) {
      CAPTURE(path_style);
      auto o = s3_test_options(path_style ? s3_test_server().endpoint : s3_test_server().vhost_endpoint);
      o.path_style = path_style;
      S3ObjectStore store(o);
      const std::string key = "agent-inputs/u1/t1/uploads/up 1.png";
      store.put(key, png, "image/png");
      const int64_t now = wall_ms();
      const std::string url = store.sign_url(key, now + 60000);
      CHECK(contains(url, "X-Amz-Signature="));
      CHECK(contains(url, path_style ? "http://127.0.0.1:" : "http://agentrt-test.s3.localhost:"));
      net::HttpClient http;
      net::HttpRequest get;
      get.url = url;
      const net::HttpResponse answer = http.send(get);
      CHECK(answer.status == 200);
      CHECK(answer.body == png);
      CHECK(answer.header("content-type") == "image/png");
      CHECK(store.verify_url(url, now) == key);
      CHECK(error_code_of([&] { store.verify_url(url, now + 3'600'000); }) == ErrorCode::expired);
      std::string tampered = url;
      tampered.back() = tampered.back() == 'a' ? 'b' : 'a';
      // s3rver does not check signatures, so the store's own check is the guard: it refuses the URL.
      CHECK(error_code_of([&] { store.verify_url(tampered, now); }) == ErrorCode::invalid_argument);
      // Another deployment's store (another prefix) takes none of this one's URLs.
      S3ObjectStore other(s3_test_options(o.endpoint));
      CHECK(error_code_of([&] { other.verify_url(url, now); }) == ErrorCode::invalid_argument);
    }
  }

  TEST_CASE("url_signing server: URLs are this deployment's own, verified by every process that shares the secret") {
    auto o = s3_test_options();
    o.url_signing = UrlSigning::server;
    o.signing_secret = "shared-secret";
    o.public_base_url = "http://127.0.0.1:8080/api/v1/objects";
    S3ObjectStore a(o);
    S3ObjectStore b(o);  // another process of the deployment
    const int64_t now = wall_ms();
    const std::string url = a.sign_url("agent-inputs/u1/t1/uploads/x", now + 60000);
    CHECK(url.rfind("http://127.0.0.1:8080/api/v1/objects/agentrt-test/agent-inputs/u1/t1/uploads/x?expires=", 0) == 0);
    CHECK(b.verify_url(url, now) == "agent-inputs/u1/t1/uploads/x");
    auto s3_signing = o;
    s3_signing.url_signing = UrlSigning::s3;
    S3ObjectStore presigning(s3_signing);
    CHECK(error_code_of([&] { a.verify_url(presigning.sign_url("k", now + 60000), now); }) ==
          ErrorCode::invalid_argument);
    CHECK(error_code_of([&] { presigning.verify_url(url, now); }) == ErrorCode::invalid_argument);
    auto other_secret = o;
    other_secret.signing_secret = "another";
    CHECK(error_code_of([&] { S3ObjectStore(other_secret).verify_url(url, now); }) == ErrorCode::invalid_argument);
  }

  TEST_CASE("list pages through ListObjectsV2 continuation tokens") {
    auto o = s3_test_options();
    o.list_page_size = 2;
    Attempts attempts;
    attempts.hook(o);
    S3ObjectStore store(o);
    for (const char* key : {"e", "c", "a/1", "b", "d"}) store.put(key, key, "text/plain");
    const int gets_before = attempts["GET"];
    const auto listed = store.list("");
    CHECK(keys_of(listed) == std::vector<std::string>{"a/1", "b", "c", "d", "e"});
    CHECK(attempts["GET"] - gets_before == 3);  // pages of 2, 2 and 1
    CHECK(listed[2].sha256 == crypto::sha256_hex("c"));
    CHECK(listed[2].content_type == "text/plain");
  }

  TEST_CASE("a 64 MiB object is put without a copy and read in 1 MiB pieces in little memory") {
    constexpr size_t kSize = 64u << 20;
    constexpr size_t kPiece = 1u << 20;
    S3ObjectStore store(s3_test_options());
    std::string big(kSize, '\0');
    for (size_t i = 0; i < kSize; i += 64) big[i] = static_cast<char>(i >> 6);
    const std::string sha = crypto::sha256_hex(big);
    const int64_t before_put = status_kb("VmRSS:");
    reset_peak();
    store.put("big.bin", big, "application/octet-stream");
    const int64_t put_growth_kb = status_kb("VmHWM:") - before_put;
    MESSAGE("put: peak RSS grew by " << put_growth_kb << " kB for a " << (kSize >> 10) << " kB object");
    CHECK(put_growth_kb < 16 * 1024);  // far below the 64 MiB a copy of the body would take
    big.clear();
    big.shrink_to_fit();
    ::malloc_trim(0);

    CHECK(store.head("big.bin")->size == kSize);
    const int64_t before_read = status_kb("VmRSS:");
    reset_peak();
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
    uint64_t offset = 0;
    while (true) {
      const auto piece = store.read("big.bin", offset, kPiece);
      REQUIRE(piece);
      if (piece->empty()) break;
      EVP_DigestUpdate(ctx, piece->data(), piece->size());
      offset += piece->size();
    }
    unsigned char digest[32];
    EVP_DigestFinal_ex(ctx, digest, nullptr);
    EVP_MD_CTX_free(ctx);
    const int64_t read_growth_kb = status_kb("VmHWM:") - before_read;
    MESSAGE("read in pieces: peak RSS grew by " << read_growth_kb << " kB (piece " << (kPiece >> 10) << " kB)");
    CHECK(offset == kSize);
    CHECK(crypto::to_hex(std::string_view(reinterpret_cast<const char*>(digest), 32)) == sha);
    CHECK(read_growth_kb < 8 * static_cast<int64_t>(kPiece >> 10));
    CHECK(store.remove("big.bin"));
  }

  TEST_CASE("verify_url fetches nothing: it checks a URL against a store whose endpoint nobody serves") {
    auto o = s3_test_options("http://127.0.0.1:" + std::to_string(closed_port()));
    Attempts attempts;
    attempts.hook(o);
    S3ObjectStore store(o);
    const int64_t now = wall_ms();
    CHECK(store.verify_url(store.sign_url("a/b", now + 60000), now) == "a/b");
    CHECK(attempts.by_method.empty());
  }
}
