// The SQLite store's packed message rows (src/store/sqlite/message_body.*): a packed message reads back as the
// message its JSON text would, type for type; a damaged one is refused with what is wrong, never read past its end.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "agentrt/error.hpp"
#include "agentrt/events.hpp"
#include "store/sqlite/message_body.hpp"

using namespace agentrt;
using agentrt::sqlite::kPackedMessage;
using agentrt::sqlite::pack_message;
using agentrt::sqlite::unpack_message;

namespace {

constexpr size_t kDepth = kMaxStoredJsonDepth;

// A value written with its type, each number exactly (a double in hex, so -0.0 and 0.0 differ).
std::string typed(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return j.get<bool>() ? "true" : "false";
    case json::value_t::number_integer: return "i" + std::to_string(j.get<int64_t>());
    case json::value_t::number_unsigned: return "u" + std::to_string(j.get<uint64_t>());
    case json::value_t::number_float: return fmt::format("f{:a}", j.get<double>());
    case json::value_t::string: return "s" + j.dump();
    case json::value_t::array: {
      std::string out = "[";
      for (const auto& v : j) out += typed(v) + ",";
      return out + "]";
    }
    case json::value_t::object: {
      std::string out = "{";
      for (const auto& [k, v] : j.get_ref<const json::object_t&>()) out += json(k).dump() + ":" + typed(v) + ",";
      return out + "}";
    }
    default: return "other";
  }
}

std::string typed(const Message& m) {
  std::string out = fmt::format("id={} role={} content={} has_content={} parts={} calls=[", json(m.id).dump(),
                                to_string(m.role), json(m.content).dump(), m.has_content, m.parts.size());
  for (const auto& c : m.tool_calls)
    out += fmt::format("{}|{}|{},", json(c.id).dump(), json(c.name).dump(), json(c.arguments).dump());
  return out + fmt::format("] call_id={} name={} error={} encrypted={} metadata={}", json(m.tool_call_id).dump(),
                           json(m.name).dump(), json(m.error).dump(), json(m.encrypted_value).dump(),
                           typed(m.metadata));
}

std::string packed(const Message& m) {
  std::string out;
  REQUIRE(pack_message(m, out));
  return out;
}

// The message its JSON text reads back as.
Message through_json(const Message& m, size_t depth = kDepth) {
  return message_from_json_text(to_json_string(m), depth);
}

// What `f` is refused with ("" when it is not).
template <class F>
std::string refusal_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return fmt::format("{}: {}", static_cast<int>(e.code()), e.what());
  }
  return "";
}

void check_same_as_json(const Message& m) {
  const std::string body = packed(m);
  CHECK(body.front() == kPackedMessage);
  CHECK(typed(unpack_message(body, kDepth)) == typed(through_json(m)));
}

Message message(Role role, std::string content) {
  Message m;
  m.id = "msg_1";
  m.role = role;
  m.content = std::move(content);
  return m;
}

}  // namespace

TEST_CASE("a packed message reads back as its JSON text would, for each role and field") {
  Message user = message(Role::user, "book a room");
  check_same_as_json(user);
  Message call = message(Role::assistant, "");
  call.has_content = false;
  call.tool_calls = {{"call_1", "book_room", R"({"room":"A1","day":"mon"})"}, {"call_2", "pay", "{}"}};
  check_same_as_json(call);
  call.has_content = true;  // an assistant's empty text is written, and read back, as ""
  check_same_as_json(call);
  Message tool = message(Role::tool, "book_room completed");
  tool.tool_call_id = "call_1";
  tool.error = "boom";
  tool.name = "booker";
  tool.metadata = json::parse(R"({"run_id":"run_1","summary_version":1,"storage_bucket":"","media":[{"a":null}]})");
  check_same_as_json(tool);
  Message final = message(Role::assistant, "Your booking is confirmed.");
  final.encrypted_value = "opaque==";
  final.metadata = {{"worker_agent_output", {{"answer", "ok"}, {"tools", json::array()}, {"usage", {{"n", 3}}}}}};
  check_same_as_json(final);
  for (Role r : {Role::developer, Role::system, Role::activity, Role::reasoning}) check_same_as_json(message(r, "x"));
  Message activity = message(Role::activity, "");
  activity.has_content = false;  // written with its content "", as to_json_string writes every role but an assistant's
  check_same_as_json(activity);
  Message empty_metadata = user;
  empty_metadata.metadata = json::object();
  check_same_as_json(empty_metadata);
  Message null_metadata = user;
  null_metadata.metadata = json::array({1});  // not an object: not written, in either form
  check_same_as_json(null_metadata);
}

