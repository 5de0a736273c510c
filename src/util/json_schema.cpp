// valijson reports a bad schema by exception (without this it prints and aborts); JsonSchema catches them.
#define VALIJSON_USE_EXCEPTIONS 1

#include "agentrt/json_schema.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <map>
#include <new>
#include <regex>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/constraints/concrete_constraints.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>
#include <vector>

#include "agentrt/error.hpp"
#include "agentrt/json_limits.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

// valijson parses and validates by recursion. A schema is refused when its JSON is nested deeper than this, or
// when parsing it could recurse more than kMaxParseSteps schema nodes deep ((refs + 1) x (schema depth + 1)
// bounds every chain the parser follows, since it visits each node once).
constexpr size_t kMaxSchemaDepth = kMaxConfigurableJsonDepth;
constexpr size_t kMaxParseSteps = 4096;
// A value is refused when validating it could recurse more than this many schema steps deep (see DepthBound).
constexpr size_t kMaxValidationSteps = 256;
// Property names longer than this are not matched against "patternProperties": valijson matches them with
// std::regex's default executor, which recurses once per character.
constexpr size_t kMaxPatternPropertyName = 4096;
// The keyword valijson sees in place of "pattern", checked by PatternConstraint below.
constexpr std::string_view kPatternKeyword = "x-agentrt-pattern";

Error bad_schema(const std::string& location, std::string_view what) {
  return Error(ErrorCode::invalid_argument, fmt::format("invalid schema at \"#{}\": {}", location, what));
}

std::string quoted(const std::string& s) { return json(s).dump(-1, ' ', false, json::error_handler_t::replace); }

std::string escape_pointer_token(std::string_view token) {
  std::string out;
  for (const char c : token) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

// A URI fragment with its %XX escapes decoded ("#/a%25b" points at "a%b"); a malformed escape stays as it is.
std::string percent_decoded(std::string_view fragment) {
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < fragment.size(); ++i) {
    if (fragment[i] == '%' && i + 2 < fragment.size() && hex(fragment[i + 1]) >= 0 && hex(fragment[i + 2]) >= 0) {
      out += static_cast<char>(hex(fragment[i + 1]) * 16 + hex(fragment[i + 2]));
      i += 2;
    } else {
      out += fragment[i];
    }
  }
  return out;
}

// Bounds on a pattern before std::regex sees it. Its compiler reads numbers (brace counts, a backreference's
// "\\123") into a signed integer without a check (the fuzzer found "{1111111111111111111}" and
// "\\18446744073709551615999999" overflowing it), and it expands every counted repetition into copies of the
// automaton, so "(a{1000}){1000}" would take gigabytes. So: at most 1 KiB, each count at most kMaxRepeat, an
// escape's number at most 3 digits, and the pattern's length times the product of its counts at most
// kMaxExpansion. Escaped braces are literals; a digit run after any other '{' counts, even inside a class
// (conservative: such literals are rare in tool schemas). Returns why a pattern is refused, or "" when it is not.
std::string pattern_problem(std::string_view source) {
  constexpr size_t kMaxPatternBytes = 1024;
  constexpr uint64_t kMaxRepeat = 1000, kMaxExpansion = 1000000;
  if (source.size() > kMaxPatternBytes) return fmt::format("is longer than {} bytes", kMaxPatternBytes);
  uint64_t product = 1;
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\\') {
      // "\N": a backreference, whose number the compiler reads into the same unchecked integer.
      size_t end = i + 1;
      while (end < source.size() && std::isdigit(static_cast<unsigned char>(source[end]))) ++end;
      if (end - i - 1 > 3)
        return fmt::format("has an escape with the number {}", source.substr(i + 1, std::min<size_t>(end - i - 1, 24)));
      i = std::max(i + 1, end - 1);
      continue;
    }
    if (source[i] != '{') continue;
    uint64_t largest = 0;
    for (size_t j = i + 1;
         j < source.size() && (std::isdigit(static_cast<unsigned char>(source[j])) || source[j] == ','); ++j) {
      if (source[j] == ',') continue;
      size_t end = j;
      while (end < source.size() && std::isdigit(static_cast<unsigned char>(source[end]))) ++end;
      const std::string_view digits = source.substr(j, end - j);
      if (digits.size() > 4 || std::stoull(std::string(digits)) > kMaxRepeat)
        return fmt::format("repeats something {} times; the limit is {}", digits.substr(0, 24), kMaxRepeat);
      largest = std::max<uint64_t>(largest, std::stoull(std::string(digits)));
      j = end - 1;
    }
    product = std::min<uint64_t>(product * std::max<uint64_t>(largest, 1), kMaxExpansion + 1);
  }
  if (source.size() * product > kMaxExpansion)
    return fmt::format("expands to too large an automaton (its length times its repetition counts is over {})",
                       kMaxExpansion);
  return {};
}

