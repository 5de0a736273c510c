// The recorded streams in tests/fixtures/openai-streams/ and the chunk accumulator's rules.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "agentrt/error.hpp"
#include "model/openai_stream.hpp"
#include "net/sse_parser.hpp"

#ifndef AGENTRT_FIXTURES_DIR
#error "AGENTRT_FIXTURES_DIR must name tests/fixtures (the build sets it)"
#endif

using agentrt::Error;
using agentrt::ErrorCode;
using agentrt::json;
using agentrt::openai::ChatStreamAccumulator;

namespace {

const std::filesystem::path kFixtures = std::filesystem::path(AGENTRT_FIXTURES_DIR) / "openai-streams";

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  REQUIRE_MESSAGE(f.good(), "cannot read ", p.string());
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// *.sse is a response body as is; *.chunks.txt becomes one as vercel/ai's tests do it.
std::string fixture_body(const std::string& name) {
  std::string raw = read_file(kFixtures / name);
  if (name.size() < 11 || name.substr(name.size() - 11) != ".chunks.txt") return raw;
  std::string body;
  std::istringstream lines(raw);
  for (std::string line; std::getline(lines, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    body += "data: " + line + "\n\n";
  }
  return body + "data: [DONE]\n\n";
}

// Records what reached the sink, to check it agrees with the result.
struct RecordingSink : agentrt::ModelStreamSink {
  std::string text, reasoning;
  struct Call {
    int starts = 0;
    std::string id, name, args;
  };
  std::map<int, Call> calls;
  std::vector<std::string> order;  // "start:<index>" / "args:<index>" in arrival order
  void on_text(std::string_view d) override { text += d; }
  void on_reasoning(std::string_view d) override { reasoning += d; }
  void on_tool_call_start(int index, std::string_view id, std::string_view name) override {
    auto& c = calls[index];
    ++c.starts;
    c.id = id;
    c.name = name;
    order.push_back("start:" + std::to_string(index));
  }
  void on_tool_call_args(int index, std::string_view delta) override {
    calls[index].args += delta;
    order.push_back("args:" + std::to_string(index));
  }
};

json or_null(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }
json or_null(const std::optional<std::string>& s) { return s ? json(*s) : json(nullptr); }

// The accumulated state in the shape of expected.json (see accumulate.py).
json summarize(const ChatStreamAccumulator& acc) {
  json calls = json::array();
  for (const auto& [index, c] : acc.tool_calls()) {
    calls.push_back({{"index", index},
                     {"id", c.id},
                     {"type", c.type.empty() ? "function" : c.type},
                     {"name", c.name},
                     {"arguments", c.arguments},
                     {"arguments_parse_as_json", json::accept(c.arguments)}});
  }
  return {{"events", acc.events()},
          {"saw_done", acc.done()},
          {"id", or_null(acc.id())},
          {"model", or_null(acc.model())},
          {"role", or_null(acc.role())},
          {"content", or_null(acc.content())},
          {"reasoning_content", or_null(acc.reasoning())},
          {"tool_calls", calls},
          {"finish_reason", or_null(acc.finish_reason())},
          {"usage", acc.usage()}};
}

struct Parsed {
  json summary;
  agentrt::ModelResult result;
  RecordingSink sink;
};

// Feeds `body` cut into the given pieces through the SSE parser into an accumulator.
void parse_pieces(const std::vector<std::string_view>& pieces, Parsed& out) {
  agentrt::net::SseParser parser;
  ChatStreamAccumulator acc(&out.sink);
  for (auto piece : pieces) parser.feed(piece, [&](const agentrt::net::SseEvent& e) { acc.on_event(e); });
  if (auto last = parser.finish()) acc.on_last_event(*last);
  out.result = acc.finish();
  out.summary = summarize(acc);
}

// The events an SSE parser produces from the pieces, end of stream included.
using EventKey = std::pair<std::string, std::string>;  // event type, data
std::vector<EventKey> sse_events(const std::vector<std::string_view>& pieces) {
  agentrt::net::SseParser parser;
  std::vector<EventKey> out;
  for (auto piece : pieces) {
    parser.feed(piece, [&](const agentrt::net::SseEvent& e) { out.emplace_back(e.event, e.data); });
  }
  if (auto last = parser.finish()) out.emplace_back(last->event, last->data);
  return out;
}

std::vector<std::string> fixture_names() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(kFixtures)) {
    const std::string n = entry.path().filename().string();
    const bool sse = n.size() > 4 && n.substr(n.size() - 4) == ".sse";
    const bool chunks = n.size() > 11 && n.substr(n.size() - 11) == ".chunks.txt";
    if (sse || chunks) names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

agentrt::net::SseEvent data_event(std::string data) {
  agentrt::net::SseEvent e;
  e.data = std::move(data);
  return e;
}

void feed_chunks(ChatStreamAccumulator& acc, const std::vector<json>& chunks, bool done = true) {
  for (const auto& c : chunks) acc.on_event(data_event(c.dump()));
  if (done) acc.on_event(data_event("[DONE]"));
}

json delta_chunk(json delta, json finish = nullptr) {
  return {{"id", "x"},
          {"model", "m"},
          {"choices", json::array({{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}})}};
}

json tool_fragment(json fragment) { return delta_chunk({{"tool_calls", json::array({fragment})}}); }

}  // namespace

TEST_CASE("every recorded stream accumulates to its expected result, and the sink saw the same answer") {
  const json expected = json::parse(read_file(kFixtures / "expected.json"));
  const auto names = fixture_names();
  REQUIRE(names.size() == expected.size());
  for (const auto& name : names) {
    CAPTURE(name);
    REQUIRE(expected.contains(name));
    const std::string body = fixture_body(name);
    Parsed p;
    parse_pieces({body}, p);
    CHECK(p.summary == expected[name]);

    // The sink and the returned result agree with the accumulated state.
    const json& content = expected[name]["content"];
    CHECK(p.sink.text == (content.is_null() ? std::string() : content.get<std::string>()));
    CHECK(p.sink.text == p.result.text);
    CHECK(p.sink.reasoning == p.result.reasoning);
    REQUIRE(p.result.tool_calls.size() == expected[name]["tool_calls"].size());
    for (size_t i = 0; i < p.result.tool_calls.size(); ++i) {
      const json& want = expected[name]["tool_calls"][i];
      const auto& got = p.result.tool_calls[i];
      CHECK(got.id == want["id"].get<std::string>());
      CHECK(got.name == want["name"].get<std::string>());
      CHECK(got.arguments == want["arguments"].get<std::string>());
      const auto& seen = p.sink.calls.at(want["index"].get<int>());
      CHECK(seen.starts == 1);
      CHECK(seen.id == got.id);
      CHECK(seen.name == got.name);
      CHECK(seen.args == got.arguments);
    }
    CHECK(p.result.finish_reason == "tool_calls");
    CHECK(p.result.usage.has_value() == !expected[name]["usage"].is_null());
  }
}

TEST_CASE("every recorded stream gives the same result when its bytes are cut at any point or read one by one") {
  const json expected = json::parse(read_file(kFixtures / "expected.json"));
  for (const auto& name : fixture_names()) {
    CAPTURE(name);
    const std::string body = fixture_body(name);
    const std::string_view all(body);
    const std::vector<EventKey> whole = sse_events({all});
    size_t mismatches = 0;
    for (size_t cut = 0; cut <= body.size(); ++cut) {
      // The accumulator sees nothing but these events, so equal events mean an equal result; the full
      // accumulation runs as well near every line end, where a cut matters most, and every 50 bytes.
      const std::vector<std::string_view> pieces{all.substr(0, cut), all.substr(cut)};
      if (sse_events(pieces) != whole) {
        ++mismatches;
        CAPTURE(cut);
        FAIL_CHECK("the events differ when the stream is cut");
      }
      const bool near_line_end = (cut > 0 && (body[cut - 1] == '\n' || body[cut - 1] == '\r')) ||
                                 (cut < body.size() && (body[cut] == '\n' || body[cut] == '\r'));
      if (near_line_end || cut % 50 == 0) {
        Parsed p;
        parse_pieces(pieces, p);
        if (p.summary != expected[name]) {
          ++mismatches;
          CAPTURE(cut);
          CHECK(p.summary == expected[name]);
        }
      }
    }
    CHECK(mismatches == 0);

    std::vector<std::string_view> bytes;
    for (size_t i = 0; i < body.size(); ++i) bytes.push_back(all.substr(i, 1));
    CHECK(sse_events(bytes) == whole);
    Parsed p;
    parse_pieces(bytes, p);
    CHECK(p.summary == expected[name]);
  }
}

TEST_CASE("recorded streams map usage to AG-UI TokenUsage counts") {
  Parsed p;
  parse_pieces({fixture_body("deepseek-reasoner-reasoning-then-tool-call.chunks.txt")}, p);
  REQUIRE(p.result.usage.has_value());
  const auto& u = *p.result.usage;
  CHECK(u.provider == "openai-compatible");
  CHECK(u.model == "deepseek-reasoner");
  CHECK(u.input_tokens == 339);
  CHECK(u.output_tokens == 83);
  CHECK(u.total_tokens == 422);
  CHECK(u.reasoning_tokens == 39);
  CHECK(u.cached_input_tokens == 320);
  CHECK(p.sink.reasoning.size() > 100);
  CHECK(p.sink.text.empty());
}

TEST_CASE("a tool call without an id gets a made-up call_ id, announced at the end with every fragment") {
  RecordingSink sink;
  ChatStreamAccumulator acc(&sink);
  feed_chunks(
      acc, {tool_fragment({{"index", 0}, {"type", "function"}, {"function", {{"name", "lookup"}, {"arguments", ""}}}}),
            tool_fragment({{"index", 0}, {"function", {{"arguments", "{\"q\":"}}}}),
            tool_fragment({{"index", 0}, {"function", {{"arguments", "\"x\"}"}}}}),
            delta_chunk(json::object(), "tool_calls")});
  CHECK(sink.calls.empty());  // held back: the id is unknown while the arguments stream
  auto result = acc.finish();
  REQUIRE(result.tool_calls.size() == 1);
  const auto& call = result.tool_calls[0];
  CHECK(call.id.rfind("call_", 0) == 0);
  CHECK(call.id.size() == 29);
  CHECK(call.arguments == "{\"q\":\"x\"}");
  REQUIRE(sink.calls.count(0) == 1);
  CHECK(sink.calls[0].starts == 1);
  CHECK(sink.calls[0].id == call.id);
  CHECK(sink.calls[0].args == call.arguments);
  CHECK(sink.order == std::vector<std::string>{"start:0", "args:0"});
}

TEST_CASE("a tool call is announced as soon as its id and name are known, then its fragments follow one by one") {
  RecordingSink sink;
  ChatStreamAccumulator acc(&sink);
  feed_chunks(acc, {tool_fragment({{"index", 3}, {"function", {{"name", "book_room"}, {"arguments", "{\"ro"}}}}),
                    tool_fragment({{"index", 3}, {"id", "late_id"}, {"function", {{"arguments", "om\":"}}}}),
                    tool_fragment({{"index", 3}, {"id", ""}, {"function", {{"name", ""}, {"arguments", "1}"}}}}),
                    delta_chunk(json::object(), "tool_calls")});
  CHECK(sink.order == std::vector<std::string>{"start:3", "args:3", "args:3"});
  CHECK(sink.calls[3].id == "late_id");
  CHECK(sink.calls[3].name == "book_room");
  CHECK(sink.calls[3].args == "{\"room\":1}");
  auto result = acc.finish();
  REQUIRE(result.tool_calls.size() == 1);
  CHECK(result.tool_calls[0].id == "late_id");
  CHECK(sink.order.size() == 3);  // finish() announced nothing twice
}

TEST_CASE("index-less tool calls in separate chunks with different ids stay separate calls") {
  ChatStreamAccumulator acc;
  feed_chunks(acc, {tool_fragment({{"id", "a1"}, {"function", {{"name", "f"}, {"arguments", "{\"n\":1}"}}}}),
                    tool_fragment({{"id", "b2"}, {"function", {{"name", "g"}, {"arguments", "{\"n\":2}"}}}}),
                    delta_chunk(json::object(), "tool_calls")});
  auto result = acc.finish();
  REQUIRE(result.tool_calls.size() == 2);
  CHECK(result.tool_calls[0].id == "a1");
  CHECK(result.tool_calls[0].arguments == "{\"n\":1}");
  CHECK(result.tool_calls[1].id == "b2");
  CHECK(result.tool_calls[1].name == "g");
  CHECK(result.tool_calls[1].arguments == "{\"n\":2}");
}

TEST_CASE("arguments that are not valid JSON are returned as they came") {
  ChatStreamAccumulator acc;
  feed_chunks(acc,
              {tool_fragment({{"index", 0}, {"id", "c"}, {"function", {{"name", "f"}, {"arguments", "{\"a\": tru"}}}}),
               delta_chunk(json::object(), "length")});
  auto result = acc.finish();
  REQUIRE(result.tool_calls.size() == 1);
  CHECK(result.tool_calls[0].arguments == "{\"a\": tru");
  CHECK(result.finish_reason == "length");
}

TEST_CASE("a tool call that never gets a name is a model error") {
  ChatStreamAccumulator acc;
  feed_chunks(acc, {tool_fragment({{"index", 0}, {"id", "c"}, {"function", {{"arguments", "{}"}}}})});
  try {
    acc.finish();
    FAIL("finish() accepted a nameless tool call");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::model);
    CHECK(std::string(e.what()).find("never got a function name") != std::string::npos);
  }
}

