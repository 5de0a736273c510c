#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "net/sse_parser.hpp"

using agentrt::net::SseEvent;
using agentrt::net::SseParser;

namespace {

std::vector<SseEvent> parse_all(SseParser& p, std::string_view bytes) {
  std::vector<SseEvent> out;
  p.feed(bytes, [&](const SseEvent& e) { out.push_back(e); });
  return out;
}

std::vector<std::string> datas(const std::vector<SseEvent>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e.data);
  return out;
}

// The same bytes fed one byte at a time.
std::vector<SseEvent> parse_bytewise(std::string_view bytes) {
  SseParser p;
  std::vector<SseEvent> out;
  for (char c : bytes) p.feed(std::string_view(&c, 1), [&](const SseEvent& e) { out.push_back(e); });
  return out;
}

}  // namespace

TEST_CASE("sse: events end at a blank line with LF, CRLF or CR line ends alike") {
  for (std::string nl : {"\n", "\r\n", "\r"}) {
    CAPTURE(nl.size());
    SseParser p;
    auto events = parse_all(p, "data: one" + nl + nl + "data: two" + nl + nl);
    CHECK(datas(events) == std::vector<std::string>{"one", "two"});
    CHECK(datas(parse_bytewise("data: one" + nl + nl + "data: two" + nl + nl)) ==
          std::vector<std::string>{"one", "two"});
  }
}

TEST_CASE("sse: a CR at the end of one read and the LF at the start of the next are one line end") {
  SseParser p;
  std::vector<SseEvent> out;
  auto cb = [&](const SseEvent& e) { out.push_back(e); };
  p.feed("data: a\r", cb);
  p.feed("\ndata: b\r", cb);
  CHECK(out.empty());  // a CRLF is not a blank line
  p.feed("\n\r", cb);
  REQUIRE(out.size() == 1);
  CHECK(out[0].data == "a\nb");
  p.feed("\n", cb);  // the LF of the CR LF that ended the event: not another blank line
  p.feed("data: c\r\r", cb);
  REQUIRE(out.size() == 2);
  CHECK(out[1].data == "c");
}

TEST_CASE("sse: comment lines are ignored and do not end an event") {
  SseParser p;
  auto events = parse_all(p, ": keep-alive\n\ndata: x\n: mid-event comment\ndata: y\n\n:ping\n\n");
  CHECK(datas(events) == std::vector<std::string>{"x\ny"});
}

TEST_CASE("sse: several data lines are joined with newlines and only one leading space is dropped") {
  SseParser p;
  auto events = parse_all(p, "data:no-space\ndata:  two spaces\ndata\ndata: \n\n");
  REQUIRE(events.size() == 1);
  CHECK(events[0].data == "no-space\n two spaces\n\n");
}

TEST_CASE("sse: event, id and retry fields are parsed; unknown fields are ignored") {
  SseParser p;
  auto events = parse_all(p, "event: error\nid: 42\nretry: 1500\nfoo: bar\ndata: {}\n\ndata: next\n\n");
  REQUIRE(events.size() == 2);
  CHECK(events[0].event == "error");
  CHECK(events[0].id == "42");
  CHECK(events[0].retry == 1500);
  CHECK(events[1].event.empty());  // the type is per event
  CHECK(events[1].id == "42");     // the last event id persists
  CHECK_FALSE(events[1].retry.has_value());
}

TEST_CASE("sse: a retry field that is not all digits is ignored") {
  SseParser p;
  auto events = parse_all(p, "retry: -5\ndata: a\n\nretry: 10x\ndata: b\n\n");
  REQUIRE(events.size() == 2);
  CHECK_FALSE(events[0].retry.has_value());
  CHECK_FALSE(events[1].retry.has_value());
}

TEST_CASE("sse: an event without data is not dispatched and forgets its type") {
  SseParser p;
  auto events = parse_all(p, "event: ping\n\ndata: real\n\n");
  REQUIRE(events.size() == 1);
  CHECK(events[0].event.empty());
  CHECK(events[0].data == "real");
}

TEST_CASE("sse: a leading byte order mark is skipped, also when it is split across reads") {
  SseParser p;
  std::vector<SseEvent> out;
  auto cb = [&](const SseEvent& e) { out.push_back(e); };
  p.feed("\xEF", cb);
  p.feed("\xBB", cb);
  p.feed(
      "\xBF"
      "data: x\n\n",
      cb);
  REQUIRE(out.size() == 1);
  CHECK(out[0].data == "x");
}

TEST_CASE("sse: an event that spans reads is dispatched once, when its blank line arrives") {
  const std::string stream = "data: {\"a\":1}\n\ndata: [DONE]\n\n";
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    CAPTURE(cut);
    SseParser p;
    std::vector<std::string> got;
    auto cb = [&](const SseEvent& e) { got.push_back(e.data); };
    p.feed(std::string_view(stream).substr(0, cut), cb);
    p.feed(std::string_view(stream).substr(cut), cb);
    CHECK(got == std::vector<std::string>{"{\"a\":1}", "[DONE]"});
    CHECK_FALSE(p.finish().has_value());
  }
}

TEST_CASE("sse: finish hands back an event the end of the stream cut short, and nothing after a whole event") {
  std::vector<std::string> got;
  auto cb = [&](const SseEvent& e) { got.push_back(e.data); };

  SseParser p;
  p.feed("data: complete\n\ndata: [DONE]\n", cb);  // a real server's last bytes: no blank line
  CHECK(got == std::vector<std::string>{"complete"});
  auto last = p.finish();
  REQUIRE(last.has_value());
  CHECK(last->data == "[DONE]");
  CHECK(p.pending_bytes() == 0);

  SseParser q;
  q.feed("event: error\ndata: a\ndata: cut of", cb);  // the stream's end also ends the unfinished line
  auto cut = q.finish();
  REQUIRE(cut.has_value());
  CHECK(cut->event == "error");
  CHECK(cut->data == "a\ncut of");

  SseParser r;
  r.feed("data: fine\n\n: trailing comment\nevent: x\n", cb);
  CHECK_FALSE(r.finish().has_value());
  CHECK(got == std::vector<std::string>{"complete", "fine"});
}

TEST_CASE("sse: an exception from the callback propagates and the parser goes on after that event") {
  SseParser p;
  std::vector<std::string> got;
  bool throw_next = true;
  auto cb = [&](const SseEvent& e) {
    if (throw_next) {
      throw_next = false;
      throw std::runtime_error("boom");
    }
    got.push_back(e.data);
  };
  CHECK_THROWS_AS(p.feed("data: a\n\ndata: b\n\n", cb), std::runtime_error);
  p.feed("data: c\n\n", cb);
  CHECK(got == std::vector<std::string>{"c"});
}
