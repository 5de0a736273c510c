#include "store/sqlite/rows.hpp"

namespace agentrt {
inline namespace v1 {
namespace sqlite {

namespace {

// Column `i` into a field, converted by the field's type. An empty JSON column keeps the field's default
// (an empty array, an empty object or null, as the record type declares it).
void read_column(const Statement& s, int i, std::string& v) { v = s.text(i); }
void read_column(const Statement& s, int i, int64_t& v) { v = s.i64(i); }
void read_column(const Statement& s, int i, int& v) { v = static_cast<int>(s.i64(i)); }
void read_column(const Statement& s, int i, bool& v) { v = s.i64(i) != 0; }
void read_column(const Statement& s, int i, double& v) { v = s.f64(i); }
void read_column(const Statement& s, int i, json& v) { v = parse_or(s.raw(i), std::move(v)); }
void read_column(const Statement& s, int i, TurnStatus& v) { v = turn_status_from_string(s.text(i)); }
void read_column(const Statement& s, int i, LedgerStatus& v) { v = ledger_status_from_string(s.text(i)); }
void read_column(const Statement& s, int i, JobStatus& v) { v = job_status_from_string(s.text(i)); }
void read_column(const Statement& s, int i, JobConfirmation& v) { v = job_confirmation_from_string(s.text(i)); }

// A record whose fields are the row's columns, in order.
template <class Record, class... Field>
Record read_fields(const Statement& s, Field Record::*... fields) {
  Record r;
  int i = 0;
  (read_column(s, i++, r.*fields), ...);
  return r;
}

}  // namespace

ThreadRecord read_thread(const Statement& s) {
  using T = ThreadRecord;
  return read_fields<T>(s, &T::id, &T::user_id, &T::title, &T::deleted, &T::created_at, &T::updated_at);
}

TurnRecord read_turn(const Statement& s) {
  using T = TurnRecord;
  return read_fields<T>(s, &T::id, &T::thread_id, &T::user_id, &T::status, &T::version, &T::client_message_id,
                        &T::run_id, &T::parent_run_id, &T::stage, &T::approval_request_id, &T::interrupts,
                        &T::expires_at, &T::owner, &T::intent, &T::error, &T::usage, &T::steps, &T::created_at,
                        &T::updated_at);
}

LedgerEntry read_ledger_entry(const Statement& s) {
  using L = LedgerEntry;
  return read_fields<L>(s, &L::turn_id, &L::tool_call_id, &L::thread_id, &L::run_id, &L::tool_name, &L::stage,
                        &L::ordinal, &L::arguments, &L::status, &L::needs_approval, &L::idempotent, &L::interrupt_id,
                        &L::decision, &L::output, &L::updated_at);
}

JobRecord read_job(const Statement& s) {
  using J = JobRecord;
  return read_fields<J>(s, &J::id, &J::thread_id, &J::turn_id, &J::run_id, &J::tool_call_id, &J::tool_name, &J::user_id,
                        &J::status, &J::progress, &J::message, &J::result, &J::assets, &J::error_code,
                        &J::error_message, &J::metadata, &J::confirmation, &J::confirm_message, &J::timeout_ms,
                        &J::expires_at, &J::delivered, &J::version, &J::created_at, &J::updated_at, &J::finished_at);
}

}  // namespace sqlite
}  // namespace v1
}  // namespace agentrt
