#include "store/sqlite/rows.hpp"

namespace agentrt {
inline namespace v1 {
namespace sqlite {

// A SQLite row's plain columns (JSON and enum columns are store_rows'): found by store_rows::read_fields.
void read_column(const Statement& s, int i, std::string& v) { v = s.text(i); }
void read_column(const Statement& s, int i, int64_t& v) { v = s.i64(i); }
void read_column(const Statement& s, int i, int& v) { v = static_cast<int>(s.i64(i)); }
void read_column(const Statement& s, int i, bool& v) { v = s.i64(i) != 0; }
void read_column(const Statement& s, int i, double& v) { v = s.f64(i); }

ThreadRecord read_thread(const Statement& s) { return store_rows::thread_from_row(s); }
TurnRecord read_turn(const Statement& s) { return store_rows::turn_from_row(s); }

bool has_wait(const TurnRecord& t) { return !(t.interrupts.is_array() && t.interrupts.empty()) || !t.trace.empty(); }
LedgerEntry read_ledger_entry(const Statement& s) { return store_rows::ledger_entry_from_row(s); }
JobRecord read_job(const Statement& s) { return store_rows::job_from_row(s); }

}  // namespace sqlite
}  // namespace v1
}  // namespace agentrt
