#include "host_model.hpp"

#include <algorithm>
#include <chrono>
#include <map>

#include <fmt/format.h>

#include "agentrt/json_reader.hpp"
#include "firewall.hpp"

namespace agentrt::capi {

namespace {

std::string arguments_text(const json& a) {
  if (a.is_string()) return a.get<std::string>();
  return a.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

void validate_model_result(const json& r) {
  const wire::JsonReader in(r, "model result");
  in.only_keys({"text", "reasoning", "toolCalls", "usage", "finishReason"});
  // Only checked here: drain() reads the fields the result has.
  for (const char* k : {"text", "reasoning", "finishReason"}) (void)in.optional_string(k);
  if (const json* calls = in.find("toolCalls")) {
    if (!calls->is_array()) in.wrong_type("toolCalls", "an array");
    for (const auto& c : *calls) {
      const wire::JsonReader call(c, "model result: tool call");
      call.only_keys({"id", "name", "arguments"});
      for (const char* k : {"id", "name"})
        if (call.required_string(k).empty()) call.fail(fmt::format("'{}' must not be empty", k));
      if (const json* a = call.find("arguments"); a && !a->is_string() && !a->is_object())
        call.wrong_type("arguments", "JSON text or a JSON object");
    }
  }
  if (const json* u = in.find("usage")) {
    if (!u->is_object()) in.wrong_type("usage", "a JSON object");
    (void)u->get<TokenUsage>();
  }
}

ModelCallState::ModelCallState(ModelStreamSink& sink, CancelToken cancel, size_t max_json_depth)
    : sink_(sink), cancel_(std::move(cancel)), max_json_depth_(max_json_depth), consumer_(std::this_thread::get_id()) {}

int32_t ModelCallState::push(Item item) {
  const bool ends = item.kind == Item::Kind::finish || item.kind == Item::Kind::fail;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (end_ == End::open && cancel_.cancelled()) end_ = End::cancelled;
    if (end_ == End::cancelled) return fail(AGENTRT_E_CANCELLED, "the model call was cancelled");
    if (end_ == End::ended) return fail(AGENTRT_E_INVALID_STATE, "the model call has already ended");
    items_.push_back(std::move(item));
    if (ends) end_ = End::ended;
  }
  cv_.notify_all();
  if (in_callback_.load() && std::this_thread::get_id() == consumer_) {
    // A synchronous host streaming from inside its callback: deliver now, not when the callback returns.
    try {
      drain();
    } catch (...) {
      error_ = std::current_exception();
      abandon();
      return fail(AGENTRT_E_CANCELLED, "the run stopped while the model streamed");
    }
  }
  return AGENTRT_OK;
}

void ModelCallState::release() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (end_ != End::open) return;
    items_.push_back(
        Item{Item::Kind::fail, 0, "the host released the model call without finishing it", {}, {}, ErrorCode::model});
    end_ = End::ended;
  }
  cv_.notify_all();
}

void ModelCallState::abandon() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (end_ == End::open) end_ = End::cancelled;
}

void ModelCallState::drain() {
  std::deque<Item> batch;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    batch.swap(items_);
  }
  for (auto& it : batch) {
    if (result_ || error_) return;  // nothing after the end counts
    switch (it.kind) {
      case Item::Kind::text:
        text_ += it.a;
        sink_.on_text(it.a);
        break;
      case Item::Kind::reasoning:
        reasoning_ += it.a;
        sink_.on_reasoning(it.a);
        break;
      case Item::Kind::tool_start: {
        auto& c = calls_[it.index];
        c[0] = it.a;
        c[1] = it.b;
        sink_.on_tool_call_start(it.index, it.a, it.b);
        break;
      }
      case Item::Kind::tool_args:
        calls_[it.index][2] += it.a;
        sink_.on_tool_call_args(it.index, it.a);
        break;
      case Item::Kind::fail: error_ = std::make_exception_ptr(Error(it.code, "host model: " + it.a)); break;
      case Item::Kind::finish: {
        // Fields the result leaves out are what was streamed.
        const json& r = it.result;
        ModelResult out;
        out.text = r.contains("text") ? r["text"].get<std::string>() : text_;
        out.reasoning = r.contains("reasoning") ? r["reasoning"].get<std::string>() : reasoning_;
        if (r.contains("toolCalls")) {
          for (const auto& c : r["toolCalls"])
            out.tool_calls.push_back(ModelToolCall{c["id"].get<std::string>(), c["name"].get<std::string>(),
                                                   c.contains("arguments") ? arguments_text(c["arguments"]) : "{}"});
        } else {
          for (const auto& [index, c] : calls_) {
            if (c[0].empty() || c[1].empty()) {
              error_ = std::make_exception_ptr(
                  Error(ErrorCode::model, fmt::format("host model: streamed tool call {} has no id or name", index)));
              return;
            }
            out.tool_calls.push_back(ModelToolCall{c[0], c[1], c[2].empty() ? "{}" : c[2]});
          }
        }
        if (r.contains("usage")) out.usage = r["usage"].get<TokenUsage>();
        out.finish_reason = r.contains("finishReason") ? r["finishReason"].get<std::string>()
                                                       : (out.tool_calls.empty() ? "stop" : "tool_calls");
        result_ = std::move(out);
        break;
      }
    }
  }
}

ModelResult ModelCallState::consume() {
  struct StopGuard {
    ModelCallState* s;
    ~StopGuard() { s->abandon(); }
  } stop_guard{this};
  for (;;) {
    drain();
    if (error_) std::rethrow_exception(error_);
    if (result_) return std::move(*result_);
    if (cancel_.cancelled()) throw Error(ErrorCode::cancelled, "host model: the model call was cancelled");
    std::unique_lock<std::mutex> lock(mutex_);
    // The cancel token has its own condition variable: wait in short slices and look at it.
    cv_.wait_for(lock, std::chrono::milliseconds(20), [&] { return !items_.empty(); });
  }
}

json model_request_to_json(const ModelRequest& r) {
  json tools = json::array();
  for (const auto& t : r.tools)
    tools.push_back(json{{"name", t.name}, {"description", t.description}, {"parameters", t.parameters}});
  json j{{"stage", r.stage},
         {"params", r.params},
         {"messages", r.messages},
         {"tools", std::move(tools)},
         {"parallelToolCalls", r.parallel_tool_calls},
         {"threadId", r.thread_id},
         {"turnId", r.turn_id},
         {"runId", r.run_id}};
  if (!r.model.empty()) j["model"] = r.model;
  if (!r.tool_choice.empty()) j["toolChoice"] = r.tool_choice;
  if (!r.traceparent.empty()) j["traceparent"] = r.traceparent;
  return j;
}

ModelResult HostModelProvider::complete(const ModelRequest& request, ModelStreamSink& sink, const CancelToken& cancel) {
  const std::string request_json = model_request_to_json(request).dump(-1, ' ', false, json::error_handler_t::replace);
  auto state = std::make_shared<ModelCallState>(sink, cancel, max_json_depth_);
  auto handle = std::make_unique<agentrt_model_call>();
  handle->state = state;
  state->enter_callback();
  // From here on the host owns the handle (it frees it with agentrt_model_call_free).
  try {
    cb_(handle.release(), request_json.c_str(), data_.get());
  } catch (...) {
    state->leave_callback();
    state->abandon();
    throw;
  }
  state->leave_callback();
  return state->consume();
}

}  // namespace agentrt::capi
