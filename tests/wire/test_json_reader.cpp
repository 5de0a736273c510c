// Every decoder of caller JSON refuses its input the same way (agentrt/json_reader.hpp).
#include <doctest/doctest.h>

#include "agentrt/error.hpp"
#include "agentrt/json.hpp"
#include "agentrt/json_reader.hpp"

using namespace agentrt;

TEST_CASE("json reader: a wrong value is invalid_argument in one format, naming where, the key and the want") {
  const json j = json::parse(R"({"name":"n","count":3,"on":true,"meta":{"a":1}})");
  const wire::JsonReader in(j, "tool spec");
  CHECK(in.required_string("name") == "n");
  CHECK(in.optional_string("missing").empty());
  CHECK(in.optional_object("meta") == json{{"a", 1}});
  CHECK(in.optional_object("missing").is_null());
  CHECK(in.optional_bool("on") == true);
  CHECK_FALSE(in.optional_bool("missing"));
  CHECK_NOTHROW(in.only_keys({"name", "count", "on", "meta"}));

  CHECK_THROWS_WITH_AS(wire::JsonReader(json::array(), "job_json"), "job_json must be a JSON object", Error);
  CHECK_THROWS_WITH_AS(in.only_keys({"name", "count", "on"}), "tool spec: unknown key 'meta' (name, count, on)", Error);
  CHECK_THROWS_WITH_AS(in.only_keys({"name", "count", "on"}, "or a reference"),
                       "tool spec: unknown key 'meta' (name, count, on; or a reference)", Error);
  CHECK_THROWS_WITH_AS(in.required("id"), "tool spec: 'id' is required", Error);
  CHECK_THROWS_WITH_AS(in.required_string("count"), "tool spec: 'count' must be a string", Error);
  CHECK_THROWS_WITH_AS(in.optional_object("name"), "tool spec: 'name' must be a JSON object", Error);
  CHECK_THROWS_WITH_AS(in.optional_bool("count"), "tool spec: 'count' must be a boolean", Error);
  CHECK(in.optional_integer("count", 1, 5) == 3);
  CHECK_FALSE(in.optional_integer("missing", 1, 5));
  CHECK_THROWS_WITH_AS(in.optional_integer("count", 4, 9), "tool spec: 'count' must be an integer from 4 to 9, not 3",
                       Error);
  CHECK_THROWS_WITH_AS(in.optional_integer("name", 1, 5), "tool spec: 'name' must be an integer from 1 to 5, not \"n\"",
                       Error);
  CHECK_THROWS_WITH_AS(in.fail("no handler"), "tool spec: no handler", Error);
  try {
    in.fail("x");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
  }
}

TEST_CASE("json reader: a wrong value is quoted printable and cut short") {
  std::string mode(201, 'x');
  mode[0] = '\x01';
  const json j{{"mode", mode}};
  const wire::JsonReader in(j, "job_json");
  try {
    in.wrong_value("mode", "\"a\" or \"b\"", j["mode"]);
    FAIL("wrong_value returned");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    const std::string m = e.message();
    CHECK(m.rfind("job_json: 'mode' must be \"a\" or \"b\", not \"\\u0001xxx", 0) == 0);
    CHECK(m.size() < 140);
    CHECK(m.substr(m.size() - 3) == "...");
  }
}
