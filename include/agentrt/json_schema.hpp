// JSON-Schema validation of tool parameters, by valijson (drafts 4 and 7: draft 4 when "$schema" names
// draft-04, draft 7 otherwise), behind a small interface of our own. A float with a zero fractional part is
// an integer (4.0 matches "type": "integer").
// Local "$ref"s only (JSON Pointer fragments into the same document, "%XX" escapes decoded); a remote "$ref" is
// refused when the schema is built, nothing is ever fetched. "format" is not checked. "pattern" and
// "patternProperties" are ECMAScript regular expressions over UTF-8 bytes; "pattern" matches in bounded stack
// and linear time (no backreferences). Recursion is bounded: a schema nested deeper than 256 levels, with a
// cycle of "$ref"s or combinators that never descends into the value ({"$ref": "#"}), or with more "$ref"s
// than its depth allows is refused; a value nested deeper than the schema can check in 256 recursion steps
// (at most 512 levels), or with a property name over 4096 bytes where patternProperties applies, is a
// violation at "".
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
  std::string message;  // one line: what is wrong (valijson's description)
};

// Compiled once, validated many times. Thread-safe for concurrent validate() calls.
class JsonSchema {
 public:
  // Throws Error(invalid_argument) when `schema` is not an object/bool or a keyword has a malformed value.
  explicit JsonSchema(json schema);
  ~JsonSchema();
  JsonSchema(JsonSchema&&) noexcept;
  JsonSchema& operator=(JsonSchema&&) noexcept;

  // The first violation (valijson's deepest first), or nullopt when the instance is valid.
  std::optional<SchemaViolation> validate(const json& instance) const;
  bool is_valid(const json& instance) const { return !validate(instance).has_value(); }
  const json& schema() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace v1
}  // namespace agentrt
