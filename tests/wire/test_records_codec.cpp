// The records codec: a job's record reads back as it was written (the projector reads agentrt.job events so).
#include <doctest/doctest.h>

#include "agentrt/error.hpp"
#include "agentrt/records.hpp"

using namespace agentrt;

namespace {

JobRecord full_job() {
  JobRecord j;
  j.id = "job_1";
  j.thread_id = "t";
  j.turn_id = "turn_1";
  j.run_id = "run_1";
  j.tool_call_id = "call_1";
  j.tool_name = "render";
  j.user_id = "u";
  j.status = JobStatus::cancelled;
  j.progress = 0.1 + 0.2;  // not a short decimal: it must come back bit for bit
  j.message = "frame 3/40";
  j.result = json{{"url", "https://cdn/x.png"}};
  j.assets = json::array({{{"key", "renders/x.png"}}});
  j.error_code = "declined";
  j.error_message = "too expensive";
  j.metadata = json{{"external_id", "e1"}};
  j.confirmation = JobConfirmation::declined;
  j.confirm_message = "Costs 3 credits";
  j.timeout_ms = 60000;
  j.expires_at = 1700000060000;
  j.delivered = true;
  j.version = 3;
  j.created_at = 1700000000000;
  j.updated_at = 1700000001000;
  j.finished_at = 1700000001000;
  return j;
}

}  // namespace

TEST_CASE("job_from_json reads back every field job_to_json writes") {
  const JobRecord j = full_job();
  const json written = job_to_json(j);
  const JobRecord back = job_from_json(written);
  CHECK(job_to_json(back) == written);
  CHECK(back.progress == j.progress);
  CHECK(job_from_json(json::parse(written.dump())).progress == j.progress);

  JobRecord bare;  // the optional members absent
  bare.id = "job_2";
  bare.thread_id = "t";
  const JobRecord bare_back = job_from_json(job_to_json(bare));
  CHECK(job_to_json(bare_back) == job_to_json(bare));
  CHECK(bare_back.result.is_null());
  CHECK(bare_back.confirmation == JobConfirmation::none);
}

TEST_CASE("job_from_json refuses what job_to_json does not write") {
  auto refused = [](const json& j, const std::string& words) {
    try {
      job_from_json(j);
      FAIL("accepted: " << j.dump());
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::invalid_argument);
      CHECK_MESSAGE(std::string(e.what()).find(words) != std::string::npos, e.what());
    }
  };
  json j = job_to_json(full_job());
  refused(json::array(), "job record must be a JSON object");
  json extra = j;
  extra["owner"] = "x";
  refused(extra, "unknown key 'owner'");
  json no_id = j;
  no_id.erase("id");
  refused(no_id, "'id' is required");
  json status = j;
  status["status"] = "done";
  refused(status, "unknown job status 'done'");
  json version = j;
  version["version"] = -1;
  refused(version, "'version' must be an integer");
  json progress = j;
  progress["progress"] = "half";
  refused(progress, "'progress' must be a number");
  json error = j;
  error["error"] = json{{"code", "x"}, {"why", "y"}};
  refused(error, "unknown key 'why'");
}
