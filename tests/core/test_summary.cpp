#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>

#include "agentrt/summary.hpp"
#include "util/utf8.hpp"

using namespace agentrt;

namespace {

size_t code_points(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

const json kNoArgs = json::object();

}  // namespace

TEST_CASE("a failed tool call is summarised as '<tool> failed: <message>'") {
  Summarizer s;
  const ToolSummaryError err{"timeout", "the upstream took\n  too long"};
  CHECK(s.summarize("search_flights", kNoArgs, json(nullptr), &err) ==
        "search_flights failed: the upstream took too long");
}

TEST_CASE("a failure without a message uses the error code, and without either just says failed") {
  Summarizer s;
  const ToolSummaryError code_only{"timeout", ""};
  CHECK(s.summarize("search", kNoArgs, json::object(), &code_only) == "search failed: timeout");
  const ToolSummaryError nothing{"", " \n "};
  CHECK(s.summarize("search", kNoArgs, json::object(), &nothing) == "search failed");
}

TEST_CASE("an error wins over a template and over the result") {
  Summarizer s;
  s.set_template("book", "Booked {room}");
  const ToolSummaryError err{"conflict", "room taken"};
  CHECK(s.summarize("book", kNoArgs, json{{"room", "A1"}, {"message", "ok"}}, &err) == "book failed: room taken");
}

TEST_CASE("a template fills nested result fields, array indexes and args") {
  Summarizer s;
  s.set_template("book_room", "Booked {booking.room} for {guest} ({items.1.name}, {items.0.qty}x)");
  const json args = {{"guest", "Ann"}, {"booking", {{"room", "ignored: result wins"}}}};
  const json result = {{"booking", {{"room", "A1"}}}, {"items", {{{"name", "tea"}, {"qty", 2}}, {{"name", "cake"}}}}};
  CHECK(s.summarize("book_room", args, result) == "Booked A1 for Ann (cake, 2x)");
}

TEST_CASE("a template's {count} is a count field, else the result's array length, else its first array field") {
  Summarizer s;
  s.set_template("list", "Found {count} results");
  CHECK(s.summarize("list", kNoArgs, json{{"count", 42}, {"hits", {1, 2}}}) == "Found 42 results");
  CHECK(s.summarize("list", kNoArgs, json::array({1, 2, 3})) == "Found 3 results");
  // json sorts keys, so "alpha" is the first array field even though it was written second.
  CHECK(s.summarize("list", kNoArgs, json{{"zeta", {1}}, {"alpha", {1, 2, 3, 4}}, {"name", "x"}}) == "Found 4 results");
  CHECK(s.summarize("list", json{{"count", 9}}, json{{"name", "x"}}) == "Found 9 results");
}

TEST_CASE("a template with a missing or null placeholder falls through to the next rule") {
  Summarizer s;
  s.set_template("lookup", "Room {booking.room} on floor {booking.floor}");
  CHECK(s.summarize("lookup", kNoArgs, json{{"booking", {{"room", "A1"}}}, {"message", "Booked room A1"}}) ==
        "Booked room A1");
  CHECK(s.summarize("lookup", kNoArgs, json{{"booking", {{"room", "A1"}, {"floor", nullptr}}}}) == "lookup completed");
  s.set_template("idx", "First: {items.5}");
  CHECK(s.summarize("idx", kNoArgs, json{{"items", {1, 2}}, {"status", "ok"}}) == "status: ok");
  s.set_template("bad_index", "{items.x}");
  CHECK(s.summarize("bad_index", kNoArgs, json{{"items", {1, 2}}}) == "bad_index completed");
}

TEST_CASE("objects and arrays in placeholders render as text, never as JSON") {
  Summarizer s;
  s.set_template("show", "Booking: {booking} | tags: {tags} | guests: {guests} | none: {empty}");
  const json result = {
      {"booking",
       {{"room", "A1"},
        {"floor", 2},
        {"extra", {{"view", "sea"}, {"bed", {{"size", "king"}}}}},
        {"note", nullptr},
        {"ok", true}}},
      {"tags", {"quiet", "sea view"}},
      {"guests", {{{"name", "Ann"}}, {{"name", "Bo"}}}},
      {"empty", json::array()},
  };
  CHECK(s.summarize("show", kNoArgs, result) ==
        "Booking: extra.bed.size: king, extra.view: sea, floor: 2, ok: true, room: A1 | tags: quiet, sea view | "
        "guests: 2 items | none: 0 items");
}

TEST_CASE("doubled braces in a template are literal braces and a lone brace is kept") {
  Summarizer s;
  s.set_template("t", "{{id}} = {id} { }");
  CHECK(s.summarize("t", kNoArgs, json{{"id", 7}}) == "{id} = 7 { }");
}

TEST_CASE("a later set_template replaces the earlier one for the same tool") {
  Summarizer s;
  s.set_template("t", "one {id}");
  s.set_template("t", "two {id}");
  CHECK(s.summarize("t", kNoArgs, json{{"id", "x"}}) == "two x");
}

TEST_CASE("a string result is the summary, cleaned") {
  Summarizer s;
  CHECK(s.summarize("echo", kNoArgs, json("  hello\n\tworld  ")) == "hello world");
  CHECK(s.summarize("echo", kNoArgs, json(" \n ")) == "echo completed");
}

TEST_CASE("summary, message and content fields are used in that order") {
  Summarizer s;
  CHECK(s.summarize("t", kNoArgs, json{{"content", "c"}, {"message", "m"}, {"summary", "s"}}) == "s");
  CHECK(s.summarize("t", kNoArgs, json{{"content", "c"}, {"message", "m"}}) == "m");
  CHECK(s.summarize("t", kNoArgs, json{{"content", "c"}, {"message", ""}, {"title", "T"}}) == "c");
  CHECK(s.summarize("t", kNoArgs, json{{"message", 5}, {"title", "T"}}) == "title: T");
}

TEST_CASE("MCP-style content parts are joined into the summary") {
  Summarizer s;
  const json result = {{"content",
                        {{{"type", "text"}, {"text", "Two files"}},
                         {{"type", "image"}, {"data", "AAAA"}},
                         {{"type", 3}, {"text", "skipped"}},
                         {{"type", "text"}, {"text", "found."}}}}};
  CHECK(s.summarize("fs", kNoArgs, result) == "Two files found.");
}

TEST_CASE("common scalar fields are listed as 'key: value' pairs in a fixed order") {
  Summarizer s;
  const json result = {{"id", 17},   {"status", "confirmed"},          {"title", "Dinner"},  {"total", 12.5},
                       {"name", ""}, {"location", {{"city", "Oslo"}}}, {"secret", "hidden"}, {"error", nullptr}};
  CHECK(s.summarize("book", kNoArgs, result) == "title: Dinner, status: confirmed, id: 17, total: 12.5");
}

TEST_CASE("anything else is '<tool> completed'") {
  Summarizer s;
  CHECK(s.summarize("ping", kNoArgs, json(nullptr)) == "ping completed");
  CHECK(s.summarize("ping", kNoArgs, json::array({1, 2})) == "ping completed");
  CHECK(s.summarize("ping", kNoArgs, json(42)) == "ping completed");
  CHECK(s.summarize("ping", kNoArgs, json{{"data", {{"x", 1}}}}) == "ping completed");
  CHECK(s.summarize("", kNoArgs, json(nullptr)) == "tool completed");
}

TEST_CASE("cleaning turns control characters into single spaces and drops bidi overrides") {
  CHECK(clean_summary_text("  a\r\n\tb\x01\x7f"
                           "c\xc2\x85"
                           "d\xc2\xa0\xe3\x80\x80"
                           "e  ",
                           100) == "a b c d e");
  // U+202E RIGHT-TO-LEFT OVERRIDE, U+2066 isolate, U+200B zero-width space and a BOM disappear.
  CHECK(clean_summary_text("ab\xe2\x80\xae"
                           "cd\xe2\x81\xa6"
                           "e\xe2\x80\x8b"
                           "f\xef\xbb\xbf",
                           100) == "abcdef");
  CHECK(clean_summary_text("", 10).empty());
  CHECK(clean_summary_text("anything", 0).empty());
}

TEST_CASE("Chinese text exactly at the limit is kept whole and one more character cuts it with an ellipsis") {
  CHECK(clean_summary_text("你好世界", 4) == "你好世界");
  CHECK(clean_summary_text("你好世界啊", 4) == "你好世…");
  Summarizer s(6);
  CHECK(s.summarize("t", kNoArgs, json("预订成功了吗")) == "预订成功了吗");
  CHECK(s.summarize("t", kNoArgs, json("预订成功了吗？")) == "预订成功了…");
}

TEST_CASE("emoji exactly at the limit are kept and the cut never splits a 4-byte sequence") {
  CHECK(clean_summary_text("😀😀😀", 3) == "😀😀😀");
  CHECK(clean_summary_text("😀😀😀😀", 3) == "😀😀…");
  CHECK(clean_summary_text("a😀 b", 3) == "a😀…");  // the space before the cut is dropped too
  // A ZWJ sequence cut right after the joiner does not leave a dangling joiner.
  CHECK(clean_summary_text("👩\u200d💻 codes", 3) == "👩…");
  CHECK(clean_summary_text("x", 1) == "x");
  CHECK(clean_summary_text("xy", 1) == "…");
}

TEST_CASE("a 1 MB result is summarised quickly to at most max_chars code points") {
  std::string big;
  while (big.size() < (1u << 20)) big += "lorem ipsum\n\t dolor ";
  Summarizer s(50);
  const auto start = std::chrono::steady_clock::now();
  const std::string from_string = s.summarize("t", kNoArgs, json(big));
  json many = json::object();
  for (int i = 0; i < 20000; ++i) many["k" + std::to_string(i)] = "lorem ipsum dolor";
  s.set_template("t2", "{all}");
  const std::string from_object = s.summarize("t2", kNoArgs, json{{"all", many}});
  const json numbers(std::vector<int>(200000, 7));
  s.set_template("t3", "{n}");
  const std::string from_array = s.summarize("t3", json{{"n", numbers}}, json::object());
  const auto elapsed = std::chrono::steady_clock::now() - start;

  CHECK(from_string == "lorem ipsum dolor lorem ipsum dolor lorem ipsum d…");
  CHECK(code_points(from_string) == 50);
  CHECK(from_object == "k0: lorem ipsum dolor, k1: lorem ipsum dolor, k10…");
  CHECK(from_array == "7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7…");
  CHECK(elapsed < std::chrono::seconds(2));
}

TEST_CASE("invalid UTF-8 becomes U+FFFD, one per maximal invalid subsequence") {
  CHECK(clean_summary_text("a\xff"
                           "b",
                           100) ==
        "a\xef\xbf\xbd"
        "b");
  CHECK(clean_summary_text("\xe4\xbd", 100) == "\xef\xbf\xbd");              // truncated 你 at the end
  CHECK(clean_summary_text("\xe4\xbdx", 100) == "\xef\xbf\xbdx");            // truncated 你, then a valid byte
  CHECK(clean_summary_text("\xc0\xaf", 100) == "\xef\xbf\xbd\xef\xbf\xbd");  // overlong '/'
  CHECK(clean_summary_text("\xed\xa0\x80", 100) == "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");  // surrogate
  CHECK(clean_summary_text("\xf4\x90\x80\x80", 100) ==
        "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");         // above U+10FFFF
  CHECK(clean_summary_text("\xf0\x9f\x98", 100) == "\xef\xbf\xbd");  // truncated emoji
}

TEST_CASE("summaries of results with invalid UTF-8 are valid UTF-8, also when cut") {
  Summarizer s(5);
  const std::string garbage =
      "ok\x80\xfe\xe4\xbd\xa0\xe4\xbd"
      "abc\xf0\x9f\x98\x80\xff";
  const std::string out = s.summarize("t", kNoArgs, json(garbage));
  CHECK(is_valid_utf8(out));
  CHECK(out == "ok\xef\xbf\xbd\xef\xbf\xbd…");
  s.set_max_chars(100);
  CHECK(s.max_chars() == 100);
  const std::string full = s.summarize("t\xff", kNoArgs, json(nullptr));
  CHECK(full == "t\xef\xbf\xbd completed");
  CHECK(is_valid_utf8(s.summarize("t", kNoArgs, json(garbage))));
}

TEST_CASE("summarize may run while templates are being replaced") {
  Summarizer s;
  s.set_template("t", "A {id}");
  std::thread writer([&] {
    for (int i = 0; i < 2000; ++i) s.set_template("t", i % 2 ? "A {id}" : "B {id}");
  });
  bool all_expected = true;
  for (int i = 0; i < 2000; ++i) {
    const std::string out = s.summarize("t", kNoArgs, json{{"id", 1}});
    all_expected = all_expected && (out == "A 1" || out == "B 1");
  }
  writer.join();
  CHECK(all_expected);
}
