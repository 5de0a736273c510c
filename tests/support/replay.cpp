#include "support/replay.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "agentrt/events.hpp"
#include "agentrt/records.hpp"
#include "pipeline/projector.hpp"

namespace agentrt::testing {

namespace {

std::string bytes_of(const MessageRecord& m) {
  return fmt::format("{{thread_id:{}, index:{}, turn_id:{}, run_id:{}, message:{}}}", m.thread_id, m.index, m.turn_id,
                     m.run_id, to_json_string(m.message));
}

// Every field but updated_at (the store's commit time); the output as JSON (the live path stores the text the
// run wrote, the replay the text of the event's parsed metadata: the same JSON, members perhaps reordered).
std::string bytes_of(const LedgerEntry& l) {
  return fmt::format(
      "{{call:{}, turn:{}, thread:{}, run:{}, tool:{}, stage:{}, ordinal:{}, arguments:{}, status:{}, "
      "approval:{}, idempotent:{}, interrupt:{}, decision:{}, output:{}}}",
      l.tool_call_id, l.turn_id, l.thread_id, l.run_id, l.tool_name, l.stage, l.ordinal, l.arguments,
      to_string(l.status), l.needs_approval, l.idempotent, l.interrupt_id, l.decision.dump(),
      l.output.empty() ? std::string() : json::parse(l.output).dump());
}

// Every field but version, created_at and updated_at (the store's).
std::string bytes_of(const TurnRecord& t) {
  return fmt::format(
      "{{id:{}, thread:{}, user:{}, status:{}, client_message:{}, run:{}, parent_run:{}, stage:{}, "
      "approval:{}, interrupts:{}, expires_at:{}, owner:{}, intent:{}, error:{}, usage:{}, steps:{}, trace:{}}}",
      t.id, t.thread_id, t.user_id, to_string(t.status), t.client_message_id, t.run_id, t.parent_run_id, t.stage,
      t.approval_request_id, t.interrupts.dump(), t.expires_at, t.owner, t.intent, t.error, t.usage.dump(), t.steps,
      t.trace);
}

// Every field but created_at (the store's).
std::string bytes_of(const ApprovalRecord& a) {
  return fmt::format("{{id:{}, turn:{}, thread:{}, decisions:{}, answer:{}}}", a.approval_request_id, a.turn_id,
                     a.thread_id, a.decisions.dump(), a.answer.dump());
}

// Every field: the job event carries the record as its change commits it, times and version included.
std::string bytes_of(const JobRecord& j) { return job_to_json(j).dump(); }

template <class T>
std::optional<std::string> compare(const std::string& what, const std::vector<T>& stored,
                                   const std::vector<T>& replayed) {
  for (size_t i = 0; i < std::max(stored.size(), replayed.size()); ++i) {
    const std::string a = i < stored.size() ? bytes_of(stored[i]) : "(none)";
    const std::string b = i < replayed.size() ? bytes_of(replayed[i]) : "(none)";
    if (a != b)
      return fmt::format("{} {} of {} stored / {} replayed differs:\n stored:   {}\n replayed: {}", what, i,
                         stored.size(), replayed.size(), a, b);
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> replay_difference(Store& store, const std::string& thread_id) {
  Projector projector(thread_id);
  std::vector<MessageRecord> replayed;
  std::map<std::string, ApprovalRecord> approvals;
  std::vector<JobRecord> jobs;
  std::optional<std::string> replayed_state;  // the thread's state as the last state event left it
  int64_t after = 0;
  for (;;) {
    auto page = store.events_after(thread_id, after, 500);
    if (page.empty()) break;
    for (const auto& se : page) {
      after = se.seq;
      Event e = event_from_json(json::parse(se.json));
      if (auto m = projector.apply(se.run_id, e)) {
        m->index = static_cast<int64_t>(replayed.size());
        replayed.push_back(std::move(*m));
      }
      projector.take_ledger_changes();
      projector.take_turn();
      if (auto st = projector.take_state()) replayed_state = std::move(st);
      for (auto& w : projector.take_job_writes()) {  // each job as its last record says, in order of appearance
        auto at = std::find_if(jobs.begin(), jobs.end(), [&](const JobRecord& j) { return j.id == w.job.id; });
        if (at != jobs.end())
          *at = std::move(w.job);
        else
          jobs.push_back(std::move(w.job));
      }
      if (auto a = projector.take_approval()) approvals[a->approval_request_id] = std::move(*a);
    }
  }
  if (auto d = compare("thread " + thread_id + ": message", store.messages(thread_id), replayed)) return d;
  if (auto d = compare("thread " + thread_id + ": job", store.thread_jobs(thread_id), jobs)) return d;
  if (auto stored = store.thread_state(thread_id); stored != replayed_state)
    return fmt::format("thread {}: state stored {} but replayed {}", thread_id, stored.value_or("(none)"),
                       replayed_state.value_or("(none)"));
  for (const auto& turn_id : projector.turns()) {
    auto stored = store.ledger(turn_id);
    std::sort(stored.begin(), stored.end(), [](const LedgerEntry& a, const LedgerEntry& b) {
      return std::tie(a.run_id, a.ordinal, a.tool_call_id) < std::tie(b.run_id, b.ordinal, b.tool_call_id);
    });
    if (auto d = compare("turn " + turn_id + ": ledger entry", stored, projector.ledger(turn_id))) return d;
    auto turn = store.get_turn(turn_id);
    if (!turn) return fmt::format("turn {} is in the log but not stored", turn_id);
    std::vector<TurnRecord> replayed_turn;
    if (auto t = projector.turn(turn_id)) replayed_turn.push_back(std::move(*t));
    if (auto d = compare("turn " + turn_id + ": row", std::vector<TurnRecord>{*turn}, replayed_turn)) return d;
    std::vector<ApprovalRecord> stored_approval, replayed_approval;
    if (auto a = store.get_approval(turn->approval_request_id)) stored_approval.push_back(std::move(*a));
    if (auto a = approvals.find(turn->approval_request_id); a != approvals.end())
      replayed_approval.push_back(a->second);
    if (auto d = compare("turn " + turn_id + ": approval", stored_approval, replayed_approval)) return d;
  }
  return std::nullopt;
}

}  // namespace agentrt::testing
