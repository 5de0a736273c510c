// The SQLite store's records as rows: JSON columns, the column list a SELECT of each record type names, and
// the one reader per record type that takes a row's columns in that order.
#pragma once

#include <string>
#include <vector>

#include "agentrt/events.hpp"
#include "agentrt/storage.hpp"
#include "store/sqlite/statement.hpp"
#include "util/json_fast.hpp"

namespace agentrt {
inline namespace v1 {
namespace sqlite {

// The active turns (RUNNING, WAITING_APPROVAL, RESUMING), as the partial index turns_one_active states it: a
// query names the index's predicate word for word, or the planner cannot use the index. The row's `active`
// column says it, written only when it changes (see commit_rows), so a move between two active statuses
// leaves the index alone.
#define AGENTRT_ACTIVE "active=1"

#define AGENTRT_THREAD_COLS "id,user_id,title,deleted,created_at,updated_at"

#define AGENTRT_TURN_COLS                                                                                 \
  "id,thread_id,user_id,status,version,client_message_id,run_id,parent_run_id,stage,approval_request_id," \
  "interrupts,expires_at,owner,intent,error,usage,steps,created_at,updated_at"

#define AGENTRT_LEDGER_COLS                                                                        \
  "turn_id,tool_call_id,thread_id,run_id,tool_name,stage,ordinal,arguments,status,needs_approval," \
  "idempotent,interrupt_id,decision,output,updated_at"

#define AGENTRT_JOB_COLS                                                                                    \
  "id,thread_id,turn_id,run_id,tool_call_id,tool_name,user_id,status,progress,message,result,assets,"       \
  "error_code,error_message,metadata,confirmation,confirm_message,timeout_ms,expires_at,delivered,version," \
  "created_at,updated_at,finished_at"

inline json parse_or(const unsigned char* text, json fallback) {
  if (!text || !*text) return fallback;
  return parse_json_or_discarded(reinterpret_cast<const char*>(text));
}

inline std::string dump(const json& j) {
  std::string out;
  append_json(out, j);
  return out;
}

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
