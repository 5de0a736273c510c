// The SQLite store's jobs: their writes inside a batch and their reads.
#include "agentrt/clock.hpp"
#include "store/sqlite/connection.hpp"
#include "store/sqlite/rows.hpp"
#include "store/sqlite_store.hpp"

namespace agentrt {
inline namespace v1 {

using namespace sqlite;

// ------------------------------------------------------------------------------------------------- jobs

void SqliteStore::require_idle(std::string_view thread_id) {
  auto q = stmt("SELECT id FROM turns WHERE thread_id=? AND " AGENTRT_ACTIVE
                " AND status<>'WAITING_APPROVAL' AND status<>'WAITING_CLIENT'");
  q.bind(1, thread_id);
  if (q.step())
    throw Error(ErrorCode::conflict, fmt::format("thread {} has a run open (turn {})", thread_id, q.text(0)));
}

void SqliteStore::write_job(JobWrite& w, int64_t now) {
  JobRecord& j = w.job;
  // The record's own times (the runtime's, as its agentrt.job event carries them); the commit's when unset.
  if (j.updated_at == 0) j.updated_at = now;
  if (j.created_at == 0) j.created_at = j.updated_at;
  const std::string result = j.result.is_null() ? std::string() : dump(j.result);
  if (w.expected_version < 0) {
    j.version = 0;
    auto ins = stmt(
        "INSERT INTO jobs(id,thread_id,turn_id,run_id,tool_call_id,tool_name,user_id,status,progress,message,result,"
        "assets,error_code,error_message,metadata,confirmation,confirm_message,timeout_ms,expires_at,delivered,"
        "version,created_at,updated_at,finished_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,0,?,?,?)");
    ins.bind(1, j.id).bind(2, j.thread_id).bind(3, j.turn_id).bind(4, j.run_id).bind(5, j.tool_call_id);
    ins.bind(6, j.tool_name).bind(7, j.user_id).bind(8, to_string(j.status)).bind(9, j.progress).bind(10, j.message);
    ins.bind(11, result).bind(12, dump(j.assets)).bind(13, j.error_code).bind(14, j.error_message);
    ins.bind(15, dump(j.metadata)).bind(16, to_string(j.confirmation)).bind(17, j.confirm_message);
    ins.bind(18, j.timeout_ms).bind(19, j.expires_at).bind(20, j.delivered).bind(21, j.created_at);
    ins.bind(22, j.updated_at).bind(23, j.finished_at);
    ins.run();  // a repeated id violates the primary key: conflict
    return;
  }
  auto up = stmt(
      "UPDATE jobs SET status=?,progress=?,message=?,result=?,assets=?,error_code=?,error_message=?,metadata=?,"
      "confirmation=?,confirm_message=?,timeout_ms=?,expires_at=?,delivered=?,version=version+1,updated_at=?,"
      "finished_at=? WHERE id=? AND version=?");
  up.bind(1, to_string(j.status)).bind(2, j.progress).bind(3, j.message).bind(4, result).bind(5, dump(j.assets));
  up.bind(6, j.error_code).bind(7, j.error_message).bind(8, dump(j.metadata)).bind(9, to_string(j.confirmation));
  up.bind(10, j.confirm_message).bind(11, j.timeout_ms).bind(12, j.expires_at).bind(13, j.delivered);
  up.bind(14, j.updated_at).bind(15, j.finished_at).bind(16, j.id).bind(17, w.expected_version);
  up.run();
  if (db_->changes() == 0)
    throw Error(ErrorCode::conflict,
                fmt::format("job {} changed concurrently (expected version {})", j.id, w.expected_version));
  j.version = w.expected_version + 1;
}

std::optional<JobRecord> SqliteStore::get_job(std::string_view job_id) {
  if (job_id.empty()) return std::nullopt;
  Read r(*this);
  auto s = r.db().stmt("SELECT " AGENTRT_JOB_COLS " FROM jobs WHERE id=?");
  s.bind(1, job_id);
  if (!s.step()) return std::nullopt;
  return read_job(s);
}

std::vector<JobRecord> SqliteStore::thread_jobs(std::string_view thread_id) {
  if (thread_id.empty()) return {};
  Read r(*this);
  auto s = r.db().stmt("SELECT " AGENTRT_JOB_COLS " FROM jobs WHERE thread_id=? ORDER BY created_at, rowid");
  s.bind(1, thread_id);
  return read_rows(s, read_job);
}

std::vector<JobRecord> SqliteStore::jobs_due(int64_t now) {
  Read r(*this);
  auto s = r.db().stmt("SELECT " AGENTRT_JOB_COLS
                       " FROM jobs WHERE delivered=0 AND "
                       "(status IN ('succeeded','failed','cancelled') OR "
                       "(expires_at > 0 AND expires_at <= ?1 AND confirmation <> 'pending')) ORDER BY created_at");
  s.bind(1, now);
  return read_rows(s, read_job);
}

}  // namespace v1
}  // namespace agentrt
