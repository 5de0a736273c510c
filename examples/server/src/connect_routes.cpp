// The connect route: re-attach to a thread the way an AG-UI client reloads (its connect()): one run's worth of
// events that give the client the thread as it stands — MESSAGES_SNAPSHOT, STATE_SNAPSHOT — and then the run in
// progress, live, or how the thread's last turn left it (paused on interrupts, waiting for client tool answers). With
// Last-Event-ID inside the run in progress, the run is taken up after that event instead.
#include "routes.hpp"

#include <algorithm>
#include <set>
#include <string>

#include <fmt/format.h>

#include "agentrt/clock.hpp"
#include "agentrt/records.hpp"
#include "sse_stream.hpp"
#include "thread_namespace.hpp"

namespace agentrt::server {

namespace {

// The sequence number of the first event of run `run_id`, the thread's last run (every run event after it is that
// run's): the least `after` whose next run event is the run's, found by bisection over the log.
std::optional<StoredEvent> first_event_of(ServerContext& s, const ApiCall& c, const std::string& run_id,
                                          int64_t last_seq) {
  int64_t lo = 0, hi = last_seq;  // the answer's `after` lies in [lo, hi]
  std::optional<StoredEvent> found;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    auto page = s.rt->events_page(c.internal_thread, c.user, mid, 1);
    if (page.empty() || page.front().run_id == run_id) {
      hi = mid;
    } else {
      lo = page.front().seq;  // that event is an earlier run's: the run starts after it
    }
  }
  auto page = s.rt->events_page(c.internal_thread, c.user, lo, 1);
  if (!page.empty() && page.front().run_id == run_id) found = std::move(page.front());
  return found;
}

// The ids of the messages events of the log after `after` make (or stream), to leave out of a snapshot that the
// replay of those events completes.
std::set<std::string> messages_made_after(ServerContext& s, const ApiCall& c, int64_t after) {
  std::set<std::string> ids;
  for (;;) {
    auto page = s.rt->events_page(c.internal_thread, c.user, after, kMaxEventsPage);
    if (page.empty()) return ids;
    for (const auto& e : page) {
      json j = json::parse(e.json, nullptr, false);
      if (!j.is_object()) continue;
      for (const char* key : {"messageId", "parentMessageId"})
        if (auto it = j.find(key); it != j.end() && it->is_string()) ids.insert(it->get<std::string>());
      if (auto v = j.find("value"); v != j.end() && v->is_object())
        if (auto m = v->find("messageId"); m != v->end() && m->is_string()) ids.insert(m->get<std::string>());
    }
    after = page.back().seq;
  }
}

// An event's JSON text as an SSE frame with `seq` as its id (the thread named as the client names it): the
// stream's framing, EventFeeds::frame, on an event of the run's with the id the prelude gives it.
SharedChunk frame(std::string json, int64_t seq, const ApiCall& c, std::string run_id = {}) {
  return EventFeeds::frame(StoredEvent{seq, std::move(run_id), std::move(json)}, c.internal_thread, c.client_thread);
}

SharedChunk frame(const Event& e, int64_t seq, const ApiCall& c) { return frame(to_json_string(e), seq, c); }

// What is open in a run at event `upto` (its steps, reasoning, text message, tool calls), as the events that open
// them again: a client that read the run up to there and lost its connection takes up the rest after them (AG-UI's
// client checks each run it reads from its start, and takes a start of a message or tool call it already has as the
// same one).
std::vector<json> open_at(ServerContext& s, const ApiCall& c, int64_t after, int64_t upto) {
  // What opens and what closes each kind of thing, and the field that names it.
  struct Kind {
    const char *start, *end, *id;
  };
  static constexpr Kind kKinds[] = {{"STEP_STARTED", "STEP_FINISHED", "stepName"},
                                    {"TEXT_MESSAGE_START", "TEXT_MESSAGE_END", "messageId"},
                                    {"TOOL_CALL_START", "TOOL_CALL_END", "toolCallId"},
                                    {"REASONING_START", "REASONING_END", "messageId"},
                                    {"REASONING_MESSAGE_START", "REASONING_MESSAGE_END", "messageId"}};
  std::vector<std::pair<std::string, json>> open;  // (kind and name, the opening event) in the order they opened
  while (after < upto) {
    auto page = s.rt->events_page(c.internal_thread, c.user, after, kMaxEventsPage);
    if (page.empty()) break;
    for (const auto& e : page) {
      if (e.seq > upto) break;
      json j = json::parse(e.json, nullptr, false);
      const std::string type = j.is_object() ? j.value("type", "") : "";
      for (const auto& k : kKinds) {
        if (type != k.start && type != k.end) continue;
        const std::string key = std::string(k.start) + ":" + j.value(k.id, "");
        if (type == k.start) {
          open.emplace_back(key, std::move(j));
        } else {
          auto it = std::find_if(open.begin(), open.end(), [&](const auto& o) { return o.first == key; });
          if (it != open.end()) open.erase(it);
        }
        break;
      }
    }
    after = page.back().seq;
  }
  std::vector<json> out;
  for (auto& [key, j] : open) {
    j["timestamp"] = now_ms();
    out.push_back(std::move(j));
  }
  return out;
}

Event messages_snapshot(json messages) {
  Event e;
  e.type = EventType::MESSAGES_SNAPSHOT;
  e.messages = std::move(messages);
  e.timestamp = now_ms();
  return e;
}

}  // namespace

