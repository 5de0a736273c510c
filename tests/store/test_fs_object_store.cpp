#include <doctest/doctest.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agentrt/error.hpp"
#include "agentrt/json.hpp"
#include "store/fs_object_store.hpp"
#include "store/object_store_conformance.hpp"
#include "util/crypto.hpp"

using namespace agentrt;
using agentrt::testing::keys_of;
using agentrt::testing::run_object_store_conformance;
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

// Every regular file and directory under root, relative, sorted: what the store left on disk.
std::vector<std::string> tree(const fs::path& root) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) out.push_back(fs::relative(e.path(), root).string());
  std::sort(out.begin(), out.end());
  return out;
}

// The same without the store's own files (.agentrt-*): what a bucket would hold.
std::vector<std::string> visible_tree(const fs::path& root) {
  std::vector<std::string> out;
  for (const auto& entry : tree(root)) {
    if (entry.find(".agentrt-") == std::string::npos) out.push_back(entry);
  }
  return out;
}

}  // namespace

TEST_CASE("FsObjectStore passes the ObjectStore conformance suite") {
  TempDir dir;
  int n = 0;
  run_object_store_conformance(
      [&] { return std::make_shared<FsObjectStore>(options_for(dir.path / std::to_string(++n))); });
}

TEST_CASE("an FsObjectStore answers to its bucket name") {
  TempDir dir;
  CHECK(FsObjectStore(options_for(dir.path)).bucket() == "agent-files");
}

TEST_CASE("remove deletes the object and prunes the directories it emptied") {
  TempDir dir;
  FsObjectStore store(options_for(dir.path));
  store.put("x/y/z/1", "1", "text/plain");
  store.put("x/2", "2", "text/plain");
  CHECK(store.remove("x/y/z/1"));
  CHECK_FALSE(store.get("x/y/z/1"));
  CHECK_FALSE(store.remove("x/y/z/1"));
  CHECK(tree(dir.path / "objects") ==
        std::vector<std::string>{".agentrt-layout", "x", "x/.agentrt-meta", "x/.agentrt-meta/2", "x/2"});
  CHECK(store.remove("x/2"));
  CHECK(tree(dir.path / "objects") == std::vector<std::string>{".agentrt-layout"});
  store.put("x/y/z/1", "again", "text/plain");  // the pruned path can be used again
  CHECK(store.get("x/y/z/1") == "again");
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
  CHECK(visible_tree(dir.path / "objects") == std::vector<std::string>{"race", "race/doc"});
  CHECK(tree(dir.path / "objects/race") == std::vector<std::string>{".agentrt-meta", ".agentrt-meta/doc", "doc"});
}

TEST_CASE("list never reports temporary files, symlinks, sidecars or names no key can have") {
  TempDir dir;
  FsObjectStore store(options_for(dir.path));
  for (const char* key : {"b", "a/2", "a/1"}) store.put(key, key, "text/plain");
  std::ofstream(dir.path / "objects/a/.agentrt-tmp-deadbeef") << "partial";
  fs::create_symlink(dir.path / "objects/b", dir.path / "objects/a/link");
  std::ofstream(dir.path / "objects/a/bad\\name") << "x";
  CHECK(keys_of(store.list("")) == std::vector<std::string>{"a/1", "a/2", "b"});
  CHECK(keys_of(store.list("a/")) == std::vector<std::string>{"a/1", "a/2"});
  CHECK(store.list("b/").empty());  // "b" is an object, nothing lies below it
}

