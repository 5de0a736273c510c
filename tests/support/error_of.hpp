// The agentrt::Error a call throws, for checks of its code and message.
#pragma once

#include <doctest/doctest.h>

#include <utility>

#include "agentrt/error.hpp"

namespace agentrt::testing {

// The Error `f` throws. When it throws none, the check fails (naming `what`, the call that should have been
// refused) and an `ok` Error with an empty message comes back, so that the caller's checks of it fail too.
template <class F>
Error error_of(F&& f, const char* what) {
  try {
    std::forward<F>(f)();
  } catch (const Error& e) {
    return e;
  }
  FAIL_CHECK(what << " was not refused");
  return Error(ErrorCode::ok, "");
}

}  // namespace agentrt::testing
