// The run routes: a run started, resumed or cancelled.
#include "routes.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>
#include <string>

#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "agentrt/records.hpp"
#include "sse_stream.hpp"

namespace agentrt::server {

namespace {

// True when the Accept header prefers application/json to text/event-stream (a missing or wildcard Accept
// keeps the stream). Media ranges are compared by their q values; a range without one has q=1.
bool prefers_json(std::string_view accept) {
  double json_q = -1, sse_q = -1;
  size_t pos = 0;
  while (pos <= accept.size()) {
    size_t end = accept.find(',', pos);
    if (end == std::string_view::npos) end = accept.size();
    std::string range(accept.substr(pos, end - pos));
    pos = end + 1;
    double q = 1;
    std::string type = range.substr(0, range.find(';'));
    for (size_t semi = range.find(';'); semi != std::string::npos; semi = range.find(';', semi + 1)) {
      std::string param = range.substr(semi + 1, range.find(';', semi + 1) - semi - 1);
      param.erase(0, param.find_first_not_of(" \t"));
      if (param.rfind("q=", 0) == 0) q = std::atof(param.c_str() + 2);
    }
    type.erase(0, type.find_first_not_of(" \t"));
    type.erase(type.find_last_not_of(" \t") + 1);
    for (auto& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (type == "application/json") json_q = std::max(json_q, q);
    if (type == "text/event-stream") sse_q = std::max(sse_q, q);
  }
  return json_q > 0 && json_q > sse_q;
}

// Why a start was refused, in the API's words: a thread waiting for client tool answers or for decisions is 409
// pending_tool_calls / pending_interrupts; anything else is the runtime's error as it is.
[[noreturn]] void throw_refused_start(ServerContext& s, ApiCall& c, const Error& e) {
  auto active = e.code() == ErrorCode::conflict ? s.rt->active_turn(c.internal_thread) : std::nullopt;
  if (active && active->status == TurnStatus::waiting_client) {
    std::string ids;
    size_t n = 0;
    for (const auto& l : s.rt->tool_calls(active->id))
      if (l.awaits_client()) ids += (n++ ? ", " : "") + l.tool_call_id;
    throw ApiError{409, "pending_tool_calls",
                   fmt::format("thread {} has {} client tool call(s) waiting for their answer (a role \"tool\" "
                               "message each): {}",
                               c.client_thread, n, ids)};
  }
  if (!active || active->status != TurnStatus::waiting_approval) throw e;
  std::string ids;
  for (const auto& i : active->interrupts) ids += (ids.empty() ? "" : ", ") + i.value("id", std::string());
  throw ApiError{409, "pending_interrupts",
                 fmt::format("thread {} has {} pending interrupt(s) not addressed by resume: {}", c.client_thread,
                             active->interrupts.size(), ids)};
}

TurnInput run_input(ServerContext& s, ApiCall& c, const json& in) {
  // Media parts are the runtime's business: it accepts only this server's own signed upload URLs (and
  // upload ids, inline data) for the same user and thread, stores them as bucket/path, and never fetches.
  TurnInput input = turn_input_from_agui(in, c.user, input_limits(s.rt->config()));
  input.traceparent = c.req.header("traceparent");  // the caller's trace: the run's span joins it
  return input;
}

TurnHandle start_run(ServerContext& s, ApiCall& c, const json& in) {
  const TurnInput input = run_input(s, c, in);
  s.rate_limit(c);
  try {
    TurnHandle h = s.rt->start_turn(input);  // a repeated message id answers with its turn (existing), even paused
    if (!h.existing) s.recent_turns.note(h.turn_id);
    return h;
  } catch (const Error& e) {
    throw_refused_start(s, c, e);
  }
}

// What a streamed start needs once its start is durable.
struct StreamedStart {
  std::string run_id;
  std::string message_id;
  bool cancel_on_disconnect = false;
  bool pre_1_0 = false;
};

// The stream of a run whose start has been stored (`h`), or the start's refusal (`error`), on the thread that
// committed the start (the runtime's callback).
void answer_streamed_start(ServerContext& s, ApiCall& c, StreamSlot& slot, const StreamedStart& st, const TurnHandle& h,
                           const std::exception_ptr& error) {
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const Error& e) {
      throw_refused_start(s, c, e);
    }
  }
  if (h.existing && h.run_id != st.run_id)
    throw ApiError{409, "already_answered",
                   fmt::format("message {} was already answered by run {}; send a new user message (or ask "
                               "with 'Accept: application/json' for the messages of that turn)",
                               st.message_id, h.run_id)};
  // A repeat replays its run from the start (only that run's events: one_run filters by run id).
  open_sse_stream(s, c, slot, SseStream::Mode::one_run, st.run_id,
                  h.existing ? 0 : std::max<int64_t>(0, h.first_seq - 1),
                  SseOptions{st.cancel_on_disconnect ? h.turn_id : "", {}, st.pre_1_0, !h.existing});
}

// A new run answered with its stream: the start rides on the run's first commit (Runtime::start_turn_async), so a
// short turn is one commit. No thread waits for it: the runtime's callback gives the answer, on the thread that
// committed the start, as a start that waited would have (the stream once the start is stored; the refusal as
// JSON). The stream's first frames come from the hub's tail there, without a hand-off to a work thread.
void start_streamed_run(ServerContext& s, ApiCall& c, const json& in, StreamedStart st) {
  auto slot = std::make_shared<StreamSlot>(s.stream_slots.take(c.user));  // a free stream slot before anything
  const TurnInput input = run_input(s, c, in);
  st.message_id = input.client_message_id;
  s.rate_limit(c);
  auto call = c.shared_from_this();
  auto started = [&s, call, slot, st = std::move(st)](const TurnHandle& h, std::exception_ptr error) {
    try {
      answer_streamed_start(s, *call, *slot, st, h, error);
    } catch (...) {
      s.answer_failure(*call, std::current_exception());
    }
  };
  try {
    const TurnHandle h = s.rt->start_turn_async(input, std::move(started));
    if (!h.existing) s.recent_turns.note(h.turn_id);  // a shutdown lets it reach its next commit
  } catch (const Error& e) {
    throw_refused_start(s, c, e);
  }
}

// Whether this request's stream stops its run when the client leaves: forwardedProps.cancelOnDisconnect, else the
// server's cancel_on_disconnect.
bool cancels_on_disconnect(const ServerContext& s, const json& in) {
  const json props = in.value("forwardedProps", json());
  if (!props.is_object()) return s.cfg.cancel_on_disconnect;
  auto it = props.find("cancelOnDisconnect");
  if (it == props.end() || it->is_null()) return s.cfg.cancel_on_disconnect;
  if (!it->is_boolean())
    throw ApiError{422, "invalid_argument", "RunAgentInput: forwardedProps.cancelOnDisconnect must be a boolean"};
  return it->get<bool>();
}

bool has_tool_message(const json& in) {
  auto msgs = in.find("messages");
  if (msgs == in.end() || !msgs->is_array()) return false;
  return std::any_of(msgs->begin(), msgs->end(), [](const json& m) {
    auto role = m.is_object() ? m.find("role") : m.end();
    return role != m.end() && role->is_string() && *role == "tool";
  });
}

// The request's answers to the client tool calls `waiting` waits for: its role "tool" messages for those calls (the
// first for each). Every other tool message is the client's history (or forged): ignored, not even decoded.
std::vector<ToolAnswer> pending_answers(ServerContext& s, const TurnRecord& waiting, const json& in) {
  std::set<std::string> pending;
  for (const auto& l : s.rt->tool_calls(waiting.id))
    if (l.awaits_client()) pending.insert(l.tool_call_id);
  json answering = {{"messages", json::array()}};
  for (const auto& m : in["messages"]) {
    if (!m.is_object() || m.value("role", json()) != "tool") continue;
    auto id = m.find("toolCallId");
    if (id == m.end() || !id->is_string() || !pending.erase(id->get<std::string>())) continue;
    answering["messages"].push_back(m);
  }
  return tool_answers_from_agui(answering, input_limits(s.rt->config()));
}

// Ownership was checked by the caller (post_run). Returns the sequence number to stream after; `turn_out`: the
// resumed turn.
int64_t resume_run(ServerContext& s, ApiCall& c, const std::string& run_id, const json& resume,
                   std::vector<ToolAnswer> answers, const json& in, std::string& turn_out) {
  const InputLimits limits = input_limits(s.rt->config());
  ResumeInput r;
  if (resume.is_array()) r.decisions = decisions_from_agui_resume(resume, limits);
  r.answers = std::move(answers);
  r.context = context_from_agui(in.value("context", json()), limits);
  r.client_tools = client_tools_from_agui(in.value("tools", json()), limits);
  if (auto st = in.find("state"); st != in.end() && !st->is_null()) {
    check_state(*st, limits);
    r.state = *st;
  }
  r.run_id = run_id;
  r.traceparent = c.req.header("traceparent");
  std::string turn_id;
  std::string approval_id;
  bool replay = false;
  auto active = s.rt->active_turn(c.internal_thread);
  if (active && is_waiting(active->status)) {
    turn_id = active->id;
    approval_id = active->approval_request_id;
  } else {
    // The same request again (a retry after the first was accepted): answer with the first run.
    auto last = s.rt->last_turn(c.internal_thread);
    if (last && !last->approval_request_id.empty())
      if (auto prior = s.rt->approval(last->approval_request_id); prior && prior->answer.value("runId", "") == run_id) {
        turn_id = last->id;
        approval_id = last->approval_request_id;
        replay = true;
      }
    if (!replay)
      throw ApiError{409, "no_pending_interrupts",
                     fmt::format("thread {} has no interrupt waiting for an answer", c.client_thread)};
  }
  if (!replay) s.rate_limit(c);
  const int64_t before = replay ? 0 : s.rt->thread(c.internal_thread)->last_seq;
  r.turn_id = turn_id;
  r.approval_request_id = approval_id;
  json answer = s.rt->resume(r);
  s.recent_turns.note(turn_id);
  turn_out = turn_id;
  if (answer.value("runId", "") != run_id)
    throw ApiError{409, "already_resumed",
                   fmt::format("the interrupts were already answered by run {}", answer.value("runId", ""))};
  return before;
}

}  // namespace

