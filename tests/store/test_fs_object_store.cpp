#include <doctest/doctest.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agentrt/error.hpp"
#include "store/fs_object_store.hpp"
#include "util/crypto.hpp"

using namespace agentrt;
namespace fs = std::filesystem;

namespace {

// A fresh directory under the system temp dir, removed with everything in it.
struct TempDir {
  fs::path path = fs::temp_directory_path() / ("agentrt-fsobj-" + crypto::random_hex(8));
  TempDir() { fs::create_directories(path); }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

constexpr const char* kBase = "http://127.0.0.1:8080/api/v1/objects";
constexpr const char* kSecret = "test-secret";

FsObjectStoreOptions options_for(const fs::path& root, std::string bucket = "agent-files") {
  FsObjectStoreOptions o;
  o.root = (root / "objects").string();
  o.bucket = std::move(bucket);
  o.signing_secret = kSecret;
  o.public_base_url = kBase;
  return o;
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

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> keys_of(const std::vector<ObjectInfo>& infos) {
  std::vector<std::string> keys;
  for (const auto& i : infos) keys.push_back(i.key);
  return keys;
}

// Every regular file and directory under root, relative, sorted: what the store left on disk.
std::vector<std::string> tree(const fs::path& root) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) out.push_back(fs::relative(e.path(), root).string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string all_bytes() {
  std::string s;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 256; ++i) s.push_back(static_cast<char>(i));
  }
  return s;
}

}  // namespace

TEST_CASE("put then get returns exactly the bytes, including NUL and high bytes") {
  TempDir dir;
  FsObjectStore store(options_for(dir.path));
  const std::string bytes = all_bytes();
  store.put("a/b/c.bin", bytes, "application/octet-stream");
  CHECK(store.get("a/b/c.bin") == bytes);
  store.put("empty", "", "text/plain");
  CHECK(store.get("empty") == std::string());
  std::string big(3 * 1024 * 1024 + 7, '\0');
  for (size_t i = 0; i < big.size(); i += 997) big[i] = static_cast<char>(i);
  store.put("big", big, "application/octet-stream");
  CHECK(store.get("big") == big);
  CHECK(store.bucket() == "agent-files");
}

TEST_CASE("read returns the part of an object asked for: from an offset, at most so many bytes") {
  TempDir dir;
  FsObjectStore store(options_for(dir.path));
  std::string big(1024 * 1024 + 13, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 7) & 0xff);
  store.put("r/big", big, "application/octet-stream");
  CHECK(store.read("r/big", 0, 10) == big.substr(0, 10));
  CHECK(store.read("r/big", 65536, 65536) == big.substr(65536, 65536));
  CHECK(store.read("r/big", big.size() - 5, 65536) == big.substr(big.size() - 5));  // fewer only at the end
  CHECK(store.read("r/big", big.size(), 10) == std::string());
  CHECK(store.read("r/big", big.size() + 100, 10) == std::string());
  std::string joined;
  for (uint64_t off = 0; off < big.size(); off += 4096) joined += *store.read("r/big", off, 4096);
  CHECK(joined == big);
  CHECK_FALSE(store.read("r/nope", 0, 10));
  store.put("r/empty", "", "text/plain");
  CHECK(store.read("r/empty", 0, 10) == std::string());
}

TEST_CASE("put replaces an existing object") {
  TempDir dir;
  FsObjectStore store(options_for(dir.path));
  store.put("k", "first", "text/plain");
  store.put("k", "second!", "application/json");
  CHECK(store.get("k") == "second!");
  CHECK(store.head("k")->content_type == "application/json");
  CHECK(store.head("k")->size == 7);
}