// libstdc++'s default regex executor recurses once per input character and overflows the stack on strings of a
// few ten thousand characters; its polynomial (Thompson NFA) mode runs in bounded stack and linear time, which
// also defuses catastrophic patterns. It rejects backreferences, which tool schemas do not need.
std::regex compile_pattern(const std::string& source, const std::string& location) {
  if (const std::string problem = pattern_problem(source); !problem.empty())
    throw bad_schema(location, fmt::format("regular expression {} {}", quoted(source.substr(0, 64)), problem));
#if defined(__GLIBCXX__)
  constexpr auto kFlags = std::regex::ECMAScript | std::regex_constants::__polynomial;
#else
  constexpr auto kFlags = std::regex::ECMAScript;
#endif
  try {
    return std::regex(source, kFlags);
  } catch (const std::regex_error& e) {
    throw bad_schema(location, fmt::format("regular expression {} is not supported: {}", quoted(source), e.what()));
  }
}

// "pattern", matched in bounded stack (valijson's own PatternConstraint uses the recursive executor).
class PatternConstraint : public valijson::constraints::PolyConstraint {
 public:
  PatternConstraint(std::string source, std::shared_ptr<const std::regex> regex)
      : source_(std::move(source)), regex_(std::move(regex)) {}

  bool validate(const valijson::adapters::Adapter& target, const std::vector<std::string>& context,
                valijson::ValidationResults* results) const override {
    if (!target.isString()) return true;
    if (std::regex_search(target.getString(), *regex_)) return true;
    if (results) results->pushError(context, fmt::format("Failed to match regex {}.", quoted(source_)));
    return false;
  }

 private:
  Constraint* cloneInto(void* where) const override { return new (where) PatternConstraint(*this); }
  size_t sizeOf() const override { return sizeof(PatternConstraint); }

  std::string source_;
  std::shared_ptr<const std::regex> regex_;
};

class PatternConstraintBuilder : public valijson::ConstraintBuilder {
 public:
  explicit PatternConstraintBuilder(const std::map<std::string, std::shared_ptr<const std::regex>>& regexes)
      : regexes_(regexes) {}
  valijson::constraints::Constraint* make(const valijson::adapters::Adapter& value) const override {
    const std::string source = value.getString();
    return new PatternConstraint(source, regexes_.at(source));
  }

 private:
  const std::map<std::string, std::shared_ptr<const std::regex>>& regexes_;
};

// The schema positions of a document and how validation moves between them: an "in place" edge validates the
// same value (allOf, anyOf, oneOf, not, if/then/else, dependencies, $ref), a "descend" edge a child of it
// (properties, items, ...). Built by an iterative walk, which also checks local refs and rewrites the
// keywords valijson would check with the recursive regex executor.
class SchemaGraph {
 public:
  struct Node {
    std::vector<size_t> in_place;
    std::vector<size_t> descend;
  };

