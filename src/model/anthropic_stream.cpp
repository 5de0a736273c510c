// The Anthropic Messages stream: events to the answer, usage and stop reasons.
#include "model/anthropic_stream.hpp"

#include <fmt/format.h>

#include <climits>

#include "agentrt/error.hpp"
#include "agentrt/json_limits.hpp"

namespace agentrt {
inline namespace v1 {
namespace anthropic {

using provider_http::count_field;
using provider_http::dump_for_message;
using provider_http::one_line;
using provider_http::parse_server_json;
using provider_http::string_field;
using provider_http::text_field;

namespace {

std::string_view trimmed(std::string_view data) {
  while (!data.empty() && (data.back() == ' ' || data.back() == '\n' || data.back() == '\r')) data.remove_suffix(1);
  return data;
}

// A content block's index, when the event has a usable one.
std::optional<int> block_index(const json& event) {
  auto it = event.find("index");
  if (it == event.end() || !it->is_number_integer()) return std::nullopt;
  const auto v = it->get<int64_t>();
  if (v < 0 || v > INT_MAX) return std::nullopt;
  return static_cast<int>(v);
}

std::string string_or_empty(const json& obj, const char* key) {
  const std::string* s = string_field(obj, key);
  return s ? *s : std::string();
}

}  // namespace

TokenUsage token_usage_from_anthropic(const json& usage, std::string model) {
  TokenUsage u;
  u.provider = "anthropic";
  u.model = std::move(model);
  u.cached_input_tokens = count_field(usage, "cache_read_input_tokens");
  u.cache_write_input_tokens = count_field(usage, "cache_creation_input_tokens");
  u.input_tokens = count_field(usage, "input_tokens") + u.cached_input_tokens + u.cache_write_input_tokens;
  u.output_tokens = count_field(usage, "output_tokens");
  u.total_tokens = u.input_tokens + u.output_tokens;
  return u;
}

std::string finish_reason_from_stop_reason(const std::string& stop_reason) {
  if (stop_reason == "end_turn") return "stop";
  if (stop_reason == "tool_use") return "tool_calls";
  if (stop_reason == "max_tokens") return "length";
  return stop_reason;
}

void MessageStreamAccumulator::on_event(const net::SseEvent& event) {
  if (done_) return;
  const std::string_view data = trimmed(event.data);
  if (data.empty()) {
    if (event.event == "error") fail_with(json{{"error", {{"message", "an error event without data"}}}});
    return;  // an empty event used as a keep-alive
  }
  ++events_;
  const json j = parse_server_json(data);
  if (j.is_discarded() || !j.is_object()) {
    if (event.event == "error") fail_with(json{{"error", {{"message", std::string(data)}}}});
    throw Error(ErrorCode::model,
                fmt::format("the model stream sent a '{}' event that is not a JSON object (or is nested deeper than {} "
                            "levels): {}",
                            event.event, kDefaultMaxJsonDepth, one_line(data, 120)));
  }
  if (event.event == "error") fail_with(j);
  on_data(j);
}

void MessageStreamAccumulator::on_last_event(const net::SseEvent& event) {
  if (event.event == "error" || json::accept(trimmed(event.data))) on_event(event);
}

void MessageStreamAccumulator::on_data(const json& event) {
  const std::string type = text_field(event, "type");
  if (type == "error" || (type.empty() && event.contains("error"))) fail_with(event);
  if (type == "message_start") {
    if (auto m = event.find("message"); m != event.end() && m->is_object()) on_message_fields(*m);
  } else if (type == "content_block_start") {
    on_block_start(event);
  } else if (type == "content_block_delta") {
    on_block_delta(event);
  } else if (type == "content_block_stop") {
    const auto index = block_index(event);
    auto it = index ? blocks_.find(*index) : blocks_.end();
    if (it != blocks_.end()) on_block_stop(it->second, it->first);
  } else if (type == "message_delta") {
    if (auto d = event.find("delta"); d != event.end() && d->is_object()) {
      if (const auto* reason = string_field(*d, "stop_reason"); reason && !reason->empty()) stop_reason_ = *reason;
    }
    if (auto u = event.find("usage"); u != event.end()) merge_usage(*u);
  } else if (type == "message_stop") {
    done_ = true;
  }
  // ping, and event types added after this was written: nothing to take.
}

void MessageStreamAccumulator::on_message_fields(const json& message) {
  if (id_.empty()) id_ = string_or_empty(message, "id");
  if (model_.empty()) model_ = string_or_empty(message, "model");
  if (auto u = message.find("usage"); u != message.end()) merge_usage(*u);
}

// message_start has the input counts, message_delta the cumulative output (and, with server tools, input) ones:
// the last value of each count is the answer's.
void MessageStreamAccumulator::merge_usage(const json& usage) {
  if (!usage.is_object()) return;
  for (const auto& [key, value] : usage.items()) {
    if (!value.is_number()) continue;
    if (usage_.is_null()) usage_ = json::object();
    usage_[key] = value;
  }
}

void MessageStreamAccumulator::on_block_start(const json& event) {
  const auto index = block_index(event);
  auto cb = event.find("content_block");
  if (!index || cb == event.end() || !cb->is_object()) return;
  auto [slot, inserted] = blocks_.try_emplace(*index);
  if (!inserted) return;  // a block starts once; a second start of its index is not taken
  Block& block = slot->second;
  block.type = text_field(*cb, "type");
  if (block.type == "text") {
    text(string_or_empty(*cb, "text"));
  } else if (block.type == "thinking") {
    block.text = string_or_empty(*cb, "thinking");
    block.signature = string_or_empty(*cb, "signature");
    reasoning(block.text);
  } else if (block.type == "redacted_thinking") {
    block.data = string_or_empty(*cb, "data");
  } else if (block.type == "tool_use") {
    block.id = string_or_empty(*cb, "id");
    block.name = string_or_empty(*cb, "name");
    if (block.id.empty() || block.name.empty())
      throw Error(ErrorCode::model, fmt::format("the model stream's tool_use block {} has no id or no name", *index));
    if (auto in = cb->find("input"); in != cb->end()) block.input = *in;
    if (sink_) {
      emitted_ = true;
      sink_->on_tool_call_start(*index, block.id, block.name);
    }
  }
}

void MessageStreamAccumulator::on_block_delta(const json& event) {
  const auto index = block_index(event);
  auto d = event.find("delta");
  if (!index || d == event.end() || !d->is_object()) return;
  auto it = blocks_.find(*index);
  Block* block = it == blocks_.end() ? nullptr : &it->second;
  const std::string type = text_field(*d, "type");
  if (type == "text_delta") {
    text(string_or_empty(*d, "text"));
  } else if (type == "thinking_delta") {
    const std::string piece = string_or_empty(*d, "thinking");
    if (block && block->type == "thinking") block->text += piece;
    reasoning(piece);
  } else if (type == "signature_delta") {
    if (block && block->type == "thinking") block->signature += string_or_empty(*d, "signature");
  } else if (type == "input_json_delta") {
    // Only a tool_use block is ours to run: a server tool's input (web search) is the server's business.
    if (!block || block->type != "tool_use" || block->stopped) return;
    const std::string piece = string_or_empty(*d, "partial_json");
    if (piece.empty()) return;
    block->arguments += piece;
    if (sink_) {
      emitted_ = true;
      sink_->on_tool_call_args(*index, piece);
    }
  }
}

void MessageStreamAccumulator::on_block_stop(Block& block, int index) {
  if (block.stopped) return;
  block.stopped = true;
  if (block.type != "tool_use" || !block.arguments.empty()) return;
  // No fragment came: the input is what the block started with ({} for a tool without parameters).
  block.arguments = block.input.is_object() ? dump_for_message(block.input) : std::string("{}");
  if (sink_) {
    emitted_ = true;
    sink_->on_tool_call_args(index, block.arguments);
  }
}

void MessageStreamAccumulator::on_message(const json& message) {
  if (!message.is_object()) throw Error(ErrorCode::model, "the model answered with something other than a JSON object");
  if (json_depth(message, kDefaultMaxJsonDepth) > kDefaultMaxJsonDepth)
    throw Error(ErrorCode::model,
                fmt::format("the model sent an answer nested deeper than {} levels", kDefaultMaxJsonDepth));
  ++events_;
  if (text_field(message, "type") == "error" || message.contains("error")) fail_with(message);
  on_message_fields(message);
  if (auto content = message.find("content"); content != message.end() && content->is_array()) {
    int index = 0;
    for (const auto& block : *content) {
      on_block_start(json{{"type", "content_block_start"}, {"index", index}, {"content_block", block}});
      if (auto it = blocks_.find(index); it != blocks_.end()) on_block_stop(it->second, index);
      ++index;
    }
  }
  if (const auto* reason = string_field(message, "stop_reason"); reason && !reason->empty()) stop_reason_ = *reason;
  done_ = true;
}

void MessageStreamAccumulator::text(std::string_view delta) {
  if (delta.empty()) return;
  text_ += delta;
  if (!sink_) return;
  emitted_ = true;
  sink_->on_text(delta);
}

void MessageStreamAccumulator::reasoning(std::string_view delta) {
  if (delta.empty()) return;
  reasoning_ += delta;
  if (!sink_) return;
  emitted_ = true;
  sink_->on_reasoning(delta);
}

void MessageStreamAccumulator::fail_with(const json& error_json) {
  provider_http::ApiError e = provider_http::api_error_from_json(error_json)
                                  .value_or(provider_http::ApiError{dump_for_message(error_json), {}, {}, {}});
  stream_error_ = e;
  throw Error(ErrorCode::model, provider_http::describe_api_error(0, e));
}

ModelResult MessageStreamAccumulator::finish(bool require_stop) {
  if (require_stop && !done_) {
    throw Error(
        ErrorCode::model,
        fmt::format("the model stream ended without message_stop after {} events: the answer was cut off", events_));
  }
  ModelResult result;
  json thinking = json::array();
  for (auto& [index, block] : blocks_) {
    if (block.type == "tool_use") {
      on_block_stop(block, index);
      result.tool_calls.push_back(ModelToolCall{block.id, block.name, block.arguments});
    } else if (block.type == "thinking") {
      thinking.push_back({{"type", "thinking"}, {"thinking", block.text}, {"signature", block.signature}});
    } else if (block.type == "redacted_thinking") {
      thinking.push_back({{"type", "redacted_thinking"}, {"data", block.data}});
    }
  }
  if (!thinking.empty()) {
    result.encrypted_value =
        dump_for_message(json{{"provider", "anthropic"}, {"model", model_}, {"blocks", std::move(thinking)}});
  }
  result.text = text_;
  result.reasoning = reasoning_;
  result.finish_reason = finish_reason_from_stop_reason(stop_reason_);
  if (!usage_.is_null()) result.usage = token_usage_from_anthropic(usage_, model_);
  return result;
}

}  // namespace anthropic
}  // namespace v1
}  // namespace agentrt
