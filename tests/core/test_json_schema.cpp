#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "agentrt/error.hpp"
#include "agentrt/json_schema.hpp"

using agentrt::Error;
using agentrt::ErrorCode;
using agentrt::json;
using agentrt::JsonSchema;

namespace {

// Debian's json-schema-test-suite package; the project's setup scripts install it.
constexpr std::string_view kSuiteDir = "/usr/share/json-schema-test-suite/tests";

// The files of the keywords JsonSchema supports. A listed file that is missing fails the test.
constexpr std::string_view kCommonFiles[] = {
    "type",
    "enum",
    "required",
    "properties",
    "additionalProperties",
    "patternProperties",
    "items",
    "additionalItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minimum",
    "maximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minProperties",
    "maxProperties",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "ref",
    "default",
};
constexpr std::string_view kDraft7OnlyFiles[] = {"const", "exclusiveMinimum", "exclusiveMaximum", "boolean_schema"};

struct Skip {
  std::string_view file;
  std::string_view group;
  std::string_view test;
  std::string_view reason;
};

// Individual cases left out, in draft4 and draft7 alike. Each entry must match at least one case.
constexpr Skip kSkips[] = {
    {"ref.json", "remote ref, containing refs itself", "remote ref valid",
     "needs the draft meta-schema fetched over http: only local refs are supported"},
    {"ref.json", "remote ref, containing refs itself", "remote ref invalid",
     "needs the draft meta-schema fetched over http: only local refs are supported"},
    {"ref.json", "Recursive references between schemas", "valid tree",
     "resolves refs against \"$id\" base URIs, which are not supported"},
    {"ref.json", "Recursive references between schemas", "invalid tree",
     "resolves refs against \"$id\" base URIs, which are not supported"},
};

// Fewer executed cases than this means files were not found or not read.
constexpr int kMinExecutedCases = 600;  // 618 with json-schema-test-suite 2.0.0

json read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  return json::parse(in);
}

}  // namespace

TEST_CASE("every case of the JSON-Schema test suite for the supported keywords passes") {
  const std::filesystem::path suite(kSuiteDir);
  if (!std::filesystem::is_directory(suite / "draft7") || !std::filesystem::is_directory(suite / "draft4")) {
    FAIL(fmt::format("json-schema-test-suite not found at {}: install the Debian package json-schema-test-suite",
                     kSuiteDir));
  }

  std::vector<std::pair<std::string, std::string>> files;  // (draft, file name)
  for (const std::string_view draft : {"draft4", "draft7"}) {
    for (const std::string_view f : kCommonFiles) files.emplace_back(draft, fmt::format("{}.json", f));
  }
  for (const std::string_view f : kDraft7OnlyFiles) files.emplace_back("draft7", fmt::format("{}.json", f));

  int executed = 0;
  std::vector<int> skip_hits(std::size(kSkips), 0);
  for (const auto& [draft, name] : files) {
    const auto path = suite / draft / name;
    if (!std::filesystem::is_regular_file(path)) {
      FAIL_CHECK(fmt::format("{} is missing from the test suite", path.string()));
      continue;
    }
    const json groups = read_json_file(path);
    for (const auto& group : groups) {
      const std::string group_description = group.at("description").get<std::string>();
      std::optional<JsonSchema> schema;
      std::string compile_error;
      try {
        schema.emplace(group.at("schema"));
      } catch (const Error& e) {
        compile_error = e.what();
      }
      for (const auto& test : group.at("tests")) {
        const std::string description = test.at("description").get<std::string>();
        bool skipped = false;
        for (std::size_t i = 0; i < std::size(kSkips); ++i) {
          if (kSkips[i].file == name && kSkips[i].group == group_description && kSkips[i].test == description) {
            ++skip_hits[i];
            skipped = true;
          }
        }
        if (skipped) continue;
        ++executed;
        const bool expected = test.at("valid").get<bool>();
        if (!schema) {
          FAIL_CHECK(fmt::format("{}/{}: \"{}\" / \"{}\": the schema did not compile: {}", draft, name,
                                 group_description, description, compile_error));
          continue;
        }
        const auto violation = schema->validate(test.at("data"));
        if (violation.has_value() == expected) {
          FAIL_CHECK(fmt::format("{}/{}: \"{}\" / \"{}\": expected {}, got {}", draft, name, group_description,
                                 description, expected ? "valid" : "invalid",
                                 violation ? fmt::format("violation at \"{}\": {}", violation->path, violation->message)
                                           : std::string("valid")));
        }
      }
    }
  }
  CHECK(executed >= kMinExecutedCases);
  for (std::size_t i = 0; i < std::size(kSkips); ++i) {
    if (skip_hits[i] == 0) {
      FAIL_CHECK(fmt::format("stale skip entry: {} \"{}\" / \"{}\" matched no case", kSkips[i].file, kSkips[i].group,
                             kSkips[i].test));
    }
  }
}

