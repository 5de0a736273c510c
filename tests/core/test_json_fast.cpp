// parse_json gives exactly what nlohmann's parser gives: same values, same number kinds, same errors.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "agentrt/error.hpp"
#include "util/json_fast.hpp"

using namespace agentrt;

namespace {

// Equal value for value and kind for kind (json's == would call 5 and 5u equal).
bool same(const json& a, const json& b) {
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case json::value_t::object: {
      if (a.size() != b.size()) return false;
      for (auto it = a.begin(); it != a.end(); ++it) {
        auto jt = b.find(it.key());
        if (jt == b.end() || !same(*it, *jt)) return false;
      }
      return true;
    }
    case json::value_t::array:
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i)
        if (!same(a[i], b[i])) return false;
      return true;
    case json::value_t::number_float: return a.get<double>() == b.get<double>() || (a != a && b != b);
    case json::value_t::discarded: return true;
    default: return a == b;
  }
}

void check_text(const std::string& text) {
  CAPTURE(text.substr(0, 200));
  json expected = json::parse(text, nullptr, false);
  json got = parse_json_or_discarded(text);
  CHECK(same(got, expected));
  if (expected.is_discarded()) {
    CHECK_THROWS_AS(parse_json(text), json::parse_error);
  } else {
    CHECK(same(parse_json(text), expected));
  }
}

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("parse_json agrees with nlohmann on hand-picked texts, valid and not") {
  const std::vector<std::string> texts = {
      "{}",
      "[]",
      "  { } ",
      "null",
      "true",
      "false",
      "0",
      "-0",
      "[-0]",
      "{\"a\":-0,\"b\":-0.0,\"c\":-0e1,\"d\":-05}",
      "[\"x-0\",\"2026-01-05\",-0.5]",
      "{\"id\":\"msg_-0Ab\",\"n\":-0}",
      "{\"id\":\"msg_-0Ab\",\"n\":[1,-0]}",
      "[\"a\\\"-0\",-0]",
      "[\"a\\\\\",-0]",
      "{\"-0\":\"-0\"}",
      "{\"k\":\"x\\\\\",\"-0\":-0e0}",
      "-0.0",
      "7",
      "-7",
      "123456789012345678",
      "1234567890123456789",
      "18446744073709551615",
      "18446744073709551616",
      "-9223372036854775808",
      "-123456789012345678",
      "01",
      "-",
      "-01",
      "1.5",
      "1e3",
      "-2E-2",
      "0.0",
      "\"\"",
      "\"a\\\"b\\\\c\\/d\"",
      "\"\\b\\f\\n\\r\\t\"",
      "\"\\u0041\\u00e9\\ud83d\\ude00\"",
      "\"caf\xc3\xa9\"",
      "\"bad \xff\"",
      "\"tab\there\"",
      "\"\\x\"",
      "\"open",
      "[1,2,]",
      "[1 2]",
      "{\"a\":1,}",
      "{\"a\" 1}",
      "{\"a\":1,\"a\":2}",
      "{\"b\":[],\"a\":{}}",
      "[[[[[]]]]]",
      "{\"k\":\"v\"} x",
      "tru",
      "nul",
      "True",
      "[true,false,null]",
      " \t\r\n[ 1 , -2 , \"x\" ] \n",
      "{\"id\":\"msg_1\",\"role\":\"assistant\",\"toolCalls\":[{\"id\":\"call_1\",\"type\":\"function\","
      "\"function\":{\"name\":\"book_room\",\"arguments\":\"{\\\"room\\\":\\\"A1\\\",\\\"day\\\":\\\"mon\\\"}\"}}]}",
      std::string("\"nul\0byte\"", 10),
      std::string(300, '[') + std::string(300, ']'),
      ""};
  for (const auto& t : texts) check_text(t);
}

