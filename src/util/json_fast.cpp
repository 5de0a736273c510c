// parse_json over simdjson's DOM parser: simdjson reads and checks the text (UTF-8 included) and its nesting,
// and its DOM is copied into nlohmann's value in one pass. Whatever simdjson cannot give exactly as nlohmann
// would (an error, an integer beyond 64 bits, -0) goes to nlohmann's parser, so every text parses as nlohmann
// parses it, errors included.
#include "util/json_fast.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <simdjson.h>

#include "agentrt/error.hpp"
#include "util/json_dom.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

// Texts above this size get a parser of their own (freed after), so that no thread keeps a large buffer.
constexpr size_t kReusedParserBytes = 1 << 20;
// simdjson's own nesting limit: a text nested deeper fails at once, before anything is built (every limit
// agentrt reads stored JSON with is below it).
constexpr size_t kParserDepth = simdjson::DEFAULT_MAX_DEPTH;  // a parser's own unless it is allocated otherwise
static_assert(kMaxStoredJsonDepth <= kParserDepth);

struct TooDeep {};

// The DOM as nlohmann's value; a container nested deeper than `max_depth` throws TooDeep. The recursion is
// bounded by kParserDepth.
void copy_into(json& out, simdjson::dom::element e, size_t depth, size_t max_depth);

// The DOM as nlohmann's value (see copy_into).
json copy(simdjson::dom::element e, size_t depth, size_t max_depth) {
  json out;
  copy_into(out, e, depth, max_depth);
  return out;
}

// Fills `out` (null) with the DOM's value in place: each member is made where it stays, without a value to
// move into the map or the array.
void copy_into(json& out, simdjson::dom::element e, size_t depth, size_t max_depth) {
  using Type = simdjson::dom::element_type;
  switch (e.type()) {
    case Type::OBJECT: {
      if (depth + 1 > max_depth) throw TooDeep{};
      out = json::object();
      auto& members = out.get_ref<json::object_t&>();
      // nlohmann keeps the last of repeated keys (a repeated key finds its member, which is made over); a hint
      // at the end is free for keys that come in order.
      for (auto field : simdjson::dom::object(e)) {
        auto it = members.emplace_hint(members.end(), std::piecewise_construct, std::forward_as_tuple(field.key),
                                       std::forward_as_tuple());
        copy_into(it->second, field.value, depth + 1, max_depth);
      }
      return;
    }
    case Type::ARRAY: {
      if (depth + 1 > max_depth) throw TooDeep{};
      out = json::array();
      auto& items = out.get_ref<json::array_t&>();
      const simdjson::dom::array array(e);
      items.reserve(std::min<size_t>(array.size(), 0xFFFFFF));  // simdjson's count saturates there
      for (auto item : array) copy_into(items.emplace_back(), item, depth + 1, max_depth);
      return;
    }
    case Type::STRING: out = std::string_view(e); return;
    case Type::INT64: {
      const int64_t v = int64_t(e);
      // nlohmann gives every integer without a sign as unsigned.
      if (v >= 0)
        out = static_cast<uint64_t>(v);
      else
        out = v;
      return;
    }
    case Type::UINT64: out = uint64_t(e); return;
    case Type::DOUBLE: out = double(e); return;
    case Type::BOOL: out = bool(e); return;
    case Type::NULL_VALUE: out = nullptr; return;
  }
}

// Whether a text simdjson accepted holds the number -0, which nlohmann gives as a signed integer and simdjson
// as 0 with no sign: a '-0' outside strings that no digit, fraction or exponent follows. The text is walked
// only when it holds such a '-0' anywhere (an id holds one now and then: a string's is not a number).
bool may_hold_negative_zero(std::string_view text) {
  auto ends_a_number = [&](size_t i) {  // the '-0' at i
    const char next = i + 2 < text.size() ? text[i + 2] : ' ';
    return !(next >= '0' && next <= '9') && next != '.' && next != 'e' && next != 'E';
  };
  size_t first = text.find("-0");
  while (first != std::string_view::npos && !ends_a_number(first)) first = text.find("-0", first + 2);
  if (first == std::string_view::npos) return false;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character (a quote too)
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '-' && i >= first && i + 1 < text.size() && text[i + 1] == '0' && ends_a_number(i)) {
      return true;
    }
  }
  return false;
}

