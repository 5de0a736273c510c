// The Anthropic request body built from a ModelRequest, and AnthropicConfig's JSON reader.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "agentrt/anthropic.hpp"
#include "agentrt/error.hpp"
#include "model/anthropic_stream.hpp"

using agentrt::AnthropicConfig;
using agentrt::Error;
using agentrt::ErrorCode;
using agentrt::json;
using agentrt::Message;
using agentrt::ModelRequest;
using agentrt::Role;
using agentrt::anthropic::build_messages_body;

namespace {

Message msg(Role role, std::string content) {
  Message m;
  m.role = role;
  m.content = std::move(content);
  return m;
}

Message tool_result(std::string call_id, std::string content, std::string error = "") {
  Message m = msg(Role::tool, std::move(content));
  m.tool_call_id = std::move(call_id);
  m.error = std::move(error);
  return m;
}

Message assistant_calls(std::vector<agentrt::ToolCall> calls, std::string encrypted_value = "") {
  Message m = msg(Role::assistant, "");
  m.has_content = false;
  m.tool_calls = std::move(calls);
  m.encrypted_value = std::move(encrypted_value);
  return m;
}

AnthropicConfig config() {
  AnthropicConfig c;
  c.model = "claude-test";
  return c;
}

const std::string kThinking =
    R"({"provider":"anthropic","model":"claude-test","blocks":[{"type":"thinking","thinking":"Check the clock.",)"
    R"("signature":"U2lnbmF0dXJl"},{"type":"redacted_thinking","data":"UmVkYWN0ZWQ="}]})";

}  // namespace

