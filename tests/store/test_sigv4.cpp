// The SigV4 signer against the official test suite (tests/fixtures/sigv4) and Amazon S3's documented examples,
// and S3 addressing: path-style and virtual-hosted URLs, presigned URLs made and verified. No server needed.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "agentrt/error.hpp"
#include "store/s3_endpoint.hpp"
#include "store/sigv4.hpp"
#include "util/crypto.hpp"

using namespace agentrt;

namespace {

std::string fixture(const std::string& name, const std::string& ext) {
  std::ifstream in(std::string(AGENTRT_FIXTURES_DIR) + "/sigv4/" + name + "/" + name + "." + ext, std::ios::binary);
  REQUIRE_MESSAGE(in, "missing fixture " << name << "." << ext);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A suite .req taken apart: its request line, headers as sent and body.
struct SuiteRequest {
  std::string method;
  std::string path;  // raw, before encoding
  sigv4::Params query;
  sigv4::Params headers;
  std::string body;
};

SuiteRequest parse_req(const std::string& text) {
  SuiteRequest r;
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = line.rfind(' ');
  r.method = line.substr(0, sp1);
  std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const size_t q = target.find('?');
  r.path = target.substr(0, q);
  if (q != std::string::npos) {
    std::string query = target.substr(q + 1);
    size_t start = 0;
    while (start <= query.size()) {
      const size_t amp = query.find('&', start);
      const std::string param = query.substr(start, amp - start);
      const size_t eq = param.find('=');
      r.query.emplace_back(crypto::percent_decode(param.substr(0, eq)),
                           eq == std::string::npos ? "" : crypto::percent_decode(param.substr(eq + 1)));
      if (amp == std::string::npos) break;
      start = amp + 1;
    }
  }
  while (std::getline(in, line) && !line.empty()) {
    const size_t colon = line.find(':');
    r.headers.emplace_back(line.substr(0, colon), line.substr(colon + 1));
  }
  std::ostringstream rest;
  rest << in.rdbuf();
  r.body = rest.str();
  return r;
}

sigv4::Request request_of(const SuiteRequest& r) {
  return sigv4::Request{r.method, sigv4::uri_path(r.path), r.query, r.headers, crypto::sha256_hex(r.body)};
}

sigv4::Params without(sigv4::Params headers, const std::string& name) {
  std::erase_if(headers, [&](const auto& h) { return h.first == name; });
  return headers;
}

const sigv4::Signer kSuite("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "us-east-1", "service");
const std::string kSuiteDate = "20150830T123600Z";
const sigv4::Signer kDocs("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "us-east-1", "s3");
const std::string kDocsDate = "20130524T000000Z";

std::string authorization(const sigv4::Signer& signer, const std::string& date, const sigv4::Request& r) {
  std::string signed_headers;
  sigv4::canonical_headers(r.headers, &signed_headers);
  return "AWS4-HMAC-SHA256 Credential=" + signer.access_key() + "/" + signer.scope(date.substr(0, 8)) +
         ", SignedHeaders=" + signed_headers + ", Signature=" + signer.signature(date, sigv4::canonical_request(r));
}

ErrorCode code_of(const auto& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::ok;
}

std::string message_of(const auto& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.message();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("SigV4: the official suite's canonical requests, strings to sign and Authorization headers") {
  for (const std::string name :
       {"get-vanilla", "get-vanilla-query-order-key-case", "get-vanilla-query-unreserved", "get-utf8",
        "get-header-value-trim", "get-header-key-duplicate", "post-sts-header-before", "post-sts-header-after"}) {
    CAPTURE(name);
    const SuiteRequest req = parse_req(fixture(name, "req"));
    sigv4::Request r = request_of(req);
    if (name == "post-sts-header-after") r.headers = without(r.headers, "X-Amz-Security-Token");
    const std::string creq = sigv4::canonical_request(r);
    CHECK(creq == fixture(name, "creq"));
    CHECK(kSuite.string_to_sign(kSuiteDate, creq) == fixture(name, "sts"));
    CHECK(authorization(kSuite, kSuiteDate, r) == fixture(name, "authz"));
    // authorize() adds the date (and the session token) itself.
    sigv4::Request bare = r;
    bare.headers = without(without(bare.headers, "X-Amz-Date"), "X-Amz-Security-Token");
    const std::string token = name == "post-sts-header-before" ? r.headers.back().second : std::string();
    const sigv4::Signer signer("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "us-east-1", "service",
                               token);
    CHECK(signer.authorize(bare, *sigv4::parse_amz_date(kSuiteDate)) == fixture(name, "authz"));
  }
}

TEST_CASE("SigV4: post-x-www-form-urlencoded hashes the body; its .sts and .authz were made without Content-Length") {
  const SuiteRequest req = parse_req(fixture("post-x-www-form-urlencoded", "req"));
  CHECK(req.body == "Param1=value1");
  sigv4::Request r = request_of(req);
  CHECK(sigv4::canonical_request(r) == fixture("post-x-www-form-urlencoded", "creq"));
  r.headers = without(r.headers, "Content-Length");
  const std::string creq = sigv4::canonical_request(r);
  CHECK(kSuite.string_to_sign(kSuiteDate, creq) == fixture("post-x-www-form-urlencoded", "sts"));
  CHECK(authorization(kSuite, kSuiteDate, r) == fixture("post-x-www-form-urlencoded", "authz"));
}

TEST_CASE("SigV4 for S3 never normalises the path: get-slashes keeps //example// where generic services drop it") {
  const SuiteRequest req = parse_req(fixture("get-slashes", "req"));
  const std::string creq = sigv4::canonical_request(request_of(req));
  std::string generic = fixture("get-slashes", "creq");
  CHECK(generic.substr(0, 14) == "GET\n/example/\n");
  CHECK(creq == "GET\n//example//\n" + generic.substr(14));
}

TEST_CASE(
    "SigV4 for S3: Amazon S3's documented signatures (GET with Range, PUT of test$file.text, ?lifecycle, "
    "?max-keys=2&prefix=J)") {
  const S3Endpoint vhost("https://s3.amazonaws.com", "examplebucket", "", false);
  const int64_t at = *sigv4::parse_amz_date(kDocsDate);
  auto signature_of = [](const std::string& authz) { return authz.substr(authz.rfind('=') + 1); };

  sigv4::Request get{"GET", vhost.object_path("test.txt"), {}, {}, std::string(sigv4::kEmptyPayloadHash)};
  get.headers = {{"Host", vhost.host()}, {"Range", "bytes=0-9"}, {"x-amz-content-sha256", get.payload_hash}};
  const std::string get_authz = kDocs.authorize(get, at);
  CHECK(get_authz.find("SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,") != std::string::npos);
  CHECK(signature_of(get_authz) == "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");

  const std::string body = "Welcome to Amazon S3.";
  sigv4::Request put{"PUT", vhost.object_path("test$file.text"), {}, {}, crypto::sha256_hex(body)};
  CHECK(put.canonical_uri == "/test%24file.text");
  put.headers = {{"Host", vhost.host()},
                 {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                 {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
                 {"x-amz-content-sha256", put.payload_hash}};
  CHECK(signature_of(kDocs.authorize(put, at)) == "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");

  sigv4::Request lifecycle{"GET", "/", {{"lifecycle", ""}}, {}, std::string(sigv4::kEmptyPayloadHash)};
  lifecycle.headers = {{"Host", vhost.host()}, {"x-amz-content-sha256", lifecycle.payload_hash}};
  CHECK(signature_of(kDocs.authorize(lifecycle, at)) ==
        "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");

  sigv4::Request list{
      "GET", vhost.bucket_path(), {{"prefix", "J"}, {"max-keys", "2"}}, {}, std::string(sigv4::kEmptyPayloadHash)};
  list.headers = {{"Host", vhost.host()}, {"x-amz-content-sha256", list.payload_hash}};
  CHECK(signature_of(kDocs.authorize(list, at)) == "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST_CASE("SigV4 for S3: the documented presigned GET URL, and verifying it until it expires") {
  const S3Endpoint vhost("https://s3.amazonaws.com", "examplebucket", "", false);
  const int64_t at = *sigv4::parse_amz_date(kDocsDate);
  const std::string url = vhost.presign_get(kDocs, "test.txt", at, 86400);
  CHECK(url ==
        "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential="
        "AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires="
        "86400&X-Amz-SignedHeaders=host&X-Amz-Signature="
        "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");
  CHECK(vhost.verify_presigned_get(kDocs, url, at * 1000) == "test.txt");
  CHECK(vhost.verify_presigned_get(kDocs, url, (at + 86400) * 1000 - 1) == "test.txt");
  CHECK(code_of([&] { vhost.verify_presigned_get(kDocs, url, (at + 86400) * 1000); }) == ErrorCode::expired);
}

TEST_CASE("S3 addressing: path-style and virtual-hosted hosts, paths and URLs") {
  const S3Endpoint path("http://127.0.0.1:4568", "agentrt-test", "dep/", true);
  CHECK(path.host() == "127.0.0.1:4568");
  CHECK(path.object_path("a b/ü$~.txt") == "/agentrt-test/dep/a%20b/%C3%BC%24~.txt");
  CHECK(path.bucket_path() == "/agentrt-test");
  CHECK(path.url(path.object_path("k"), "x=1") == "http://127.0.0.1:4568/agentrt-test/dep/k?x=1");
  CHECK(path.describe("k") == "s3://agentrt-test/dep/k");

  const S3Endpoint vhost("https://S3.EU-West-1.amazonaws.com:443/", "agentrt-test", "", false);
  CHECK(vhost.host() == "agentrt-test.s3.eu-west-1.amazonaws.com");
  CHECK(vhost.object_path("a b/ü$~.txt") == "/a%20b/%C3%BC%24~.txt");
  CHECK(vhost.bucket_path() == "/");
  CHECK(vhost.url(vhost.object_path("k")) == "https://agentrt-test.s3.eu-west-1.amazonaws.com/k");
  const S3Endpoint odd_port("https://s3.example.com:8443", "b-1", "", false);
  CHECK(odd_port.host() == "b-1.s3.example.com:8443");

  // The same PUT signed both ways differs in the host and path lines only.
  auto creq = [](const S3Endpoint& e) {
    return sigv4::canonical_request(sigv4::Request{"PUT", e.object_path("k 1"), {}, {{"host", e.host()}}, "abc"});
  };
  const S3Endpoint a("http://s3.localhost:9000", "agentrt-test", "", true);
  const S3Endpoint b("http://s3.localhost:9000", "agentrt-test", "", false);
  CHECK(creq(a) == "PUT\n/agentrt-test/k%201\n\nhost:s3.localhost:9000\n\nhost\nabc");
  CHECK(creq(b) == "PUT\n/k%201\n\nhost:agentrt-test.s3.localhost:9000\n\nhost\nabc");
}

TEST_CASE("S3 addressing refuses bad endpoints, buckets and prefixes with invalid_argument") {
  for (const char* endpoint : {"", "s3.amazonaws.com", "ftp://h", "http://h/path", "http://h?x=1", "http://u@h",
                               "http://h#f", "http://h:99999"}) {
    CAPTURE(endpoint);
    CHECK(code_of([&] { S3Endpoint(endpoint, "bucket", "", true); }) == ErrorCode::invalid_argument);
  }
  for (const char* bucket :
       {"", "ab", "Upper", "under_score", "-dash", "dash-", "a..b", "192.168.1.1", "a/b", "\xc3\xbc-bucket"}) {
    CAPTURE(bucket);
    CHECK(code_of([&] { S3Endpoint("http://h", bucket, "", true); }) == ErrorCode::invalid_argument);
  }
  for (const char* prefix : {"p", "/p/", "p//", "../", "a/../", ".agentrt-x/"}) {
    CAPTURE(prefix);
    CHECK(code_of([&] { S3Endpoint("http://h", "bucket", prefix, true); }) == ErrorCode::invalid_argument);
  }
  CHECK(message_of([&] { S3Endpoint("http://127.0.0.1:9000", "bucket", "", false); }) ==
        "S3 endpoint 'http://127.0.0.1:9000': virtual-hosted addressing needs a DNS name (set path_style)");
  CHECK(code_of([&] { S3Endpoint("http://[::1]:9000", "bucket", "", false); }) == ErrorCode::invalid_argument);
  CHECK(code_of([&] { S3Endpoint("http://[::1]:9000", "bucket", "a/b/", true); }) == ErrorCode::ok);
}

TEST_CASE("verify_presigned_get takes back only this deployment's own URL for its bucket and prefix") {
  const S3Endpoint store("http://s3.localhost:9000", "agentrt-test", "dep/", false);
  const int64_t at = 1'700'000'000;
  const std::string key = "agent-inputs/u1/t1/uploads/up 1";
  const std::string url = store.presign_get(kDocs, key, at, 600);
  const int64_t now = at * 1000 + 1000;
  CHECK(store.verify_presigned_get(kDocs, url, now) == key);

  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string u = url;
    const size_t at_pos = u.find(from);
    REQUIRE(at_pos != std::string::npos);
    return u.replace(at_pos, from.size(), to);
  };
  const sigv4::Signer other_key("AKIAOTHER", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "us-east-1", "s3");
  const sigv4::Signer other_secret("AKIAIOSFODNN7EXAMPLE", "another secret", "us-east-1", "s3");
  const sigv4::Signer other_region("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "eu-west-1",
                                   "s3");
  const S3Endpoint other_prefix("http://s3.localhost:9000", "agentrt-test", "other/", false);
  const S3Endpoint other_bucket("http://s3.localhost:9000", "agentrt-other", "dep/", false);
  const S3Endpoint path_style("http://s3.localhost:9000", "agentrt-test", "dep/", true);
  struct Case {
    std::string url;
    std::string why;
  };
  const std::vector<Case> cases = {
      {replaced("X-Amz-Expires=600", "X-Amz-Expires=6000"), "the signature does not match"},
      {replaced("up%201", "up%202"), "the signature does not match"},
      {replaced("X-Amz-Date=20231114T221320Z", "X-Amz-Date=20231114T221321Z"), "the signature does not match"},
      {store.presign_get(other_key, key, at, 600), "X-Amz-Credential is not this deployment's key and region"},
      {store.presign_get(other_secret, key, at, 600), "the signature does not match"},
      {store.presign_get(other_region, key, at, 600), "X-Amz-Credential is not this deployment's key and region"},
      {other_prefix.presign_get(kDocs, key, at, 600), "is not under the prefix 'dep/'"},
      {other_bucket.presign_get(kDocs, key, at, 600), "host 'agentrt-other.s3.localhost:9000' is not"},
      {path_style.presign_get(kDocs, key, at, 600), "host 's3.localhost:9000' is not"},
      {replaced("http://", "https://"), "scheme 'https' is not 'http'"},
      {replaced("up%201", "up%20%31"), "the path is not encoded the way this deployment signs it"},
      {replaced("dep/agent-inputs", "dep/agent-inputs/%2E%2E"), "'.' or '..' segment"},
      {url + "&X-Amz-Expires=600", "query parameter 'X-Amz-Expires' appears twice"},
      {url + "&response-content-type=text%2Fhtml", "unexpected query parameter 'response-content-type'"},
      {replaced("X-Amz-SignedHeaders=host", "X-Amz-SignedHeaders=host%3Brange"), "X-Amz-SignedHeaders is not"},
      {replaced("X-Amz-Expires=600", "X-Amz-Expires=604801"), "X-Amz-Expires is not a number of seconds"},
      {url.substr(0, url.find("&X-Amz-Signature")), "missing query parameter X-Amz-Signature"},
      {url.substr(0, url.find('?')), "it has no X-Amz-* query parameters"},
      {url + "#f", "it has a fragment"},
      {"file:///etc/passwd", "scheme 'file' is not 'http'"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.url);
    const std::string message = message_of([&] { store.verify_presigned_get(kDocs, c.url, now); });
    CHECK_MESSAGE(message.find(c.why) != std::string::npos, message);
    CHECK(code_of([&] { store.verify_presigned_get(kDocs, c.url, now); }) == ErrorCode::invalid_argument);
  }
  // A genuine URL past its expiry is expired; a forged one stays invalid whatever the time.
  CHECK(code_of([&] { store.verify_presigned_get(kDocs, url, (at + 600) * 1000); }) == ErrorCode::expired);
  CHECK(code_of([&] { store.verify_presigned_get(kDocs, cases[0].url, (at + 6000) * 1000); }) ==
        ErrorCode::invalid_argument);
}
