// UTF-8 well-formedness. Pure, thread-safe.
#pragma once

#include <cstddef>
#include <string_view>

namespace agentrt {
inline namespace v1 {

// True when `s` is well-formed UTF-8: no overlong forms, surrogates, or code points above U+10FFFF.
bool is_valid_utf8(std::string_view s);

// The length of the well-formed UTF-8 sequence `at` starts with (1 for an ASCII byte), or 0 when it starts with
// none (an empty text, a stray or overlong byte, a surrogate, a truncated sequence, a code point past U+10FFFF).
size_t utf8_sequence_length(std::string_view at);

}  // namespace v1
}  // namespace agentrt
