// The PostgreSQL store's jobs: their writes inside a batch and their reads.
#include <fmt/format.h>

#include "store/postgres/connection.hpp"
#include "store/postgres/pool.hpp"
#include "store/postgres/postgres_store.hpp"
#include "store/record_rows.hpp"

namespace agentrt {
inline namespace v1 {

using namespace pg;
using store_rows::dump;

namespace {

JobRecord read_job(const Row& r) { return store_rows::job_from_row(r); }

}  // namespace

void PostgresStore::require_idle(Pipeline& p, std::string_view thread_id) {
  p.add("SELECT id FROM turns WHERE thread_id=$1 AND " AGENTRT_ACTIVE
        " AND status<>'WAITING_APPROVAL' AND status<>'WAITING_CLIENT'",
        Params().add(thread_id), "look for an open run", [thread = std::string(thread_id)](const Result& r) {
          if (r.rows() > 0)
            throw Error(ErrorCode::conflict,
                        fmt::format("thread {} has a run open (turn {})", thread, r.row(0).text(0)));
        });
}

void PostgresStore::write_job(Pipeline& pipe, JobWrite& w, int64_t now) {
  JobRecord& j = w.job;
  // The record's own times (the runtime's, as its agentrt.job event carries them); the commit's when unset.
  if (j.updated_at == 0) j.updated_at = now;
  if (j.created_at == 0) j.created_at = j.updated_at;
  Params p;
  p.add(to_string(j.status)).add(j.progress).add(j.message);
  p.add(j.result.is_null() ? std::string() : dump(j.result)).add(dump(j.assets)).add(j.error_code);
  p.add(j.error_message).add(dump(j.metadata)).add(to_string(j.confirmation)).add(j.confirm_message);
  p.add(j.timeout_ms).add(j.expires_at).add(j.delivered).add(j.updated_at).add(j.finished_at).add(j.id);
  if (w.expected_version < 0) {
    j.version = 0;
    p.add(j.thread_id).add(j.turn_id).add(j.run_id).add(j.tool_call_id).add(j.tool_name).add(j.user_id);
    p.add(j.created_at);
    // A repeated id violates the primary key: conflict.
    pipe.add(
        "INSERT INTO jobs(status,progress,message,result,assets,error_code,error_message,metadata,confirmation,"
        "confirm_message,timeout_ms,expires_at,delivered,updated_at,finished_at,id,thread_id,turn_id,run_id,"
        "tool_call_id,tool_name,user_id,created_at,version) "
        "VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20,$21,$22,$23,0)",
        p, "insert a job");
    return;
  }
  p.add(w.expected_version);
  swap_version(pipe,
               "UPDATE jobs SET status=$1,progress=$2,message=$3,result=$4,assets=$5,error_code=$6,"
               "error_message=$7,metadata=$8,confirmation=$9,confirm_message=$10,timeout_ms=$11,"
               "expires_at=$12,delivered=$13,version=version+1,updated_at=$14,finished_at=$15 "
               "WHERE id=$16 AND version=$17",
               p, "job", j.id, w.expected_version, j.version);
}

std::optional<JobRecord> PostgresStore::get_job(std::string_view job_id) {
  if (job_id.empty()) return std::nullopt;
  return pool_->with([&](Connection& c) -> std::optional<JobRecord> {
    Result r = c.exec("SELECT " AGENTRT_JOB_COLS " FROM jobs WHERE id=$1", Params().add(job_id), "read a job");
    if (r.rows() == 0) return std::nullopt;
    return read_job(r.row(0));
  });
}

std::vector<JobRecord> PostgresStore::thread_jobs(std::string_view thread_id) {
  if (thread_id.empty()) return {};
  return pool_->with([&](Connection& c) {
    return read_rows(c.exec("SELECT " AGENTRT_JOB_COLS " FROM jobs WHERE thread_id=$1 ORDER BY created_at, pos",
                            Params().add(thread_id), "read a thread's jobs"),
                     read_job);
  });
}

std::vector<JobRecord> PostgresStore::jobs_due(int64_t now) {
  return pool_->with([&](Connection& c) {
    return read_rows(c.exec("SELECT " AGENTRT_JOB_COLS " FROM jobs WHERE NOT delivered AND "
                            "(status IN ('succeeded','failed','cancelled') OR "
                            "(expires_at > 0 AND expires_at <= $1 AND confirmation <> 'pending')) "
                            "ORDER BY created_at, pos",
                            Params().add(now), "read due jobs"),
                     read_job);
  });
}

}  // namespace v1
}  // namespace agentrt
