#include <doctest/doctest.h>

#include <set>
#include <utility>
#include <vector>

#include "agentrt/error.hpp"
#include "agentrt/ledger_state.hpp"
#include "agentrt/storage.hpp"

using namespace agentrt;

namespace {
const std::vector<LedgerStatus> kAll = {LedgerStatus::requested,   LedgerStatus::approved, LedgerStatus::rejected,
                                        LedgerStatus::started,     LedgerStatus::finished, LedgerStatus::failed,
                                        LedgerStatus::interrupted, LedgerStatus::expired};
}

TEST_CASE("ledger: the transition table allows exactly the documented moves") {
  using S = LedgerStatus;
  const std::set<std::pair<S, S>> allowed = {
      {S::requested, S::approved},      {S::requested, S::rejected},    {S::requested, S::expired},
      {S::requested, S::failed},        {S::requested, S::interrupted}, {S::approved, S::started},
      {S::approved, S::failed},         {S::approved, S::interrupted},  {S::started, S::finished},
      {S::started, S::failed},          {S::started, S::interrupted},   {S::started, S::requested},
      {S::rejected, S::rejected},       {S::finished, S::finished},     {S::failed, S::failed},
      {S::interrupted, S::interrupted}, {S::expired, S::expired},       {S::started, S::started},
      {S::requested, S::finished}};
  int n = 0;
  for (S from : kAll)
    for (S to : kAll) {
      CAPTURE(to_string(from));
      CAPTURE(to_string(to));
      CHECK(can_transition(from, to) == (allowed.count({from, to}) == 1));
      n += can_transition(from, to);
    }
  CHECK(n == 19);
}

TEST_CASE("ledger: no path runs a call twice: from started, approved and started are unreachable") {
  // Everything reachable from `started` without passing a person's decision (requested -> approved is one).
  std::set<LedgerStatus> seen = {LedgerStatus::started};
  std::vector<LedgerStatus> todo = {LedgerStatus::started};
  while (!todo.empty()) {
    LedgerStatus s = todo.back();
    todo.pop_back();
    for (LedgerStatus to : kAll)
      if (can_transition(s, to) && !(s == LedgerStatus::requested && to == LedgerStatus::approved) &&
          seen.insert(to).second)
        todo.push_back(to);
  }
  CHECK(seen.count(LedgerStatus::approved) == 0);
  for (LedgerStatus s : kAll)
    if (is_terminal(s))
      for (LedgerStatus to : kAll) CHECK(can_transition(s, to) == (s == to));
}

TEST_CASE("ledger: advance refuses what the table refuses, and leaves the entry as it was") {
  LedgerEntry l;
  l.tool_call_id = "call_1";
  advance(l, LedgerStatus::approved);
  advance(l, LedgerStatus::started);
  try {
    advance(l, LedgerStatus::approved);
    FAIL("advance took started -> approved");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_state);
    CHECK(std::string(e.what()) == "tool call call_1: cannot go from started to approved");
  }
  CHECK(l.status == LedgerStatus::started);
  advance(l, LedgerStatus::finished);
  CHECK_THROWS_AS(advance(l, LedgerStatus::failed), Error);
  CHECK(l.status == LedgerStatus::finished);
}

TEST_CASE("ledger: a started call runs again only when its tool is idempotent") {
  LedgerEntry l;
  l.tool_call_id = "call_2";
  l.status = LedgerStatus::started;
  try {
    advance(l, LedgerStatus::started);
    FAIL("a non-idempotent call was started twice");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_state);
    CHECK(std::string(e.what()) ==
          "tool call call_2: started before, and its tool is not idempotent: it is not run again");
  }
  l.idempotent = true;
  advance(l, LedgerStatus::started);
  CHECK(l.status == LedgerStatus::started);
}

TEST_CASE("ledger: status names round-trip, and an unknown name is invalid_argument") {
  for (LedgerStatus s : kAll) CHECK(ledger_status_from_string(to_string(s)) == s);
  try {
    ledger_status_from_string("done");
    FAIL("an unknown status was read");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
  }
}