TEST_CASE("head reports size, content type, sha256 and modification time") {
  TempDir dir;
  FsObjectStore store(options_for(dir.path));
  const auto before =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  store.put("docs/report.pdf", "abc", "application/pdf");
  const auto info = store.head("docs/report.pdf");
  REQUIRE(info);
  CHECK(info->key == "docs/report.pdf");
  CHECK(info->size == 3);
  CHECK(info->content_type == "application/pdf");
  CHECK(info->sha256 == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(info->modified_at >= before - 1000);
  store.put("untyped", "x", "");
  CHECK(store.head("untyped")->content_type == "application/octet-stream");
}

TEST_CASE("missing objects are nullopt for get and head, and false for remove") {
  TempDir dir;
  FsObjectStore store(options_for(dir.path));
  store.put("a/b", "x", "text/plain");
  CHECK_FALSE(store.get("nope"));
  CHECK_FALSE(store.head("a/nope"));
  CHECK_FALSE(store.get("a"));      // a directory, not an object
  CHECK_FALSE(store.get("a/b/c"));  // below an object
  CHECK_FALSE(store.remove("nope/x"));
  CHECK_FALSE(store.remove("a"));
}

TEST_CASE("remove deletes the object and prunes the directories it emptied") {
  TempDir dir;
  FsObjectStore store(options_for(dir.path));
  store.put("x/y/z/1", "1", "text/plain");
  store.put("x/2", "2", "text/plain");
  CHECK(store.remove("x/y/z/1"));
  CHECK_FALSE(store.get("x/y/z/1"));
  CHECK_FALSE(store.remove("x/y/z/1"));
  CHECK(tree(dir.path / "objects") == std::vector<std::string>{"x", "x/2"});
  CHECK(store.remove("x/2"));
  CHECK(tree(dir.path / "objects").empty());
  store.put("x/y/z/1", "again", "text/plain");  // the pruned path can be used again
  CHECK(store.get("x/y/z/1") == "again");
}

TEST_CASE("put_if_absent writes only when the key is free and never changes an existing object") {
  TempDir dir;
  FsObjectStore store(options_for(dir.path));
  CHECK(store.put_if_absent("doc", "v1", "text/plain"));
  CHECK_FALSE(store.put_if_absent("doc", "v2", "application/json"));
  CHECK(store.get("doc") == "v1");
  CHECK(store.head("doc")->content_type == "text/plain");
  CHECK(tree(dir.path / "objects") == std::vector<std::string>{"doc"});  // no temporary file left behind
}

TEST_CASE("put_if_absent has exactly one winner among racing processes") {
  TempDir dir;
  const auto opts = options_for(dir.path);
  { FsObjectStore init(opts); }  // create the root before forking
  constexpr int kChildren = 6;
  std::vector<pid_t> pids;
  for (int i = 0; i < kChildren; ++i) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int status = 2;
      try {
        FsObjectStore store(opts);
        status = store.put_if_absent("race/doc", "writer " + std::to_string(i), "text/plain") ? 0 : 1;
      } catch (...) {
      }
      ::_exit(status);
    }
    pids.push_back(pid);
  }
  int winners = 0;
  int losers = 0;
  int winner_index = -1;
  for (int i = 0; i < kChildren; ++i) {
    int status = 0;
    REQUIRE(::waitpid(pids[static_cast<size_t>(i)], &status, 0) == pids[static_cast<size_t>(i)]);
    REQUIRE(WIFEXITED(status));
    if (WEXITSTATUS(status) == 0) {
      ++winners;
      winner_index = i;
    } else if (WEXITSTATUS(status) == 1) {
      ++losers;
    }
  }
  CHECK(winners == 1);
  CHECK(losers == kChildren - 1);
  FsObjectStore store(opts);
  CHECK(store.get("race/doc") == "writer " + std::to_string(winner_index));
  CHECK(tree(dir.path / "objects") == std::vector<std::string>{"race", "race/doc"});
}

TEST_CASE("put_if_absent has exactly one winner among racing threads") {
  TempDir dir;
  FsObjectStore store(options_for(dir.path));
  std::atomic<int> winners{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      if (store.put_if_absent("t/doc", std::to_string(i), "text/plain")) ++winners;
    });
  }
  for (auto& t : threads) t.join();
  CHECK(winners.load() == 1);
}