namespace {

const json kWeatherArgs = json::parse(R"({
  "type": "object",
  "properties": {
    "city": {"type": "string", "minLength": 1},
    "units": {"enum": ["metric", "imperial"]},
    "days": {"type": "integer", "minimum": 1, "maximum": 14},
    "location": {
      "type": "object",
      "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
      "required": ["lat", "lon"]
    },
    "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3, "uniqueItems": true}
  },
  "required": ["city"],
  "additionalProperties": false
})");

struct Expected {
  std::string path;
  std::string message;
};

Expected violation_of(const JsonSchema& schema, std::string_view instance) {
  const auto v = schema.validate(json::parse(instance));
  REQUIRE_MESSAGE(v.has_value(), instance);
  return {v->path, v->message};
}

}  // namespace

TEST_CASE("valid tool arguments produce no violation") {
  const JsonSchema schema(kWeatherArgs);
  CHECK_FALSE(schema.validate(json::parse(R"({"city": "Oslo"})")).has_value());
  CHECK(schema.is_valid(json::parse(
      R"({"city": "Oslo", "units": "metric", "days": 3, "location": {"lat": 59.9, "lon": 10.7}, "tags": ["a", "b"]})")));
  CHECK(schema.schema() == kWeatherArgs);
}

TEST_CASE("a missing required property is reported at the object that lacks it") {
  const JsonSchema schema(kWeatherArgs);
  auto v = violation_of(schema, R"({})");
  CHECK(v.path == "");
  CHECK(v.message == R"(missing required property "city")");

  v = violation_of(schema, R"({"city": "Oslo", "location": {"lat": 1}})");
  CHECK(v.path == "/location");
  CHECK(v.message == R"(missing required property "lon")");
}

TEST_CASE("a wrong type names the expected and the found type and value") {
  const JsonSchema schema(kWeatherArgs);
  auto v = violation_of(schema, R"({"city": 5})");
  CHECK(v.path == "/city");
  CHECK(v.message == "expected string, found integer 5");

  v = violation_of(schema, R"({"city": "Oslo", "days": 2.5})");
  CHECK(v.path == "/days");
  CHECK(v.message == "expected integer, found number 2.5");

  v = violation_of(schema, R"({"city": "Oslo", "location": {"lat": "north", "lon": 1}})");
  CHECK(v.path == "/location/lat");
  CHECK(v.message == R"(expected number, found string "north")");

  v = violation_of(JsonSchema(json::parse(R"({"type": ["string", "integer", "null"]})")), "[1]");
  CHECK(v.path == "");
  CHECK(v.message == "expected null, string or integer, found array");
}

TEST_CASE("a value outside an enum lists the allowed values") {
  const JsonSchema schema(kWeatherArgs);
  const auto v = violation_of(schema, R"({"city": "Oslo", "units": "kelvin"})");
  CHECK(v.path == "/units");
  CHECK(v.message == R"(expected one of ["metric","imperial"], found string "kelvin")");
}

TEST_CASE("number bounds, string length and array bounds are reported with their limits") {
  const JsonSchema schema(kWeatherArgs);
  auto v = violation_of(schema, R"({"city": "Oslo", "days": 0})");
  CHECK(v.path == "/days");
  CHECK(v.message == "expected a number >= 1, found integer 0");

  v = violation_of(schema, R"({"city": "Oslo", "days": 15})");
  CHECK(v.message == "expected a number <= 14, found integer 15");

  v = violation_of(schema, R"({"city": ""})");
  CHECK(v.path == "/city");
  CHECK(v.message == "expected at least 1 character, found 0");

  v = violation_of(schema, R"({"city": "Oslo", "tags": []})");
  CHECK(v.path == "/tags");
  CHECK(v.message == "expected at least 1 item, found 0");

  v = violation_of(schema, R"({"city": "Oslo", "tags": ["a", "b", "c", "d"]})");
  CHECK(v.path == "/tags");
  CHECK(v.message == "expected at most 3 items, found 4");

  v = violation_of(schema, R"({"city": "Oslo", "tags": ["a", 2]})");
  CHECK(v.path == "/tags/1");
  CHECK(v.message == "expected string, found integer 2");

  v = violation_of(schema, R"({"city": "Oslo", "tags": ["a", "b", "a"]})");
  CHECK(v.path == "/tags");
  CHECK(v.message == "expected unique items, items 0 and 2 are equal");
}

