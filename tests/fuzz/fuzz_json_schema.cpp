// The JSON Schema validator (src/util/json_schema.*): the input is [schema, instance] (JSON, within the
// nesting limit, as every schema and instance that reaches it). A schema compiles or is refused with
// Error(invalid_argument); validation answers, the same every time, and a violation says where.
#include <cstdint>
#include <string>

#include "agentrt/error.hpp"
#include "agentrt/json_limits.hpp"
#include "agentrt/json_schema.hpp"
#include "fuzz_support.hpp"

using namespace agentrt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  json input;
  try {
    input = parse_json_text(agentrt_fuzz::text_of(data, size), kDefaultMaxJsonDepth, "input");
  } catch (const Error&) {
    return 0;
  }
  if (!input.is_array() || input.size() != 2) return 0;
  std::optional<JsonSchema> schema;
  try {
    schema.emplace(input[0]);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::invalid_argument)
      agentrt_fuzz::broken("json_schema", std::string("a schema was refused with another code: ") + e.what());
    return 0;
  }
  const auto first = schema->validate(input[1]);
  const auto second = schema->validate(input[1]);
  if (first.has_value() != second.has_value() || (first && (first->path != second->path)))
    agentrt_fuzz::broken("json_schema", "two validations of one instance disagree");
  if (first && !first->path.empty() && first->path[0] != '/')
    agentrt_fuzz::broken("json_schema", "a violation's path is not a JSON Pointer: " + first->path);
  if (first && first->message.empty()) agentrt_fuzz::broken("json_schema", "a violation without a message");
  return 0;
}