enum class Outcome { parsed, too_deep, nlohmann };

// simdjson's answer: the value (parsed), a text nested deeper than `max_depth` (too_deep), or a text whose
// value or error nlohmann's parser must give.
Outcome parse(std::string_view text, size_t max_depth, json& out) {
  // An empty text (whose data may be null, which simdjson would copy from) is nlohmann's to refuse.
  if (max_depth > kParserDepth || text.empty()) return Outcome::nlohmann;
  thread_local simdjson::dom::parser reused;
  simdjson::dom::parser own;
  simdjson::dom::parser& parser = text.size() <= kReusedParserBytes ? reused : own;
  simdjson::dom::element root;
  const auto error = parser.parse(text.data(), text.size()).get(root);
  if (error == simdjson::DEPTH_ERROR) return Outcome::too_deep;  // deeper than kParserDepth >= max_depth
  if (error != simdjson::SUCCESS || may_hold_negative_zero(text)) return Outcome::nlohmann;
  try {
    out = copy(root, 0, max_depth);
  } catch (const TooDeep&) {
    return Outcome::too_deep;
  }
  return Outcome::parsed;
}

// A text refused for its nesting (invalid text within the limit is nlohmann's to judge).
bool too_deep(Outcome o, std::string_view text, size_t max_depth) {
  return o == Outcome::too_deep || (o == Outcome::nlohmann && json_text_depth(text, max_depth) > max_depth);
}

}  // namespace

void throw_too_deep(size_t max_depth) {
  throw Error(ErrorCode::invalid_argument, fmt::format("JSON text is nested deeper than {} levels", max_depth));
}

json parse_json(std::string_view text, size_t max_depth) {
  json out;
  const Outcome o = parse(text, max_depth, out);
  if (o == Outcome::parsed) return out;
  if (too_deep(o, text, max_depth)) throw_too_deep(max_depth);
  return json::parse(text);
}

std::optional<simdjson::dom::element> parse_dom(std::string_view text, size_t max_depth) {
  if (max_depth >= kParserDepth || text.empty() || text.size() > kReusedParserBytes) return std::nullopt;
  // The parser's own limit is the caller's, so a text nested too deep anywhere, in a member nobody reads too,
  // fails as parse_json fails it.
  // (simdjson's depth counts one more than the containers: the document itself.)
  thread_local simdjson::dom::parser parser;
  if (parser.max_depth() != max_depth + 1 && parser.allocate(std::max<size_t>(text.size(), 4096), max_depth + 1))
    return std::nullopt;  // out of memory: parse_json decides
  simdjson::dom::element root;
  const auto error = parser.parse(text.data(), text.size()).get(root);
  if (error == simdjson::DEPTH_ERROR) throw_too_deep(max_depth);
  if (error != simdjson::SUCCESS || may_hold_negative_zero(text)) return std::nullopt;
  return root;
}

json dom_to_json(simdjson::dom::element e, size_t depth, size_t max_depth) {
  try {
    return copy(e, depth, max_depth);
  } catch (const TooDeep&) {
    throw_too_deep(max_depth);
  }
}

json parse_json_or_discarded(std::string_view text, size_t max_depth) {
  json out;
  const Outcome o = parse(text, max_depth, out);
  if (o == Outcome::parsed) return out;
  if (too_deep(o, text, max_depth)) return json::value_t::discarded;
  return json::parse(text, nullptr, false);
}

}  // namespace v1
}  // namespace agentrt