// POST /agent/connect: AG-UI RunAgentInput ({threadId, runId}; the rest is not taken) -> text/event-stream.
void post_connect(ServerContext& s, ApiCall& c) {
  const json in = run_agent_input_body(s, c);
  const std::string run_id = in["runId"].get<std::string>();
  if (!run_id.empty()) require_id(run_id, "run id");
  auto slot = s.stream_slots.take(c.user);
  const auto thread = s.rt->thread(c.internal_thread);
  const int64_t last_seq = thread ? thread->last_seq : 0;
  auto active = thread ? s.rt->active_turn(c.internal_thread) : std::nullopt;

  // A run in progress: its own RUN_STARTED, the snapshots without what its events make, then its events.
  const bool live = active && (active->status == TurnStatus::running || active->status == TurnStatus::resuming);
  std::optional<StoredEvent> started = live ? first_event_of(s, c, active->run_id, last_seq) : std::nullopt;
  json messages = json::array();
  for (auto& m : s.rt->history(c.internal_thread)) messages.push_back(m);  // read before the events (see below)
  std::vector<SharedChunk> prelude;
  // A client that lost its connection mid-run says the last event it took (Last-Event-ID): within the run in
  // progress, it gets the run's RUN_STARTED, what is open at that event opened again, and the events after it.
  std::optional<int64_t> taken;
  if (const std::string cursor(c.req.header("Last-Event-ID")); started && !cursor.empty()) {
    const int64_t n = event_cursor(cursor);
    if (n >= started->seq && n <= last_seq) taken = n;  // otherwise the whole run again, with the snapshots
  }
  if (started && taken) {
    prelude.push_back(frame(started->json, *taken, c, started->run_id));
    for (auto& j : open_at(s, c, started->seq, *taken)) prelude.push_back(frame(j.dump(), *taken, c));
    SseOptions options;
    options.prelude = std::move(prelude);
    options.pre_1_0 = speaks_pre_1_0(in);
    open_sse_stream(s, c, slot, SseStream::Mode::one_run, started->run_id, *taken, std::move(options));
    return;
  }
  if (started) {
    // History first, the events second: a message completed in between is among the events, and left out.
    const auto replayed = messages_made_after(s, c, started->seq);
    json kept = json::array();
    for (auto& m : messages)
      if (!replayed.count(m.value("id", std::string()))) kept.push_back(std::move(m));
    messages = std::move(kept);
    prelude.push_back(EventFeeds::frame(*started, c.internal_thread, c.client_thread));
  } else {
    prelude.push_back(frame(events::run_started(c.internal_thread, run_id), last_seq, c));
  }
  const int64_t at = started ? started->seq : last_seq;
  prelude.push_back(frame(messages_snapshot(std::move(messages)), at, c));
  if (auto state = s.rt->thread_state(c.internal_thread))
    prelude.push_back(frame(events::state_snapshot(std::move(*state)), at, c));
  if (started) {
    SseOptions options;
    options.prelude = std::move(prelude);
    options.pre_1_0 = speaks_pre_1_0(in);
    open_sse_stream(s, c, slot, SseStream::Mode::one_run, started->run_id, started->seq, std::move(options));
    return;
  }
  // Nothing running: how the last turn left the thread, as the end of this run.
  json outcome = {{"type", "success"}};
  if (active && active->status == TurnStatus::waiting_approval) {
    outcome = {{"type", "interrupt"}, {"interrupts", active->interrupts}};
  } else if (active && active->status == TurnStatus::waiting_client) {
    json pending = json::array();
    for (const auto& l : s.rt->tool_calls(active->id))
      if (l.awaits_client()) pending.push_back(l.tool_call_id);
    outcome["pendingToolCallIds"] = std::move(pending);
  }
  prelude.push_back(frame(events::run_finished(c.internal_thread, run_id, std::move(outcome)), at, c));
  if (speaks_pre_1_0(in)) prelude.back() = pre_1_0_frame(prelude.back());
  std::string body;
  for (const auto& f : prelude) body += f->bytes;
  HttpResponse r;
  r.content_type = "text/event-stream";
  r.body = std::move(body);
  r.headers = {{"Cache-Control", "no-cache"}};
  c.send(std::move(r));  // with the call's CORS headers
}

}  // namespace agentrt::server