  // Walks `doc` (which it may rewrite: "pattern" becomes kPatternKeyword, "format" is dropped).
  SchemaGraph(json& doc, std::map<std::string, std::shared_ptr<const std::regex>>& regexes) : doc_(doc) {
    node_of("", doc);
    while (!todo_.empty()) {
      const size_t id = todo_.back();
      todo_.pop_back();
      visit(id, regexes);
    }
    const size_t depth = json_depth(doc);
    if (refs_ > 0 && (refs_ + 1) * (depth + 1) > kMaxParseSteps)
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("schema too complex: {} \"$ref\"s in a schema nested {} levels deep", refs_, depth));
    for (auto [object, source] : renamed_) {
      json value = std::move((*object)["pattern"]);
      object->erase("pattern");
      (*object)[std::string(kPatternKeyword)] = std::move(value);
    }
    for (json* object : formats_) object->erase("format");
  }

  const std::vector<Node>& nodes() const { return nodes_; }
  bool has_pattern_properties() const { return has_pattern_properties_; }

 private:
  size_t node_of(const std::string& pointer, json& schema) {
    auto [it, inserted] = ids_.try_emplace(pointer, nodes_.size());
    if (inserted) {
      nodes_.emplace_back();
      values_.push_back(&schema);
      pointers_.push_back(pointer);
      todo_.push_back(it->second);
    }
    return it->second;
  }

  // A schema position below `at`: an object or a boolean, else the schema is malformed.
  size_t child(size_t at, const std::string& suffix, json& schema) {
    const std::string pointer = pointers_[at] + suffix;
    if (!schema.is_object() && !schema.is_boolean())
      throw bad_schema(pointer, fmt::format("a schema must be an object or a boolean, found {}", schema.type_name()));
    return node_of(pointer, schema);
  }

  void visit(size_t id, std::map<std::string, std::shared_ptr<const std::regex>>& regexes) {
    json& schema = *values_[id];
    if (!schema.is_object()) return;
    const std::string here = pointers_[id];
    const auto edge = [&](bool in_place, const std::string& suffix, json& sub) {
      const size_t to = child(id, suffix, sub);
      (in_place ? nodes_[id].in_place : nodes_[id].descend).push_back(to);
    };
    for (auto& [key, value] : schema.items()) {
      const std::string suffix = "/" + escape_pointer_token(key);
      if (key == "allOf" || key == "anyOf" || key == "oneOf") {
        if (!value.is_array() || value.empty())
          throw bad_schema(here, fmt::format("\"{}\" must be a non-empty array of schemas", key));
        for (size_t i = 0; i < value.size(); ++i) edge(true, fmt::format("{}/{}", suffix, i), value[i]);
      } else if (key == "not" || key == "if" || key == "then" || key == "else") {
        edge(true, suffix, value);
      } else if (key == "dependencies" && value.is_object()) {
        for (auto& [name, dep] : value.items())
          if (!dep.is_array()) edge(true, suffix + "/" + escape_pointer_token(name), dep);
      } else if (key == "properties" || key == "patternProperties" || key == "definitions" || key == "$defs") {
        if (!value.is_object()) throw bad_schema(here, fmt::format("\"{}\" must be an object of schemas", key));
        for (auto& [name, sub] : value.items()) {
          const std::string sub_suffix = suffix + "/" + escape_pointer_token(name);
          if (key == "definitions" || key == "$defs") {
            child(id, sub_suffix, sub);  // checked and rewritten, applied only through a $ref
            continue;
          }
          if (key == "patternProperties") {
            has_pattern_properties_ = true;
            try {
              std::regex probe(name);  // valijson compiles it when validating; a bad one must fail here
            } catch (const std::regex_error& e) {
              throw bad_schema(here, fmt::format("regular expression {} is not supported: {}", quoted(name), e.what()));
            }
          }
          edge(false, sub_suffix, sub);
        }
      } else if (key == "additionalProperties" || key == "additionalItems" || key == "contains" ||
                 key == "propertyNames") {
        edge(false, suffix, value);
      } else if (key == "items") {
        if (value.is_array()) {
          for (size_t i = 0; i < value.size(); ++i) edge(false, fmt::format("{}/{}", suffix, i), value[i]);
        } else {
          edge(false, suffix, value);
        }
      } else if (key == "$ref" && value.is_string()) {
        const size_t to = resolve(value.get<std::string>());  // before nodes_[id]: it may grow nodes_
        nodes_[id].in_place.push_back(to);
        ++refs_;
      } else if (key == "pattern" && value.is_string()) {
        const std::string source = value.get<std::string>();
        if (!regexes.count(source))
          regexes.emplace(source, std::make_shared<const std::regex>(compile_pattern(source, here)));
        renamed_.emplace_back(&schema, source);
      } else if (key == "multipleOf" && (!value.is_number() || value.get<double>() <= 0)) {
        throw bad_schema(here, fmt::format("\"multipleOf\" must be a number > 0, found {}", value.dump()));
      } else if (key == "format") {
        formats_.push_back(&schema);  // not checked (valijson's date and time checks recurse per character)
      } else if (key == std::string_view(kPatternKeyword)) {
        throw bad_schema(here, fmt::format("\"{}\" is reserved", kPatternKeyword));
      }
    }
  }

  // The node a local "$ref" points at. Remote refs are refused: nothing is ever fetched.
  size_t resolve(const std::string& ref) {
    if (ref.empty() || ref[0] != '#')
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("unsupported schema \"$ref\" {}: only local refs (\"#...\") are supported", quoted(ref)));
    const std::string pointer = percent_decoded(std::string_view(ref).substr(1));
    try {
      json& target = doc_.at(json::json_pointer(pointer));
      if (!target.is_object() && !target.is_boolean()) throw std::out_of_range("not a schema");
      return node_of(json::json_pointer(pointer).to_string(), target);
    } catch (const std::exception&) {
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("schema \"$ref\" {} does not point into the schema", quoted(ref)));
    }
  }

  json& doc_;
  std::vector<Node> nodes_;
  std::vector<json*> values_;
  std::vector<std::string> pointers_;
  std::map<std::string, size_t> ids_;
  std::vector<size_t> todo_;
  std::vector<std::pair<json*, std::string>> renamed_;
  std::vector<json*> formats_;
  size_t refs_ = 0;
  bool has_pattern_properties_ = false;
};

