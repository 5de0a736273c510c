// The ObjectStore conformance suite: what every object store must do, written against the interface only.
// A store's test calls run_object_store_conformance with a factory that makes a fresh, empty store (FsObjectStore
// on a new folder, S3ObjectStore under a new prefix of the test bucket).
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agentrt/error.hpp"
#include "agentrt/storage.hpp"
#include "util/crypto.hpp"

namespace agentrt::testing {

// What a store promises beyond the interface's minimum.
struct ObjectStoreTraits {
  // put_if_absent has exactly one winner among racing writers (fs: link(); S3: If-None-Match). S3ObjectStore's
  // emulation (HEAD, then PUT) only promises never to overwrite an object that existed before the call.
  bool exclusive_put_if_absent = true;
};

inline ErrorCode error_code_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::ok;
}

inline std::vector<std::string> keys_of(const std::vector<ObjectInfo>& infos) {
  std::vector<std::string> keys;
  for (const auto& i : infos) keys.push_back(i.key);
  return keys;
}

inline int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline void run_object_store_conformance(const std::function<std::shared_ptr<ObjectStore>()>& make,
                                         ObjectStoreTraits traits = {}) {
  SUBCASE("put then get returns exactly the bytes, including NUL and high bytes") {
    auto store = make();
    std::string bytes;
    for (int round = 0; round < 3; ++round)
      for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i));
    store->put("a/b/c.bin", bytes, "application/octet-stream");
    CHECK(store->get("a/b/c.bin") == bytes);
    store->put("empty", "", "text/plain");
    CHECK(store->get("empty") == std::string());
    std::string big(3 * 1024 * 1024 + 7, '\0');
    for (size_t i = 0; i < big.size(); i += 997) big[i] = static_cast<char>(i);
    store->put("big", big, "application/octet-stream");
    CHECK(store->get("big") == big);
  }

  SUBCASE("read returns the part of an object asked for: from an offset, at most so many bytes") {
    auto store = make();
    std::string big(1024 * 1024 + 13, '\0');
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 7) & 0xff);
    store->put("r/big", big, "application/octet-stream");
    CHECK(store->read("r/big", 0, 10) == big.substr(0, 10));
    CHECK(store->read("r/big", 65536, 65536) == big.substr(65536, 65536));
    CHECK(store->read("r/big", big.size() - 5, 65536) == big.substr(big.size() - 5));  // fewer only at the end
    CHECK(store->read("r/big", big.size(), 10) == std::string());
    CHECK(store->read("r/big", big.size() + 100, 10) == std::string());
    CHECK(store->read("r/big", 3, 0) == std::string());
    std::string joined;
    for (uint64_t off = 0; off < big.size(); off += 262144) joined += *store->read("r/big", off, 262144);
    CHECK(joined == big);
    CHECK_FALSE(store->read("r/nope", 0, 10));
    CHECK_FALSE(store->read("r/nope", 0, 0));
    store->put("r/empty", "", "text/plain");
    CHECK(store->read("r/empty", 0, 10) == std::string());
  }

  SUBCASE("put replaces an existing object") {
    auto store = make();
    store->put("k", "first", "text/plain");
    store->put("k", "second!", "application/json");
    CHECK(store->get("k") == "second!");
    CHECK(store->head("k")->content_type == "application/json");
    CHECK(store->head("k")->size == 7);
    CHECK(store->head("k")->sha256 == crypto::sha256_hex("second!"));
  }

  SUBCASE("head reports size, content type, sha256 and modification time") {
    auto store = make();
    const int64_t before = wall_ms();
    store->put("docs/report.pdf", "abc", "application/pdf");
    const auto info = store->head("docs/report.pdf");
    REQUIRE(info);
    CHECK(info->key == "docs/report.pdf");
    CHECK(info->size == 3);
    CHECK(info->content_type == "application/pdf");
    CHECK(info->sha256 == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(info->modified_at >= before - 2000);  // S3 keeps whole seconds
    CHECK(info->modified_at <= wall_ms() + 1000);
    store->put("untyped", "x", "");
    CHECK(store->head("untyped")->content_type == "application/octet-stream");
  }

  SUBCASE("missing objects are nullopt for get, read and head, and false for remove") {
    auto store = make();
    store->put("a/b", "x", "text/plain");
    CHECK_FALSE(store->get("nope"));
    CHECK_FALSE(store->head("a/nope"));
    CHECK_FALSE(store->get("a"));  // a prefix of a key, not an object
    CHECK_FALSE(store->head("a"));
    CHECK_FALSE(store->remove("nope/x"));
    CHECK_FALSE(store->remove("a"));
    CHECK(store->get("a/b") == "x");
  }

  SUBCASE("remove deletes the object and the key can be used again") {
    auto store = make();
    store->put("x/y/z/1", "1", "text/plain");
    store->put("x/2", "2", "text/plain");
    CHECK(store->remove("x/y/z/1"));
    CHECK_FALSE(store->get("x/y/z/1"));
    CHECK_FALSE(store->head("x/y/z/1"));
    CHECK_FALSE(store->remove("x/y/z/1"));
    CHECK(keys_of(store->list("")) == std::vector<std::string>{"x/2"});
    CHECK(store->remove("x/2"));
    CHECK(store->list("").empty());
    store->put("x/y/z/1", "again", "text/plain");
    CHECK(store->get("x/y/z/1") == "again");
  }

  SUBCASE("put_if_absent writes only when the key is free and never changes an existing object") {
    auto store = make();
    CHECK(store->put_if_absent("doc", "v1", "text/plain"));
    CHECK_FALSE(store->put_if_absent("doc", "v2", "application/json"));
    CHECK(store->get("doc") == "v1");
    CHECK(store->head("doc")->content_type == "text/plain");
    CHECK(keys_of(store->list("")) == std::vector<std::string>{"doc"});
  }

  SUBCASE("put_if_absent among racing threads: one winner, and the object is a writer's whole") {
    auto store = make();
    std::atomic<int> winners{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; ++i) {
      threads.emplace_back([&, i] {
        if (store->put_if_absent("t/doc", "writer " + std::to_string(i), "text/plain")) ++winners;
      });
    }
    for (auto& t : threads) t.join();
    if (traits.exclusive_put_if_absent) {
      CHECK(winners.load() == 1);
    } else {
      CHECK(winners.load() >= 1);
    }
    const auto doc = store->get("t/doc");
    REQUIRE(doc);
    CHECK(doc->rfind("writer ", 0) == 0);
    // Where several writers may write (an emulated put_if_absent), the bytes are one writer's whole; their
    // metadata may be another's on s3rver, which writes an object's bytes and its metadata as two files, one
    // after the other (S3 replaces both at once).
    if (traits.exclusive_put_if_absent) CHECK(store->head("t/doc")->sha256 == crypto::sha256_hex(*doc));
  }

  SUBCASE("list returns the objects under a prefix sorted by key, with their metadata") {
    auto store = make();
    for (const char* key : {"b", "a/2", "a/b/3", "ab", "a/1", "a/b/c/4"}) store->put(key, key, "text/plain");
    CHECK(keys_of(store->list("a/")) == std::vector<std::string>{"a/1", "a/2", "a/b/3", "a/b/c/4"});
    CHECK(keys_of(store->list("a")) == std::vector<std::string>{"a/1", "a/2", "a/b/3", "a/b/c/4", "ab"});
    CHECK(keys_of(store->list("")) == std::vector<std::string>{"a/1", "a/2", "a/b/3", "a/b/c/4", "ab", "b"});
    CHECK(keys_of(store->list("a/b")) == std::vector<std::string>{"a/b/3", "a/b/c/4"});
    CHECK(keys_of(store->list("a/b/c/")) == std::vector<std::string>{"a/b/c/4"});
    CHECK(store->list("zzz/").empty());
    CHECK(store->list("b/").empty());
    const auto infos = store->list("a/b/3");
    REQUIRE(infos.size() == 1);
    CHECK(infos[0].size == 5);
    CHECK(infos[0].content_type == "text/plain");
    CHECK(infos[0].sha256 == crypto::sha256_hex("a/b/3"));
  }

  SUBCASE("list refuses prefixes that could escape the store") {
    auto store = make();
    for (const char* prefix : {"/", "/etc", "../", "a/../", "./", "a//", "a\\b"}) {
      CAPTURE(prefix);
      CHECK(error_code_of([&] { store->list(prefix); }) == ErrorCode::invalid_argument);
    }
    CHECK(error_code_of([&] { store->list(std::string_view("a\0", 2)); }) == ErrorCode::invalid_argument);
    CHECK(error_code_of([&] { store->list(".."); }) == ErrorCode::ok);  // a partial name: matches "..x" keys only
  }

  SUBCASE("keys that could escape the store or are malformed are refused by every operation") {
    auto store = make();
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
      CHECK(error_code_of([&] { store->put(key, "x", "text/plain"); }) == ErrorCode::invalid_argument);
      CHECK(error_code_of([&] { store->put_if_absent(key, "x", "text/plain"); }) == ErrorCode::invalid_argument);
      CHECK(error_code_of([&] { store->get(key); }) == ErrorCode::invalid_argument);
      CHECK(error_code_of([&] { store->read(key, 0, 1); }) == ErrorCode::invalid_argument);
      CHECK(error_code_of([&] { store->head(key); }) == ErrorCode::invalid_argument);
      CHECK(error_code_of([&] { store->remove(key); }) == ErrorCode::invalid_argument);
      CHECK(error_code_of([&] { store->sign_url(key, wall_ms() + 60000); }) == ErrorCode::invalid_argument);
    }
    CHECK(store->list("").empty());
    CHECK(error_code_of([&] { store->put("ok", "x", "text/plain\n"); }) == ErrorCode::invalid_argument);
    CHECK(error_code_of([&] { store->put("ok", "x", std::string(256, 't')); }) == ErrorCode::invalid_argument);
  }

  SUBCASE("sign_url and verify_url round-trip keys with spaces, UTF-8 and reserved characters") {
    auto store = make();
    const int64_t now = wall_ms();
    for (const std::string key : {"a b/c d", "文件/照片 1.jpg", "q?x=1&y#z", "100%/~tilde+plus", "emoji/😀.txt"}) {
      CAPTURE(key);
      const std::string url = store->sign_url(key, now + 60000);
      CHECK(url.find(' ') == std::string::npos);
      CHECK(store->verify_url(url, now) == key);
    }
    CHECK(error_code_of([&] { store->sign_url("k", -1); }) == ErrorCode::invalid_argument);
  }

  SUBCASE("verify_url refuses tampered and foreign URLs, and reports an expired one as expired") {
    auto store = make();
    const int64_t now = wall_ms();
    const std::string url = store->sign_url("agent-inputs/u1/t1/uploads/x", now + 60000);
    CHECK(store->verify_url(url, now) == "agent-inputs/u1/t1/uploads/x");
    CHECK(error_code_of([&] { store->verify_url(url, now + 120000); }) == ErrorCode::expired);
    std::string flipped = url;
    flipped.back() = flipped.back() == '0' ? '1' : '0';
    const size_t key_at = url.find("uploads/x");
    std::string other_key = url;
    other_key.replace(key_at, 9, "uploads/y");
    for (const std::string& bad : {flipped, other_key, url + "&extra=1", std::string("file:///etc/passwd"),
                                   std::string("https://example.com/agent-inputs/u1/t1/uploads/x"), std::string()}) {
      CAPTURE(bad);
      CHECK(error_code_of([&] { store->verify_url(bad, now); }) == ErrorCode::invalid_argument);
      CHECK(error_code_of([&] { store->verify_url(bad, now + 120000); }) == ErrorCode::invalid_argument);
    }
  }
}

}  // namespace agentrt::testing
