#include <doctest/doctest.h>

#include <string>

#include "agentrt/error.hpp"
#include "agentrt/json_limits.hpp"

using namespace agentrt;

TEST_CASE("json_depth counts the nesting of a value without recursion") {
  CHECK(json_depth(json(1)) == 0);
  CHECK(json_depth(json::array()) == 1);
  CHECK(json_depth(json::parse(R"({"a":[1,{"b":[]}],"c":{}})")) == 4);
  json deep = json::array();
  for (int i = 0; i < 100000; ++i) deep = json::array({std::move(deep)});
  CHECK(json_depth(deep) == 100001);
  CHECK(json_depth(deep, 64) == 65);
  CHECK_THROWS_AS(check_json_depth(deep, 64, "resume"), Error);
}

TEST_CASE("json_text_depth ignores brackets inside strings and escaped quotes") {
  CHECK(json_text_depth(R"(["[[[[", "\"[[", {"k":"{{"}])") == 2);
  CHECK(json_text_depth("") == 0);
  CHECK(json_text_depth(std::string(200000, '['), 64) == 65);
}

TEST_CASE("parse_json_text refuses deep and malformed texts with invalid_argument naming what it read") {
  const std::string at_limit = std::string(64, '[') + std::string(64, ']');
  CHECK(json_depth(parse_json_text(at_limit, 64, "body")) == 64);
  const std::string over = std::string(65, '[') + std::string(65, ']');
  try {
    parse_json_text(over, 64, "body");
    FAIL("accepted a text nested 65 deep");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    CHECK(std::string(e.what()) == "body is nested deeper than 64 levels");
  }
  try {
    parse_json_text(std::string(400000, '['), 64, "resume");
    FAIL("accepted 400000 brackets");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
  }
  try {
    parse_json_text("{\"a\":", 64, "config");
    FAIL("accepted a truncated text");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    CHECK(std::string(e.what()).rfind("config is not valid JSON: ", 0) == 0);
  }
}

TEST_CASE("parse_json_text refuses a number out of range with invalid_argument, not the JSON library's out_of_range") {
  // Found by fuzz_json_schema (tests/fuzz/regressions/json_schema/number-overflow-1e309).
  try {
    parse_json_text("[1e309]", 64, "result_json");
    FAIL("accepted 1e309");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    CHECK(std::string(e.what()).rfind("result_json is not valid JSON: ", 0) == 0);
    CHECK(std::string(e.what()).find("number overflow parsing '1e309'") != std::string::npos);
  }
}
