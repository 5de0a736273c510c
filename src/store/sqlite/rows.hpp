// The SQLite store's records as rows: the shared readers of store/record_rows.hpp over a SQLite statement.
#pragma once

#include <string>
#include <vector>

#include "agentrt/events.hpp"
#include "agentrt/storage.hpp"
#include "store/record_rows.hpp"
#include "store/sqlite/statement.hpp"

namespace agentrt {
inline namespace v1 {
namespace sqlite {

using store_rows::dump;
using store_rows::parse_or;

// The row the statement stands on, in the column order of AGENTRT_*_COLS (a thread's last_seq is not a
// column of its row).
ThreadRecord read_thread(const Statement& s);
TurnRecord read_turn(const Statement& s);
LedgerEntry read_ledger_entry(const Statement& s);
JobRecord read_job(const Statement& s);

// Every row the statement yields, each read by `read`.
template <class Read>
auto read_rows(Statement& s, Read read) {
  std::vector<decltype(read(s))> out;
  while (s.step()) out.push_back(read(s));
  return out;
}

}  // namespace sqlite
}  // namespace v1
}  // namespace agentrt
