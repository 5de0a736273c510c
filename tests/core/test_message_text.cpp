// message_from_json_text (the store's read path over simdjson's DOM) against message_from_json over
// parse_json: the same message, or the same error, for every text.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "agentrt/content.hpp"
#include "agentrt/error.hpp"
#include "util/json_fast.hpp"

using namespace agentrt;

namespace {

// What reading `text` gives: the message as its JSON text, or the error as "<kind>: <message>".
std::string outcome(bool dom, const std::string& text, size_t max_depth) {
  try {
    const Message m =
        dom ? message_from_json_text(text, max_depth) : message_from_json(parse_json(text, max_depth), max_depth);
    return to_json_string(m) + (m.has_content ? " +content" : " -content");
  } catch (const Error& e) {
    return "Error " + std::to_string(static_cast<int>(e.code())) + ": " + e.message();
  } catch (const json::exception& e) {
    return std::string("json::exception: ") + e.what();
  }
}

}  // namespace

TEST_CASE("a message read from its text is the message read from its parsed value, errors included") {
  const std::string deep_meta = [] {
    std::string t = R"({"id":"m","role":"assistant","content":"x","metadata":{"a":)";
    for (int i = 0; i < 9; ++i) t += R"({"b":)";
    t += "1";
    for (int i = 0; i < 9; ++i) t += "}";
    return t + "}}";
  }();
  const std::vector<std::string> texts = {
      // Well-formed messages of every shape the store writes.
      R"({"id":"msg_1","role":"user","content":"book a room"})",
      R"({"id":"msg_2","role":"assistant","toolCalls":[{"id":"call_1","type":"function","function":{"name":"book_room","arguments":"{\"room\":\"A1\"}"}}]})",
      R"({"id":"msg_3","role":"tool","content":"done","toolCallId":"call_1","metadata":{"tool_call_id":"call_1","summary_version":1,"payload_has_ui":false}})",
      R"({"id":"msg_4","role":"assistant","content":"Your booking \u00e9 \"ok\"","metadata":{"worker_agent_output":{"answer":"a","tools":[{"status":"succeeded"}],"usage":[],"n":-5,"f":1.5,"big":18446744073709551615}}})",
      R"({"id":"msg_5","role":"user","content":[{"type":"text","text":"hi"},{"type":"image","source":{"type":"url","value":"http://x/y","mimeType":"image/png"},"metadata":{"k":[1,2]}}]})",
      R"({"id":"msg_6","role":"system","content":"ERROR model_error: down","name":"n","error":"e"})",
      R"({"id":"msg_7","role":"assistant","content":null})",
      R"({"id":"msg_8","role":"assistant","content":"","toolCalls":[]})",
      R"({"id":"msg_9","role":"activity"})",
      R"({"id":"msg_10","role":"user","content":[{"type":"binary","mimeType":"image/png","data":"AAAA","filename":"a.png"}]})",
      // Repeated keys: nlohmann keeps the last.
      R"({"id":"first","id":"last","role":"user","content":"a","content":"b","metadata":{"x":1},"metadata":{"y":2}})",
      // Keys of a known key's size that are not it, in any case (the DOM reader sorts keys by size, then bytes).
      R"({"id":"m","rolE":"x","role":"user","nam":"q","name":"n","content":"c","toolcalls":5,"Metadata":[1],"ID":2})",
      R"({"id":"m","role":"assistant","toolCalls":[{"id":"c","type":"x","typo":1,"function":{"name":"f","arguments":"{}","argument5":1},"functioN":2}]})",
      // Repeated keys among exactly 12 members, and among more.
      R"({"id":"a","role":"user","content":"x","e1":1,"e2":2,"e3":3,"e4":4,"e5":5,"e6":6,"e7":7,"e8":8,"id":"z"})",
      R"({"id":"a","role":"user","content":"x","e1":1,"e2":2,"e3":3,"e4":4,"e5":5,"e6":6,"e7":7,"e8":8,"e9":9,"id":"z","content":"y"})",
      R"({"e1":1,"e2":2,"e3":3,"e4":4,"e5":5,"e6":6,"e7":7,"e8":8,"e9":9,"e10":10,"e11":11,"e12":12,"e13":13,"id":"m","role":"tool","content":"c"})",
      // What simdjson leaves to nlohmann: -0, an integer past 64 bits.
      R"({"id":"m","role":"user","content":"a","metadata":{"z":-0}})",
      R"({"id":"m","role":"user","content":"a","metadata":{"z":123456789012345678901234567890}})",
      // Malformed messages.
      R"({"role":"user","content":"a"})",
      R"({"id":7,"role":"user","content":"a"})",
      R"({"id":"m","role":"wizard","content":"a"})",
      R"({"id":"m","role":"assistant","content":["x"]})",
      R"({"id":"m","role":"user"})",
      R"({"id":"m","role":"tool","content":"x"})",
      R"({"id":"m","role":"user","content":"a","metadata":[1]})",
      R"({"id":"m","role":"user","content":"a","name":5})",
      R"({"id":"m","role":"assistant","toolCalls":{}})",
      R"({"id":"m","role":"assistant","toolCalls":[5]})",
      R"({"id":"m","role":"assistant","toolCalls":[{"id":"c"}]})",
      R"({"id":"m","role":"assistant","toolCalls":[{"id":"c","function":"f"}]})",
      R"({"id":"m","role":"assistant","toolCalls":[{"id":"c","function":{"name":"f","arguments":{}}}]})",
      R"({"id":"m","role":"user","content":[]})",
      R"({"id":"m","role":"user","content":5})",
      R"([1,2])",
      R"("text")",
      // Not JSON, or not UTF-8.
      R"({"id":"m","role":"user","content":"a")",
      "{\"id\":\"m\",\"role\":\"user\",\"content\":\"\xff\"}",
      "",
      // Nesting: 11 levels in all, in the metadata, and in a member no reader takes.
      deep_meta,
      R"({"id":"m","role":"user","content":"a","extra":[[[[[[[[[[1]]]]]]]]]]})",
  };
  for (const auto& text : texts) {
    for (size_t max_depth : {size_t(5), size_t(11), size_t(12), size_t(128)}) {
      CAPTURE(text);
      CAPTURE(max_depth);
      CHECK(outcome(true, text, max_depth) == outcome(false, text, max_depth));
    }
  }
  // The nesting limit is the message's: metadata 10 deep under the message is 11 levels.
  CHECK(outcome(true, deep_meta, 10).find("nested deeper than 10 levels") != std::string::npos);
  CHECK(outcome(true, deep_meta, 11).rfind("{\"id\":\"m\"", 0) == 0);
}
