// Model calls: the request a stage sends, the stream's events as they arrive, and the answer's end (its message,
// its tool calls' ids and ledger facts).
#include <fmt/format.h>

#include <map>

#include "agentrt/records.hpp"
#include "runtime/context_builder.hpp"
#include "runtime/event_wire.hpp"
#include "runtime/turn_runner.hpp"

namespace agentrt {
inline namespace v1 {

using namespace turn;

void TurnRunner::build_request(Stage stage, const StagePolicy& policy, ModelRequest& req) {
  ContextInput in;
  in.system_prompt = policy.system_prompt;
  if (stage != Stage::intent && !ctx_.turn.intent.empty())
    in.system_notes.push_back("The user's intent: " + ctx_.turn.intent);
  if (stage == Stage::organization && !draft_.empty()) in.system_notes.push_back("Draft answer:\n" + draft_);
  if (ctx_.handle && !ctx_.handle->context.empty()) in.system_notes.push_back(context_section(ctx_.handle->context));
  in.turn_id = ctx_.turn.id;
  in.budget_chars = rt_.cfg.context_budget_chars;
  build_context(in, ctx_.history, ctx_.full_results, req.messages);
  rt_.attachments.media_for_model(req.messages, ctx_.media_cache);
  req.stage = to_string(stage);
  req.model = policy.model;
  req.params = policy.params;
  req.thread_id = ctx_.turn.thread_id;
  req.turn_id = ctx_.turn.id;
  req.run_id = ctx_.turn.run_id;
  req.traceparent.clear();  // the model call's span sets it when tracing
}

std::string TurnRunner::unique_call_id(std::string_view proposed) {
  std::string id(proposed);
  if (id.empty()) id = new_id("call");
  if (id.size() > 128) id = id.substr(0, 128);
  while (ctx_.used_tool_call_ids.count(id))
    id = fmt::format("{}_{}", proposed.substr(0, 100), new_id("r").substr(2 + 8, 8));
  ctx_.used_tool_call_ids.insert(id);
  return id;
}

class TurnRunner::Sink final : public ModelStreamSink {
 public:
  Sink(TurnRunner& r, Visibility vis, std::string msg_id) : r_(r), vis_(vis), msg_id_(std::move(msg_id)) {}
  void on_text(std::string_view d) override {
    if (d.empty()) return;
    if (vis_ == Visibility::hidden) return;
    if (vis_ == Visibility::reasoning) return on_reasoning(d);
    auto& ctx = r_.ctx_;
    if (ctx.open_text.empty()) {
      ctx.em->text_start(msg_id_);
      ctx.open_text = msg_id_;
    }
    ctx.em->text_content(msg_id_, d);
    streamed_text_.append(d);
  }
  void on_reasoning(std::string_view d) override {
    if (d.empty()) return;
    auto& ctx = r_.ctx_;
    if (ctx.open_reasoning.empty()) {
      ctx.open_reasoning = new_id("rsn");
      ctx.em->emit(events::reasoning_start(ctx.open_reasoning));
      ctx.em->emit(events::reasoning_message_start(ctx.open_reasoning));
    }
    ctx.em->emit(events::reasoning_content(ctx.open_reasoning, std::string(d)));
  }
  void on_tool_call_start(int index, std::string_view id, std::string_view name) override {
    auto& ctx = r_.ctx_;
    std::string eff = r_.unique_call_id(id);
    by_index_[index] = eff;
    announced_.push_back({std::string(id), eff, std::string(name), {}, false});
    ctx.em->tool_call_start(eff, name, msg_id_);
    ctx.open_tool_calls.insert(eff);
  }
  void on_tool_call_args(int index, std::string_view d) override {
    auto it = by_index_.find(index);
    if (it == by_index_.end() || d.empty()) return;
    r_.ctx_.em->tool_call_args(it->second, d);
    for (auto& a : announced_)
      if (a.effective == it->second) a.arguments.append(d);
  }
  void on_fallback(const ModelFallback& f) override {
    r_.ctx_.em->emit(events::custom("agentrt.model_fallback",
                                    json{{"stage", r_.ctx_.turn.stage},
                                         {"from", {{"provider", f.from_provider}, {"model", f.from_model}}},
                                         {"to", {{"provider", f.to_provider}, {"model", f.to_model}}},
                                         {"error", {{"code", f.error_code}, {"message", f.error}}}}));
  }
  struct Announced {
    std::string original, effective, name, arguments;  // name and arguments as streamed
    bool taken;
  };
  // The announced call a result's tool call is (the first with its id not taken yet), or null.
  const Announced* take(const std::string& original) {
    for (auto& a : announced_)
      if (!a.taken && a.original == original) {
        a.taken = true;
        return &a;
      }
    return nullptr;
  }
  const std::string& message_id() const { return msg_id_; }
  const std::string& streamed_text() const { return streamed_text_; }

 private:
  TurnRunner& r_;
  Visibility vis_;
  std::string msg_id_;
  std::map<int, std::string> by_index_;
  std::vector<Announced> announced_;
  std::string streamed_text_;  // the text streamed as TEXT_MESSAGE_CONTENT
};

json TurnRunner::worker_output(const std::string& answer) {
  WorkerAgentOutput w;
  w.answer = answer;
  w.intent = ctx_.turn.intent;
  w.turn_id = ctx_.turn.id;
  w.run_id = ctx_.turn.run_id;
  for (const auto& l : ctx_.ledger) {
    auto it = ctx_.outcomes.find(l.tool_call_id);
    if (it == ctx_.outcomes.end()) continue;
    WorkerAgentOutput::ToolRef ref;
    ref.tool_call_id = l.tool_call_id;
    ref.tool_name = l.tool_name;
    ref.status = it->second.status;
    ref.result_summary = it->second.summary;
    w.tools.push_back(std::move(ref));
  }
  w.usage = usage_json(turn_usage_);
  return json(w);
}

TurnRunner::Answer TurnRunner::call_model(Stage stage, const ModelRequest& req, Visibility vis, bool final_candidate) {
  Sink sink(*this, vis, new_id("msg"));
  ModelResult result;
  try {
    result = rt_.cfg.model->complete(req, sink, ctx_.handle->cancel);
  } catch (const Error& e) {
    // A provider whose transfer failed says io (the server cannot be reached, the connection broke): that is the
    // model failing, and io at the run's end reads as the store failing. The store's own failures while the model
    // streamed are the emitter's to report.
    if (e.code() == ErrorCode::io && !ctx_.em->failure()) throw Error(ErrorCode::model, e.message());
    throw;
  }
  rt_.model_calls.fetch_add(1, std::memory_order_relaxed);
  ++ctx_.turn.steps;
  ++run_model_calls_;
  if (result.usage) {
    add_usage(ctx_.run_usage, *result.usage);
    add_usage(turn_usage_, *result.usage);
  }
  check_cancel();
  auto& em = *ctx_.em;
  RunEmitter::Unit unit(em);  // the events that end the model's answer commit with its message
  if (!ctx_.open_reasoning.empty()) {
    em.emit(events::reasoning_message_end(ctx_.open_reasoning));
    em.emit(events::reasoning_end(ctx_.open_reasoning));
    ctx_.open_reasoning.clear();
  }
  const bool is_final = result.tool_calls.empty();
  const std::string& msg_id = sink.message_id();
  // The assistant message is stored once, complete, never half of it: the projector derives it from the
  // events, and the last event of the answer says it is complete (metadata.agentrt.message), with what the
  // model's final answer holds beyond what was streamed (the result is authoritative).
  const bool persist = !is_final || vis == Visibility::text;
  // The provider's state for this answer (thinking blocks and their signatures) travels with the message.
  if (persist && !result.encrypted_value.empty())
    em.emit(events::reasoning_encrypted_value("message", msg_id, result.encrypted_value));
  json facts = json::object();
  std::string streamed = sink.streamed_text();
  // Tool calls: the effective id of each (the announced one, else a new one), what differs from the stream, and
  // the ledger's facts (the projector derives the entries from the message's completion).
  std::vector<bool> announced, restated;
  for (auto& c : result.tool_calls) {
    const auto* a = sink.take(c.id);
    c.id = a ? a->effective : unique_call_id(c.id);
    announced.push_back(a != nullptr);
    restated.push_back(a && (a->name != c.name || a->arguments != c.arguments));
    ctx_.open_tool_calls.erase(c.id);
  }
  const auto& calls = result.tool_calls;
  std::vector<Requested> requested = request(stage, calls);
  json listed = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const LedgerEntry& l = requested[i].entry;
    if (!restated[i] && requested[i].problem) {
      listed.push_back(calls[i].id);
      continue;
    }
    json call = json::object();
    auto& f = call.get_ref<json::object_t&>();
    f.emplace("id", calls[i].id);
    if (restated[i]) {
      f.emplace("name", calls[i].name);
      f.emplace("arguments", calls[i].arguments);
    }
    if (!requested[i].problem) f.emplace("tool", l.client ? "client" : l.needs_approval ? "approve" : "run");
    if (l.idempotent) f.emplace("idempotent", true);
    listed.push_back(std::move(call));
  }
  // Announced calls missing from the result (a provider inconsistency) are closed, not left open.
  std::vector<std::string> missing(ctx_.open_tool_calls.begin(), ctx_.open_tool_calls.end());
  ctx_.open_tool_calls.clear();
  const bool text_open = vis == Visibility::text && (!ctx_.open_text.empty() || !result.text.empty() || is_final);
  if (vis == Visibility::text && text_open && ctx_.open_text.empty()) streamed = result.text;
  if (persist && streamed != result.text) facts["content"] = result.text;
  if (!calls.empty()) facts["toolCalls"] = std::move(listed);
  json complete = json::object();
  complete.get_ref<json::object_t&>().emplace("message", std::move(facts));
  auto marked = [&complete] {
    json meta = json::object();
    meta.get_ref<json::object_t&>().emplace("agentrt", std::move(complete));
    return meta;
  };
  const bool ends = !calls.empty() || !missing.empty();
  if (text_open) {
    if (ctx_.open_text.empty()) {
      em.text_start(msg_id);
      if (!result.text.empty()) em.text_content(msg_id, result.text);
      ctx_.open_text = msg_id;
    }
    json meta = json::object();
    if (is_final && final_candidate)
      meta.get_ref<json::object_t&>().emplace("worker_agent_output", worker_output(result.text));
    if (persist && !ends) meta.get_ref<json::object_t&>().emplace("agentrt", std::move(complete));
    em.emit(events::text_end(ctx_.open_text, meta.empty() ? json(nullptr) : std::move(meta)));
    ctx_.open_text.clear();
  }
  // The last end carries the message's completion.
  auto end_call = [&](const std::string& id, bool last) {
    if (!last || !persist) return em.tool_call_end(id);
    Event end = events::tool_call_end(id);
    end.metadata = marked();
    em.emit(end);
  };
  for (size_t i = 0; i < calls.size(); ++i) {
    const auto& c = calls[i];
    if (!announced[i]) {
      em.tool_call_start(c.id, c.name, msg_id);
      if (!c.arguments.empty()) em.tool_call_args(c.id, c.arguments);
    }
    end_call(c.id, missing.empty() && i + 1 == calls.size());
  }
  for (size_t i = 0; i < missing.size(); ++i) end_call(missing[i], i + 1 == missing.size());
  return Answer{std::move(result), std::move(requested)};
}

}  // namespace v1
}  // namespace agentrt
