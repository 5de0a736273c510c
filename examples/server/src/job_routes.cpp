// The job routes: a job, its cancellation, a thread's jobs.
#include "routes.hpp"

#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "agentrt/ids.hpp"
#include "agentrt/records.hpp"
#include "thread_namespace.hpp"

namespace agentrt::server {

namespace {

// The job record as the client sees it: its thread under the client's id.
json client_job(const ApiCall& c, const JobRecord& j) {
  std::string text = dump(job_to_json(j));
  if (auto client = client_thread_id(c.user, j.thread_id)) text = rewrite_json_string(text, j.thread_id, *client);
  return json::parse(text);
}

// The caller's job: another user's job, one on a deleted thread and an unknown one are all 404.
JobRecord own_job(ServerContext& s, const ApiCall& c, const std::string& job_id) {
  if (const char* problem = id_problem(job_id))
    throw ApiError{422, "invalid_argument", fmt::format("the job id {}", problem)};
  auto j = s.rt->job(job_id);
  auto t = j ? s.rt->thread(j->thread_id) : std::nullopt;
  if (!j || j->user_id != c.user || !t || t->user_id != c.user || t->deleted)
    throw ApiError{404, "not_found", fmt::format("job {} not found", job_id)};
  return *j;
}

}  // namespace

// GET /agent/jobs/{jobId} -> the job record (agentrt::job_to_json)
void get_job(ServerContext& s, ApiCall& c) { c.send_json(200, client_job(c, own_job(s, c, c.match.id))); }

// POST /agent/jobs/{jobId}/cancel, optional body {reason} -> the cancelled record. The runtime calls the
// job cancel hook and adds the outcome to the thread's history. A job that has already ended otherwise, or
// waits for the person's confirmation, is 409 invalid_state; a cancelled one is answered unchanged.
void post_cancel_job(ServerContext& s, ApiCall& c) {
  const std::string job_id = c.match.id;
  std::string reason;
  if (!c.req.body.empty()) {
    json body = parse_json_body(c.req, s.cfg.limits.max_body_bytes);
    if (body.contains("reason")) {
      if (!body["reason"].is_string()) throw ApiError{422, "invalid_argument", "'reason' must be a string"};
      reason = body["reason"].get<std::string>();
    }
  }
  own_job(s, c, job_id);
  c.send_json(200, client_job(c, s.rt->cancel_job(job_id, reason)));
}

// GET /agent/threads/{threadId}/jobs -> {threadId, jobs:[...]} in creation order
void get_thread_jobs(ServerContext& s, ApiCall& c) {
  s.own_thread(c, c.match.id);
  json jobs = json::array();
  for (const auto& j : s.rt->jobs(c.internal_thread)) jobs.push_back(job_to_json(j));
  c.send_json(200, json{{"threadId", c.client_thread}, {"jobs", std::move(jobs)}});
}

}  // namespace agentrt::server