TEST_CASE("a refused key leaves nothing on disk; a 1024-byte key of 255-byte segments is a file like any other") {
  TempDir dir;
  FsObjectStore store(options_for(dir.path));
  for (const std::string key : {"../x", "a/./b", "a//b", ".agentrt-tmp-1"}) {
    CHECK(code_of([&] { store.put(key, "x", "text/plain"); }) == ErrorCode::invalid_argument);
  }
  CHECK(tree(dir.path) == std::vector<std::string>{"objects", "objects/.agentrt-layout"});
  CHECK(message_of([&] { store.get("a/../b"); }) == "invalid object key 'a/../b': it has a '.' or '..' segment");
  const std::string longest = std::string(255, 'a') + "/" + std::string(255, 'b') + "/" + std::string(255, 'c') + "/" +
                              std::string(253, 'd') + "/ee";
  CHECK(longest.size() == 1024);
  CHECK(code_of([&] { store.put(longest, "x", "text/plain"); }) == ErrorCode::ok);
  CHECK(read_file(dir.path / "objects" / longest) == "x");
  CHECK(store.get(longest) == "x");
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
  opts.public_base_url = fmt::format("{}/", kBase);
  FsObjectStore slash(opts);
  CHECK(slash.sign_url("k", 5) == store.sign_url("k", 5));
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

namespace {

int64_t file_mtime_ns(const fs::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

void set_mtime(const fs::path& p, int64_t seconds, long nanos) {
  const timespec times[2] = {{0, UTIME_OMIT}, {static_cast<time_t>(seconds), nanos}};
  REQUIRE(::utimensat(AT_FDCWD, p.c_str(), times, 0) == 0);
}

// Runs `write` in a child process whose store _exit()s at the crash point `step`: the state a crash leaves.
void crash_at(const FsObjectStoreOptions& base, std::string_view step,
              const std::function<void(FsObjectStore&)>& write) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    FsObjectStoreOptions o = base;
    const std::string at(step);
    o.crash_point = [at](std::string_view s) {
      if (s == at) ::_exit(42);
    };
    try {
      FsObjectStore store(o);
      write(store);
    } catch (...) {
    }
    ::_exit(1);  // never reached the crash point
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE_MESSAGE(WEXITSTATUS(status) == 42, "the child did not reach the crash point " << step);
}

// A file of the earlier single-file layout: header line, JSON line, bytes.
void write_legacy(const fs::path& p, std::string_view bytes, std::string_view type) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary)
      << "AGENTRT-OBJECT/1\n"
      << json{{"content_type", type}, {"sha256", crypto::sha256_hex(bytes)}, {"size", bytes.size()}}.dump() << "\n"
      << bytes;
}

}  // namespace

TEST_CASE("the folder holds what a bucket would: the bytes as a plain file, the metadata in a sidecar beside it") {
  TempDir dir;
  FsObjectStore store(options_for(dir.path));
  const fs::path root = dir.path / "objects";
  store.put("agent-outputs/u1/t1/p.json", "{\"a\":1}", "application/json");
  CHECK(read_file(root / "agent-outputs/u1/t1/p.json") == "{\"a\":1}");
  CHECK(visible_tree(root) == std::vector<std::string>{"agent-outputs", "agent-outputs/u1", "agent-outputs/u1/t1",
                                                       "agent-outputs/u1/t1/p.json"});
  const json side = json::parse(read_file(root / "agent-outputs/u1/t1/.agentrt-meta/p.json"));
  CHECK(side["content_type"] == "application/json");
  CHECK(side["sha256"] == crypto::sha256_hex("{\"a\":1}"));
  CHECK(side["size"] == 7);
  CHECK(side["mtime_ns"] == file_mtime_ns(root / "agent-outputs/u1/t1/p.json"));
  CHECK_FALSE(side.contains("previous"));
  CHECK(store.head("agent-outputs/u1/t1/p.json")->modified_at ==
        file_mtime_ns(root / "agent-outputs/u1/t1/p.json") / 1'000'000);
  // A replacement keeps the version it replaced as "previous", at an earlier time.
  store.put("agent-outputs/u1/t1/p.json", "{\"a\":2}", "application/json");
  const json again = json::parse(read_file(root / "agent-outputs/u1/t1/.agentrt-meta/p.json"));
  CHECK(again["sha256"] == crypto::sha256_hex("{\"a\":2}"));
  CHECK(again["previous"]["sha256"] == crypto::sha256_hex("{\"a\":1}"));
  CHECK(again["previous"]["mtime_ns"].get<int64_t>() < again["mtime_ns"].get<int64_t>());
  CHECK((fs::status(root / "agent-outputs/u1/t1/p.json").permissions() & fs::perms::group_read) == fs::perms::none);
}

TEST_CASE("a crash after the sidecar and before the data file leaves the old object whole") {
  TempDir dir;
  const auto opts = options_for(dir.path);
  {
    FsObjectStore store(opts);
    store.put("k", "old", "text/old");
  }
  crash_at(opts, "sidecar", [](FsObjectStore& s) { s.put("k", "new bytes", "text/new"); });
  FsObjectStore store(opts);
  CHECK(store.get("k") == "old");
  const auto info = store.head("k");
  REQUIRE(info);
  CHECK(info->content_type == "text/old");
  CHECK(info->sha256 == crypto::sha256_hex("old"));
  CHECK(info->size == 3);
  CHECK(store.read("k", 1, 10) == "ld");
  CHECK(keys_of(store.list("")) == std::vector<std::string>{"k"});
  CHECK(store.list("")[0].content_type == "text/old");
  // The next write goes through as usual.
  store.put("k", "newer", "text/newer");
  CHECK(store.get("k") == "newer");
  CHECK(store.head("k")->content_type == "text/newer");
}

