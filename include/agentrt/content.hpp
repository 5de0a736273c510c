// Messages and content parts in AG-UI 1.0 shape (camelCase JSON, optional fields omitted, never null).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentrt/json.hpp"
#include "agentrt/json_limits.hpp"

namespace agentrt {
inline namespace v1 {

enum class Role { developer, system, assistant, user, tool, activity, reasoning };
std::string_view to_string(Role role) noexcept;
Role role_from_string(std::string_view s);  // throws Error(invalid_argument) on an unknown role

// Where a media part's bytes are: inline base64 data, a URL, or a provider/upload file id.
struct PartSource {
  std::string type;       // "data" | "url" | "file"
  std::string value;      // base64 bytes, the URL, or the file id
  std::string mime_type;  // required for "data"
  std::string provider;   // optional, "file" only
};

// One part of a message's content: text, or a media part with a source.
struct ContentPart {
  std::string type;  // "text" | "image" | "audio" | "video" | "document"
  std::string text;  // "text" parts
  std::optional<PartSource> source;
  std::string id;
  json metadata;  // object or null (absent)

  static ContentPart make_text(std::string text);
  bool is_media() const { return type != "text"; }
};

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // the JSON text the model produced
};

// A history message. `content` is a string unless `parts` is used (user and tool messages may carry parts).
struct Message {
  std::string id;
  Role role = Role::user;
  std::string content;
  std::vector<ContentPart> parts;  // non-empty means content is a part list
  bool has_content = true;         // false: an assistant message with tool calls and no text
  std::vector<ToolCall> tool_calls;
  std::string tool_call_id;  // tool messages
  std::string name;
  std::string error;            // tool messages
  std::string encrypted_value;  // AG-UI encryptedValue: a provider's opaque state for the message ("" = none)
  json metadata;                // object or null (absent)

  // The message's text: `content`, or the text parts joined with newlines.
  std::string text() const;
};

// JSON in AG-UI 1.0 Message/ContentPart shape. from_json validates (throws Error(invalid_argument)) and
// upgrades the 0.x `binary` part ({type:"binary", mimeType, data|url|id, filename}) to a 1.0 media part.
// from_json refuses a value nested deeper than kDefaultMaxJsonDepth ("message is nested deeper than 64
// levels") before copying anything out of it; message_from_json takes the limit.
void to_json(json& j, const PartSource& s);
void from_json(const json& j, PartSource& s);
void to_json(json& j, const ContentPart& p);
void from_json(const json& j, ContentPart& p);
void to_json(json& j, const ToolCall& c);
void from_json(const json& j, ToolCall& c);
void to_json(json& j, const Message& m);
void from_json(const json& j, Message& m);

// A message from its JSON; Error(invalid_argument) for a malformed one or one nested deeper than max_depth
// (the depth of the message's own JSON: 1 for {"id","role","content":"text"}).
Message message_from_json(const json& j, size_t max_depth);
// The same from the message's JSON text (as message_from_json(parse_json(text, max_depth), max_depth), errors
// included), without building nlohmann values for the fields that are strings: the store's read path.
Message message_from_json_text(std::string_view text, size_t max_depth);

// The nesting depth of the message's JSON form (as json_depth of to_json(m)), without building it; counting
// stops past `stop_after`.
size_t message_depth(const Message& m, size_t stop_after = static_cast<size_t>(-1));

// The same JSON as to_json(Message), written straight to text (the store's hot path).
std::string to_json_string(const Message& m);

// Parses a content value (string or part array) into `out` (text or parts). Throws on a malformed value.
void parse_content(const json& content, Message& out);

}  // namespace v1
}  // namespace agentrt