TEST_CASE("list returns the objects under a prefix sorted by key, and nothing else") {
  TempDir dir;
  FsObjectStore store(options_for(dir.path));
  for (const char* key : {"b", "a/2", "a/b/3", "ab", "a/1", "a/b/c/4"}) store.put(key, key, "text/plain");
  // Files the store must never report: a leftover temporary, a symlink, a name no key can have.
  std::ofstream(dir.path / "objects/a/.agentrt-tmp-deadbeef") << "partial";
  fs::create_symlink(dir.path / "objects/b", dir.path / "objects/a/link");
  std::ofstream(dir.path / "objects/a/bad\\name") << "x";

  CHECK(keys_of(store.list("a/")) == std::vector<std::string>{"a/1", "a/2", "a/b/3", "a/b/c/4"});
  CHECK(keys_of(store.list("a")) == std::vector<std::string>{"a/1", "a/2", "a/b/3", "a/b/c/4", "ab"});
  CHECK(keys_of(store.list("")) == std::vector<std::string>{"a/1", "a/2", "a/b/3", "a/b/c/4", "ab", "b"});
  CHECK(keys_of(store.list("a/b")) == std::vector<std::string>{"a/b/3", "a/b/c/4"});
  CHECK(keys_of(store.list("a/b/c/")) == std::vector<std::string>{"a/b/c/4"});
  CHECK(store.list("zzz/").empty());
  CHECK(store.list("b/").empty());  // "b" is an object, nothing lies below it

  const auto infos = store.list("a/b/3");
  REQUIRE(infos.size() == 1);
  CHECK(infos[0].size == 5);
  CHECK(infos[0].content_type == "text/plain");
  CHECK(infos[0].sha256 == crypto::sha256_hex("a/b/3"));
}

TEST_CASE("list refuses prefixes that could escape the root") {
  TempDir dir;
  FsObjectStore store(options_for(dir.path));
  for (const char* prefix : {"/", "/etc", "../", "a/../", "./", "a//", "a\\b"}) {
    CAPTURE(prefix);
    CHECK(code_of([&] { store.list(prefix); }) == ErrorCode::invalid_argument);
  }
  CHECK(code_of([&] { store.list(std::string_view("a\0", 2)); }) == ErrorCode::invalid_argument);
  CHECK(code_of([&] { store.list(".."); }) == ErrorCode::ok);  // a partial name: matches "..x" keys only
}

TEST_CASE("keys that could escape the root or are malformed are refused by every operation") {
  TempDir dir;
  FsObjectStore store(options_for(dir.path));
  const std::vector<std::string> bad = {
      "",
      "/abs",
      "..",
      "../x",
      "a/../../x",
      "a/./b",
      ".",
      "a/",
      "a//b",
      "a\\b",
      "..\\x",
      "a\nb",
      "a\x7f",
      std::string("a\0b", 3),
      "\xff",
      "\xc0\xaf",
      ".agentrt-tmp-1",
      "a/.agentrt-x/b",
      std::string(1025, 'k'),
      std::string(256, 's'),
  };
  for (const auto& key : bad) {
    CAPTURE(key);
    CHECK(code_of([&] { store.put(key, "x", "text/plain"); }) == ErrorCode::invalid_argument);
    CHECK(code_of([&] { store.put_if_absent(key, "x", "text/plain"); }) == ErrorCode::invalid_argument);
    CHECK(code_of([&] { store.get(key); }) == ErrorCode::invalid_argument);
    CHECK(code_of([&] { store.head(key); }) == ErrorCode::invalid_argument);
    CHECK(code_of([&] { store.remove(key); }) == ErrorCode::invalid_argument);
    CHECK(code_of([&] { store.sign_url(key, 1); }) == ErrorCode::invalid_argument);
  }
  CHECK(tree(dir.path) == std::vector<std::string>{"objects"});
  CHECK(message_of([&] { store.get("a/../b"); }) == "invalid object key 'a/../b': it has a '.' or '..' segment");
  // Long but legal: 1024 bytes in segments of 255 or fewer.
  const std::string longest = std::string(255, 'a') + "/" + std::string(255, 'b') + "/" + std::string(255, 'c') + "/" +
                              std::string(253, 'd') + "/ee";
  CHECK(longest.size() == 1024);
  CHECK(code_of([&] { store.put(longest, "x", "text/plain"); }) == ErrorCode::ok);
  CHECK(code_of([&] { store.put("ok", "x", "text/plain\n"); }) == ErrorCode::invalid_argument);
}