TEST_CASE("a crash after the sidecar of a new key leaves no object, and the key is still free") {
  TempDir dir;
  const auto opts = options_for(dir.path);
  crash_at(opts, "sidecar", [](FsObjectStore& s) { s.put_if_absent("fresh/doc", "v1", "text/plain"); });
  FsObjectStore store(opts);
  CHECK_FALSE(store.get("fresh/doc"));
  CHECK_FALSE(store.head("fresh/doc"));
  CHECK(store.list("").empty());
  CHECK_FALSE(store.remove("fresh/doc"));
  CHECK(store.put_if_absent("fresh/doc", "v2", "application/json"));
  CHECK(store.get("fresh/doc") == "v2");
  CHECK(store.head("fresh/doc")->content_type == "application/json");
}

TEST_CASE("bytes changed outside the store are refused; bytes whose times a copy lost are still described") {
  TempDir dir;
  FsObjectStore store(options_for(dir.path));
  const fs::path file = dir.path / "objects/k";
  store.put("k", "hello", "text/plain");
  set_mtime(file, 1'600'000'000, 0);  // a copy that kept whole seconds only
  CHECK(store.head("k")->content_type == "text/plain");
  CHECK(store.get("k") == "hello");
  std::ofstream(file, std::ios::binary) << "HELLO";  // same size, other bytes
  CHECK(code_of([&] { store.get("k"); }) == ErrorCode::io);
  CHECK(contains(message_of([&] { store.head("k"); }), "its bytes changed outside the store"));
  CHECK(code_of([&] { store.list(""); }) == ErrorCode::io);
  store.put("k", "fixed", "text/plain");  // a put replaces it whatever it was
  CHECK(store.get("k") == "fixed");
}

TEST_CASE("a root of the legacy single-file layout is converted when a store opens it") {
  TempDir dir;
  const fs::path root = dir.path / "objects";
  std::string binary("a\0b\xff", 4);
  write_legacy(root / "agent-inputs/u1/t1/uploads/up_1", binary, "image/png");
  write_legacy(root / "doc.json", "{}", "application/json");
  set_mtime(root / "doc.json", 1'600'000'000, 123'000'000);
  std::ofstream(root / "foreign") << "hello";                             // not one of ours: stays an error
  std::ofstream(root / "short") << "AGENTRT-OBJECT/1\n{\"size\":9}\nab";  // a damaged one: left alone
  FsObjectStore store(options_for(dir.path));
  CHECK(read_file(root / "agent-inputs/u1/t1/uploads/up_1") == binary);  // plain bytes now
  CHECK(store.get("agent-inputs/u1/t1/uploads/up_1") == binary);
  const auto info = store.head("agent-inputs/u1/t1/uploads/up_1");
  REQUIRE(info);
  CHECK(info->content_type == "image/png");
  CHECK(info->sha256 == crypto::sha256_hex(binary));
  CHECK(info->size == 4);
  CHECK(store.head("doc.json")->modified_at == 1'600'000'000'123);  // the object keeps its time
  CHECK(read_file(root / "doc.json") == "{}");
  CHECK(read_file(root / ".agentrt-layout").rfind("agentrt object layout 2", 0) == 0);
  CHECK(code_of([&] { store.get("foreign"); }) == ErrorCode::io);
  CHECK(code_of([&] { store.get("short"); }) == ErrorCode::io);
  CHECK(read_file(root / "short") == "AGENTRT-OBJECT/1\n{\"size\":9}\nab");
}

TEST_CASE("a conversion cut short by a crash is finished by the next store that opens the root") {
  TempDir dir;
  const fs::path root = dir.path / "objects";
  write_legacy(root / "a/one", "first", "text/one");
  write_legacy(root / "b/two", "second", "text/two");
  crash_at(options_for(dir.path), "sidecar", [](FsObjectStore&) {});  // dies converting the first file
  CHECK_FALSE(fs::exists(root / ".agentrt-layout"));
  FsObjectStore store(options_for(dir.path));
  CHECK(fs::exists(root / ".agentrt-layout"));
  CHECK(store.get("a/one") == "first");
  CHECK(store.head("a/one")->content_type == "text/one");
  CHECK(store.get("b/two") == "second");
  CHECK(store.head("b/two")->content_type == "text/two");
  CHECK(keys_of(store.list("")) == std::vector<std::string>{"a/one", "b/two"});
}

TEST_CASE("an object whose own bytes begin with the legacy header is never taken for a legacy file") {
  TempDir dir;
  const std::string tricky = "AGENTRT-OBJECT/1\n{\"content_type\":\"x/y\",\"sha256\":\"00\",\"size\":2}\nab";
  {
    FsObjectStore store(options_for(dir.path));
    store.put("tricky", tricky, "text/plain");
  }
  fs::remove(dir.path / "objects/.agentrt-layout");  // as if a conversion ran again
  FsObjectStore store(options_for(dir.path));
  CHECK(store.get("tricky") == tricky);
  CHECK(store.head("tricky")->content_type == "text/plain");
}