// The deepest value (in nesting levels) whose validation stays within kMaxValidationSteps recursion steps.
// steps(s, d), the longest chain of schema steps from s over a value d levels deep, is computed layer by layer:
// in-place edges keep d, descend edges need d - 1. A cycle of in-place edges ({"$ref": "#"}) would recurse
// forever and is refused.
size_t deepest_valid_depth(const SchemaGraph& graph) {
  const auto& nodes = graph.nodes();
  const size_t n = nodes.size();
  // Topological order of the in-place edges (Kahn), children before parents.
  std::vector<size_t> pending(n, 0);
  std::vector<std::vector<size_t>> parents(n);
  for (size_t s = 0; s < n; ++s) {
    pending[s] = nodes[s].in_place.size();
    for (const size_t c : nodes[s].in_place) parents[c].push_back(s);
  }
  std::vector<size_t> order;
  for (size_t s = 0; s < n; ++s)
    if (pending[s] == 0) order.push_back(s);
  for (size_t i = 0; i < order.size(); ++i)
    for (const size_t p : parents[order[i]])
      if (--pending[p] == 0) order.push_back(p);
  if (order.size() != n)
    throw Error(ErrorCode::invalid_argument,
                "invalid schema: a cycle of \"$ref\"s or combinators that never descends into the value");

  std::vector<size_t> prev(n, 0), steps(n, 0);
  for (size_t d = 0; d <= kMaxStoredJsonDepth; ++d) {
    for (const size_t s : order) {
      size_t best = 0;
      for (const size_t c : nodes[s].in_place) best = std::max(best, steps[c] + 1);
      if (d > 0)
        for (const size_t c : nodes[s].descend) best = std::max(best, prev[c] + 1);
      steps[s] = best;
    }
    if (steps[0] > kMaxValidationSteps) return d == 0 ? 0 : d - 1;
    if (d > 0 && steps == prev) break;  // the schema does not reach deeper values
    prev = steps;
  }
  return kMaxStoredJsonDepth;
}

// The longest property name in `value`, iteratively.
size_t longest_key(const json& value) {
  size_t longest = 0;
  std::vector<const json*> todo{&value};
  while (!todo.empty()) {
    const json* v = todo.back();
    todo.pop_back();
    if (v->is_object())
      for (auto it = v->begin(); it != v->end(); ++it) longest = std::max(longest, it.key().size());
    if (v->is_structured())
      for (const auto& c : *v)
        if (c.is_structured()) todo.push_back(&c);
  }
  return longest;
}

// JSON Schema (draft 6 on) counts 4.0 as an integer; valijson does not. A copy of `value` with such numbers
// (within int64) as integers, or nullopt when it has none.
std::optional<json> with_integral_floats_as_integers(const json& value) {
  constexpr double kTwo63 = 9223372036854775808.0;
  const auto integral = [&](const json& v) {
    if (!v.is_number_float()) return false;
    const double d = v.get<double>();
    return std::isfinite(d) && std::floor(d) == d && d >= -kTwo63 && d < kTwo63;
  };
  bool any = false;
  std::vector<const json*> todo{&value};
  while (!todo.empty() && !any) {
    const json* v = todo.back();
    todo.pop_back();
    if (integral(*v)) any = true;
    if (v->is_structured())
      for (const auto& c : *v) todo.push_back(&c);
  }
  if (!any) return std::nullopt;
  json copy = value;
  std::vector<json*> edit{&copy};
  while (!edit.empty()) {
    json* v = edit.back();
    edit.pop_back();
    if (integral(*v)) *v = static_cast<std::int64_t>(v->get<double>());
    if (v->is_structured())
      for (auto& c : *v) edit.push_back(&c);
  }
  return copy;
}