json run_agent_input_body(ServerContext& s, ApiCall& c, bool check_thread) {
  json in = parse_json_body(c.req, s.cfg.limits.max_body_bytes);
  for (const char* k : {"threadId", "runId"})
    if (!in.contains(k) || !in[k].is_string())
      throw ApiError{422, "invalid_argument", fmt::format("RunAgentInput: '{}' must be a string", k)};
  if (check_thread)
    s.usable_thread(c, in["threadId"].get<std::string>());
  else
    s.name_thread(c, in["threadId"].get<std::string>());
  in["threadId"] = c.internal_thread;  // the runtime's name of it
  return in;
}

// POST /agent/runs: AG-UI RunAgentInput in, this run's events out. With `Accept: application/json` (preferred
// to text/event-stream) a start is answered in JSON instead of a stream: a repeated message id with the turn
// it already started and the messages that turn added (200, existing:true), a new one with the started
// turn's ids (202, existing:false) to follow on /events.
void post_run(ServerContext& s, ApiCall& c) {
  // The thread is not read here: a start has the runtime check it (a deleted thread's start is refused 404
  // not_found, "thread <id> not found", its id the client's once the answer is written); a resume or tool answers
  // check it first (below).
  json in = run_agent_input_body(s, c, false);
  const std::string run_id = in["runId"].get<std::string>();
  const json resume = in.value("resume", json());
  if (!resume.is_null() && !resume.is_array())
    throw ApiError{422, "invalid_argument", "RunAgentInput: 'resume' must be an array"};
  const bool cancel_on_disconnect = cancels_on_disconnect(s, in);
  // Answers to the client tool calls the thread's turn waits for (its other tool messages are history).
  std::vector<ToolAnswer> answers;
  const bool answering = has_tool_message(in);
  if ((resume.is_array() && !resume.empty()) || answering) s.check_usable(c);
  if (answering)
    if (auto waiting = s.rt->active_turn(c.internal_thread); waiting && is_waiting(waiting->status))
      answers = pending_answers(s, *waiting, in);
  if ((resume.is_array() && !resume.empty()) || !answers.empty()) {
    auto slot = s.stream_slots.take(c.user);
    std::string turn_id;
    const int64_t after = resume_run(s, c, run_id, resume, std::move(answers), in, turn_id);
    open_sse_stream(s, c, slot, SseStream::Mode::one_run, run_id, after,
                    SseOptions{cancel_on_disconnect ? turn_id : "", {}, speaks_pre_1_0(in)});
    return;
  }
  if (prefers_json(c.req.header("Accept"))) {
    const TurnHandle h = start_run(s, c, in);
    std::string status;
    if (h.existing)
      if (auto t = s.rt->turn(h.turn_id)) status = to_string(t->status);
    json out = turn_handle_to_json(h, status);
    out["threadId"] = c.client_thread;
    c.send_json(h.existing ? 200 : 202, out);
    return;
  }
  start_streamed_run(s, c, in, StreamedStart{run_id, {}, cancel_on_disconnect, speaks_pre_1_0(in)});
}

