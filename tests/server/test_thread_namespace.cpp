// The server's thread namespaces: every frame's JSON has the runtime's thread id replaced by the client's. The
// rewrite first searches the text for the id between quotes (sixteen places a step); it must never miss one.
#include <doctest/doctest.h>

#include <optional>
#include <random>
#include <string>
#include <thread>

#include "thread_namespace.hpp"

using namespace agentrt::server;

namespace {

// Every JSON string token equal to `from` replaced, found by walking the tokens (no search first).
std::string reference(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] != '"') {
      out += text[i++];
      continue;
    }
    size_t j = i + 1;
    while (j < text.size() && text[j] != '"') j += text[j] == '\\' ? 2 : 1;
    if (j >= text.size()) {
      out.append(text.substr(i));
      break;
    }
    const std::string_view inner = text.substr(i + 1, j - i - 1);
    out += '"';
    out.append(inner == from ? to : inner);
    out += '"';
    i = j + 1;
  }
  return out;
}

}  // namespace

TEST_CASE("server thread namespace: the id is replaced wherever it stands between quotes, never elsewhere") {
  const std::string from = internal_thread_id("alice", "t-1");
  const std::string to = "t-1";
  // The id as a string at every offset of texts of every length around the sixteen-byte steps, with filler that
  // has quotes, the id's first letter and near misses (the id one byte short, or one longer).
  const std::string fillers[] = {"x",       "\"", "u", ",\"k\":", "\"u\"", "\\\"", from.substr(0, from.size() - 1),
                                 from + "z"};
  size_t cases = 0;
  for (size_t before = 0; before < 40; ++before)
    for (size_t after = 0; after < 24; ++after)
      for (const auto& fill : fillers) {
        std::string text;
        while (text.size() < before) text += fill;
        text.resize(before);
        const size_t at = text.size();
        text += "\"" + from + "\"";
        std::string tail;
        while (tail.size() < after) tail += fill;
        tail.resize(after);
        text += tail;
        CAPTURE(text);
        CHECK(rewrite_json_string(text, from, to) == reference(text, from, to));
        std::string out = "prefix:";
        append_rewritten_json(out, text, from, to);
        CHECK(out == "prefix:" + reference(text, from, to));
        (void)at;
        ++cases;
      }
  CHECK(cases == 40 * 24 * 8);

  // Random texts of quotes, id pieces and bytes, against the reference.
  std::mt19937 rng(7);
  const std::string pieces[] = {"\"", from, "u", "\\", "a", "\"" + from + "\"", ":", "\"" + from, from + "\""};
  for (int round = 0; round < 3000; ++round) {
    std::string text;
    const int n = static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) text += pieces[rng() % std::size(pieces)];
    CAPTURE(text);
    CHECK(rewrite_json_string(text, from, to) == reference(text, from, to));
  }

  // Short ids and texts: nothing read past the end, the exact answer still.
  CHECK(rewrite_json_string("\"a\"", "a", "b") == "\"b\"");
  CHECK(rewrite_json_string("\"a", "a", "b") == "\"a");
  CHECK(rewrite_json_string("", "a", "b").empty());
  CHECK(rewrite_json_string("\"ab\"", "a", "b") == "\"ab\"");
  CHECK(rewrite_json_string(R"({"threadId":"x","v":["x","xx"]})", "x", "yy") == R"({"threadId":"yy","v":["yy","xx"]})");
}

TEST_CASE("server thread namespace: each user's threads have a prefix of their own, the same on every call") {
  // Users one after another on one thread and on others (each keeps its last user's prefix).
  const std::string alice = internal_thread_id("alice", "t-1");
  const std::string bob = internal_thread_id("bob", "t-1");
  CHECK(alice != bob);
  CHECK(alice.size() == std::string("u0123456789ab.t-1").size());
  CHECK(internal_thread_id("alice", "t-1") == alice);
  CHECK(internal_thread_id("alice", "t-2") == alice.substr(0, alice.size() - 1) + "2");
  CHECK(internal_thread_id("bob", "t-1") == bob);
  CHECK(client_thread_id("alice", alice) == std::optional<std::string>("t-1"));
  CHECK(client_thread_id("bob", alice) == std::nullopt);
  CHECK(client_thread_id("alic", alice) == std::nullopt);
  CHECK(client_thread_id("alice", bob) == std::nullopt);
  std::string on_other;
  std::thread([&] { on_other = internal_thread_id("bob", "t-1") + " " + internal_thread_id("alice", "t-1"); }).join();
  CHECK(on_other == bob + " " + alice);
}