TEST_CASE("parse_json agrees with nlohmann on every JSON file of the fixtures and the JSON-Schema suite") {
  std::vector<std::filesystem::path> roots = {std::filesystem::path(AGENTRT_FIXTURES_DIR),
                                              "/usr/share/json-schema-test-suite"};
  int files = 0;
  for (const auto& root : roots) {
    if (!std::filesystem::exists(root)) continue;
    for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
      if (!e.is_regular_file() || e.path().extension() != ".json") continue;
      const std::string text = read(e.path());
      check_text(text);
      // And the document as this library writes JSON back (compact, escapes where needed), whole and
      // value by value.
      json j = json::parse(text, nullptr, false);
      if (j.is_discarded()) continue;
      check_text(j.dump());
      if (j.is_array())
        for (const auto& v : j) check_text(v.dump());
      ++files;
    }
  }
  CHECK(files >= 100);  // the JSON-Schema suite alone has over 150 files
}

TEST_CASE("parse_json refuses a text nested deeper than its limit, in the subset and past it") {
  auto arrays = [](size_t n) { return std::string(n, '[') + std::string(n, ']'); };
  // The subset parser's own cut (its limit below its recursion bound) and nlohmann's (past it).
  for (size_t limit : {size_t{8}, size_t{64}, kMaxStoredJsonDepth}) {
    CHECK(json_depth(parse_json(arrays(limit), limit)) == limit);
    CHECK(json_depth(parse_json_or_discarded(arrays(limit), limit)) == limit);
    CHECK(parse_json_or_discarded(arrays(limit + 1), limit).is_discarded());
    try {
      (void)parse_json(arrays(limit + 1), limit);
      FAIL("parsed a text nested " << limit + 1 << " deep under a limit of " << limit);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::invalid_argument);
      CHECK(e.message() == "JSON text is nested deeper than " + std::to_string(limit) + " levels");
    }
  }
  // The default limit is the stored one; 200,000 levels are refused, not built.
  CHECK(parse_json_or_discarded(arrays(200000)).is_discarded());
  CHECK_THROWS_AS((void)parse_json(arrays(200000)), Error);
  // Objects count as arrays do; brackets in strings do not count.
  CHECK(parse_json_or_discarded(R"({"a":{"b":{"c":"[[[[[["}}})", 3).is_object());
  CHECK(parse_json_or_discarded(R"({"a":{"b":{"c":{}}}})", 3).is_discarded());
  // Within the limit, invalid text is still nlohmann's to judge.
  CHECK_THROWS_AS((void)parse_json("[1,", 8), json::parse_error);
}

TEST_CASE("parse_json finds the byte that ends a plain run wherever it falls in an eight-byte step") {
  // Strings scan eight bytes a step: a quote, a backslash, a control character or a non-ASCII byte at each
  // offset of a long run, and at its end, gives what nlohmann gives (including its errors).
  const std::vector<std::string> enders = {"\\\"",     "\\\\", "\\n", "\\u0041", "\x01", "\x1f", "\x7f",
                                           "\xc3\xa9", "\xff", " ",   "~",       "\"",   "\\"};
  for (const auto& e : enders) {
    for (size_t at = 0; at < 20; ++at) {
      std::string s = std::string(at, 'a') + e + std::string(19 - at, 'b');
      check_text("\"" + s + "\"");
      check_text("{\"k\":\"" + s + "\",\"z\":[\"" + s + "\"]}");
      check_text("\"" + std::string(at, 'x'));  // unterminated at every length
    }
  }
}

TEST_CASE(
    "parse_json keeps nlohmann's object semantics: key order on the way in does not matter, the last "
    "repeat wins") {
  for (const std::string text : {R"({"a":1,"b":2,"c":3})", R"({"c":1,"b":2,"a":3})", R"({"b":1,"a":2,"b":3})",
                                 R"({"a":1,"a":2})", R"({"ab":1,"a":2,"abc":3,"b":{"y":1,"x":2,"y":3}})"}) {
    check_text(text);
    CHECK(parse_json(text).dump() == json::parse(text).dump());
  }
}