TEST_CASE("a packed message keeps every number's type and value as JSON gives them back") {
  Message m = message(Role::tool, "r");
  m.tool_call_id = "c";
  m.metadata = {{"zero", 0},
                {"one_signed", json(int64_t{1})},
                {"minus_one", -1},
                {"min", std::numeric_limits<int64_t>::min()},
                {"max", std::numeric_limits<int64_t>::max()},
                {"umax", std::numeric_limits<uint64_t>::max()},
                {"half", 0.5},
                {"neg_zero", -0.0},
                {"whole", 100.0},
                {"tiny", 5e-324},
                {"huge", 1.7976931348623157e308},
                {"nan", std::nan("")},
                {"inf", std::numeric_limits<double>::infinity()},
                {"flags", {true, false, nullptr}},
                {"binary", json::binary({1, 2, 3})}};
  check_same_as_json(m);
  const Message back = unpack_message(packed(m), kDepth);
  CHECK(back.metadata["zero"].is_number_unsigned());
  CHECK(back.metadata["one_signed"].is_number_unsigned());
  CHECK(back.metadata["minus_one"].get<int64_t>() == -1);
  CHECK(back.metadata["min"].get<int64_t>() == std::numeric_limits<int64_t>::min());
  CHECK(std::signbit(back.metadata["neg_zero"].get<double>()));
  CHECK(back.metadata["nan"].is_null());
  CHECK(back.metadata["binary"] == json::parse(json::binary({1, 2, 3}).dump()));
}

TEST_CASE("a packed message mends ill-formed UTF-8 as the JSON writer does, in every string and key") {
  const std::string bad = std::string("ok \xff\xfe end \xe2\x82", 12);
  Message m = message(Role::tool, bad);
  m.id = "id" + bad;
  m.tool_call_id = bad;
  m.name = bad;
  m.error = bad;
  m.encrypted_value = bad;
  // Two keys that differ only in their bad bytes mend to one: the last in order is kept, as a parser keeps it.
  m.metadata = {{"k\xfe", 1}, {"k\xff", 2}, {"v", bad}, {"list", {bad}}};
  check_same_as_json(m);
  Message call = message(Role::assistant, bad);
  call.tool_calls = {{bad, bad, bad}};
  check_same_as_json(call);
  CHECK(unpack_message(packed(m), kDepth).metadata.size() == 3);
}

