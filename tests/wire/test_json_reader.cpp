// Every decoder of caller JSON refuses its input the same way (src/wire/json_reader.hpp).
#include <doctest/doctest.h>

#include "agentrt/error.hpp"
#include "agentrt/json.hpp"
#include "wire/json_reader.hpp"

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
  CHECK_THROWS_WITH_AS(in.required("id"), "tool spec: 'id' is required", Error);
  CHECK_THROWS_WITH_AS(in.required_string("count"), "tool spec: 'count' must be a string", Error);
  CHECK_THROWS_WITH_AS(in.optional_object("name"), "tool spec: 'name' must be a JSON object", Error);
  CHECK_THROWS_WITH_AS(in.optional_bool("count"), "tool spec: 'count' must be a boolean", Error);
  CHECK_THROWS_WITH_AS(in.fail("no handler"), "tool spec: no handler", Error);
  try {
    in.fail("x");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
  }
}