TEST_CASE("a symlink inside the root never leads a key outside it") {
  TempDir dir;
  FsObjectStore store(options_for(dir.path));
  const fs::path outside = dir.path / "outside";
  fs::create_directories(outside);
  std::ofstream(outside / "secret") << "top secret";
  fs::create_symlink(outside, dir.path / "objects/link");
  fs::create_symlink(outside / "secret", dir.path / "objects/file-link");

  CHECK(code_of([&] { store.get("link/secret"); }) == ErrorCode::io);
  CHECK(code_of([&] { store.head("link/secret"); }) == ErrorCode::io);
  CHECK(code_of([&] { store.get("file-link"); }) == ErrorCode::io);
  CHECK(code_of([&] { store.put("link/new", "x", "text/plain"); }) == ErrorCode::io);
  CHECK(code_of([&] { store.put_if_absent("link/new", "x", "text/plain"); }) == ErrorCode::io);
  CHECK(code_of([&] { store.remove("link/secret"); }) == ErrorCode::io);
  CHECK(code_of([&] { store.list("link/"); }) == ErrorCode::io);
  CHECK(message_of([&] { store.get("link/secret"); }) ==
        fmt::format("refusing to follow the symlink '{}'", (dir.path / "objects/link").string()));
  CHECK(store.list("").empty());
  // Nothing outside changed.
  CHECK(tree(outside) == std::vector<std::string>{"secret"});
  CHECK(read_file(outside / "secret") == "top secret");
}

TEST_CASE("filesystem failures are io errors that name the path and the reason") {
  TempDir dir;
  std::ofstream(dir.path / "plain-file") << "x";
  FsObjectStoreOptions opts = options_for(dir.path);
  opts.root = (dir.path / "plain-file" / "root").string();
  const std::string message = message_of([&] { FsObjectStore store(opts); });
  CHECK(code_of([&] { FsObjectStore store(opts); }) == ErrorCode::io);
  CHECK(contains(message, opts.root));
  CHECK(contains(message, "Not a directory"));

  FsObjectStore store(options_for(dir.path));
  store.put("a", "x", "text/plain");
  CHECK(code_of([&] { store.put("a/b", "y", "text/plain"); }) == ErrorCode::io);
  store.put("d/e", "x", "text/plain");
  CHECK(code_of([&] { store.put("d", "y", "text/plain"); }) == ErrorCode::io);
  CHECK(code_of([&] { store.put_if_absent("d", "y", "text/plain"); }) == ErrorCode::io);
  CHECK(store.get("d/e") == "x");

  // A file that is not one of ours is reported, not passed off as an object.
  std::ofstream(dir.path / "objects/foreign") << "hello";
  CHECK(code_of([&] { store.get("foreign"); }) == ErrorCode::io);
  CHECK(code_of([&] { store.head("foreign"); }) == ErrorCode::io);
}