TEST_CASE("random messages read back from their packed form as from their JSON text") {
  // Metadata trees drawn from values that each take another path: nesting, numbers at their edges, text that
  // needs escapes or mending.
  std::mt19937 rng(12);
  const std::vector<std::string> texts = {
      "",  "a",          "quote \" and \\ backslash", "line\nbreak\x01", "caf\xc3\xa9", "\xf0\x9f\x98\x80", "\xff",
      "k", "toolCallId", std::string(300, 'x')};
  std::function<json(int)> value = [&](int depth) -> json {
    switch (rng() % (depth > 4 ? 6 : 8)) {
      case 0: return nullptr;
      case 1: return rng() % 2 == 0;
      case 2: return static_cast<int64_t>(rng()) - static_cast<int64_t>(rng()) * 4096;
      case 3: return static_cast<uint64_t>(rng()) << (rng() % 33);
      case 4: return static_cast<double>(static_cast<int32_t>(rng())) / 7.0;
      case 5: return texts[rng() % texts.size()];
      case 6: {
        json a = json::array();
        for (size_t i = rng() % 4; i > 0; --i) a.push_back(value(depth + 1));
        return a;
      }
      default: {
        json o = json::object();
        for (size_t i = rng() % 4; i > 0; --i) o[texts[rng() % texts.size()]] = value(depth + 1);
        return o;
      }
    }
  };
  const Role roles[] = {Role::user, Role::assistant, Role::tool, Role::system, Role::activity};
  for (int round = 0; round < 400; ++round) {
    Message m = message(roles[rng() % std::size(roles)], texts[rng() % texts.size()]);
    m.has_content = m.role != Role::assistant || rng() % 2 == 0;
    if (m.role == Role::assistant)
      for (size_t i = rng() % 3; i > 0; --i)
        m.tool_calls.push_back({texts[rng() % texts.size()], "tool", texts[rng() % texts.size()]});
    if (m.role == Role::tool) m.tool_call_id = "call_" + std::to_string(round);
    if (rng() % 2) m.name = texts[rng() % texts.size()];
    if (rng() % 3 == 0) m.metadata = json::object({{"m", value(0)}, {"n", value(0)}});
    CAPTURE(to_json_string(m));
    check_same_as_json(m);
  }
}

TEST_CASE("a message whose content is a part list is not packed: its JSON text is stored and read") {
  Message m = message(Role::user, "");
  m.parts.push_back(ContentPart{});
  m.parts.back().type = "text";
  m.parts.back().text = "look";
  std::string out = "kept";
  CHECK_FALSE(pack_message(m, out));
  CHECK(out == "kept");
  CHECK(typed(unpack_message(to_json_string(m), kDepth)) == typed(through_json(m)));
}

TEST_CASE("a packed message is nested as deep as its JSON text: the same limit refuses both") {
  // Metadata of `levels` arrays inside it: the message is level 1, the metadata 2, its arrays 3 and on.
  auto nested = [](size_t levels) {
    Message m = message(Role::user, "u");
    json inner = json::array();
    for (size_t i = 1; i < levels; ++i) inner = json::array({inner});
    m.metadata = {{"a", inner}};
    return m;
  };
  for (size_t levels = 1; levels <= 6; ++levels) {
    const Message m = nested(levels);
    for (size_t limit = 2; limit <= 9; ++limit) {
      CAPTURE(levels);
      CAPTURE(limit);
      const std::string json_error = refusal_of([&] { through_json(m, limit); });
      const std::string packed_error = refusal_of([&] { unpack_message(packed(m), limit); });
      CHECK(json_error == packed_error);
      CHECK((levels + 2 <= limit) == json_error.empty());
    }
  }
  // A tool call lies four levels down (the list, the call, its function).
  Message call = message(Role::assistant, "");
  call.tool_calls = {{"c", "n", "{}"}};
  CHECK(refusal_of([&] { unpack_message(packed(call), 3); }) != "");
  CHECK(refusal_of([&] { unpack_message(packed(call), 3); }) == refusal_of([&] { through_json(call, 3); }));
  CHECK(refusal_of([&] { unpack_message(packed(call), 4); }) == "");
}

