// OpenAI chat completions: the endpoint (base URL, key, headers) and the request body built from a
// ModelRequest (messages, tools, media parts).
#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "model/openai_stream.hpp"
#include "model/provider_config.hpp"

namespace agentrt {
inline namespace v1 {
namespace openai {
namespace {

std::string lower_ascii(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](char c) { return (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c; });
  return s;
}

std::string message_text(const Message& m) {
  if (m.parts.empty()) return m.content;
  std::string out;
  for (const auto& p : m.parts) {
    if (p.type != "text") continue;
    if (!out.empty()) out.push_back('\n');
    out += p.text;
  }
  return out;
}

[[noreturn]] void unsupported_part(const ContentPart& part) {
  throw Error(ErrorCode::unsupported,
              fmt::format("a user '{}' part with a '{}' source cannot be sent to an OpenAI-compatible model", part.type,
                          part.source ? part.source->type : std::string("missing")));
}

json user_part(const ContentPart& part) {
  if (part.type == "text") return json{{"type", "text"}, {"text", part.text}};
  if (!part.source) {
    throw Error(ErrorCode::invalid_argument, fmt::format("a user '{}' part has no source", part.type));
  }
  const PartSource& src = *part.source;
  if (part.type == "image") {
    json image_url;
    if (src.type == "data") {
      if (src.value.rfind("data:", 0) == 0) {
        image_url["url"] = src.value;  // already a data URL
      } else {
        if (src.mime_type.empty()) {
          throw Error(ErrorCode::invalid_argument, "an image part with inline data has no mime type");
        }
        image_url["url"] = fmt::format("data:{};base64,{}", src.mime_type, src.value);
      }
    } else if (src.type == "url") {
      image_url["url"] = src.value;
    } else {
      unsupported_part(part);
    }
    if (part.metadata.is_object()) {
      if (const auto* detail = string_field(part.metadata, "detail")) image_url["detail"] = *detail;
    }
    return json{{"type", "image_url"}, {"image_url", std::move(image_url)}};
  }
  if (part.type == "audio") {
    if (src.type != "data") unsupported_part(part);
    // input_audio takes plain base64 and knows two formats only.
    const std::string mime = lower_ascii(src.mime_type);
    std::string format;
    if (mime == "audio/wav" || mime == "audio/x-wav" || mime == "audio/wave" || mime == "audio/vnd.wave") {
      format = "wav";
    } else if (mime == "audio/mpeg" || mime == "audio/mp3") {
      format = "mp3";
    } else {
      throw Error(ErrorCode::unsupported,
                  fmt::format("audio of type '{}' cannot be sent to the model: only wav and mp3 can", src.mime_type));
    }
    return json{{"type", "input_audio"}, {"input_audio", {{"data", src.value}, {"format", format}}}};
  }
  if (part.type == "document") {
    if (src.type == "file") return json{{"type", "file"}, {"file", {{"file_id", src.value}}}};
    if (src.type == "data" && lower_ascii(src.mime_type) == "application/pdf") {
      std::string filename = "document.pdf";
      if (part.metadata.is_object()) {
        if (const auto* f = string_field(part.metadata, "filename")) filename = *f;
      }
      return json{{"type", "file"},
                  {"file", {{"filename", filename}, {"file_data", "data:application/pdf;base64," + src.value}}}};
    }
    unsupported_part(part);
  }
  unsupported_part(part);
}

}  // namespace

OpenAIEndpoint::OpenAIEndpoint(const OpenAIConfig& config)
    : ModelEndpoint(provider_http::endpoint_settings(config, "OpenAI")) {}

std::string make_tool_call_id() {
  static constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  std::string id = "call_";
  thread_local std::mt19937_64 gen{std::random_device{}()};
  for (int i = 0; i < 24; ++i) id.push_back(kAlphabet[pick(gen)]);
  return id;
}

std::optional<json> to_openai_message(const Message& m) {
  switch (m.role) {
    case Role::developer:
    case Role::system:
      return json{{"role", m.role == Role::system ? "system" : "developer"}, {"content", message_text(m)}};
    case Role::user: {
      if (m.parts.empty()) return json{{"role", "user"}, {"content", m.content}};
      json parts = json::array();
      for (const auto& p : m.parts) parts.push_back(user_part(p));
      return json{{"role", "user"}, {"content", std::move(parts)}};
    }
    case Role::assistant: {
      json out{{"role", "assistant"}};
      std::string text = m.has_content ? message_text(m) : std::string();
      // The API wants content null (not "") next to tool_calls when the model said nothing.
      if (text.empty() && !m.tool_calls.empty()) {
        out["content"] = nullptr;
      } else {
        out["content"] = std::move(text);
      }
      if (!m.tool_calls.empty()) {
        json calls = json::array();
        for (const auto& c : m.tool_calls) {
          calls.push_back({{"id", c.id},
                           {"type", "function"},
                           {"function", {{"name", c.name}, {"arguments", c.arguments.empty() ? "{}" : c.arguments}}}});
        }
        out["tool_calls"] = std::move(calls);
      }
      return out;
    }
    case Role::tool: {
      std::string text = message_text(m);
      if (text.empty() && !m.error.empty()) text = m.error;
      return json{{"role", "tool"}, {"tool_call_id", m.tool_call_id}, {"content", std::move(text)}};
    }
    case Role::activity:
    case Role::reasoning: return std::nullopt;
  }
  return std::nullopt;
}

json build_chat_body(const ModelRequest& request, const OpenAIConfig& config) {
  auto [model, params] = provider_config::resolve_model(request, config);
  json body = std::move(params);
  if (model.empty()) throw Error(ErrorCode::invalid_argument, "no model name configured for the OpenAI provider");

  body["model"] = model;
  json messages = json::array();
  for (const auto& m : request.messages) {
    if (auto msg = to_openai_message(m)) messages.push_back(std::move(*msg));
  }
  body["messages"] = std::move(messages);
  body["stream"] = true;
  if (!body.contains("stream_options") || !body["stream_options"].is_object()) body["stream_options"] = json::object();
  body["stream_options"]["include_usage"] = true;

  body.erase("tools");
  body.erase("tool_choice");
  body.erase("parallel_tool_calls");
  if (!request.tools.empty()) {
    json tools = json::array();
    for (const auto& t : request.tools) {
      json fn{{"name", t.name}};
      if (!t.description.empty()) fn["description"] = t.description;
      if (!t.parameters.is_null()) fn["parameters"] = t.parameters;
      tools.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    body["tools"] = std::move(tools);
    // OpenAI refuses tool_choice and parallel_tool_calls without tools, hence only here.
    if (!request.tool_choice.empty()) body["tool_choice"] = request.tool_choice;
    // true is the default; leaving it out keeps servers that do not know the field happy.
    if (!request.parallel_tool_calls) body["parallel_tool_calls"] = false;
  }
  return body;
}

}  // namespace openai
}  // namespace v1
}  // namespace agentrt
