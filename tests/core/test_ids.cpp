#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "agentrt/attachments.hpp"
#include "agentrt/clock.hpp"
#include "agentrt/error.hpp"
#include "agentrt/ids.hpp"
#include "core/ids.hpp"
#include "store/document_layout.hpp"

using namespace agentrt;

TEST_CASE("ids: the rule's edges") {
  for (const std::string& good :
       {std::string("a"), std::string("A-z_0.9:x@y"), std::string("a..b"), std::string("a."),
        std::string("u0123456789ab.t:1"), std::string(128, 'z'), std::string("-"), std::string("alice@example.com")}) {
    CAPTURE(good);
    CHECK(id_problem(good) == nullptr);
    CHECK(is_valid_id(good));
    CHECK_NOTHROW(require_id(good, "thread id"));
  }
  struct Bad {
    std::string id;
    std::string problem;
  };
  const std::vector<Bad> bads = {
      {"", "is empty"},
      {std::string(129, 'a'), "is longer than 128 bytes"},
      {".", "starts with '.'"},
      {"..", "starts with '.'"},
      {".agentrt-tmp", "starts with '.'"},
      {"a/b", "holds a character other than A-Z a-z 0-9 _ - . : @"},
      {"a b", "holds a character other than A-Z a-z 0-9 _ - . : @"},
      {"a\\b", "holds a character other than A-Z a-z 0-9 _ - . : @"},
      {"a%2F", "holds a character other than A-Z a-z 0-9 _ - . : @"},
      {"\xc3\xa9", "holds a character other than A-Z a-z 0-9 _ - . : @"},
      {std::string("a\0b", 3), "holds a character other than A-Z a-z 0-9 _ - . : @"},
  };
  for (const auto& bad : bads) {
    CAPTURE(bad.id);
    REQUIRE(id_problem(bad.id) != nullptr);
    CHECK(std::string(id_problem(bad.id)) == bad.problem);
    CHECK_FALSE(is_valid_id(bad.id));
  }
}

TEST_CASE("ids: require_id names the id, escapes it and cuts it") {
  try {
    require_id(std::string("t\x01\n", 3), "thread id");
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    CHECK(e.message() ==
          "thread id 't\\x01\\x0a' holds a character other than A-Z a-z 0-9 _ - . : @ (ids are 1-128 of "
          "A-Z a-z 0-9 _ - . : @, not starting with '.')");
  }
  std::string big(1000, 'x');
  big.push_back(' ');
  try {
    require_id(big, "user id");
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.message() == "user id '" + std::string(140, 'x') +
                             "...' is longer than 128 bytes (ids are 1-128 of A-Z a-z 0-9 _ - . : @, not starting "
                             "with '.')");
  }
}

TEST_CASE("ids: require_id with a shorter bound names that bound") {
  CHECK_NOTHROW(require_id(std::string(114, 'a'), "thread id", 114));
  auto message = [](std::string_view id, size_t max_bytes) {
    try {
      require_id(id, "thread id", max_bytes);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::invalid_argument);
      return e.message();
    }
    return std::string("accepted");
  };
  const std::string rule = " (ids are 1-114 of A-Z a-z 0-9 _ - . : @, not starting with '.')";
  CHECK(message(std::string(115, 'a'), 114) ==
        "thread id '" + std::string(115, 'a') + "' is longer than 114 bytes" + rule);
  // Past the bound, the length is the problem named, whatever the characters (as id_problem() orders them).
  CHECK(message(std::string(115, '/'), 114) ==
        "thread id '" + std::string(115, '/') + "' is longer than 114 bytes" + rule);
  CHECK(message("a/b", 114) == "thread id 'a/b' holds a character other than A-Z a-z 0-9 _ - . : @" + rule);
  CHECK(message("", 114) == "thread id '' is empty" + rule);
  CHECK(message(".a", 114) == "thread id '.a' starts with '.'" + rule);
  // A bound above the rule's is the rule's.
  CHECK(message(std::string(129, 'a'), 500) ==
        "thread id '" + std::string(129, 'a') +
            "' is longer than 128 bytes (ids are 1-128 of A-Z a-z 0-9 _ - . : @, not starting with '.')");
  CHECK(message(std::string(128, 'a'), 500) == "accepted");
}

TEST_CASE("ids: one rule for threads, uploads and conversation documents") {
  // Every id the rule accepts names an upload folder and a conversation document; every one it refuses
  // names neither.
  for (const std::string& id : {std::string("th:1"), std::string("a@b"), std::string("x.y"), std::string(".x"),
                                std::string("a/b"), std::string(""), std::string("..")}) {
    CAPTURE(id);
    const bool valid = is_valid_id(id);
    bool upload_ok = true, document_ok = true;
    try {
      upload_key("u1", id, "up1");
    } catch (const Error&) {
      upload_ok = false;
    }
    try {
      conversation_document_key(id, 1);
    } catch (const Error&) {
      document_ok = false;
    }
    CHECK(upload_ok == valid);
    CHECK(document_ok == valid);
  }
}

TEST_CASE("ids: new_id is the prefix, '_', 8 time digits and 14 random ones, and does not repeat") {
  const std::string alphabet = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz";
  std::set<std::string> seen;
  std::set<std::string> random_parts;
  for (int i = 0; i < 1000; ++i) {
    const std::string id = new_id("turn");
    REQUIRE(id.size() == 5 + 8 + kNewIdRandomDigits);
    CHECK(id.rfind("turn_", 0) == 0);
    CHECK(id.find_first_not_of(alphabet, 5) == std::string::npos);
    CHECK(is_valid_id(id));
    seen.insert(id);
    random_parts.insert(id.substr(5 + 8));
  }
  CHECK(seen.size() == 1000);
  CHECK(random_parts.size() == 1000);  // the random digits alone tell ids apart (unique_call_id uses them)
}

TEST_CASE("ids: an id made in a later millisecond sorts after every earlier one, byte for byte") {
  const std::string first = new_id("run");
  const int64_t t0 = now_ms();
  while (now_ms() == t0) {
  }
  const std::string second = new_id("run");
  CHECK(first < second);
  // The time digits are the milliseconds, most significant first.
  const std::string alphabet = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz";
  uint64_t ms = 0;
  for (size_t i = 4; i < 4 + 8; ++i) ms = ms * 64 + alphabet.find(second[i]);
  CHECK(static_cast<int64_t>(ms) >= t0 + 1);
  CHECK(static_cast<int64_t>(ms) <= now_ms());
}