TEST_CASE("an unexpected property is named when additionalProperties is false") {
  const JsonSchema schema(kWeatherArgs);
  const auto v = violation_of(schema, R"({"city": "Oslo", "country": "NO"})");
  CHECK(v.path == "");
  CHECK(v.message == R"(unexpected property "country")");
}

TEST_CASE("property names are escaped in the violation's JSON Pointer") {
  const JsonSchema schema(json::parse(R"({"properties": {"a/b~c": {"properties": {"x": {"type": "string"}}}}})"));
  const auto v = violation_of(schema, R"({"a/b~c": {"x": null}})");
  CHECK(v.path == "/a~1b~0c/x");
  CHECK(v.message == "expected string, found null");
}

TEST_CASE("combinators report their own violation and allOf reports the branch's") {
  auto v = violation_of(JsonSchema(json::parse(R"({"anyOf": [{"type": "string"}, {"type": "integer"}]})")), "1.5");
  CHECK(v.message == "expected a value matching at least one of 2 anyOf schemas, found number 1.5");

  v = violation_of(JsonSchema(json::parse(R"({"oneOf": [{"type": "number"}, {"type": "integer"}]})")), "3");
  CHECK(v.message == "expected a value matching exactly one of 2 oneOf schemas, it matches #0 and #1");

  v = violation_of(JsonSchema(json::parse(R"({"not": {"type": "null"}})")), "null");
  CHECK(v.message == R"(expected a value not matching the "not" schema, found null)");

  v = violation_of(JsonSchema(json::parse(R"({"allOf": [{"properties": {"a": {"maxLength": 2}}}]})")),
                   R"({"a": "abc"})");
  CHECK(v.path == "/a");
  CHECK(v.message == "expected at most 2 characters, found 3");
}

TEST_CASE("a float with a zero fractional part is an integer") {
  const JsonSchema schema(json::parse(R"({"type": "integer", "multipleOf": 2})"));
  CHECK(schema.is_valid(json::parse("4.0")));
  CHECK(schema.is_valid(json::parse("-4")));
  CHECK(schema.validate(json::parse("4.5"))->message == "expected integer, found number 4.5");
  CHECK(schema.validate(json::parse("3"))->message == "expected a multiple of 2, found integer 3");
}

TEST_CASE("string lengths count Unicode code points, not bytes") {
  const JsonSchema schema(json::parse(R"({"minLength": 3, "maxLength": 3})"));
  CHECK(schema.is_valid(json("h\u00e9\u00e9")));                                     // 5 bytes
  CHECK(schema.is_valid(json("\xF0\x9F\x92\xA9\xF0\x9F\x92\xA9\xF0\x9F\x92\xA9")));  // 3 emoji, 12 bytes
  CHECK(schema.validate(json("\xF0\x9F\x92\xA9\xF0\x9F\x92\xA9"))->message ==
        "expected at least 3 characters, found 2");
}

TEST_CASE("pattern searches anywhere in the string and survives very long inputs") {
  const JsonSchema schema(json::parse(R"({"pattern": "^[a-z]+$"})"));
  CHECK(schema.is_valid(json("abc")));
  CHECK(schema.validate(json("abC"))->message == R"(expected a string matching "^[a-z]+$", found string "abC")");
  CHECK(JsonSchema(json::parse(R"({"pattern": "b+"})")).is_valid(json("abba")));
  // A recursive regex executor overflows the stack on strings of this size.
  CHECK(schema.is_valid(json(std::string(200000, 'a'))));
  CHECK_FALSE(schema.is_valid(json(std::string(200000, 'a') + "!")));
}