TEST_CASE("reasoning comes from reasoning_content or reasoning, apart from the answer text") {
  RecordingSink sink;
  ChatStreamAccumulator acc(&sink);
  feed_chunks(acc, {delta_chunk({{"reasoning_content", "think "}}), delta_chunk({{"reasoning", "more"}}),
                    delta_chunk({{"content", "Answer"}}, "stop")});
  auto result = acc.finish();
  CHECK(result.reasoning == "think more");
  CHECK(result.text == "Answer");
  CHECK(sink.reasoning == "think more");
  CHECK(sink.text == "Answer");
  CHECK(result.finish_reason == "stop");
}

TEST_CASE("the last non-null usage wins, wherever it rides") {
  ChatStreamAccumulator acc;
  json first = delta_chunk({{"content", "a"}});
  first["usage"] = {{"prompt_tokens", 1}, {"completion_tokens", 1}, {"total_tokens", 2}};
  json later = delta_chunk(json::object(), "stop");
  later["usage"] = {{"prompt_tokens", 10}, {"completion_tokens", 4}, {"total_tokens", 14}};
  json after = delta_chunk(json::object());
  after["usage"] = nullptr;
  feed_chunks(acc, {first, later, after});
  auto result = acc.finish();
  REQUIRE(result.usage.has_value());
  CHECK(result.usage->input_tokens == 10);
  CHECK(result.usage->output_tokens == 4);
  CHECK(result.usage->total_tokens == 14);
  CHECK(result.usage->model == "m");
}