TEST_CASE("a damaged packed message is refused with what is wrong, at every cut and every changed byte") {
  Message m = message(Role::tool, "book_room completed");
  m.tool_call_id = "call_1";
  m.metadata = {{"n", -5}, {"d", 0.25}, {"list", {"a", true, nullptr}}, {"deep", {{"x", json::object()}}}};
  const std::string body = packed(m);
  auto refusal = [](const std::string& b) {
    try {
      unpack_message(b, kDepth);
      return std::string();
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::invalid_argument);
      return std::string(e.what());
    }
  };
  // Every proper prefix is refused: a packed message says what follows and nothing is optional at its end.
  for (size_t cut = 0; cut < body.size(); ++cut) {
    CAPTURE(cut);
    CHECK(refusal(body.substr(0, cut)) != "");
  }
  // Every byte changed: refused or read, never read past the end (the sanitizers' run checks that).
  for (size_t at = 1; at < body.size(); ++at)
    for (int delta : {1, 0x7f, 0x80, 0xff}) {
      std::string b = body;
      b[at] = static_cast<char>(static_cast<unsigned char>(b[at]) ^ delta);
      (void)refusal(b);
    }
  const std::string head = std::string(1, kPackedMessage);
  CHECK(refusal(head + "\x07\x01\x01i\x00") == "packed message: an unknown role (code 7)");
  CHECK(refusal(head + std::string("\x03\x81\x01i\x00", 5)) == "packed message: unknown fields (flags 0x81)");
  CHECK(refusal(head + std::string("\x03\x01\x01i\x00!", 6)) == "packed message: 1 bytes after its end");
  CHECK(refusal(head + std::string("\x03\x01\x01\xff\x00", 5)) == "packed message: a string is not UTF-8");
  CHECK(refusal(head + std::string("\x03\x01\x05i\x00", 5)) == "packed message: a string runs past its end");
  CHECK(refusal(head + std::string("\x03\x00\x01i", 4)) == "packed message: 'content' is required (role user)");
  CHECK(refusal(head + std::string("\x04\x01\x01i\x00", 5)) == "packed message: 'toolCallId' is required (role tool)");
  CHECK(refusal(head + std::string("\x03\x41\x01i\x00\x07\x00", 7)) == "packed message: its metadata is not an object");
  CHECK(refusal(head + std::string("\x03\x41\x01i\x00\x08\x7f", 7)) == "packed message: a count runs past its end");
  CHECK(refusal(head + std::string("\x03\x41\x01i\x00\x08\x01\x01k\x09", 10)) ==
        "packed message: a value of an unknown kind");
  CHECK(refusal(head + std::string("\x03\x41\x01i\x00\x08\x01\x01k\x04\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 20)) ==
        "packed message: a number is over 64 bits");
  CHECK(refusal(head + std::string("\x03\x41\x01i\x00\x08\x01\x01k\x03\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 20)) ==
        "packed message: a negative number is out of range");
  CHECK(refusal(head + std::string("\x03\x41\x01i\x00\x08\x01\x01k\x05\x00\x00\x00\x00\x00\x00\xf8\x7f", 18)) ==
        "packed message: a number is not finite");
  CHECK(refusal(head + std::string("\x03\x41\x01i\x00\x08\x01\x01k\x05\x00\x00", 12)) ==
        "packed message: it ends early");
  // The smallest well-formed ones read.
  CHECK(unpack_message(head + std::string("\x03\x01\x01i\x00", 5), kDepth).id == "i");
  CHECK(unpack_message(head + std::string("\x02\x00\x00", 3), kDepth).has_content == false);
}

TEST_CASE("a row is the messages that follow each other with one run and one turn; it splits back into them") {
  auto record = [](const char* turn, const char* run, const char* content) {
    Message m = message(Role::user, content);
    return MessageRecord{"t", 0, turn, run, m};
  };
  const std::vector<MessageRecord> messages = {record("a", "r1", "0"), record("a", "r1", "1"), record("b", "r1", "2"),
                                               record("b", "r2", "3"), record("b", "r2", "4"), record("a", "r1", "5")};
  std::vector<size_t> ends;
  for (size_t i = 0; i < messages.size(); i = ends.back()) ends.push_back(agentrt::sqlite::row_end(messages, i));
  CHECK(ends == std::vector<size_t>{2, 3, 5, 6});
  std::string body;
  CHECK(agentrt::sqlite::pack_row(std::span<const MessageRecord>(messages).subspan(0, 2), body));
  CHECK(body.front() == agentrt::sqlite::kPackedMessages);
  std::vector<std::string_view> parts;
  agentrt::sqlite::split_row(body, parts);
  REQUIRE(parts.size() == 2);
  CHECK(unpack_message(parts[1], kDepth).content == "1");
  body.clear();
  CHECK(agentrt::sqlite::pack_row(std::span<const MessageRecord>(messages).subspan(5, 1), body));
  CHECK(body.front() == kPackedMessage);
  agentrt::sqlite::split_row(body, parts);
  CHECK(parts.size() == 1);
}
