#include "tracing/run_spans.hpp"

#include <cxxabi.h>

#include <charconv>
#include <cstdlib>
#include <memory>
#include <typeinfo>

#include "agentrt/error.hpp"
#include "agentrt/turn_state.hpp"

namespace agentrt {
inline namespace v1 {
namespace trace {
namespace {

constexpr int64_t kNsPerMs = 1'000'000;

// An exception's class name, readable ("std::runtime_error").
std::string class_name(const std::exception& e) {
  const char* mangled = typeid(e).name();
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  return status == 0 && demangled ? std::string(demangled.get()) : std::string(mangled);
}

// A tool call's arguments as the conventions' messages carry them: the JSON value, or the text when it is not JSON.
json arguments_value(const std::string& text) {
  json v = json::parse(text, nullptr, false);
  return v.is_discarded() ? json(text) : v;
}

// The GenAI conventions' message form: {role, parts: [{type: "text", content} | {type: "tool_call", id, name,
// arguments} | {type: "tool_call_response", id, response}]}.
json message_json(const Message& m) {
  json parts = json::array();
  if (m.role == Role::tool) {
    parts.push_back(json{{"type", "tool_call_response"}, {"id", m.tool_call_id}, {"response", m.text()}});
  } else {
    const std::string text = m.text();
    if (!text.empty()) parts.push_back(json{{"type", "text"}, {"content", text}});
    for (const auto& c : m.tool_calls)
      parts.push_back(
          json{{"type", "tool_call"}, {"id", c.id}, {"name", c.name}, {"arguments", arguments_value(c.arguments)}});
  }
  return json{{"role", std::string(to_string(m.role))}, {"parts", std::move(parts)}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void set_usage(Span& span, int64_t input, int64_t output) {
  if (input > 0) span.set_int("gen_ai.usage.input_tokens", input);
  if (output > 0) span.set_int("gen_ai.usage.output_tokens", output);
}

// What a run's outcome is called on its span.
std::string_view outcome_of(TurnStatus s) {
  switch (s) {
    case TurnStatus::completed: return "success";
    case TurnStatus::waiting_approval: return "interrupt";
    case TurnStatus::waiting_client: return "pending_client_tools";
    case TurnStatus::cancelled: return "cancelled";
    case TurnStatus::expired: return "expired";
    case TurnStatus::failed: return "error";
    default: return "incomplete";
  }
}

void describe_job(Span& s, const JobRecord& job) {
  s.add_string("agentrt.job.id", job.id);
  s.add_string("gen_ai.tool.name", job.tool_name);
  s.add_string("gen_ai.tool.call.id", job.tool_call_id);
  s.add_string("gen_ai.conversation.id", job.thread_id);
  s.add_string("agentrt.turn.id", job.turn_id);
}

void finish_job(Span& s, const JobRecord& job) {
  s.set_string("agentrt.job.status", to_string(job.status));
  if (job.status == JobStatus::failed)
    s.set_error(job.error_code.empty() ? "failed" : job.error_code, job.error_message);
  s.end();  // now: finished_at has only milliseconds, and the job's span must not end before its tool call's
}

std::string wait_key(const TurnRecord& t) { return "wait:" + t.id + ":" + t.approval_request_id; }
std::string job_key(const JobRecord& j) { return "job:" + j.id; }

}  // namespace

std::string provider_name(std::string_view model_name) {
  if (model_name.substr(0, 6) == "openai") return "openai";
  if (model_name.find("anthropic") != std::string_view::npos) return "anthropic";
  return std::string(model_name);
}

Span start_run(Tracer& tracer, const TurnRecord& turn, std::string_view traceparent, std::string_view follows,
               const ModelProvider& model) {
  if (!tracer.enabled()) return Span{};
  const auto host = parse_traceparent(traceparent);
  const auto before = parse_traceparent(follows);
  const auto& agent = tracer.config().agent_name;
  Span s = tracer.start("invoke_agent", agent, SpanKind::internal, host ? host : before);
  if (!s) return s;
  if (host && before) s.add_link(*before);
  s.add_string("gen_ai.operation.name", "invoke_agent");
  s.add_string("gen_ai.agent.name", agent);
  s.add_string("gen_ai.provider.name", provider_name(model.name()));
  s.add_string("gen_ai.conversation.id", turn.thread_id);
  s.add_string("agentrt.turn.id", turn.id);
  s.add_string("agentrt.run.id", turn.run_id);
  if (!turn.parent_run_id.empty()) s.add_string("agentrt.parent_run.id", turn.parent_run_id);
  return s;
}

void run_failed(Span& run, std::string_view code, std::string_view message) { run.set_error(code, message); }

void end_run(Span& run, const TurnRecord& turn, const std::vector<TokenUsage>& usage) {
  if (!run) return;
  run.set_string("agentrt.outcome", outcome_of(turn.status));
  run.set_int("agentrt.steps", turn.steps);
  int64_t in = 0, out = 0;
  for (const auto& u : usage) {
    in += u.input_tokens;
    out += u.output_tokens;
  }
  set_usage(run, in, out);
  if (turn.status == TurnStatus::failed && !run.has_error()) run.set_error("_OTHER", turn.error);
  run.end();
}

ModelCallSpan::ModelCallSpan(Tracer& tracer, const Span& run, ModelRequest& request, const ModelProvider& model)
    : tracer_(tracer) {
  if (!tracer.enabled()) return;
  span_ = tracer.start("chat", request.model, SpanKind::client, run.context());
  request.traceparent = span_.traceparent();
  if (!span_) return;
  span_.add_string("gen_ai.operation.name", "chat");
  span_.add_string("gen_ai.provider.name", provider_name(model.name()));
  if (!request.model.empty()) span_.add_string("gen_ai.request.model", request.model);
  span_.add_string("gen_ai.conversation.id", request.thread_id);
  span_.add_string("agentrt.stage", request.stage);
  if (tracer.capture_content()) {
    json in = json::array();
    for (const auto& m : request.messages) in.push_back(message_json(m));
    span_.add_string("gen_ai.input.messages", dump(in));
  }
}

void ModelCallSpan::finish(const ModelResult& result) {
  if (!span_) return;
  if (result.usage) {
    if (!result.usage->model.empty()) span_.set_string("gen_ai.response.model", result.usage->model);
    set_usage(span_, result.usage->input_tokens, result.usage->output_tokens);
  }
  if (!result.finish_reason.empty())
    span_.set("gen_ai.response.finish_reasons", std::vector<std::string>{result.finish_reason});
  if (tracer_.capture_content()) {
    Message m;
    m.role = Role::assistant;
    m.content = result.text;
    for (const auto& c : result.tool_calls) m.tool_calls.push_back(ToolCall{c.id, c.name, c.arguments});
    json out = message_json(m);
    out["finish_reason"] = result.finish_reason;
    span_.set_string("gen_ai.output.messages", dump(json::array({std::move(out)})));
  }
  span_.end();
}

void ModelCallSpan::fail(std::exception_ptr error) {
  if (!span_) return;
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    span_.set_error(to_string(e.code()), e.message());
  } catch (const std::exception& e) {
    span_.set_error(class_name(e), e.what());
  } catch (...) {
    span_.set_error("_OTHER", "a non-standard exception");
  }
  span_.end();
}

Span start_tool(Tracer& tracer, const Span& run, const LedgerEntry& call, const ToolSpec& spec, const json& args) {
  if (!tracer.enabled()) return Span{};
  Span s = tracer.start("execute_tool", call.tool_name, SpanKind::internal, run.context());
  if (!s) return s;
  s.add_string("gen_ai.operation.name", "execute_tool");
  s.add_string("gen_ai.tool.name", call.tool_name);
  s.add_string("gen_ai.tool.call.id", call.tool_call_id);
  // Run by the agent's side (the runtime), calling out to whatever the tool does.
  s.add_string("gen_ai.tool.type", "extension");
  if (!spec.description.empty()) s.add_string("gen_ai.tool.description", spec.description);
  s.add_string("gen_ai.conversation.id", call.thread_id);
  s.add_string("agentrt.stage", call.stage);
  if (tracer.capture_content()) s.add_string("gen_ai.tool.call.arguments", dump(args));
  return s;
}

void end_tool(Tracer& tracer, Span& tool, const ToolAgentOutput& out) {
  if (!tool) return;
  tool.set_string("agentrt.tool.status", to_string(out.status));
  if (out.error) tool.set_error(out.error->code, out.error->message);
  if (tracer.capture_content() && !out.result.is_null()) tool.set_string("gen_ai.tool.call.result", dump(out.result));
  tool.end();
}

std::string format_stored_span(const SpanContext& context, const std::array<uint8_t, 8>& parent_span_id,
                               int64_t start_ns) {
  std::string out = format_traceparent(context);
  if (out.empty()) return out;
  out += ' ';
  out += hex_id(parent_span_id);
  out += ' ';
  out += std::to_string(start_ns);
  return out;
}

std::optional<StoredSpan> parse_stored_span(std::string_view text) {
  // 55 (traceparent) + 1 + 16 + 1 + at least one digit.
  if (text.size() < 74 || text.size() > 74 + 19 || text[55] != ' ' || text[72] != ' ') return std::nullopt;
  StoredSpan s;
  const auto context = parse_traceparent(text.substr(0, 55));
  if (!context || !parse_hex_id(text.substr(56, 16), s.parent_span_id)) return std::nullopt;
  s.context = *context;
  const std::string_view start = text.substr(73);
  const auto [end, ec] = std::from_chars(start.data(), start.data() + start.size(), s.start_ns);
  if (ec != std::errc() || end != start.data() + start.size() || s.start_ns <= 0) return std::nullopt;
  return s;
}

std::string begin_approval_wait(Tracer& tracer, const Span& run, const TurnRecord& paused) {
  if (!tracer.enabled()) return {};
  const int64_t start = now_ns();
  Span s = tracer.start("agentrt.approval_wait", {}, SpanKind::internal, run.context(), start);
  std::string stored = format_stored_span(s.context(), run.context().span_id, start);
  s.add_string("gen_ai.conversation.id", paused.thread_id);
  s.add_string("agentrt.turn.id", paused.id);
  s.add_string("agentrt.run.id", paused.run_id);
  s.add_string("agentrt.approval_request.id", paused.approval_request_id);
  s.set_int("agentrt.interrupts", paused.interrupts.is_array() ? static_cast<int64_t>(paused.interrupts.size()) : 0);
  tracer.hold(wait_key(paused), std::move(s));
  return stored;
}

// The wait held for `paused`; else (paused by another process, or before a restart) the one the turn stored, or
// one begun at the pause's commit.
Span take_wait(Tracer& tracer, const TurnRecord& paused, std::string_view parent, bool& held) {
  Span s = tracer.take(wait_key(paused));
  held = s.context().valid();
  if (held) return s;
  if (const auto stored = parse_stored_span(paused.trace))
    s = tracer.reopen("agentrt.approval_wait", SpanKind::internal, stored->context, stored->parent_span_id,
                      stored->start_ns);
  else
    s = tracer.start("agentrt.approval_wait", {}, SpanKind::internal, parse_traceparent(parent),
                     paused.updated_at > 0 ? paused.updated_at * kNsPerMs : 0);
  s.add_string("gen_ai.conversation.id", paused.thread_id);
  s.add_string("agentrt.turn.id", paused.id);
  s.add_string("agentrt.run.id", paused.run_id);
  s.add_string("agentrt.approval_request.id", paused.approval_request_id);
  return s;
}

std::string end_approval_wait(Tracer& tracer, const TurnRecord& paused, std::string_view outcome,
                              std::string_view parent) {
  if (!tracer.enabled()) return {};
  bool held = false;
  Span s = take_wait(tracer, paused, parent, held);
  s.set_string("agentrt.approval.outcome", outcome);
  std::string tp = s.traceparent();
  s.end();
  return tp;
}

DecidedWait::DecidedWait(Tracer& tracer, const TurnRecord& paused, std::string_view parent) : tracer_(tracer) {
  if (!tracer.enabled()) return;
  key_ = wait_key(paused);
  span_ = take_wait(tracer, paused, parent, held_);
  decided_ns_ = now_ns();
}

DecidedWait::~DecidedWait() {
  if (!span_.context().valid()) return;
  // Not decided after all: a held wait goes back for whoever ends it; one begun here is dropped (the resume that
  // wins begins its own).
  if (held_)
    tracer_.hold(key_, std::move(span_));
  else
    span_.discard();
}

void DecidedWait::committed() {
  if (!span_.context().valid()) return;
  span_.set_string("agentrt.approval.outcome", "decided");
  span_.end(decided_ns_);
  span_ = Span{};
}

void begin_job(Tracer& tracer, const Span& tool, const JobRecord& job) {
  if (!tracer.enabled()) return;
  Span s = tracer.start("agentrt.job", job.tool_name, SpanKind::internal, tool.context());
  describe_job(s, job);
  if (is_terminal(job.status)) return finish_job(s, job);  // the host ended it while the tool was answering
  tracer.hold(job_key(job), std::move(s));
}

void end_job(Tracer& tracer, const JobRecord& job) {
  if (!tracer.enabled()) return;
  Span s = tracer.take(job_key(job));
  if (!s.context().valid()) {
    // Started by another process (or before a restart): from the job's creation, a trace of its own.
    s = tracer.start("agentrt.job", job.tool_name, SpanKind::internal, std::nullopt,
                     job.created_at > 0 ? job.created_at * kNsPerMs : 0);
    describe_job(s, job);
  }
  finish_job(s, job);
}

}  // namespace trace
}  // namespace v1
}  // namespace agentrt
