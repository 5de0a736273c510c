#include "store/sqlite/message_body.hpp"

#include <cmath>
#include <cstring>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "agentrt/events.hpp"
#include "util/json_fast.hpp"
#include "util/utf8.hpp"

namespace agentrt {
inline namespace v1 {
namespace sqlite {

namespace {

// The fields a packed message holds after its id, in this order.
enum Flag : uint8_t {
  kContent = 1,  // a string (a part list is stored as JSON text)
  kToolCalls = 2,
  kToolCallId = 4,
  kName = 8,
  kError = 16,
  kEncryptedValue = 32,
  kMetadata = 64,  // an object
  kKnownFlags = 127,
};

// A stored value's first byte.
enum Tag : uint8_t { kNull, kFalse, kTrue, kNegative, kUnsigned, kDouble, kString, kArray, kObject };

// The roles by their stored code: part of the format (a new role takes the next code; none is ever renumbered).
constexpr Role kRoles[] = {Role::developer, Role::system,   Role::assistant, Role::user,
                           Role::tool,      Role::activity, Role::reasoning};

uint8_t role_code(Role r) {
  for (uint8_t i = 0; i < std::size(kRoles); ++i)
    if (kRoles[i] == r) return i;
  throw Error(ErrorCode::internal, "packed message: a role without a stored code");
}

void put_varint(std::string& out, uint64_t v) {
  char bytes[10];
  size_t n = 0;
  for (; v >= 0x80; v >>= 7) bytes[n++] = static_cast<char>((v & 0x7f) | 0x80);
  bytes[n++] = static_cast<char>(v);
  out.append(bytes, n);
}

// A string as the JSON writer leaves it: ill-formed UTF-8 mended as it mends it (rare: the text goes through the
// writer and back).
void put_string(std::string& out, std::string_view s) {
  if (!is_valid_utf8(s)) {
    std::string quoted;
    append_json_string(quoted, s);
    const std::string mended = parse_json(quoted, 1).get<std::string>();
    put_varint(out, mended.size());
    out += mended;
    return;
  }
  put_varint(out, s.size());
  out += s;
}

void put_value(std::string& out, const json& j) {
  switch (j.type()) {
    case json::value_t::null:
    case json::value_t::discarded: out += static_cast<char>(kNull); return;
    case json::value_t::boolean: out += static_cast<char>(j.get<bool>() ? kTrue : kFalse); return;
    case json::value_t::number_integer: {
      const int64_t v = j.get<int64_t>();
      out += static_cast<char>(v >= 0 ? kUnsigned : kNegative);
      put_varint(out, v >= 0 ? static_cast<uint64_t>(v) : ~static_cast<uint64_t>(v));  // -1 is 0
      return;
    }
    case json::value_t::number_unsigned:
      out += static_cast<char>(kUnsigned);
      put_varint(out, j.get<uint64_t>());
      return;
    case json::value_t::number_float: {
      const double d = j.get<double>();
      if (!std::isfinite(d)) {
        out += static_cast<char>(kNull);
        return;
      }
      uint64_t bits;
      std::memcpy(&bits, &d, sizeof bits);
      char bytes[9] = {static_cast<char>(kDouble)};
      for (int i = 0; i < 8; ++i) bytes[1 + i] = static_cast<char>(bits >> (8 * i));  // little-endian
      out.append(bytes, sizeof bytes);
      return;
    }
    case json::value_t::string:
      out += static_cast<char>(kString);
      put_string(out, j.get_ref<const std::string&>());
      return;
    case json::value_t::array:
      out += static_cast<char>(kArray);
      put_varint(out, j.size());
      for (const auto& v : j) put_value(out, v);
      return;
    case json::value_t::object:
      out += static_cast<char>(kObject);
      put_varint(out, j.size());
      for (const auto& [key, value] : j.get_ref<const json::object_t&>()) {
        put_string(out, key);
        put_value(out, value);
      }
      return;
    case json::value_t::binary: put_value(out, json::parse(j.dump())); return;  // as the JSON writer writes it
  }
}

// Reads a packed message, every length and count checked against what is left.
class Reader {
 public:
  Reader(std::string_view body, size_t max_depth)
      : p_(reinterpret_cast<const unsigned char*>(body.data())), end_(p_ + body.size()), max_depth_(max_depth) {}

  [[noreturn]] static void damaged(std::string_view what) {
    throw Error(ErrorCode::invalid_argument, fmt::format("packed message: {}", what));
  }
  bool at_end() const { return p_ == end_; }
  size_t left() const { return static_cast<size_t>(end_ - p_); }

  uint8_t byte() {
    if (p_ == end_) damaged("it ends early");
    return *p_++;
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      const uint8_t b = byte();
      if (shift == 63 && b > 1) damaged("a number is over 64 bits");
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
      if (shift == 63) damaged("a number is over 64 bits");
    }
  }
  // A count of items that take at least `min_bytes` each.
  size_t count(size_t min_bytes) {
    const uint64_t n = varint();
    if (n > left() / min_bytes) damaged("a count runs past its end");
    return static_cast<size_t>(n);
  }
  // A length, then that many bytes.
  std::string_view bytes() {
    const uint64_t n = varint();
    if (n > left()) damaged("a string runs past its end");
    const std::string_view s(reinterpret_cast<const char*>(p_), static_cast<size_t>(n));
    p_ += n;
    return s;
  }
  std::string_view text() {
    const std::string_view s = bytes();
    if (!is_valid_utf8(s)) damaged("a string is not UTF-8");
    return s;
  }
  void text_into(std::string& s) {
    const std::string_view v = text();
    s.assign(v.data(), v.size());
  }
  // A container at `level` (the message is level 1) within the limit.
  void enter(size_t level) const {
    if (level > max_depth_) throw_too_deep(max_depth_);
  }
  void value_into(json& out, size_t level) {
    switch (byte()) {
      case kNull: out = nullptr; return;
      case kFalse: out = false; return;
      case kTrue: out = true; return;
      case kNegative: {
        const uint64_t v = varint();
        if (v > static_cast<uint64_t>(INT64_MAX)) damaged("a negative number is out of range");
        out = static_cast<int64_t>(~v);
        return;
      }
      case kUnsigned: out = varint(); return;
      case kDouble: {
        if (left() < 8) damaged("it ends early");
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits |= static_cast<uint64_t>(p_[i]) << (8 * i);
        p_ += 8;
        double d;
        std::memcpy(&d, &bits, sizeof d);
        if (!std::isfinite(d)) damaged("a number is not finite");
        out = d;
        return;
      }
      case kString: out = text(); return;
      case kArray: {
        enter(level);
        out = json::array();
        auto& items = out.get_ref<json::array_t&>();
        const size_t n = count(1);
        items.reserve(n);
        for (size_t i = 0; i < n; ++i) value_into(items.emplace_back(), level + 1);
        return;
      }
      case kObject: object_into(out, level); return;
      default: damaged("a value of an unknown kind");
    }
  }
  // An object at `level`; of repeated keys the last is kept, as a JSON parser keeps it.
  void object_into(json& out, size_t level) {
    enter(level);
    out = json::object();
    auto& members = out.get_ref<json::object_t&>();
    const size_t n = count(2);
    for (size_t i = 0; i < n; ++i) {
      auto it = members.emplace_hint(members.end(), std::piecewise_construct, std::forward_as_tuple(text()),
                                     std::forward_as_tuple());
      value_into(it->second, level + 1);
    }
  }

 private:
  const unsigned char* p_;
  const unsigned char* const end_;
  const size_t max_depth_;
};

}  // namespace

bool pack_message(const Message& m, std::string& out) {
  if (!m.parts.empty()) return false;
  // The fields to_json_string writes: the content when it writes one, the others when set.
  const bool content = m.has_content || m.role != Role::assistant;
  const uint8_t flags = (content ? kContent : 0) | (m.tool_calls.empty() ? 0 : kToolCalls) |
                        (m.tool_call_id.empty() ? 0 : kToolCallId) | (m.name.empty() ? 0 : kName) |
                        (m.error.empty() ? 0 : kError) | (m.encrypted_value.empty() ? 0 : kEncryptedValue) |
                        (m.metadata.is_object() ? kMetadata : 0);
  const char head[3] = {kPackedMessage, static_cast<char>(role_code(m.role)), static_cast<char>(flags)};
  out.append(head, sizeof head);
  put_string(out, m.id);
  if (content) put_string(out, m.content);
  if (flags & kToolCalls) {
    put_varint(out, m.tool_calls.size());
    for (const auto& c : m.tool_calls) {
      put_string(out, c.id);
      put_string(out, c.name);
      put_string(out, c.arguments);
    }
  }
  if (flags & kToolCallId) put_string(out, m.tool_call_id);
  if (flags & kName) put_string(out, m.name);
  if (flags & kError) put_string(out, m.error);
  if (flags & kEncryptedValue) put_string(out, m.encrypted_value);
  if (flags & kMetadata) put_value(out, m.metadata);
  return true;
}

size_t row_end(std::span<const MessageRecord> messages, size_t from) {
  size_t end = from + 1;
  while (end < messages.size() && messages[end].run_id == messages[from].run_id &&
         messages[end].turn_id == messages[from].turn_id)
    ++end;
  return end;
}

bool pack_row(std::span<const MessageRecord> messages, std::string& out) {
  if (messages.size() == 1) {
    if (pack_message(messages[0].message, out)) return true;
    out += to_json_string(messages[0].message);
    return false;
  }
  out += kPackedMessages;
  put_varint(out, messages.size());
  std::string one;
  for (const auto& m : messages) {
    one.clear();
    if (!pack_message(m.message, one)) one = to_json_string(m.message);
    put_varint(out, one.size());
    out += one;
  }
  return true;
}

void split_row(std::string_view body, std::vector<std::string_view>& parts) {
  parts.clear();
  if (body.empty() || body.front() != kPackedMessages) {
    parts.push_back(body);
    return;
  }
  Reader in(body.substr(1), 0);
  const size_t n = in.count(1);
  if (n < 2) Reader::damaged(fmt::format("a group of {} messages", n));
  parts.reserve(n);
  for (size_t i = 0; i < n; ++i) parts.push_back(in.bytes());
  if (!in.at_end()) Reader::damaged(fmt::format("{} bytes after the group's end", in.left()));
}

Message unpack_message(std::string_view body, size_t max_depth) {
  if (body.empty() || body.front() != kPackedMessage) {
    try {
      return message_from_json_text(body, max_depth);
    } catch (const json::exception& e) {
      throw Error(ErrorCode::invalid_argument, fmt::format("not a message: {}", e.what()));
    }
  }
  Reader in(body.substr(1), max_depth);
  Message m;
  in.enter(1);
  const uint8_t role = in.byte();
  if (role >= std::size(kRoles)) Reader::damaged(fmt::format("an unknown role (code {})", role));
  m.role = kRoles[role];
  const uint8_t flags = in.byte();
  if (flags & ~kKnownFlags) Reader::damaged(fmt::format("unknown fields (flags {:#04x})", flags));
  in.text_into(m.id);
  if (flags & kContent) {
    in.text_into(m.content);
  } else if (m.role == Role::assistant) {
    m.has_content = false;
  } else if (m.role != Role::activity) {
    Reader::damaged(fmt::format("'content' is required (role {})", to_string(m.role)));
  }
  if (flags & kToolCalls) {
    in.enter(4);  // the list, a call and its function
    const size_t n = in.count(3);
    m.tool_calls.resize(n);
    for (auto& c : m.tool_calls) {
      in.text_into(c.id);
      in.text_into(c.name);
      in.text_into(c.arguments);
    }
  }
  if (flags & kToolCallId) in.text_into(m.tool_call_id);
  if (m.role == Role::tool && m.tool_call_id.empty()) Reader::damaged("'toolCallId' is required (role tool)");
  if (flags & kName) in.text_into(m.name);
  if (flags & kError) in.text_into(m.error);
  if (flags & kEncryptedValue) in.text_into(m.encrypted_value);
  if (flags & kMetadata) {
    if (in.byte() != kObject) Reader::damaged("its metadata is not an object");
    in.object_into(m.metadata, 2);
  }
  if (!in.at_end()) Reader::damaged(fmt::format("{} bytes after its end", in.left()));
  return m;
}

}  // namespace sqlite
}  // namespace v1
}  // namespace agentrt
