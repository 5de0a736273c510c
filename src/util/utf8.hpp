// UTF-8 well-formedness. Pure, thread-safe.
#pragma once

#include <string_view>

namespace agentrt {
inline namespace v1 {

// True when `s` is well-formed UTF-8: no overlong forms, surrogates, or code points above U+10FFFF.
bool is_valid_utf8(std::string_view s);

}  // namespace v1
}  // namespace agentrt