TEST_CASE("the store refuses an empty secret, a bad bucket and a bad base URL") {
  TempDir dir;
  auto opts = options_for(dir.path);
  opts.signing_secret.clear();
  CHECK(code_of([&] { FsObjectStore s(opts); }) == ErrorCode::invalid_argument);
  for (const char* bucket : {"", "..", "a/b", "a b", "ü"}) {
    CAPTURE(bucket);
    CHECK(code_of([&] { FsObjectStore s(options_for(dir.path, bucket)); }) == ErrorCode::invalid_argument);
  }
  for (const char* base : {"", "127.0.0.1:8080/x", "file:///tmp/x", "ftp://h/x", "http://h/x?y=1", "http://u@h/x",
                           "http://h:99999/x", "http:///x", "http://h/x#f"}) {
    CAPTURE(base);
    opts = options_for(dir.path);
    opts.public_base_url = base;
    CHECK(code_of([&] { FsObjectStore s(opts); }) == ErrorCode::invalid_argument);
  }
}

TEST_CASE("sign_url produces base/bucket/percent-encoded key with expires and an HMAC signature") {
  TempDir dir;
  FsObjectStore store(options_for(dir.path));
  const std::string key = "agent-inputs/u1/t1/uploads/my file é.png";
  CHECK(store.sign_url(key, 1700000000000) ==
        "http://127.0.0.1:8080/api/v1/objects/agent-files/agent-inputs/u1/t1/uploads/my%20file%20%C3%A9.png"
        "?expires=1700000000000&sig=9ffbdf193e5b2fc3d1331d68836a680de84a141f393fc8ac1772fb486dddc2e4");
  CHECK(store.verify_url(store.sign_url(key, 1700000000000), 1699999999999) == key);
  CHECK(code_of([&] { store.sign_url("k", -1); }) == ErrorCode::invalid_argument);

  auto opts = options_for(dir.path);
  opts.public_base_url = std::string(kBase) + "/";
  FsObjectStore slash(opts);
  CHECK(slash.sign_url("k", 5) == store.sign_url("k", 5));
}

TEST_CASE("verify_url round-trips keys with spaces, UTF-8 and reserved characters") {
  TempDir dir;
  FsObjectStore store(options_for(dir.path));
  for (const std::string key : {"a b/c d", "文件/照片 1.jpg", "q?x=1&y#z", "100%/~tilde+plus", "emoji/😀.txt"}) {
    CAPTURE(key);
    const std::string url = store.sign_url(key, 2000);
    CHECK(url.find(' ') == std::string::npos);
    CHECK(store.verify_url(url, 1000) == key);
  }
}

