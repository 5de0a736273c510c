#include "util/json_fast.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "agentrt/error.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

// Recursive descent over the subset; false = "not this parser's to decide" (the caller hands the text on).
class Subset {
 public:
  Subset(std::string_view t, size_t max_depth)
      : p_(t.data()), end_(t.data() + t.size()), max_depth_(std::min<size_t>(max_depth, kMaxDepth)) {}

  bool document(json& out) {
    space();
    if (!value(out, 0)) return false;
    space();
    return p_ == end_;
  }

  // The text nests deeper than the limit (given at most kMaxDepth): no other parser need look at it.
  bool too_deep() const { return too_deep_; }

 private:
  // The recursion's own bound; deeper texts within the caller's limit go to nlohmann's (iterative) parser.
  static constexpr size_t kMaxDepth = 256;

  // Entering a container nested `depth` + 1 levels deep.
  bool enter(int depth) {
    if (static_cast<size_t>(depth) + 1 <= max_depth_) return true;
    too_deep_ = max_depth_ < kMaxDepth;
    return false;
  }

  void space() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  bool literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word) return false;
    p_ += word.size();
    return true;
  }

  bool value(json& out, int depth) {
    if (p_ == end_) return false;
    switch (*p_) {
      case '{': return object(out, depth);
      case '[': return array(out, depth);
      case '"': {
        std::string s;
        if (!string(s)) return false;
        out = std::move(s);
        return true;
      }
      case 't':
        if (!literal("true")) return false;
        out = true;
        return true;
      case 'f':
        if (!literal("false")) return false;
        out = false;
        return true;
      case 'n':
        if (!literal("null")) return false;
        out = nullptr;
        return true;
      default: return number(out);
    }
  }

  bool object(json& out, int depth) {
    if (!enter(depth)) return false;
    ++p_;  // '{'
    out = json::object();
    auto& members = out.get_ref<json::object_t&>();
    space();
    if (p_ < end_ && *p_ == '}') {
      ++p_;
      return true;
    }
    for (;;) {
      space();
      if (p_ == end_ || *p_ != '"') return false;
      std::string key;
      if (!string(key)) return false;
      space();
      if (p_ == end_ || *p_ != ':') return false;
      ++p_;
      space();
      json v;
      if (!value(v, depth + 1)) return false;
      members.insert_or_assign(std::move(key), std::move(v));  // a repeated key: the last one wins, as there
      space();
      if (p_ == end_) return false;
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ != '}') return false;
      ++p_;
      return true;
    }
  }

  bool array(json& out, int depth) {
    if (!enter(depth)) return false;
    ++p_;  // '['
    out = json::array();
    auto& items = out.get_ref<json::array_t&>();
    space();
    if (p_ < end_ && *p_ == ']') {
      ++p_;
      return true;
    }
    for (;;) {
      space();
      items.emplace_back();
      if (!value(items.back(), depth + 1)) return false;
      space();
      if (p_ == end_) return false;
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ != ']') return false;
      ++p_;
      return true;
    }
  }

  // ASCII text with the short escapes; runs without an escape are appended in one piece.
  bool string(std::string& out) {
    ++p_;  // '"'
    const char* run = p_;
    while (p_ < end_) {
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        out.append(run, p_ - run);
        ++p_;
        return true;
      }
      if (c < 0x20 || c >= 0x80) return false;
      if (c != '\\') {
        ++p_;
        continue;
      }
      out.append(run, p_ - run);
      if (++p_ == end_) return false;
      switch (*p_) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        default: return false;  // \u and anything else
      }
      run = ++p_;
    }
    return false;
  }

  // Integers of up to 18 digits (exact in either kind): negative ones signed, others unsigned, as nlohmann
  // gives them. Fractions, exponents, longer or malformed numbers are not this parser's.
  bool number(json& out) {
    const bool negative = *p_ == '-';
    if (negative) ++p_;
    const char* digits = p_;
    uint64_t v = 0;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9') v = v * 10 + static_cast<uint64_t>(*p_++ - '0');
    const auto n = p_ - digits;
    if (n == 0 || n > 18 || (n > 1 && *digits == '0')) return false;
    if (p_ < end_ && (*p_ == '.' || *p_ == 'e' || *p_ == 'E')) return false;
    if (negative)
      out = -static_cast<int64_t>(v);
    else
      out = v;
    return true;
  }

  const char* p_;
  const char* end_;
  const size_t max_depth_;
  bool too_deep_ = false;
};

// What the subset parser could not decide: too deep (known or by a scan of the brackets), or nlohmann's.
bool within(const Subset& subset, std::string_view text, size_t max_depth) {
  return !subset.too_deep() && json_text_depth(text, max_depth) <= max_depth;
}

}  // namespace

json parse_json(std::string_view text, size_t max_depth) {
  json out;
  Subset subset(text, max_depth);
  if (subset.document(out)) return out;
  if (!within(subset, text, max_depth))
    throw Error(ErrorCode::invalid_argument, fmt::format("JSON text is nested deeper than {} levels", max_depth));
  return json::parse(text);
}

json parse_json_or_discarded(std::string_view text, size_t max_depth) {
  json out;
  Subset subset(text, max_depth);
  if (subset.document(out)) return out;
  if (!within(subset, text, max_depth)) return json::value_t::discarded;
  return json::parse(text, nullptr, false);
}

}  // namespace v1
}  // namespace agentrt
