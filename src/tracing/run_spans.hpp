// The runtime's spans, per the OpenTelemetry GenAI semantic conventions: a run ("invoke_agent <agent>"), its model
// calls ("chat <model>"), its tool calls ("execute_tool <tool>"), an approval wait ("agentrt.approval_wait", from
// the pause to the decision, expiry or cancel) and a job ("agentrt.job <tool>", from its start to its end). The
// runtime calls these at a few points; each does nothing but a branch when tracing is off or the span does not
// record. Message content is recorded only with TracingConfig::capture_content. Stateless functions: as
// thread-safe as the spans they are given (the Tracer is thread-safe).
#pragma once

#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentrt/jobs.hpp"
#include "agentrt/model.hpp"
#include "agentrt/outputs.hpp"
#include "agentrt/storage.hpp"
#include "agentrt/tools.hpp"
#include "tracing/tracer.hpp"

namespace agentrt {
inline namespace v1 {
namespace trace {

// gen_ai.provider.name of a ModelProvider::name() ("openai-compatible" -> "openai").
std::string provider_name(std::string_view model_name);

// The span of a run of `turn`: a child of the host's traceparent when it is valid, else of `follows` (the approval
// wait a resumed run continues), else a new trace's root. A run with both links to `follows`.
Span start_run(Tracer& tracer, const TurnRecord& turn, std::string_view traceparent, std::string_view follows,
               const ModelProvider& model);
// Why a run failed: error.type (the code the run reports) and status ERROR.
void run_failed(Span& run, std::string_view code, std::string_view message);
// Ends the run's span with its outcome (the turn's status after the run) and the run's token usage.
void end_run(Span& run, const TurnRecord& turn, const std::vector<TokenUsage>& usage);

// A model call of a run: "chat <model>", a child of the run's span; fills request.traceparent with its context.
// Ended by finish() with the answer, or by fail() with what the call threw. Not thread-safe: the run's thread.
class ModelCallSpan {
 public:
  ModelCallSpan(Tracer& tracer, const Span& run, ModelRequest& request, const ModelProvider& model);
  void finish(const ModelResult& result);
  void fail(std::exception_ptr error);
  // Runs `call` (which returns something with a ModelResult `result`), ending the span with its outcome.
  template <class F>
  auto run(F&& call) {
    try {
      auto answer = call();
      finish(answer.result);
      return answer;
    } catch (...) {
      fail(std::current_exception());
      throw;
    }
  }

 private:
  Tracer& tracer_;
  Span span_;
};

// A tool call's span: "execute_tool <tool>", a child of the run's span.
Span start_tool(Tracer& tracer, const Span& run, const LedgerEntry& call, const ToolSpec& spec, const json& args);
void end_tool(Tracer& tracer, Span& tool, const ToolAgentOutput& out);

// The approval wait of a paused turn: starts now (a child of the run's span) and is kept by the tracer until
// end_approval_wait, in this process. Returns what the paused turn stores (TurnRecord::trace: the wait's ids, its
// parent's and its start; "" when tracing is off), so that a process that did not pause it ends the same span, in
// the same trace. A wait stored without it (paused with tracing off, or by a store that drops the field) starts at
// the paused turn's last change, a child of `parent` (the resume's traceparent) or a new root. end_approval_wait
// returns the wait's traceparent ("" when tracing is off): what the continuation run follows.
std::string begin_approval_wait(Tracer& tracer, const Span& run, const TurnRecord& paused);
std::string end_approval_wait(Tracer& tracer, const TurnRecord& paused, std::string_view outcome,
                              std::string_view parent = {});

// The approval wait a resume decides: taken from the tracer (or begun at the pause, for a wait another process
// paused) when the resume starts, ended "decided" at that moment once the decision has committed — and handed
// back, unexported, when it did not (another resume won, the store failed), for the resume or expiry that does
// end it. Not thread-safe: the resume's thread.
class DecidedWait {
 public:
  DecidedWait(Tracer& tracer, const TurnRecord& paused, std::string_view parent);
  ~DecidedWait();  // not committed: handed back
  DecidedWait(const DecidedWait&) = delete;
  DecidedWait& operator=(const DecidedWait&) = delete;
  // What the resumed run follows ("" when tracing is off).
  std::string traceparent() const { return span_.traceparent(); }
  void committed();

 private:
  Tracer& tracer_;
  std::string key_;
  Span span_;
  int64_t decided_ns_ = 0;
  bool held_ = false;  // taken from the tracer (else begun here)
};

// A wait's span as a waiting turn stores it: "<traceparent> <parent span id> <start, ns since the Unix epoch>"
// ("" for an invalid context), and read back (nullopt for anything else).
struct StoredSpan {
  SpanContext context;
  std::array<uint8_t, 8> parent_span_id{};
  int64_t start_ns = 0;
};
std::string format_stored_span(const SpanContext& context, const std::array<uint8_t, 8>& parent_span_id,
                               int64_t start_ns);
std::optional<StoredSpan> parse_stored_span(std::string_view text);

// A started job: a child of its tool call's span, kept until end_job (a job that ends at once is ended here).
void begin_job(Tracer& tracer, const Span& tool, const JobRecord& job);
void end_job(Tracer& tracer, const JobRecord& job);

}  // namespace trace
}  // namespace v1
}  // namespace agentrt
