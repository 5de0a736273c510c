// parse_json (src/util/json_fast.*: simdjson, and nlohmann for what simdjson cannot give as nlohmann does),
// differential against nlohmann: for any text within the nesting limit both give the same value, kind for
// kind (5 and 5u differ), or both fail; past the limit it refuses. parse_json throws exactly when
// parse_json_or_discarded discards.
#include <cstdint>
#include <string>

#include "agentrt/error.hpp"
#include "agentrt/json_limits.hpp"
#include "fuzz_support.hpp"
#include "util/json_fast.hpp"

using namespace agentrt;

namespace {

[[noreturn]] void broken(const std::string& what) { agentrt_fuzz::broken("json_parse", what); }

// Equal value for value and kind for kind (json's == calls 5 and 5u equal). Recursion is bounded by the
// limit the values were parsed under.
bool same(const json& a, const json& b) {
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case json::value_t::object: {
      if (a.size() != b.size()) return false;
      for (auto it = a.begin(), jt = b.begin(); it != a.end(); ++it, ++jt)
        if (it.key() != jt.key() || !same(*it, *jt)) return false;
      return true;
    }
    case json::value_t::array:
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i)
        if (!same(a[i], b[i])) return false;
      return true;
    default: return a == b;
  }
}

void differential(std::string_view text, size_t limit) {
  const json fast = parse_json_or_discarded(text, limit);
  const size_t depth = json_text_depth(text, limit);
  bool threw = false;
  try {
    (void)parse_json(text, limit);
  } catch (const json::exception&) {  // what nlohmann throws: parse_error, out_of_range (1e309)
    threw = true;
  } catch (const Error&) {
    threw = true;
  }
  if (threw != fast.is_discarded()) broken("parse_json throws where parse_json_or_discarded does not discard");
  if (depth > limit) {
    if (!fast.is_discarded()) broken("a text nested deeper than the limit was parsed");
    return;
  }
  const json reference = json::parse(text, nullptr, false);
  if (reference.is_discarded() != fast.is_discarded()) broken("one parser failed and the other did not");
  if (!reference.is_discarded() && !same(reference, fast)) broken("the parsers disagree: " + reference.dump());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = agentrt_fuzz::text_of(data, size);
  differential(text, kMaxStoredJsonDepth);
  differential(text, 4);  // the subset parser's own cut
  return 0;
}