TEST_CASE("an error object inside a 200 stream is a model error with its type and message") {
  const std::vector<std::pair<json, std::string>> shapes = {
      {{{"error", {{"message", "The server had an error"}, {"type", "server_error"}, {"code", nullptr}}}},
       "error in the stream (server_error): The server had an error"},
      {{{"error", {{"code", 400}, {"message", "context too long"}, {"type", "exceed_context_size_error"}}}},
       "error in the stream (type exceed_context_size_error, code 400): context too long"},
      {{{"object", "error"}, {"message", "flat vllm"}, {"type", "BadRequestError"}, {"code", 400}},
       "error in the stream (type BadRequestError, code 400): flat vllm"},
  };
  for (const auto& [chunk, message] : shapes) {
    CAPTURE(message);
    ChatStreamAccumulator acc;
    acc.on_event(data_event(delta_chunk({{"content", "par"}}).dump()));
    try {
      acc.on_event(data_event(chunk.dump()));
      FAIL("the error event was accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::model);
      CHECK(std::string(e.what()) == message);
    }
    REQUIRE(acc.stream_error().has_value());
  }
}

TEST_CASE("an `event: error` SSE event is a model error") {
  ChatStreamAccumulator acc;
  agentrt::net::SseEvent e;
  e.event = "error";
  e.data = "upstream went away";
  CHECK_THROWS_WITH_AS(acc.on_event(e), "error in the stream: upstream went away", Error);
}

TEST_CASE("a stream that ends without [DONE] is an error, not a short answer") {
  ChatStreamAccumulator acc;
  feed_chunks(acc, {delta_chunk({{"content", "Hello"}}), delta_chunk(json::object(), "stop")}, /*done=*/false);
  CHECK_FALSE(acc.done());
  try {
    acc.finish();
    FAIL("a cut stream was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::model);
    CHECK(std::string(e.what()) == "the model stream ended without [DONE] after 2 events: the answer was cut off");
  }
}

TEST_CASE("a chunk that is not a JSON object is a model error") {
  ChatStreamAccumulator acc;
  CHECK_THROWS_AS(acc.on_event(data_event("{\"choices\": [")), Error);
  CHECK_THROWS_AS(acc.on_event(data_event("[1,2]")), Error);
}

TEST_CASE("events after [DONE] are ignored and choices other than the first are skipped") {
  ChatStreamAccumulator acc;
  json two = delta_chunk({{"content", "mine"}});
  two["choices"].push_back({{"index", 1}, {"delta", {{"content", "other"}}}, {"finish_reason", nullptr}});
  acc.on_event(data_event(two.dump()));
  CHECK(acc.on_event(data_event("[DONE]")));
  CHECK(acc.on_event(data_event(delta_chunk({{"content", " late"}}).dump())));
  auto result = acc.finish();
  CHECK(result.text == "mine");
  CHECK(acc.events() == 2);
}

TEST_CASE("a non-streamed chat.completion is read like a stream of one chunk") {
  RecordingSink sink;
  ChatStreamAccumulator acc(&sink);
  acc.on_completion(
      {{"id", "cmpl"},
       {"model", "m"},
       {"choices",
        json::array({{{"index", 0},
                      {"finish_reason", "tool_calls"},
                      {"message",
                       {{"role", "assistant"},
                        {"content", nullptr},
                        {"tool_calls", json::array({{{"id", "c1"},
                                                     {"type", "function"},
                                                     {"function", {{"name", "f"}, {"arguments", "{}"}}}}})}}}}})},
       {"usage", {{"prompt_tokens", 3}, {"completion_tokens", 2}, {"total_tokens", 5}}}});
  auto result = acc.finish();
  REQUIRE(result.tool_calls.size() == 1);
  CHECK(result.tool_calls[0].id == "c1");
  CHECK(result.finish_reason == "tool_calls");
  CHECK(result.usage->total_tokens == 5);
  CHECK(sink.calls[0].starts == 1);
}
