// A JSON-Schema validator for the subset tool parameters use (draft 4/6/7 keywords below).
// Supported: boolean schemas, type (string or array; 1.0 is an integer), enum, const, required, properties,
// additionalProperties (bool or schema), patternProperties, items (schema or tuple array), additionalItems,
// minItems, maxItems, uniqueItems, minimum, maximum, exclusiveMinimum/exclusiveMaximum (number form and
// draft-4 bool form), multipleOf, minLength, maxLength (in Unicode code points), pattern and
// patternProperties (std::regex ECMAScript with search semantics, over UTF-8 bytes: no backreferences,
// lookbehind or \p{..}), minProperties, maxProperties, allOf, anyOf, oneOf, not, and local "$ref" (any
// JSON Pointer fragment into the same document: "#", "#/definitions/..", "#/$defs/..").
// As in drafts 4-7, a "$ref" replaces its sibling keywords. Remote refs and "$id" are not supported.
// Other keywords (title, description, default, format, examples, if/then/else, contains, propertyNames,
// dependencies, ...) are ignored. Validation deeper than 256 levels (a cyclic "$ref") is a violation.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agentrt/json.hpp"

namespace agentrt {
inline namespace v1 {

struct SchemaViolation {
  std::string path;     // JSON Pointer into the instance, "" for the root
  std::string message;  // one line: what was expected and what was found
};

// Compiled once, validated many times. Thread-safe for concurrent validate() calls.
class JsonSchema {
 public:
  // Throws Error(invalid_argument) when `schema` is not an object/bool or a keyword has a malformed value.
  explicit JsonSchema(json schema);
  ~JsonSchema();
  JsonSchema(JsonSchema&&) noexcept;
  JsonSchema& operator=(JsonSchema&&) noexcept;

  // The first violation, or nullopt when the instance is valid.
  std::optional<SchemaViolation> validate(const json& instance) const;
  bool is_valid(const json& instance) const { return !validate(instance).has_value(); }
  const json& schema() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace v1
}  // namespace agentrt
