// Anthropic Messages: the request body built from a ModelRequest (system, alternating messages of content
// blocks, tool results, media, thinking blocks sent back, tools).
#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include "agentrt/error.hpp"
#include "agentrt/json_limits.hpp"
#include "model/anthropic_stream.hpp"
#include "model/provider_config.hpp"

namespace agentrt {
inline namespace v1 {
namespace anthropic {
namespace {

using provider_http::string_field;

[[noreturn]] void unsupported_part(const ContentPart& part) {
  throw Error(ErrorCode::unsupported, fmt::format("a '{}' part with a '{}' source cannot be sent to an Anthropic model",
                                                  part.type, part.source ? part.source->type : std::string("missing")));
}

// {type:"base64", media_type, data} from inline data (a data: URL or plain base64 with its mime type).
json base64_source(const ContentPart& part) {
  const PartSource& src = *part.source;
  std::string_view value = src.value;
  std::string media_type = src.mime_type;
  if (value.rfind("data:", 0) == 0) {
    const size_t marker = value.find(";base64,");
    if (marker == std::string_view::npos)
      throw Error(ErrorCode::invalid_argument, fmt::format("a '{}' part's data URL is not base64", part.type));
    media_type = std::string(value.substr(5, marker - 5));
    value.remove_prefix(marker + 8);
  }
  if (media_type.empty())
    throw Error(ErrorCode::invalid_argument, fmt::format("a '{}' part with inline data has no mime type", part.type));
  return json{{"type", "base64"}, {"media_type", media_type}, {"data", std::string(value)}};
}

// A text, image or document part as a content block: images and PDFs inline (base64), by URL, or by Files API id.
json part_block(const ContentPart& part) {
  if (part.type == "text") return json{{"type", "text"}, {"text", part.text}};
  if (part.type != "image" && part.type != "document") unsupported_part(part);
  if (!part.source) throw Error(ErrorCode::invalid_argument, fmt::format("a '{}' part has no source", part.type));
  const PartSource& src = *part.source;
  json source;
  if (src.type == "data") {
    source = base64_source(part);
  } else if (src.type == "url") {
    source = json{{"type", "url"}, {"url", src.value}};
  } else if (src.type == "file") {
    source = json{{"type", "file"}, {"file_id", src.value}};
  } else {
    unsupported_part(part);
  }
  return json{{"type", part.type}, {"source", std::move(source)}};
}

// The message's content as blocks: its parts, or its text (an empty text is no block: the API refuses those).
void add_content(const Message& m, json& blocks) {
  if (m.parts.empty()) {
    if (!m.content.empty()) blocks.push_back({{"type", "text"}, {"text", m.content}});
    return;
  }
  for (const auto& p : m.parts) {
    if (p.type == "text" && p.text.empty()) continue;
    blocks.push_back(part_block(p));
  }
}

json tool_use_block(const ToolCall& call) {
  // The API wants the input as an object; arguments that are not one (a model's broken JSON) go as {}.
  json input = json::parse(call.arguments, nullptr, false);
  if (input.is_discarded() || !input.is_object() || json_depth(input, kDefaultMaxJsonDepth) > kDefaultMaxJsonDepth)
    input = json::object();
  return json{{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", std::move(input)}};
}

json tool_result_block(const Message& m) {
  json block{{"type", "tool_result"}, {"tool_use_id", m.tool_call_id}};
  json content = json::array();
  add_content(m, content);
  if (content.empty() && !m.error.empty()) content.push_back({{"type", "text"}, {"text", m.error}});
  if (content.size() == 1 && content[0]["type"] == "text") {
    block["content"] = content[0]["text"];
  } else if (!content.empty()) {
    block["content"] = std::move(content);
  }
  if (!m.error.empty()) block["is_error"] = true;
  return block;
}

// Appends blocks as a message of `role`, to the last message when it has that role too (the API wants user and
// assistant to alternate).
void append_message(json& messages, const char* role, json blocks) {
  if (blocks.empty()) return;
  if (!messages.empty() && messages.back()["role"] == role) {
    for (auto& b : blocks) messages.back()["content"].push_back(std::move(b));
    return;
  }
  messages.push_back({{"role", role}, {"content", std::move(blocks)}});
}

json tool_choice_for(const ModelRequest& request) {
  json choice;
  if (request.tool_choice == "auto" || request.tool_choice == "none") {
    choice = json{{"type", request.tool_choice}};
  } else if (request.tool_choice == "required") {
    choice = json{{"type", "any"}};
  } else if (!request.tool_choice.empty()) {
    throw Error(ErrorCode::invalid_argument, fmt::format("tool_choice '{}' is not one of auto, none, required "
                                                         "for an Anthropic model",
                                                         request.tool_choice));
  }
  if (!request.parallel_tool_calls) {
    if (choice.is_null()) choice = json{{"type", "auto"}};
    if (choice["type"] != "none") choice["disable_parallel_tool_use"] = true;  // "none" does not take it
  }
  return choice;
}

}  // namespace

json thinking_blocks_from(const std::string& encrypted_value) {
  json blocks = json::array();
  if (encrypted_value.empty() || json_text_depth(encrypted_value, kDefaultMaxJsonDepth) > kDefaultMaxJsonDepth)
    return blocks;
  const json value = json::parse(encrypted_value, nullptr, false);
  if (!value.is_object() || value.value("provider", json()) != "anthropic") return blocks;
  auto it = value.find("blocks");
  if (it == value.end() || !it->is_array()) return blocks;
  for (const auto& b : *it) {
    if (!b.is_object()) continue;
    const std::string* type = string_field(b, "type");
    const bool thinking = type && *type == "thinking" && string_field(b, "thinking") && string_field(b, "signature");
    const bool redacted = type && *type == "redacted_thinking" && string_field(b, "data");
    if (thinking || redacted) blocks.push_back(b);
  }
  return blocks;
}

json build_messages_body(const ModelRequest& request, const AnthropicConfig& config) {
  auto [model, params] = provider_config::resolve_model(request, config);
  if (model.empty()) throw Error(ErrorCode::invalid_argument, "no model name configured for the Anthropic provider");
  json body{{"max_tokens", config.max_tokens}};
  body.merge_patch(params);
  body["model"] = model;
  body["stream"] = true;

  std::string system;
  json messages = json::array();
  for (const auto& m : request.messages) {
    json blocks = json::array();
    switch (m.role) {
      case Role::system:
      case Role::developer: {
        const std::string text = m.text();
        if (text.empty()) break;
        if (!system.empty()) system += "\n\n";
        system += text;
        break;
      }
      case Role::user:
        add_content(m, blocks);
        append_message(messages, "user", std::move(blocks));
        break;
      case Role::assistant:
        blocks = thinking_blocks_from(m.encrypted_value);  // first, as the API requires
        if (m.has_content) add_content(m, blocks);
        for (const auto& call : m.tool_calls) blocks.push_back(tool_use_block(call));
        append_message(messages, "assistant", std::move(blocks));
        break;
      case Role::tool:
        blocks.push_back(tool_result_block(m));
        append_message(messages, "user", std::move(blocks));
        break;
      case Role::activity:
      case Role::reasoning: break;
    }
  }
  // In a user message the tool results come before anything else.
  for (auto& msg : messages) {
    if (msg["role"] != "user") continue;
    auto& content = msg["content"];
    std::stable_partition(content.begin(), content.end(), [](const json& b) { return b["type"] == "tool_result"; });
  }
  if (!system.empty()) body["system"] = std::move(system);
  body["messages"] = std::move(messages);

  // Server tools configured in params (web search, ...) stay; the request's tools follow them.
  json tools = body.contains("tools") && body["tools"].is_array() ? body["tools"] : json::array();
  for (const auto& t : request.tools) {
    json tool{{"name", t.name}};
    if (!t.description.empty()) tool["description"] = t.description;
    tool["input_schema"] = t.parameters.is_object() ? t.parameters : json{{"type", "object"}};
    tools.push_back(std::move(tool));
  }
  if (!tools.empty()) body["tools"] = std::move(tools);
  if (!request.tools.empty()) {
    if (json choice = tool_choice_for(request); !choice.is_null()) body["tool_choice"] = std::move(choice);
  }
  return body;
}

}  // namespace anthropic
}  // namespace v1
}  // namespace agentrt