TEST_CASE("verify_url refuses tampered, foreign and malformed URLs with invalid_argument") {
  TempDir dir;
  FsObjectStore store(options_for(dir.path));
  const std::string good = store.sign_url("agent-inputs/u1/t1/uploads/x", 2000);
  const std::string sig = good.substr(good.size() - 64);
  std::string flipped = good;
  flipped.back() = flipped.back() == '0' ? '1' : '0';

  auto other_bucket_opts = options_for(dir.path, "other-bucket");
  FsObjectStore other_bucket(other_bucket_opts);
  auto other_secret_opts = options_for(dir.path);
  other_secret_opts.signing_secret = "another-secret";
  FsObjectStore other_secret(other_secret_opts);

  const std::string path = "/api/v1/objects/agent-files/agent-inputs/u1/t1/uploads/x";
  const std::string query = "?expires=2000&sig=" + sig;
  struct Case {
    std::string url;
    std::string why;
  };
  const std::vector<Case> cases = {
      {flipped, "the signature does not match"},
      {other_secret.sign_url("agent-inputs/u1/t1/uploads/x", 2000), "the signature does not match"},
      {other_bucket.sign_url("agent-inputs/u1/t1/uploads/x", 2000), "bucket 'other-bucket' is not 'agent-files'"},
      {"http://127.0.0.2:8080" + path + query, "host '127.0.0.2' is not '127.0.0.1'"},
      {"http://localhost:8080" + path + query, "host 'localhost' is not '127.0.0.1'"},
      {"http://127.0.0.1:8081" + path + query, "port 8081 is not 8080"},
      {"http://127.0.0.1" + path + query, "port 80 is not 8080"},
      {"https://127.0.0.1:8080" + path + query, "scheme 'https' is not 'http'"},
      {"file://" + path + query, "scheme 'file' is not 'http'"},
      {"file:///etc/passwd", "scheme 'file' is not 'http'"},
      {"http://evil@127.0.0.1:8080" + path + query, "it carries user information"},
      {"http://127.0.0.1:8080/api/v2/objects/agent-files/agent-inputs/u1/t1/uploads/x" + query,
       "path '/api/v2/objects/agent-files/agent-inputs/u1/t1/uploads/x' does not start with '/api/v1/objects/'"},
      {"http://127.0.0.1:8080/api/v1/objectsX/agent-files/x" + query, "does not start with '/api/v1/objects/'"},
      {"http://127.0.0.1:8080/api/v1/objects/agent-files" + query, "the path names no key"},
      {"http://127.0.0.1:8080" + path, "missing query parameters expires and sig"},
      {"http://127.0.0.1:8080" + path + "?sig=" + sig, "missing query parameter expires"},
      {"http://127.0.0.1:8080" + path + "?expires=2000", "missing query parameter sig"},
      {"http://127.0.0.1:8080" + path + query + "&sig=" + sig, "query parameter 'sig' appears twice"},
      {"http://127.0.0.1:8080" + path + query + "&x=1", "unexpected query parameter 'x'"},
      {"http://127.0.0.1:8080" + path + "?expires=2e3&sig=" + sig, "expires is not a number of milliseconds"},
      {"http://127.0.0.1:8080" + path + "?expires=02000&sig=" + sig, "the signature does not match"},
      {"http://127.0.0.1:8080" + path + "?expires=2000&sig=" + sig.substr(1), "sig is not 64 lower-case hex digits"},
      {"http://127.0.0.1:8080" + path + query + "#frag", "it has a fragment"},
      {"http://127.0.0.1:8080/api/v1/objects/agent-files/agent-inputs/u1/%2E%2E/x" + query, "'.' or '..' segment"},
      {"http://127.0.0.1:8080/api/v1/objects/agent-files/a%2" + query, "malformed percent-escape"},
      {"http://127.0.0.1:8080" + path + " " + query, "space, control or non-ASCII"},
      {"/api/v1/objects/agent-files/x" + query, "not an absolute URL"},
      {"", "not an absolute URL"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.url);
    const std::string message = message_of([&] { store.verify_url(c.url, 1000); });
    CHECK(code_of([&] { store.verify_url(c.url, 1000); }) == ErrorCode::invalid_argument);
    CHECK_MESSAGE(contains(message, c.why), message);
  }
}

TEST_CASE("verify_url reports an expired but genuine URL as expired, and a forged expired one as invalid") {
  TempDir dir;
  FsObjectStore store(options_for(dir.path));
  const std::string url = store.sign_url("k", 2000);
  CHECK(store.verify_url(url, 1999) == "k");
  CHECK(code_of([&] { store.verify_url(url, 2000); }) == ErrorCode::expired);
  CHECK(code_of([&] { store.verify_url(url, 5000); }) == ErrorCode::expired);
  std::string forged = url;
  forged.back() = forged.back() == 'a' ? 'b' : 'a';
  CHECK(code_of([&] { store.verify_url(forged, 5000); }) == ErrorCode::invalid_argument);
}

TEST_CASE("verify_url ignores case in scheme and host and accepts the default port spelled out") {
  TempDir dir;
  auto opts = options_for(dir.path);
  opts.public_base_url = "https://Files.Example.com/o";
  FsObjectStore store(opts);
  const std::string url = store.sign_url("k", 2000);
  CHECK(url.substr(0, 33) == "https://Files.Example.com/o/agent");
  CHECK(store.verify_url(url, 1000) == "k");
  const std::string rest = url.substr(std::string("https://Files.Example.com").size());
  CHECK(store.verify_url("HTTPS://files.example.COM:443" + rest, 1000) == "k");
  CHECK(code_of([&] { store.verify_url("https://files.example.com:8443" + rest, 1000); }) ==
        ErrorCode::invalid_argument);
}