// POST /agent/runs/{threadId}/resume {approvalRequestId, decisions, runId?} -> 202 {status:"accepted", ...}
void post_resume(ServerContext& s, ApiCall& c) {
  s.own_thread(c, c.match.id);
  json body = parse_json_body(c.req, s.cfg.limits.max_body_bytes);
  if (!body.contains("approvalRequestId") || !body["approvalRequestId"].is_string())
    throw ApiError{422, "invalid_argument", "'approvalRequestId' must be a string"};
  if (!body.contains("decisions") || !body["decisions"].is_array())
    throw ApiError{422, "invalid_argument", "'decisions' must be an array"};
  const std::string approval_id = body["approvalRequestId"].get<std::string>();
  std::vector<Decision> decisions;
  for (const auto& d : body["decisions"]) decisions.push_back(d.get<Decision>());
  const std::string run_id = body.value("runId", "");
  std::string turn_id;
  if (auto prior = s.rt->approval(approval_id)) {
    if (prior->thread_id != c.internal_thread)
      throw ApiError{404, "not_found", fmt::format("approval request {} not found", approval_id)};
    turn_id = prior->turn_id;
  } else {
    auto active = s.rt->active_turn(c.internal_thread);
    if (!active || active->approval_request_id != approval_id)
      throw ApiError{404, "not_found",
                     fmt::format("approval request {} is not open on thread {}", approval_id, c.client_thread)};
    s.rate_limit(c);
    turn_id = active->id;
  }
  ResumeInput r;
  r.turn_id = turn_id;
  r.approval_request_id = approval_id;
  r.decisions = std::move(decisions);
  r.run_id = run_id;
  r.traceparent = c.req.header("traceparent");
  json answer = s.rt->resume(r);
  s.recent_turns.note(turn_id);
  c.send_json(202, answer);
}

// POST /agent/runs/{threadId}/cancel -> 202 {status:"accepted", turnId, runId}
void post_cancel(ServerContext& s, ApiCall& c) {
  s.own_thread(c, c.match.id);
  if (!c.req.body.empty())
    parse_json_body(c.req, s.cfg.limits.max_body_bytes);  // optional body, but not a malformed one
  auto active = s.rt->active_turn(c.internal_thread);
  if (!active)
    throw ApiError{409, "no_active_turn", fmt::format("thread {} has no running or waiting turn", c.client_thread)};
  s.rt->cancel(active->id);
  c.send_json(
      202,
      json{{"status", "accepted"}, {"threadId", c.client_thread}, {"turnId", active->id}, {"runId", active->run_id}});
}

}  // namespace agentrt::server
