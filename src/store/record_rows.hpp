// Store-neutral row codecs shared by the SQL stores (SQLite, PostgreSQL): the column list a SELECT of each record
// type names, the one reader per record type that takes a row's columns in that order, the JSON columns, the
// event log's row shape (the consecutive events of one run in one commit as JSON lines in one row) and a stored
// message's body. A backend's row type gives text(i), raw(i) (NUL-terminated text), i64(i) and f64(i), and
// read_column overloads (found by argument-dependent lookup) for its plain columns: strings, integers, flags.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agentrt/error.hpp"
#include "agentrt/events.hpp"
#include "agentrt/storage.hpp"
#include "util/json_fast.hpp"

#define AGENTRT_THREAD_COLS "id,user_id,title,deleted,created_at,updated_at"

#define AGENTRT_TURN_COLS                                                                                 \
  "id,thread_id,user_id,status,version,client_message_id,run_id,parent_run_id,stage,approval_request_id," \
  "interrupts,expires_at,owner,intent,error,usage,steps,created_at,updated_at,trace"

#define AGENTRT_LEDGER_COLS                                                                        \
  "turn_id,tool_call_id,thread_id,run_id,tool_name,stage,ordinal,arguments,status,needs_approval," \
  "idempotent,interrupt_id,decision,output,updated_at,client"

#define AGENTRT_JOB_COLS                                                                                    \
  "id,thread_id,turn_id,run_id,tool_call_id,tool_name,user_id,status,progress,message,result,assets,"       \
  "error_code,error_message,metadata,confirmation,confirm_message,timeout_ms,expires_at,delivered,version," \
  "created_at,updated_at,finished_at"

namespace agentrt {
inline namespace v1 {
namespace store_rows {

// A JSON column: empty keeps `fallback` (the field's default), a damaged one reads as a discarded value.
inline json parse_or(const unsigned char* text, json fallback) {
  if (!text || !*text) return fallback;
  return parse_json_or_discarded(reinterpret_cast<const char*>(text));
}

inline std::string dump(const json& j) {
  std::string out;
  append_json(out, j);
  return out;
}

// Column `i` into a field of a type every backend stores the same way (JSON text, an enum's name).
template <class Row>
void read_column(const Row& r, int i, json& v) {
  v = parse_or(r.raw(i), std::move(v));
}
template <class Row>
void read_column(const Row& r, int i, TurnStatus& v) {
  v = turn_status_from_string(r.text(i));
}
template <class Row>
void read_column(const Row& r, int i, LedgerStatus& v) {
  v = ledger_status_from_string(r.text(i));
}
template <class Row>
void read_column(const Row& r, int i, JobStatus& v) {
  v = job_status_from_string(r.text(i));
}
template <class Row>
void read_column(const Row& r, int i, JobConfirmation& v) {
  v = job_confirmation_from_string(r.text(i));
}

// A record whose fields are the row's columns, in order.
template <class Record, class Row, class... Field>
Record read_fields(const Row& row, Field Record::*... fields) {
  Record r;
  int i = 0;
  (read_column(row, i++, r.*fields), ...);
  return r;
}

// A spend query's token usage: provider, model and the six counts, from column `first` on (AGENTRT_SPEND_USAGE's
// order).
template <class Row>
TokenUsage usage_columns(const Row& r, int first) {
  TokenUsage u;
  u.provider = r.text(first);
  u.model = r.text(first + 1);
  u.input_tokens = r.i64(first + 2);
  u.output_tokens = r.i64(first + 3);
  u.total_tokens = r.i64(first + 4);
  u.reasoning_tokens = r.i64(first + 5);
  u.cached_input_tokens = r.i64(first + 6);
  u.cache_write_input_tokens = r.i64(first + 7);
  return u;
}

// The row in the column order of AGENTRT_*_COLS (a thread's last_seq is not a column of its row).
template <class Row>
ThreadRecord thread_from_row(const Row& s) {
  using T = ThreadRecord;
  return read_fields<T>(s, &T::id, &T::user_id, &T::title, &T::deleted, &T::created_at, &T::updated_at);
}

template <class Row>
TurnRecord turn_from_row(const Row& s) {
  using T = TurnRecord;
  return read_fields<T>(s, &T::id, &T::thread_id, &T::user_id, &T::status, &T::version, &T::client_message_id,
                        &T::run_id, &T::parent_run_id, &T::stage, &T::approval_request_id, &T::interrupts,
                        &T::expires_at, &T::owner, &T::intent, &T::error, &T::usage, &T::steps, &T::created_at,
                        &T::updated_at, &T::trace);
}

template <class Row>
LedgerEntry ledger_entry_from_row(const Row& s) {
  using L = LedgerEntry;
  return read_fields<L>(s, &L::turn_id, &L::tool_call_id, &L::thread_id, &L::run_id, &L::tool_name, &L::stage,
                        &L::ordinal, &L::arguments, &L::status, &L::needs_approval, &L::idempotent, &L::interrupt_id,
                        &L::decision, &L::output, &L::updated_at, &L::client);
}

template <class Row>
JobRecord job_from_row(const Row& s) {
  using J = JobRecord;
  return read_fields<J>(s, &J::id, &J::thread_id, &J::turn_id, &J::run_id, &J::tool_call_id, &J::tool_name, &J::user_id,
                        &J::status, &J::progress, &J::message, &J::result, &J::assets, &J::error_code,
                        &J::error_message, &J::metadata, &J::confirmation, &J::confirm_message, &J::timeout_ms,
                        &J::expires_at, &J::delivered, &J::version, &J::created_at, &J::updated_at, &J::finished_at);
}

// One row of the event log: the consecutive events of one run in one commit, seq first_seq..last_seq, their
// JSON joined by newlines.
struct EventRow {
  int64_t first_seq = 0;
  int64_t last_seq = 0;
  std::string run_id;
  std::string body;
};

// Numbers the events after `last_seq` (writing each event's seq back) and groups them into rows: the
// consecutive events of one run are one row. Error(invalid_argument) for an event whose JSON is not a single
// line.
std::vector<EventRow> event_rows(std::vector<StoredEvent>& events, int64_t last_seq);

// Appends the events of a stored row (its first seq, run and body) whose seq is above `after_seq` to `out`,
// while `out` holds fewer than `limit`.
void split_event_row(int64_t first_seq, const std::string& run_id, std::string_view body, int64_t after_seq,
                     size_t limit, std::vector<StoredEvent>& out);

// A history message from its stored body, read by `decode` (a store's own format; JSON text by default).
// Error(io) naming the thread and index when the body is nested deeper than any message this build stores, or is
// not a message at all.
using MessageDecoder = Message (*)(std::string_view body, size_t max_depth);
// The Error(io) of a stored message that cannot be read, and why.
Error unreadable_message(std::string_view thread_id, int64_t index, std::string_view why);
Message stored_message(std::string_view thread_id, int64_t index, std::string_view body,
                       MessageDecoder decode = message_from_json_text);

}  // namespace store_rows
}  // namespace v1
}  // namespace agentrt
