#include "agentrt/json_schema.hpp"

#include <fmt/format.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <regex>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "agentrt/error.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

// Validation follows $ref and descends into the instance; both count against this limit so that a cyclic
// $ref ({"$ref": "#"}) or a hostile, deeply nested instance ends in a violation instead of a stack overflow.
constexpr int kMaxValidationDepth = 256;
// Same idea for compiling absurdly nested schemas.
constexpr int kMaxSchemaDepth = 256;
// Values quoted in messages are cut so that one violation stays one short line.
constexpr std::size_t kMaxQuotedChars = 80;

enum TypeBit : unsigned {
  kNull = 1u << 0,
  kBoolean = 1u << 1,
  kObject = 1u << 2,
  kArray = 1u << 3,
  kNumber = 1u << 4,
  kString = 1u << 5,
  kInteger = 1u << 6,
};

constexpr std::pair<std::string_view, unsigned> kTypeNames[] = {
    {"null", kNull},     {"boolean", kBoolean}, {"object", kObject},   {"array", kArray},
    {"number", kNumber}, {"string", kString},   {"integer", kInteger},
};

bool is_integral_number(const json& v) {
  if (v.is_number_integer()) return true;  // also true for unsigned
  if (!v.is_number_float()) return false;
  const double d = v.get<double>();
  return std::isfinite(d) && std::floor(d) == d;  // JSON Schema: 1.0 is an integer
}

unsigned type_bits(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return kNull;
    case json::value_t::boolean: return kBoolean;
    case json::value_t::object: return kObject;
    case json::value_t::array: return kArray;
    case json::value_t::string: return kString;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return kNumber | kInteger;
    case json::value_t::number_float: return kNumber | (is_integral_number(v) ? kInteger : 0u);
    default: return 0;  // binary / discarded never come out of a JSON text
  }
}

std::string_view found_type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "boolean";
    case json::value_t::object: return "object";
    case json::value_t::array: return "array";
    case json::value_t::string: return "string";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    default: return "number";
  }
}

std::string expected_types(unsigned bits) {
  std::string out;
  std::size_t count = 0;
  for (const auto& [name, bit] : kTypeNames) count += (bits & bit) ? 1 : 0;
  std::size_t i = 0;
  for (const auto& [name, bit] : kTypeNames) {
    if (!(bits & bit)) continue;
    if (i > 0) out += (i + 1 == count) ? " or " : ", ";
    out += name;
    ++i;
  }
  return out;
}

// A JSON text cut at a code point boundary, so that messages stay valid UTF-8.
std::string brief(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() <= kMaxQuotedChars) return s;
  std::size_t cut = kMaxQuotedChars;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  s.resize(cut);
  s += "...";
  return s;
}

// "found integer 5", "found object": containers are not quoted because they rarely fit on the line.
std::string found(const json& v) {
  if (v.is_object() || v.is_array()) return fmt::format("found {}", found_type_name(v));
  if (v.is_null()) return "found null";
  return fmt::format("found {} {}", found_type_name(v), brief(v));
}

