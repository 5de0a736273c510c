#include "model/openai_stream.hpp"

#include <fmt/format.h>

#include "agentrt/json_limits.hpp"

namespace agentrt {
inline namespace v1 {
namespace openai {

using provider_http::count_field;
using provider_http::dump_for_message;
using provider_http::one_line;
using provider_http::parse_server_json;
using provider_http::text_field;

namespace {

void check_server_depth(const json& j, const char* what) {
  if (json_depth(j, kDefaultMaxJsonDepth) > kDefaultMaxJsonDepth)
    throw Error(ErrorCode::model,
                fmt::format("the model sent {} nested deeper than {} levels", what, kDefaultMaxJsonDepth));
}

int64_t nested_count(const json& obj, const char* outer, const char* inner) {
  if (!obj.is_object()) return 0;
  auto it = obj.find(outer);
  return it == obj.end() ? 0 : count_field(*it, inner);
}

}  // namespace

// ---- responses ---------------------------------------------------------------------------------------

TokenUsage token_usage_from_openai(const json& usage, std::string model) {
  TokenUsage u;
  u.provider = "openai-compatible";
  u.model = std::move(model);
  if (!usage.is_object()) return u;
  u.input_tokens = count_field(usage, "prompt_tokens");
  if (u.input_tokens == 0) u.input_tokens = count_field(usage, "input_tokens");
  u.output_tokens = count_field(usage, "completion_tokens");
  if (u.output_tokens == 0) u.output_tokens = count_field(usage, "output_tokens");
  u.total_tokens = count_field(usage, "total_tokens");
  if (u.total_tokens == 0) u.total_tokens = u.input_tokens + u.output_tokens;
  u.reasoning_tokens = nested_count(usage, "completion_tokens_details", "reasoning_tokens");
  if (u.reasoning_tokens == 0) u.reasoning_tokens = nested_count(usage, "output_tokens_details", "reasoning_tokens");
  u.cached_input_tokens = nested_count(usage, "prompt_tokens_details", "cached_tokens");
  if (u.cached_input_tokens == 0) u.cached_input_tokens = count_field(usage, "prompt_cache_hit_tokens");  // DeepSeek
  if (u.cached_input_tokens == 0) u.cached_input_tokens = count_field(usage, "cache_read_input_tokens");
  u.cache_write_input_tokens = count_field(usage, "cache_creation_input_tokens");
  return u;
}

bool ChatStreamAccumulator::on_event(const net::SseEvent& event) {
  if (done_) return true;
  std::string_view data = event.data;
  while (!data.empty() && (data.back() == ' ' || data.back() == '\n' || data.back() == '\r')) data.remove_suffix(1);
  if (event.event == "error") {
    ++events_;
    json j = parse_server_json(data);
    if (!j.is_discarded() && api_error_from_json(j)) fail_with(j);
    fail_with(json{{"error", {{"message", std::string(data)}}}});
  }
  if (data.empty()) return false;  // an empty data line used as a keep-alive
  ++events_;
  if (data.rfind("[DONE]", 0) == 0) {
    done_ = true;
    return true;
  }
  if (json_text_depth(data, kDefaultMaxJsonDepth) > kDefaultMaxJsonDepth)
    throw Error(ErrorCode::model,
                fmt::format("the model stream sent a chunk nested deeper than {} levels", kDefaultMaxJsonDepth));
  json chunk = json::parse(data, nullptr, false);
  if (chunk.is_discarded() || !chunk.is_object()) {
    throw Error(ErrorCode::model,
                fmt::format("the model stream sent a chunk that is not a JSON object: {}", one_line(data, 120)));
  }
  on_chunk(chunk);
  return false;
}

void ChatStreamAccumulator::on_last_event(const net::SseEvent& event) {
  std::string_view data = event.data;
  while (!data.empty() && (data.back() == ' ' || data.back() == '\n' || data.back() == '\r')) data.remove_suffix(1);
  if (event.event == "error" || data.rfind("[DONE]", 0) == 0 || json::accept(data)) on_event(event);
}

void ChatStreamAccumulator::fail_with(const json& error_json) {
  ApiError e = api_error_from_json(error_json).value_or(ApiError{dump_for_message(error_json), {}, {}, {}});
  stream_error_ = e;
  throw Error(ErrorCode::model, describe_api_error(0, e));
}

void ChatStreamAccumulator::on_chunk(const json& chunk) {
  check_server_depth(chunk, "a chunk");
  if (auto it = chunk.find("error"); it != chunk.end() && !it->is_null()) fail_with(chunk);
  if (text_field(chunk, "object") == "error") fail_with(chunk);

  if (id_.empty()) {
    if (const auto* s = string_field(chunk, "id")) id_ = *s;
  }
  if (model_.empty()) {
    if (const auto* s = string_field(chunk, "model")) model_ = *s;
  }
  if (auto it = chunk.find("usage"); it != chunk.end() && it->is_object() && !it->empty()) {
    usage_ = *it;
  } else if (auto g = chunk.find("x_groq"); g != chunk.end() && g->is_object()) {
    if (auto gu = g->find("usage"); gu != g->end() && gu->is_object() && !gu->empty()) usage_ = *gu;
  }

  auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array()) return;
  for (const auto& choice : *choices) {
    if (!choice.is_object()) continue;
    if (auto idx = choice.find("index"); idx != choice.end() && idx->is_number_integer() && idx->get<int64_t>() != 0) {
      continue;  // n > 1: only the first choice is ours
    }
    if (auto d = choice.find("delta"); d != choice.end() && d->is_object()) {
      const json& delta = *d;
      if (const auto* role = string_field(delta, "role"); role && !role->empty()) role_ = *role;
      for (const char* key : {"content", "refusal"}) {
        const auto* piece = string_field(delta, key);
        if (!piece || piece->empty()) continue;
        if (!content_) content_.emplace();
        *content_ += *piece;
        if (sink_) {
          emitted_ = true;
          sink_->on_text(*piece);
        }
      }
      // vLLM renamed reasoning_content to reasoning; Ollama and Groq use reasoning. Never both at once.
      const auto* reasoning = string_field(delta, "reasoning_content");
      if (!reasoning || reasoning->empty()) reasoning = string_field(delta, "reasoning");
      if (reasoning && !reasoning->empty()) {
        if (!reasoning_) reasoning_.emplace();
        *reasoning_ += *reasoning;
        if (sink_) {
          emitted_ = true;
          sink_->on_reasoning(*reasoning);
        }
      }
      if (auto tc = delta.find("tool_calls"); tc != delta.end() && tc->is_array()) {
        size_t position = 0;
        for (const auto& fragment : *tc) on_tool_call_fragment(position++, fragment);
      }
    }
    // After the delta: Mistral, DeepSeek and vLLM put the finish reason in the chunk of the last delta.
    if (const auto* reason = string_field(choice, "finish_reason"); reason && !reason->empty())
      finish_reason_ = *reason;
  }
}

void ChatStreamAccumulator::on_tool_call_fragment(size_t position, const json& fragment) {
  if (!fragment.is_object()) return;
  const std::string* fragment_id = string_field(fragment, "id");
  const bool has_id = fragment_id && !fragment_id->empty();
  int index = 0;
  if (auto it = fragment.find("index"); it != fragment.end() && it->is_number_integer()) {
    index = it->get<int>();
  } else {
    // No index (Mistral): the position in the delta's array; a different id at the same position in a
    // later chunk is a new call, not more of the old one.
    auto known = position_index_.find(position);
    index = known != position_index_.end() ? known->second : static_cast<int>(position);
    auto existing = calls_.find(index);
    if (has_id && existing != calls_.end() && !existing->second.id.empty() && existing->second.id != *fragment_id) {
      index = calls_.rbegin()->first + 1;
    }
    position_index_[position] = index;
  }

  auto [slot, inserted] = calls_.try_emplace(index);
  StreamToolCall& call = slot->second;
  if (inserted) call.index = index;
  if (call.id.empty() && has_id) call.id = *fragment_id;
  if (const auto* type = string_field(fragment, "type"); call.type.empty() && type && !type->empty()) call.type = *type;
  if (auto fn = fragment.find("function"); fn != fragment.end() && fn->is_object()) {
    if (const auto* name = string_field(*fn, "name"); call.name.empty() && name && !name->empty()) call.name = *name;
    if (const auto* args = string_field(*fn, "arguments"); args && !args->empty()) {
      call.arguments += *args;
      if (call.announced && sink_) {
        emitted_ = true;
        sink_->on_tool_call_args(index, *args);
      }
    }
  }
  if (!call.announced && !call.id.empty() && !call.name.empty()) announce(call);
}

void ChatStreamAccumulator::announce(StreamToolCall& call) {
  call.announced = true;
  if (!sink_) return;
  emitted_ = true;
  sink_->on_tool_call_start(call.index, call.id, call.name);
  if (!call.arguments.empty()) sink_->on_tool_call_args(call.index, call.arguments);
}

void ChatStreamAccumulator::on_completion(const json& completion) {
  if (!completion.is_object())
    throw Error(ErrorCode::model, "the model answered with something other than a JSON object");
  check_server_depth(completion, "an answer");
  json chunk = json::object();
  for (const char* key : {"id", "model", "usage", "error", "object"}) {
    if (auto it = completion.find(key); it != completion.end()) chunk[key] = *it;
  }
  json choices = json::array();
  if (auto it = completion.find("choices"); it != completion.end() && it->is_array()) {
    for (const auto& c : *it) {
      if (!c.is_object()) continue;
      // A server's fields may have any type: an index that is no integer is choice 0's, as a missing one.
      const auto index = c.find("index");
      json choice{{"index", index != c.end() && index->is_number_integer() ? *index : json(0)},
                  {"finish_reason", c.value("finish_reason", json())}};
      if (auto msg = c.find("message"); msg != c.end()) choice["delta"] = *msg;
      choices.push_back(std::move(choice));
    }
  }
  chunk["choices"] = std::move(choices);
  ++events_;
  on_chunk(chunk);
  done_ = true;
}

ModelResult ChatStreamAccumulator::finish(bool require_done) {
  if (require_done && !done_) {
    throw Error(ErrorCode::model,
                fmt::format("the model stream ended without [DONE] after {} events: the answer was cut off", events_));
  }
  for (const auto& [index, call] : calls_) {
    if (call.name.empty()) {
      throw Error(ErrorCode::model, fmt::format("the model stream's tool call {} never got a function name", index));
    }
  }
  ModelResult result;
  for (auto& [index, call] : calls_) {
    if (call.id.empty()) call.id = make_tool_call_id();
    if (!call.announced) announce(call);
    result.tool_calls.push_back(ModelToolCall{call.id, call.name, call.arguments});
  }
  result.text = content_.value_or(std::string());
  result.reasoning = reasoning_.value_or(std::string());
  result.finish_reason = finish_reason_;
  if (!usage_.is_null()) result.usage = token_usage_from_openai(usage_, model_);
  return result;
}

}  // namespace openai
}  // namespace v1
}  // namespace agentrt