// valijson's context, ["<root>", "[city]", "[0]"], as a JSON Pointer: "/city/0".
std::string pointer_of(const std::vector<std::string>& context) {
  std::string out;
  for (size_t i = 1; i < context.size(); ++i) {
    const std::string& part = context[i];
    const bool bracketed = part.size() >= 2 && part.front() == '[' && part.back() == ']';
    out += '/';
    out += escape_pointer_token(bracketed ? std::string_view(part).substr(1, part.size() - 2) : part);
  }
  return out;
}

}  // namespace

// The parsed schema; immutable after the constructor.
struct JsonSchema::Impl {
  json document;  // as given
  std::map<std::string, std::shared_ptr<const std::regex>> regexes;
  valijson::Schema parsed;
  size_t max_value_depth = 0;
  bool has_pattern_properties = false;
};

JsonSchema::JsonSchema(json schema) : impl_(std::make_unique<Impl>()) {
  impl_->document = std::move(schema);
  const json& doc = impl_->document;
  if (!doc.is_object() && !doc.is_boolean())
    throw Error(ErrorCode::invalid_argument,
                fmt::format("a JSON schema must be an object or a boolean, found {}", doc.type_name()));
  check_json_depth(doc, kMaxSchemaDepth, "a JSON schema");
  json rewritten = doc;
  const SchemaGraph graph(rewritten, impl_->regexes);
  impl_->max_value_depth = deepest_valid_depth(graph);
  impl_->has_pattern_properties = graph.has_pattern_properties();

  const bool draft4 = doc.is_object() && doc.contains("$schema") && doc["$schema"].is_string() &&
                      doc["$schema"].get<std::string>().find("draft-04") != std::string::npos;
  valijson::SchemaParser parser(draft4 ? valijson::SchemaParser::kDraft4 : valijson::SchemaParser::kDraft7);
  parser.addConstraintBuilder(std::string(kPatternKeyword), new PatternConstraintBuilder(impl_->regexes));
  try {
    // No fetch function: a remote "$ref" is an error, never a download.
    parser.populateSchema(valijson::adapters::NlohmannJsonAdapter(rewritten), impl_->parsed);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(ErrorCode::invalid_argument, fmt::format("invalid schema: {}", e.what()));
  }
}

JsonSchema::~JsonSchema() = default;
JsonSchema::JsonSchema(JsonSchema&&) noexcept = default;
JsonSchema& JsonSchema::operator=(JsonSchema&&) noexcept = default;

std::optional<SchemaViolation> JsonSchema::validate(const json& instance) const {
  const size_t limit = impl_->max_value_depth;
  if (json_depth(instance, limit) > limit)
    return SchemaViolation{
        "", fmt::format("the value is nested deeper than {} levels, the most this schema checks", limit)};
  if (impl_->has_pattern_properties && longest_key(instance) > kMaxPatternPropertyName)
    return SchemaViolation{"", fmt::format("a property name is longer than {} bytes, the most patternProperties checks",
                                           kMaxPatternPropertyName)};
  const std::optional<json> normalised = with_integral_floats_as_integers(instance);
  valijson::Validator validator;  // one per call: it caches regexes without a lock
  valijson::ValidationResults results;
  try {
    if (validator.validate(impl_->parsed, valijson::adapters::NlohmannJsonAdapter(normalised ? *normalised : instance),
                           &results))
      return std::nullopt;
  } catch (const std::exception& e) {
    return SchemaViolation{"", fmt::format("the value could not be validated: {}", e.what())};
  }
  valijson::ValidationResults::Error first;
  if (!results.popError(first)) return SchemaViolation{"", "the value does not match the schema"};
  return SchemaViolation{pointer_of(first.context), first.description};
}

const json& JsonSchema::schema() const { return impl_->document; }

}  // namespace v1
}  // namespace agentrt
