#include "agentrt/summary.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <utility>

namespace agentrt {
inline namespace v1 {

namespace {

constexpr char32_t kReplacement = 0xFFFD;
constexpr char32_t kZeroWidthJoiner = 0x200D;

// Decodes the code point at `i` and advances past it. An ill-formed sequence yields U+FFFD and advances past
// its maximal subpart (Unicode 15, section 3.9 "U+FFFD Substitution of Maximal Subparts"), so one bad lead
// byte never swallows the valid character after it.
char32_t next_code_point(std::string_view s, size_t& i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    ++i;
    return c;
  }
  int len = 0;
  char32_t cp = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    cp = c & 0x0F;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    cp = c & 0x07;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    ++i;
    return kReplacement;
  }
  size_t j = i + 1;
  for (int k = 1; k < len; ++k, ++j) {
    if (j >= s.size()) {
      i = j;
      return kReplacement;
    }
    const auto b = static_cast<unsigned char>(s[j]);
    if (b < lo || b > hi) {
      i = j;
      return kReplacement;
    }
    cp = (cp << 6) | (b & 0x3F);
    lo = 0x80;
    hi = 0xBF;
  }
  i = j;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Control characters count as separators: "a\nb" and "a\x01b" should not glue words together.
bool is_space_like(char32_t cp) {
  return cp <= 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// Invisible characters that reorder or hide text. The zero-width joiner is kept: emoji sequences need it.
bool is_dropped(char32_t cp) {
  return cp == 0x200B || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0xFEFF;
}

// ---- JSON values as plain text --------------------------------------------------------------------------

// Every rendered item adds at least one visible character (a ':' or ','), so rendering more than this many
// items cannot change the cut text; it bounds the work on huge results.
size_t item_cap(size_t max_chars) { return max_chars + 2; }

std::string count_text(size_t n) { return n == 1 ? "1 item" : std::to_string(n) + " items"; }

bool is_scalar(const json& v) { return v.is_string() || v.is_number() || v.is_boolean(); }

void render_scalar(const json& v, std::string& out) {
  if (v.is_string()) {
    out += v.get_ref<const std::string&>();
  } else if (v.is_boolean()) {
    out += v.get<bool>() ? "true" : "false";
  } else if (v.is_number()) {
    out += v.dump();  // shortest round-trip form: 3, -2, 0.5, 1e+100
  }
}

void render_array(const json& v, std::string& out, size_t cap) {
  bool all_scalars = !v.empty();
  for (const auto& item : v) {
    if (!is_scalar(item)) {
      all_scalars = false;
      break;
    }
  }
  if (!all_scalars) {
    out += count_text(v.size());
    return;
  }
  size_t n = 0;
  for (const auto& item : v) {
    if (n == cap) break;
    if (n++ > 0) out += ", ";
    render_scalar(item, out);
  }
}

// Fields as "k: v", nested objects flattened to "a.b: v" down to a few levels, then summarised by size.
void render_object(const json& v, std::string& out, std::string& prefix, size_t& items, size_t cap, int depth) {
  for (const auto& [key, value] : v.items()) {
    if (items >= cap) return;
    if (value.is_null()) continue;
    const size_t prefix_size = prefix.size();
    prefix += key;
    if (value.is_object() && !value.empty() && depth < 4) {
      prefix += '.';
      render_object(value, out, prefix, items, cap, depth + 1);
    } else {
      if (items++ > 0) out += ", ";
      out += prefix;
      out += ": ";
      if (value.is_object()) {
        out += value.size() == 1 ? "1 field" : std::to_string(value.size()) + " fields";
      } else if (value.is_array()) {
        render_array(value, out, cap);
      } else if (value.is_binary()) {
        out += std::to_string(value.get_binary().size()) + " bytes";
      } else {
        render_scalar(value, out);
      }
    }
    prefix.resize(prefix_size);
  }
}

// Plain text for a placeholder; nullopt for null (a missing value).
std::optional<std::string> render_value(const json& v, size_t max_chars) {
  std::string out;
  if (v.is_null()) return std::nullopt;
  if (v.is_object()) {
    std::string prefix;
    size_t items = 0;
    render_object(v, out, prefix, items, item_cap(max_chars), 0);
  } else if (v.is_array()) {
    render_array(v, out, item_cap(max_chars));
  } else if (v.is_binary()) {
    out = std::to_string(v.get_binary().size()) + " bytes";
  } else {
    render_scalar(v, out);
  }
  return out;
}

// ---- templates --------------------------------------------------------------------------------------------

const json* resolve_path(const json& root, std::string_view path) {
  const json* node = &root;
  while (true) {
    const size_t dot = path.find('.');
    const std::string_view segment = path.substr(0, dot);
    if (segment.empty()) return nullptr;
    if (node->is_object()) {
      const auto it = node->find(segment);
      if (it == node->end()) return nullptr;
      node = &*it;
    } else if (node->is_array()) {
      if (segment.size() > 9 || segment.find_first_not_of("0123456789") != std::string_view::npos) return nullptr;
      const size_t index = std::stoul(std::string(segment));
      if (index >= node->size()) return nullptr;
      node = &(*node)[index];
    } else {
      return nullptr;
    }
    if (dot == std::string_view::npos) break;
    path.remove_prefix(dot + 1);
  }
  return node->is_null() ? nullptr : node;
}

std::optional<size_t> implicit_count(const json& result) {
  if (result.is_array()) return result.size();
  if (result.is_object()) {
    for (const auto& [key, value] : result.items()) {
      if (value.is_array()) return value.size();
    }
  }
  return std::nullopt;
}

std::optional<std::string> lookup(std::string_view name, const json& args, const json& result, size_t max_chars) {
  if (const json* v = resolve_path(result, name)) return render_value(*v, max_chars);
  if (name == "count") {
    if (const auto n = implicit_count(result)) return std::to_string(*n);
  }
  if (const json* v = resolve_path(args, name)) return render_value(*v, max_chars);
  return std::nullopt;
}

// nullopt when a placeholder has no value, so the caller can fall through to the next rule.
std::optional<std::string> render_template(std::string_view tmpl, const json& args, const json& result,
                                           size_t max_chars) {
  std::string out;
  size_t i = 0;
  while (i < tmpl.size()) {
    const char c = tmpl[i];
    if ((c == '{' || c == '}') && i + 1 < tmpl.size() && tmpl[i + 1] == c) {
      out.push_back(c);
      i += 2;
      continue;
    }
    if (c == '{') {
      const size_t close = tmpl.find_first_of("{}", i + 1);
      // Only "{name}" without spaces is a placeholder, so prose like "{ }" stays literal.
      if (close != std::string_view::npos && tmpl[close] == '}' && close > i + 1 &&
          tmpl.substr(i + 1, close - i - 1).find_first_of(" \t\r\n") == std::string_view::npos) {
        auto value = lookup(tmpl.substr(i + 1, close - i - 1), args, result, max_chars);
        if (!value) return std::nullopt;
        out += *value;
        i = close + 1;
        continue;
      }
    }
    out.push_back(c);  // a lone brace is literal text
    ++i;
  }
  return out;
}

// ---- generic fallbacks ------------------------------------------------------------------------------------

std::string text_field(const json& result, size_t max_chars) {
  for (const char* key : {"summary", "message", "content"}) {
    const auto it = result.find(key);
    if (it == result.end()) continue;
    if (it->is_string()) {
      std::string text = clean_summary_text(it->get_ref<const std::string&>(), max_chars);
      if (!text.empty()) return text;
    } else if (it->is_array()) {
      std::string joined;
      for (const auto& part : *it) {
        if (!part.is_object()) continue;
        const auto type = part.find("type");
        const auto text = part.find("text");
        if (type == part.end() || *type != "text" || text == part.end() || !text->is_string()) continue;
        joined += ' ';
        joined += text->get_ref<const std::string&>();
      }
      std::string text = clean_summary_text(joined, max_chars);
      if (!text.empty()) return text;
    }
  }
  return {};
}

constexpr std::array<const char*, 14> kCommonKeys = {"title", "name",  "status", "error",   "state",
                                                     "id",    "type",  "date",   "time",    "location",
                                                     "count", "total", "amount", "currency"};

std::string common_fields(const json& result) {
  std::string out;
  for (const char* key : kCommonKeys) {
    const auto it = result.find(key);
    if (it == result.end() || !is_scalar(*it) || (it->is_string() && it->get_ref<const std::string&>().empty())) {
      continue;
    }
    if (!out.empty()) out += ", ";
    out += key;
    out += ": ";
    render_scalar(*it, out);
  }
  return out;
}

}  // namespace

std::string clean_summary_text(std::string_view text, size_t max_chars) {
  std::string out;
  if (max_chars == 0) return out;
  out.reserve(std::min(text.size(), max_chars * 4 + 4));
  size_t count = 0;  // code points in `out`
  size_t keep = 0;   // bytes of `out` holding the first max_chars - 1 code points
  bool pending_space = false;
  bool cut = false;
  const auto emit = [&](char32_t cp) {
    if (count == max_chars) {
      cut = true;
      return;
    }
    append_utf8(out, cp);
    if (++count == max_chars - 1) keep = out.size();
  };
  size_t i = 0;
  while (i < text.size() && !cut) {
    const char32_t cp = next_code_point(text, i);
    if (is_space_like(cp)) {
      pending_space = !out.empty();
      continue;
    }
    if (is_dropped(cp)) continue;
    if (pending_space) {
      emit(U' ');
      pending_space = false;
    }
    emit(cp);
  }
  if (cut) {
    out.resize(keep);
    // Don't end on a space or a dangling joiner before the ellipsis.
    while (!out.empty()) {
      if (out.back() == ' ') {
        out.pop_back();
      } else if (out.size() >= 3 && out.compare(out.size() - 3, 3, "\xE2\x80\x8D") == 0) {
        out.resize(out.size() - 3);
      } else {
        break;
      }
    }
    out += "\xE2\x80\xA6";  // …
  }
  return out;
}

void Summarizer::set_template(std::string tool_name, std::string tmpl) {
  std::lock_guard lock(mutex_);
  templates_.insert_or_assign(std::move(tool_name), std::move(tmpl));
}

void Summarizer::set_max_chars(size_t n) {
  std::lock_guard lock(mutex_);
  max_chars_ = n;
}

size_t Summarizer::max_chars() const {
  std::lock_guard lock(mutex_);
  return max_chars_;
}

std::string Summarizer::summarize(std::string_view tool_name, const json& args, const json& result,
                                  const ToolSummaryError* error) const {
  size_t max_chars = 0;
  std::optional<std::string> tmpl;
  {
    std::lock_guard lock(mutex_);
    max_chars = max_chars_;
    if (const auto it = templates_.find(tool_name); it != templates_.end()) tmpl = it->second;
  }
  std::string tool = clean_summary_text(tool_name, max_chars);
  if (tool.empty()) tool = "tool";

  if (error != nullptr) {
    std::string reason = clean_summary_text(error->message, max_chars);
    if (reason.empty()) reason = clean_summary_text(error->code, max_chars);
    return clean_summary_text(reason.empty() ? tool + " failed" : tool + " failed: " + reason, max_chars);
  }
  if (tmpl) {
    if (const auto rendered = render_template(*tmpl, args, result, max_chars)) {
      std::string text = clean_summary_text(*rendered, max_chars);
      if (!text.empty()) return text;
    }
  }
  if (result.is_string()) {
    std::string text = clean_summary_text(result.get_ref<const std::string&>(), max_chars);
    if (!text.empty()) return text;
  }
  if (result.is_object()) {
    if (std::string text = text_field(result, max_chars); !text.empty()) return text;
    if (std::string text = clean_summary_text(common_fields(result), max_chars); !text.empty()) return text;
  }
  return clean_summary_text(tool + " completed", max_chars);
}

}  // namespace v1
}  // namespace agentrt