TEST_CASE("a cyclic $ref ends in a violation instead of a crash") {
  auto v = violation_of(JsonSchema(json::parse(R"({"$ref": "#"})")), "1");
  CHECK(v.path == "");
  CHECK(v.message == R"(schema recursion deeper than 256 levels (cyclic "$ref"?))");

  const JsonSchema two_cycle(json::parse(
      R"({"definitions": {"a": {"$ref": "#/definitions/b"}, "b": {"$ref": "#/$defs/c"}}, "$defs": {"c": {"$ref": "#/definitions/a"}}, "$ref": "#/definitions/a"})"));
  CHECK(two_cycle.validate(json::parse("{}"))->message ==
        R"(schema recursion deeper than 256 levels (cyclic "$ref"?))");
  // Inside anyOf the depth failure is just a non-match.
  const JsonSchema guarded(json::parse(R"({"anyOf": [{"$ref": "#"}, {"type": "string"}]})"));
  CHECK(guarded.is_valid(json("x")));
}

TEST_CASE("a deeply nested instance of a recursive schema is refused, not overflowed") {
  const JsonSchema tree(json::parse(R"({"type": "array", "items": {"$ref": "#"}})"));
  const auto nested = [](int levels) {
    json v = json::array();
    for (int i = 0; i < levels; ++i) {
      json outer = json::array();
      outer.push_back(std::move(v));
      v = std::move(outer);
    }
    return v;
  };
  CHECK(tree.is_valid(nested(50)));
  const json deep = nested(5000);
  const auto v = tree.validate(deep);
  REQUIRE(v.has_value());
  CHECK(v->message == R"(schema recursion deeper than 256 levels (cyclic "$ref"?))");
}

TEST_CASE("malformed keyword values are rejected when the schema is compiled") {
  const auto code_of = [](std::string_view schema) {
    try {
      JsonSchema s{json::parse(schema)};
    } catch (const Error& e) {
      return std::pair{e.code(), std::string(e.what())};
    }
    return std::pair{ErrorCode::ok, std::string()};
  };
  CHECK(code_of(R"({"type": "text"})") ==
        std::pair{ErrorCode::invalid_argument,
                  std::string(R"(invalid schema at "#": "type" has an unknown type name "text")")});
  CHECK(code_of(R"({"properties": {"a": {"minLength": -1}}})") ==
        std::pair{ErrorCode::invalid_argument,
                  std::string(
                      R"(invalid schema at "#/properties/a": "minLength" must be a non-negative integer, found -1)")});
  CHECK(code_of(R"({"multipleOf": 0})") ==
        std::pair{ErrorCode::invalid_argument,
                  std::string(R"(invalid schema at "#": "multipleOf" must be a number > 0, found 0)")});
  CHECK(code_of(R"({"required": "a"})").first == ErrorCode::invalid_argument);
  CHECK(code_of(R"({"anyOf": []})").first == ErrorCode::invalid_argument);
  CHECK(code_of(R"({"items": 3})").first == ErrorCode::invalid_argument);
  CHECK(code_of(R"({"pattern": "("})").first == ErrorCode::invalid_argument);
  CHECK(code_of(R"({"patternProperties": {"[": {}}})").first == ErrorCode::invalid_argument);
  CHECK(code_of(R"("string")") == std::pair{ErrorCode::invalid_argument,
                                            std::string("a JSON schema must be an object or a boolean, found string")});
  CHECK(code_of(R"({"$ref": "http://example.com/s.json"})") ==
        std::pair{
            ErrorCode::invalid_argument,
            std::string(
                R"(unsupported schema "$ref" "http://example.com/s.json": only local refs ("#...") are supported)")});
  CHECK(code_of(R"({"$ref": "#/definitions/missing"})") ==
        std::pair{ErrorCode::invalid_argument,
                  std::string(R"(schema "$ref" "#/definitions/missing" does not point into the schema)")});
  // Keywords outside the supported set are ignored, whatever their value.
  CHECK(code_of(R"({"format": 7, "title": [], "if": 1})").first == ErrorCode::ok);
}

TEST_CASE("a moved schema validates like the original") {
  JsonSchema a(kWeatherArgs);
  JsonSchema b(std::move(a));
  CHECK(b.validate(json::parse("{}"))->message == R"(missing required property "city")");
  JsonSchema c(json(true));
  c = std::move(b);
  CHECK(c.validate(json::parse(R"({"city": 1})"))->path == "/city");
}

TEST_CASE("concurrent validate calls on one schema give the same answers") {
  const JsonSchema schema(kWeatherArgs);
  const json good = json::parse(R"({"city": "Oslo", "tags": ["x"], "location": {"lat": 1, "lon": 2}})");
  const json bad = json::parse(R"({"city": "Oslo", "tags": ["x", 1]})");
  std::vector<int> wrong(4, 0);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < wrong.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        if (!schema.is_valid(good)) ++wrong[t];
        const auto v = schema.validate(bad);
        if (!v || v->path != "/tags/1") ++wrong[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(wrong == std::vector<int>(4, 0));
}
