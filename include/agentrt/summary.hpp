// Tool-result summaries: the short, cleaned, versioned text stored as a tool message's content.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "agentrt/json.hpp"

namespace agentrt {
inline namespace v1 {

// Bumped whenever the rules below change what summarize() returns for the same input, so that stored
// summaries can be told apart (it goes into the tool message's metadata as summary_version).
inline constexpr int kSummaryVersion = 1;

struct ToolSummaryError {
  std::string code;
  std::string message;
};

// Turns a tool call's outcome into the one-line text the model and history see instead of the payload.
// Thread-safe: templates and max_chars are written and read under one mutex; summarize() may run
// concurrently with set_template().
class Summarizer {
 public:
  explicit Summarizer(size_t max_chars = 280) : max_chars_(max_chars) {}

  // A per-tool template with named placeholders (replaces an earlier one for the same tool):
  //   "{title}"          a field of the result, else of the args
  //   "{booking.room}"   a nested field; "{items.0.name}" indexes an array
  //   "{count}"          a `count` field if there is one, else the length of the result when it is an
  //                      array, else of its first array-valued field (in key order: json sorts keys)
  //   "{{" and "}}"      literal braces; a brace group that is empty or holds a space is literal text
  // A placeholder whose value is missing or null makes the whole template not apply (summarize() goes on
  // to the next rule). Strings are inserted as they are; objects render as "k: v, k: v" (nested objects as
  // "a.b: v"), arrays of scalars as "x, y", other arrays as "N items" — never as JSON text.
  void set_template(std::string tool_name, std::string tmpl);
  // 0 makes every summary empty.
  void set_max_chars(size_t n);
  size_t max_chars() const;

  // Rules, first that applies:
  //   1. error -> "<tool> failed: <reason>" (reason = the message, or the code when there is no message);
  //   2. the tool's template (skipped when a placeholder is missing or the text comes out empty);
  //   3. a string result;
  //   4. a `summary`, `message` or `content` string field of the result (in that order); `content` may also
  //      be an array of {"type":"text","text":...} parts (MCP tool results), whose texts are joined;
  //   5. common scalar fields of the result as "k: v" pairs joined by ", ", in this order:
  //      title, name, status, error, state, id, type, date, time, location, count, total, amount, currency;
  //   6. "<tool> completed".
  // The text is cleaned by clean_summary_text(), so it fits in max_chars code points.
  std::string summarize(std::string_view tool_name, const json& args, const json& result,
                        const ToolSummaryError* error = nullptr) const;

 private:
  mutable std::mutex mutex_;
  size_t max_chars_;
  std::map<std::string, std::string, std::less<>> templates_;
};

// Cleans text as summarize() does: invalid UTF-8 becomes U+FFFD (one per maximal invalid subsequence, as
// Unicode recommends); newlines, tabs, other control characters and Unicode spaces become spaces; bidi
// override/isolate controls, zero-width spaces and BOMs are dropped (they can disguise text in a UI); runs
// of spaces collapse to one; the ends are trimmed. When the result has more than `max_chars` code points it
// is cut to max_chars - 1 of them (never inside a UTF-8 sequence, trailing spaces dropped) followed by "…",
// so it is at most max_chars code points long. Linear in the input; stops reading once the cut is known.
std::string clean_summary_text(std::string_view text, size_t max_chars);

}  // namespace v1
}  // namespace agentrt