TEST_SUITE("anthropic") {
  TEST_CASE("system and developer messages go top-level; tool results are grouped in one user message, first") {
    ModelRequest r;
    r.stage = "execution";
    r.messages = {
        msg(Role::system, "You are terse."),
        msg(Role::user, "What time is it in Paris and Tokyo?"),
        assistant_calls({{"toolu_a", "clock", R"({"city":"Paris"})"}, {"toolu_b", "clock", R"({"city":"Tokyo"})"}}),
        tool_result("toolu_a", "10:00"),
        tool_result("toolu_b", "", "clock service unreachable"),
        msg(Role::developer, "Answer in one line."),
        msg(Role::user, "Quickly, please.")};
    const json body = build_messages_body(r, config());
    CHECK(body["model"] == "claude-test");
    CHECK(body["max_tokens"] == 4096);
    CHECK(body["stream"] == true);
    CHECK(body["system"] == "You are terse.\n\nAnswer in one line.");
    const json expected = json::parse(R"([
      {"role":"user","content":[{"type":"text","text":"What time is it in Paris and Tokyo?"}]},
      {"role":"assistant","content":[
        {"type":"tool_use","id":"toolu_a","name":"clock","input":{"city":"Paris"}},
        {"type":"tool_use","id":"toolu_b","name":"clock","input":{"city":"Tokyo"}}]},
      {"role":"user","content":[
        {"type":"tool_result","tool_use_id":"toolu_a","content":"10:00"},
        {"type":"tool_result","tool_use_id":"toolu_b","content":"clock service unreachable","is_error":true},
        {"type":"text","text":"Quickly, please."}]}])");
    CHECK(body["messages"] == expected);
  }

  TEST_CASE("consecutive messages of one role are merged so that user and assistant alternate") {
    ModelRequest r;
    r.messages = {msg(Role::user, "one"), msg(Role::user, "two"), msg(Role::assistant, "three"),
                  msg(Role::assistant, "four"), msg(Role::user, "")};
    const json body = build_messages_body(r, config());
    CHECK(body["messages"] == json::parse(R"([
      {"role":"user","content":[{"type":"text","text":"one"},{"type":"text","text":"two"}]},
      {"role":"assistant","content":[{"type":"text","text":"three"},{"type":"text","text":"four"}]}])"));
    CHECK_FALSE(body.contains("system"));
  }

  TEST_CASE("images go as native parts: base64 from inline data or a data URL, or a URL; PDFs as documents") {
    Message user = msg(Role::user, "");
    user.parts = {agentrt::ContentPart::make_text("What is this?")};
    agentrt::ContentPart png;
    png.type = "image";
    png.source = agentrt::PartSource{"data", "iVBORw0KGgo=", "image/png", ""};
    agentrt::ContentPart jpeg_url;
    jpeg_url.type = "image";
    jpeg_url.source = agentrt::PartSource{"data", "data:image/jpeg;base64,/9j/4AAQ", "", ""};
    agentrt::ContentPart remote;
    remote.type = "image";
    remote.source = agentrt::PartSource{"url", "https://example.com/cat.png", "", ""};
    agentrt::ContentPart pdf;
    pdf.type = "document";
    pdf.source = agentrt::PartSource{"data", "JVBERi0=", "application/pdf", ""};
    user.parts.insert(user.parts.end(), {png, jpeg_url, remote, pdf});
    ModelRequest r;
    r.messages = {user};
    const json body = build_messages_body(r, config());
    CHECK(body["messages"][0]["content"] == json::parse(R"([
      {"type":"text","text":"What is this?"},
      {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},
      {"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j/4AAQ"}},
      {"type":"image","source":{"type":"url","url":"https://example.com/cat.png"}},
      {"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}}])"));

    agentrt::ContentPart audio;
    audio.type = "audio";
    audio.source = agentrt::PartSource{"data", "UklGRg==", "audio/wav", ""};
    r.messages[0].parts = {audio};
    CHECK_THROWS_AS(build_messages_body(r, config()), Error);
  }

  TEST_CASE("an assistant message's thinking blocks go first, unchanged; another provider's value is ignored") {
    ModelRequest r;
    r.messages = {msg(Role::user, "time?"), assistant_calls({{"toolu_1", "clock", "{}"}}, kThinking),
                  tool_result("toolu_1", "10:00")};
    json body = build_messages_body(r, config());
    CHECK(body["messages"][1]["content"] == json::parse(R"([
      {"type":"thinking","thinking":"Check the clock.","signature":"U2lnbmF0dXJl"},
      {"type":"redacted_thinking","data":"UmVkYWN0ZWQ="},
      {"type":"tool_use","id":"toolu_1","name":"clock","input":{}}])"));

    for (const std::string other :
         {R"({"provider":"openai","blocks":[{"type":"thinking","thinking":"x","signature":"y"}]})", "not json", "[1,2]",
          R"({"provider":"anthropic","blocks":"x"})"}) {
      r.messages[1].encrypted_value = other;
      body = build_messages_body(r, config());
      CHECK(body["messages"][1]["content"] ==
            json::parse(R"([{"type":"tool_use","id":"toolu_1","name":"clock","input":{}}])"));
    }
  }

  TEST_CASE("tools, tool_choice and parallel_tool_calls map to Anthropic's fields; params are merged in") {
    AnthropicConfig c = config();
    c.params = {{"temperature", 0.2}, {"thinking", {{"type", "enabled"}, {"budget_tokens", 2048}}}};
    c.stages["intent"] = agentrt::AnthropicStageModel{"claude-small", {{"max_tokens", 512}, {"temperature", nullptr}}};
    ModelRequest r;
    r.stage = "execution";
    r.messages = {msg(Role::user, "hi")};
    r.tools = {{"clock", "Tells the time", json{{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}},
               {"ping", "", nullptr}};
    r.tool_choice = "required";
    r.parallel_tool_calls = false;
    json body = build_messages_body(r, c);
    CHECK(body["temperature"] == 0.2);
    CHECK(body["thinking"] == json{{"type", "enabled"}, {"budget_tokens", 2048}});
    CHECK(body["tools"] == json::parse(R"([
      {"name":"clock","description":"Tells the time","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}},
      {"name":"ping","input_schema":{"type":"object"}}])"));
    CHECK(body["tool_choice"] == json{{"type", "any"}, {"disable_parallel_tool_use", true}});

    r.tool_choice = "none";
    CHECK(build_messages_body(r, c)["tool_choice"] == json{{"type", "none"}});
    r.tool_choice = "";
    CHECK(build_messages_body(r, c)["tool_choice"] == json{{"type", "auto"}, {"disable_parallel_tool_use", true}});
    r.parallel_tool_calls = true;
    CHECK_FALSE(build_messages_body(r, c).contains("tool_choice"));
    r.tool_choice = "auto";
    CHECK(build_messages_body(r, c)["tool_choice"] == json{{"type", "auto"}});

    r.stage = "intent";
    r.tools.clear();
    body = build_messages_body(r, c);
    CHECK(body["model"] == "claude-small");
    CHECK(body["max_tokens"] == 512);
    CHECK_FALSE(body.contains("temperature"));
    CHECK_FALSE(body.contains("tools"));
    CHECK_FALSE(body.contains("tool_choice"));
  }

  TEST_CASE("anthropic_config_from_json reads the snake_case keys and refuses unknown ones, wrong types and api_key") {
    const AnthropicConfig c = agentrt::anthropic_config_from_json(json::parse(R"({
      "base_url": "http://127.0.0.1:9", "api_key_env": "MY_KEY", "model": "claude-x", "max_tokens": 1000,
      "params": {"temperature": 1}, "stages": {"intent": {"model": "claude-y", "params": {"top_k": 5}}},
      "anthropic_version": "2023-01-01", "extra_headers": {"anthropic-beta": "files-api-2025-04-14"},
      "connect_timeout_ms": 1, "request_timeout_ms": 2, "idle_timeout_ms": 3, "max_retries": 4,
      "retry_base_backoff_ms": 5, "retry_max_backoff_ms": 6, "max_retry_after_ms": 7})"));
    CHECK(c.base_url == "http://127.0.0.1:9");
    CHECK(c.api_key_env == "MY_KEY");
    CHECK(c.model == "claude-x");
    CHECK(c.max_tokens == 1000);
    CHECK(c.params == json{{"temperature", 1}});
    CHECK(c.stages.at("intent").model == "claude-y");
    CHECK(c.stages.at("intent").params == json{{"top_k", 5}});
    CHECK(c.anthropic_version == "2023-01-01");
    CHECK(c.extra_headers ==
          std::vector<std::pair<std::string, std::string>>{{"anthropic-beta", "files-api-2025-04-14"}});
    CHECK(c.connect_timeout.count() == 1);
    CHECK(c.request_timeout.count() == 2);
    CHECK(c.idle_timeout.count() == 3);
    CHECK(c.max_retries == 4);
    CHECK(c.retry_base_backoff.count() == 5);
    CHECK(c.retry_max_backoff.count() == 6);
    CHECK(c.max_retry_after.count() == 7);

    const AnthropicConfig d = agentrt::anthropic_config_from_json(json::object());
    CHECK(d.base_url == "https://api.anthropic.com");
    CHECK(d.api_key_env == "ANTHROPIC_API_KEY");
    CHECK(d.anthropic_version == "2023-06-01");
    CHECK(d.max_tokens == 4096);

    auto refused = [](const char* text) {
      try {
        agentrt::anthropic_config_from_json(json::parse(text));
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::invalid_argument);
        return e.message();
      }
      FAIL("accepted: " << text);
      return std::string();
    };
    CHECK(refused(R"({"modle": "x"})") == "Anthropic configuration: 'modle' is not a known key");
    CHECK(refused(R"({"max_tokens": "many"})") ==
          "Anthropic configuration: 'max_tokens' must be a non-negative integer");
    CHECK(refused(R"({"max_tokens": 0})") == "Anthropic configuration: 'max_tokens' must be at least 1");
    CHECK(refused(R"({"api_key": "sk-ant-secret"})").find("sk-ant-secret") == std::string::npos);
    CHECK(refused(R"({"stages": {"intent": {"temperature": 1}}})") ==
          "Anthropic configuration: 'stages.intent.temperature' is not a known key (model, params)");
    CHECK(refused("[]") == "Anthropic configuration must be a JSON object");
  }
}