// "1 item", "2 items"
std::string counted(std::size_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

std::size_t code_points(const std::string& s) {
  std::size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

// -1/0/1 like <=>; exact for two integers (int64 or uint64), via double otherwise.
int compare_numbers(const json& a, const json& b) {
  const bool a_int = a.is_number_integer();
  const bool b_int = b.is_number_integer();
  if (a_int && b_int) {
    const bool a_neg = !a.is_number_unsigned() && a.get<std::int64_t>() < 0;
    const bool b_neg = !b.is_number_unsigned() && b.get<std::int64_t>() < 0;
    if (a_neg != b_neg) return a_neg ? -1 : 1;
    if (a_neg) {
      const auto x = a.get<std::int64_t>(), y = b.get<std::int64_t>();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    const auto x = a.get<std::uint64_t>(), y = b.get<std::uint64_t>();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  const double x = a.get<double>(), y = b.get<double>();
  return x < y ? -1 : (x > y ? 1 : 0);
}

bool is_multiple_of(const json& value, const json& divisor) {
  if (value.is_number_integer() && divisor.is_number_integer()) {
    // divisor > 0 was checked at compile time
    const auto d = divisor.get<std::uint64_t>();
    std::uint64_t magnitude = 0;
    if (!value.is_number_unsigned() && value.get<std::int64_t>() < 0) {
      magnitude = 0 - static_cast<std::uint64_t>(value.get<std::int64_t>());
    } else {
      magnitude = value.get<std::uint64_t>();
    }
    return magnitude % d == 0;
  }
  const double q = value.get<double>() / divisor.get<double>();
  if (!std::isfinite(q)) return false;
  // Decimal divisors like 0.01 are not exact in binary, so 0.0075 / 0.0001 is 75.00000000000001; a few
  // ulps of slack accept that without accepting real fractions. Beyond 2^53 every double is integral anyway.
  return std::fabs(q - std::round(q)) <= 8 * DBL_EPSILON * std::fabs(q);
}

std::string escape_pointer_token(std::string_view key) {
  std::string out;
  out.reserve(key.size());
  for (const char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// One compiled (sub)schema. Immutable after JsonSchema's constructor, hence safe to read from many threads;
// it points into the Impl's deque and root document, which never move afterwards.
struct Node {
  bool accepts_nothing = false;  // the `false` schema
  const Node* ref = nullptr;     // draft 4-7: a $ref replaces all sibling keywords
  unsigned types = 0;            // 0 = any type
  const json* enum_values = nullptr;
  const json* const_value = nullptr;
  // numbers
  const json* minimum = nullptr;
  const json* maximum = nullptr;
  bool minimum_exclusive = false;  // draft-4 boolean form
  bool maximum_exclusive = false;
  const json* exclusive_minimum = nullptr;  // draft-6+ number form
  const json* exclusive_maximum = nullptr;
  const json* multiple_of = nullptr;
  // strings
  std::optional<std::size_t> min_length;
  std::optional<std::size_t> max_length;
  std::optional<std::regex> pattern;
  std::string pattern_source;
  // arrays
  std::optional<std::size_t> min_items;
  std::optional<std::size_t> max_items;
  bool unique_items = false;
  const Node* items = nullptr;  // applies to every item
  bool has_tuple_items = false;
  std::vector<const Node*> tuple_items;
  const Node* additional_items = nullptr;  // only meaningful with tuple items
  // objects
  std::vector<std::string> required;
  std::optional<std::size_t> min_properties;
  std::optional<std::size_t> max_properties;
  std::map<std::string, const Node*, std::less<>> properties;
  struct PatternProperty {
    std::string source;
    std::regex regex;
    const Node* schema;
  };
  std::vector<PatternProperty> pattern_properties;
  const Node* additional_properties = nullptr;
  // combinators
  std::vector<const Node*> all_of;
  std::vector<const Node*> any_of;
  std::vector<const Node*> one_of;
  const Node* not_schema = nullptr;
};

std::regex compile_regex(const std::string& source, std::string_view where) {
  // libstdc++'s default executor recurses once per input character and overflows the stack on strings of
  // a few ten thousand characters; its polynomial (Thompson NFA) mode runs in bounded stack and linear
  // time, which also defuses catastrophic patterns. It rejects backreferences, which tool schemas do not
  // need.
#if defined(__GLIBCXX__)
  constexpr auto kFlags = std::regex::ECMAScript | std::regex_constants::__polynomial;
#else
  constexpr auto kFlags = std::regex::ECMAScript;
#endif
  try {
    return std::regex(source, kFlags);
  } catch (const std::regex_error& e) {
    throw Error(ErrorCode::invalid_argument,
                fmt::format("invalid schema at \"#{}\": regular expression {} is not supported: {}", where,
                            brief(json(source)), e.what()));
  }
}

// Turns a schema document into Nodes. Not thread-safe; it lives only inside JsonSchema's constructor.
class SchemaCompiler {
 public:
  SchemaCompiler(const json& root, std::deque<Node>& nodes) : root_(root), nodes_(nodes) {}

  const Node* compile_root() {
    const Node* root = compile(root_, "", 0);
    // Refs may point at places the keyword walk never reached (e.g. "#/definitions/x"); compiling those
    // can add more refs, hence the index loop over a growing vector.
    for (std::size_t i = 0; i < pending_refs_.size(); ++i) {
      auto [node, target] = pending_refs_[i];
      node->ref = resolve(target);
    }
    return root;
  }

 private:
  [[noreturn]] static void bad(const std::string& location, std::string_view what) {
    throw Error(ErrorCode::invalid_argument, fmt::format("invalid schema at \"#{}\": {}", location, what));
  }

  const Node* compile(const json& schema, const std::string& location, int depth) {
    if (auto it = by_location_.find(location); it != by_location_.end()) return it->second;
    if (depth > kMaxSchemaDepth) bad(location, fmt::format("schemas nested deeper than {}", kMaxSchemaDepth));
    Node& node = nodes_.emplace_back();
    by_location_.emplace(location, &node);
    if (schema.is_boolean()) {
      node.accepts_nothing = !schema.get<bool>();
      return &node;
    }
    if (!schema.is_object()) {
      bad(location, fmt::format("a schema must be an object or a boolean, found {}", found_type_name(schema)));
    }
    if (auto it = schema.find("$ref"); it != schema.end()) {
      if (!it->is_string()) bad(location, "\"$ref\" must be a string");
      pending_refs_.emplace_back(&node, it->get<std::string>());
      return &node;  // draft 4-7: siblings of $ref are ignored
    }
    for (const auto& [keyword, value] : schema.items()) {
      compile_keyword(node, keyword, value, location, depth);
    }
    // draft-4 boolean exclusiveMinimum/Maximum modify minimum/maximum and mean nothing without them
    if (!node.minimum) node.minimum_exclusive = false;
    if (!node.maximum) node.maximum_exclusive = false;
    return &node;
  }

  const Node* sub(const json& value, const std::string& location, std::string_view token, int depth) {
    return compile(value, location + "/" + escape_pointer_token(token), depth + 1);
  }

  std::vector<const Node*> schema_array(const json& value, const std::string& location, std::string_view keyword,
                                        int depth) {
    if (!value.is_array() || value.empty()) {
      bad(location, fmt::format("\"{}\" must be a non-empty array of schemas", keyword));
    }
    std::vector<const Node*> out;
    const std::string base = location + "/" + std::string(keyword);
    for (std::size_t i = 0; i < value.size(); ++i) {
      out.push_back(compile(value[i], base + "/" + std::to_string(i), depth + 1));
    }
    return out;
  }

  static std::size_t count(const json& value, const std::string& location, std::string_view keyword) {
    if (!is_integral_number(value) || value.get<double>() < 0) {
      bad(location, fmt::format("\"{}\" must be a non-negative integer, found {}", keyword, brief(value)));
    }
    return value.is_number_unsigned() || value.is_number_integer() ? value.get<std::size_t>()
                                                                   : static_cast<std::size_t>(value.get<double>());
  }

  static const json* number(const json& value, const std::string& location, std::string_view keyword) {
    if (!value.is_number()) bad(location, fmt::format("\"{}\" must be a number, found {}", keyword, brief(value)));
    return &value;
  }

  void compile_keyword(Node& node, const std::string& keyword, const json& value, const std::string& location,
                       int depth) {
    if (keyword == "type") {
      node.types = parse_types(value, location);
    } else if (keyword == "enum") {
      if (!value.is_array()) bad(location, "\"enum\" must be an array");
      node.enum_values = &value;
    } else if (keyword == "const") {
      node.const_value = &value;
    } else if (keyword == "minimum") {
      node.minimum = number(value, location, keyword);
    } else if (keyword == "maximum") {
      node.maximum = number(value, location, keyword);
    } else if (keyword == "exclusiveMinimum") {
      if (value.is_boolean()) {
        node.minimum_exclusive = value.get<bool>();
      } else {
        node.exclusive_minimum = number(value, location, keyword);
      }
    } else if (keyword == "exclusiveMaximum") {
      if (value.is_boolean()) {
        node.maximum_exclusive = value.get<bool>();
      } else {
        node.exclusive_maximum = number(value, location, keyword);
      }
    } else if (keyword == "multipleOf") {
      if (!value.is_number() || value.get<double>() <= 0) {
        bad(location, fmt::format("\"multipleOf\" must be a number > 0, found {}", brief(value)));
      }
      node.multiple_of = &value;
    } else if (keyword == "minLength") {
      node.min_length = count(value, location, keyword);
    } else if (keyword == "maxLength") {
      node.max_length = count(value, location, keyword);
    } else if (keyword == "pattern") {
      if (!value.is_string()) bad(location, "\"pattern\" must be a string");
      node.pattern_source = value.get<std::string>();
      node.pattern = compile_regex(node.pattern_source, location + "/pattern");
    } else if (keyword == "minItems") {
      node.min_items = count(value, location, keyword);
    } else if (keyword == "maxItems") {
      node.max_items = count(value, location, keyword);
    } else if (keyword == "uniqueItems") {
      if (!value.is_boolean()) bad(location, "\"uniqueItems\" must be a boolean");
      node.unique_items = value.get<bool>();
    } else if (keyword == "items") {
      if (value.is_array()) {
        node.has_tuple_items = true;
        for (std::size_t i = 0; i < value.size(); ++i) {
          node.tuple_items.push_back(compile(value[i], location + "/items/" + std::to_string(i), depth + 1));
        }
      } else {
        node.items = sub(value, location, keyword, depth);
      }
    } else if (keyword == "additionalItems") {
      node.additional_items = sub(value, location, keyword, depth);
    } else if (keyword == "required") {
      if (!value.is_array()) bad(location, "\"required\" must be an array of strings");
      for (const auto& name : value) {
        if (!name.is_string()) bad(location, "\"required\" must be an array of strings");
        node.required.push_back(name.get<std::string>());
      }
    } else if (keyword == "minProperties") {
      node.min_properties = count(value, location, keyword);
    } else if (keyword == "maxProperties") {
      node.max_properties = count(value, location, keyword);
    } else if (keyword == "properties") {
      if (!value.is_object()) bad(location, "\"properties\" must be an object");
      const std::string base = location + "/properties";
      for (const auto& [name, schema] : value.items()) {
        node.properties.emplace(name, sub(schema, base, name, depth));
      }
    } else if (keyword == "patternProperties") {
      if (!value.is_object()) bad(location, "\"patternProperties\" must be an object");
      const std::string base = location + "/patternProperties";
      for (const auto& [source, schema] : value.items()) {
        const std::string where = base + "/" + escape_pointer_token(source);
        node.pattern_properties.push_back({source, compile_regex(source, where), sub(schema, base, source, depth)});
      }
    } else if (keyword == "additionalProperties") {
      node.additional_properties = sub(value, location, keyword, depth);
    } else if (keyword == "allOf") {
      node.all_of = schema_array(value, location, keyword, depth);
    } else if (keyword == "anyOf") {
      node.any_of = schema_array(value, location, keyword, depth);
    } else if (keyword == "oneOf") {
      node.one_of = schema_array(value, location, keyword, depth);
    } else if (keyword == "not") {
      node.not_schema = sub(value, location, keyword, depth);
    }
    // Anything else (title, description, default, format, definitions, $schema, ...) is not validated.
  }

  static unsigned parse_types(const json& value, const std::string& location) {
    auto one = [&](const json& name) -> unsigned {
      if (name.is_string()) {
        for (const auto& [type_name, bit] : kTypeNames) {
          if (name.get_ref<const std::string&>() == type_name) return bit;
        }
      }
      bad(location, fmt::format("\"type\" has an unknown type name {}", brief(name)));
    };
    if (value.is_string()) return one(value);
    if (!value.is_array() || value.empty()) bad(location, "\"type\" must be a type name or an array of them");
    unsigned bits = 0;
    for (const auto& name : value) bits |= one(name);
    return bits;
  }

  // "#", "#/definitions/a" (URI fragment: percent-encoded JSON Pointer). Remote refs and "$id" anchors are
  // out of scope: tool schemas are self-contained.
  const Node* resolve(const std::string& ref) {
    if (ref.empty() || ref[0] != '#') {
      throw Error(
          ErrorCode::invalid_argument,
          fmt::format("unsupported schema \"$ref\" {}: only local refs (\"#...\") are supported", brief(json(ref))));
    }
    std::string pointer;
    for (std::size_t i = 1; i < ref.size(); ++i) {
      if (ref[i] == '%' && i + 2 < ref.size() && hex_value(ref[i + 1]) >= 0 && hex_value(ref[i + 2]) >= 0) {
        pointer += static_cast<char>(hex_value(ref[i + 1]) * 16 + hex_value(ref[i + 2]));
        i += 2;
      } else {
        pointer += ref[i];
      }
    }
    if (auto it = by_location_.find(pointer); it != by_location_.end()) return it->second;
    const json* target = nullptr;
    try {
      const json::json_pointer ptr(pointer);
      if (root_.contains(ptr)) target = &root_.at(ptr);
    } catch (const json::exception&) {
      target = nullptr;  // reported below with the ref text, which is what the author wrote
    }
    if (target == nullptr) {
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("schema \"$ref\" {} does not point into the schema", brief(json(ref))));
    }
    return compile(*target, pointer, 0);
  }

  const json& root_;
  std::deque<Node>& nodes_;
  std::unordered_map<std::string, const Node*> by_location_;
  std::vector<std::pair<Node*, std::string>> pending_refs_;
};

// Walks one instance. One per validate() call and never shared, so concurrent validate() calls share nothing
// mutable.
class Validator {
 public:
  std::optional<SchemaViolation> run(const Node& root, const json& instance) {
    check(root, instance, 0);
    return std::move(violation_);
  }

 private:
  struct Segment {
    const std::string* key;  // nullptr for an array index
    std::size_t index;
  };

  std::string path() const {
    std::string out;
    for (const Segment& s : path_) {
      out += '/';
      out += s.key ? escape_pointer_token(*s.key) : std::to_string(s.index);
    }
    return out;
  }

  // In a quiet section (inside anyOf/oneOf/not) failures only steer the combinator; the message reported is
  // the combinator's own, so none is built there.
  bool fail(std::string message) {
    if (quiet_ == 0 && !violation_) violation_ = SchemaViolation{path(), std::move(message)};
    return false;
  }

  bool matches_quietly(const Node& node, const json& v, int depth) {
    ++quiet_;
    const bool ok = check(node, v, depth);
    --quiet_;
    return ok;
  }

  bool check_child(const Node& node, const json& v, Segment segment, int depth) {
    path_.push_back(segment);
    const bool ok = check(node, v, depth + 1);
    path_.pop_back();
    return ok;
  }

  bool check(const Node& node, const json& v, int depth) {
    if (depth > kMaxValidationDepth) {
      return fail(fmt::format("schema recursion deeper than {} levels (cyclic \"$ref\"?)", kMaxValidationDepth));
    }
    if (node.ref) return check(*node.ref, v, depth + 1);
    if (node.accepts_nothing) return fail("no value is allowed here");
    if (node.types != 0 && (type_bits(v) & node.types) == 0) {
      return fail(fmt::format("expected {}, {}", expected_types(node.types), found(v)));
    }
    if (node.enum_values) {
      bool any = false;
      for (const auto& candidate : *node.enum_values) {
        if (candidate == v) {
          any = true;
          break;
        }
      }
      if (!any) return fail(fmt::format("expected one of {}, {}", brief(*node.enum_values), found(v)));
    }
    if (node.const_value && !(*node.const_value == v)) {
      return fail(fmt::format("expected {}, {}", brief(*node.const_value), found(v)));
    }
    if (v.is_number() && !check_number(node, v)) return false;
    if (v.is_string() && !check_string(node, v.get_ref<const std::string&>())) return false;
    if (v.is_array() && !check_array(node, v, depth)) return false;
    if (v.is_object() && !check_object(node, v, depth)) return false;
    return check_combinators(node, v, depth);
  }

  bool check_number(const Node& node, const json& v) {
    if (node.minimum) {
      const int c = compare_numbers(v, *node.minimum);
      if (node.minimum_exclusive ? c <= 0 : c < 0) {
        return fail(fmt::format("expected a number {} {}, {}",
                                node.minimum_exclusive ? ">" : ">=", node.minimum->dump(), found(v)));
      }
    }
    if (node.maximum) {
      const int c = compare_numbers(v, *node.maximum);
      if (node.maximum_exclusive ? c >= 0 : c > 0) {
        return fail(fmt::format("expected a number {} {}, {}",
                                node.maximum_exclusive ? "<" : "<=", node.maximum->dump(), found(v)));
      }
    }
    if (node.exclusive_minimum && compare_numbers(v, *node.exclusive_minimum) <= 0) {
      return fail(fmt::format("expected a number > {}, {}", node.exclusive_minimum->dump(), found(v)));
    }
    if (node.exclusive_maximum && compare_numbers(v, *node.exclusive_maximum) >= 0) {
      return fail(fmt::format("expected a number < {}, {}", node.exclusive_maximum->dump(), found(v)));
    }
    if (node.multiple_of && !is_multiple_of(v, *node.multiple_of)) {
      return fail(fmt::format("expected a multiple of {}, {}", node.multiple_of->dump(), found(v)));
    }
    return true;
  }

  bool check_string(const Node& node, const std::string& s) {
    if (node.min_length || node.max_length) {
      const std::size_t n = code_points(s);
      if (node.min_length && n < *node.min_length) {
        return fail(
            fmt::format("expected at least {}, found {}", counted(*node.min_length, "character", "characters"), n));
      }
      if (node.max_length && n > *node.max_length) {
        return fail(
            fmt::format("expected at most {}, found {}", counted(*node.max_length, "character", "characters"), n));
      }
    }
    if (node.pattern && !std::regex_search(s, *node.pattern)) {
      return fail(fmt::format("expected a string matching {}, {}", brief(json(node.pattern_source)), found(json(s))));
    }
    return true;
  }

  bool check_array(const Node& node, const json& v, int depth) {
    const std::size_t n = v.size();
    if (node.min_items && n < *node.min_items) {
      return fail(fmt::format("expected at least {}, found {}", counted(*node.min_items, "item", "items"), n));
    }
    if (node.max_items && n > *node.max_items) {
      return fail(fmt::format("expected at most {}, found {}", counted(*node.max_items, "item", "items"), n));
    }
    if (node.unique_items) {
      for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t j = i + 1; j < n; ++j) {
          if (v[i] == v[j]) return fail(fmt::format("expected unique items, items {} and {} are equal", i, j));
        }
      }
    }
    if (node.items) {
      for (std::size_t i = 0; i < n; ++i) {
        if (!check_child(*node.items, v[i], {nullptr, i}, depth)) return false;
      }
    } else if (node.has_tuple_items) {
      const std::size_t positional = std::min(n, node.tuple_items.size());
      for (std::size_t i = 0; i < positional; ++i) {
        if (!check_child(*node.tuple_items[i], v[i], {nullptr, i}, depth)) return false;
      }
      if (node.additional_items && n > node.tuple_items.size()) {
        if (node.additional_items->accepts_nothing) {
          return fail(
              fmt::format("expected at most {}, found {}", counted(node.tuple_items.size(), "item", "items"), n));
        }
        for (std::size_t i = node.tuple_items.size(); i < n; ++i) {
          if (!check_child(*node.additional_items, v[i], {nullptr, i}, depth)) return false;
        }
      }
    }
    return true;
  }

  bool check_object(const Node& node, const json& v, int depth) {
    for (const auto& name : node.required) {
      if (!v.contains(name)) return fail(fmt::format("missing required property {}", brief(json(name))));
    }
    if (node.min_properties && v.size() < *node.min_properties) {
      return fail(fmt::format("expected at least {}, found {}", counted(*node.min_properties, "property", "properties"),
                              v.size()));
    }
    if (node.max_properties && v.size() > *node.max_properties) {
      return fail(fmt::format("expected at most {}, found {}", counted(*node.max_properties, "property", "properties"),
                              v.size()));
    }
    if (node.properties.empty() && node.pattern_properties.empty() && !node.additional_properties) return true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      const std::string& key = it.key();
      bool matched = false;
      if (auto p = node.properties.find(key); p != node.properties.end()) {
        matched = true;
        if (!check_child(*p->second, it.value(), {&key, 0}, depth)) return false;
      }
      for (const auto& pp : node.pattern_properties) {
        if (!std::regex_search(key, pp.regex)) continue;
        matched = true;
        if (!check_child(*pp.schema, it.value(), {&key, 0}, depth)) return false;
      }
      if (!matched && node.additional_properties) {
        if (node.additional_properties->accepts_nothing) {
          return fail(fmt::format("unexpected property {}", brief(json(key))));
        }
        if (!check_child(*node.additional_properties, it.value(), {&key, 0}, depth)) return false;
      }
    }
    return true;
  }

  bool check_combinators(const Node& node, const json& v, int depth) {
    for (const Node* s : node.all_of) {
      if (!check(*s, v, depth + 1)) return false;  // the branch's own violation is the useful one
    }
    if (!node.any_of.empty()) {
      bool any = false;
      for (const Node* s : node.any_of) {
        if (matches_quietly(*s, v, depth + 1)) {
          any = true;
          break;
        }
      }
      if (!any)
        return fail(fmt::format("expected a value matching at least one of {} anyOf schemas, {}", node.any_of.size(),
                                found(v)));
    }
    if (!node.one_of.empty()) {
      std::vector<std::size_t> hits;
      for (std::size_t i = 0; i < node.one_of.size(); ++i) {
        if (matches_quietly(*node.one_of[i], v, depth + 1)) hits.push_back(i);
        if (hits.size() == 2) break;
      }
      if (hits.empty()) {
        return fail(fmt::format("expected a value matching exactly one of {} oneOf schemas, it matches none, {}",
                                node.one_of.size(), found(v)));
      }
      if (hits.size() > 1) {
        return fail(fmt::format("expected a value matching exactly one of {} oneOf schemas, it matches #{} and #{}",
                                node.one_of.size(), hits[0], hits[1]));
      }
    }
    if (node.not_schema && matches_quietly(*node.not_schema, v, depth + 1)) {
      return fail(fmt::format("expected a value not matching the \"not\" schema, {}", found(v)));
    }
    return true;
  }

  std::vector<Segment> path_;
  int quiet_ = 0;
  std::optional<SchemaViolation> violation_;
};

}  // namespace

// The compiled schema; immutable after the constructor.
struct JsonSchema::Impl {
  json document;
  std::deque<Node> nodes;  // a deque so that Node pointers stay valid while compiling appends
  const Node* root = nullptr;
};

JsonSchema::JsonSchema(json schema) : impl_(std::make_unique<Impl>()) {
  impl_->document = std::move(schema);
  if (!impl_->document.is_object() && !impl_->document.is_boolean()) {
    throw Error(ErrorCode::invalid_argument, fmt::format("a JSON schema must be an object or a boolean, found {}",
                                                         found_type_name(impl_->document)));
  }
  SchemaCompiler compiler(impl_->document, impl_->nodes);
  impl_->root = compiler.compile_root();
}

JsonSchema::~JsonSchema() = default;
JsonSchema::JsonSchema(JsonSchema&&) noexcept = default;
JsonSchema& JsonSchema::operator=(JsonSchema&&) noexcept = default;

std::optional<SchemaViolation> JsonSchema::validate(const json& instance) const {
  return Validator().run(*impl_->root, instance);
}

const json& JsonSchema::schema() const { return impl_->document; }

}  // namespace v1
}  // namespace agentrt
