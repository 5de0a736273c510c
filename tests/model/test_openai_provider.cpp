// The OpenAI-compatible provider against the in-process mock server: wire format, retries, errors,
// truncated and slow streams, cancellation, connection reuse.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agentrt/error.hpp"
#include "agentrt/openai.hpp"
#include "model/openai_stream.hpp"
#include "support/mock_openai_server.hpp"
#include "support/provider_calls.hpp"

using namespace std::chrono_literals;
using agentrt::CancelToken;
using agentrt::Error;
using agentrt::ErrorCode;
using agentrt::json;
using agentrt::ModelRequest;
using agentrt::OpenAIConfig;
using agentrt::testing::complete_error;
using agentrt::testing::MockOpenAIServer;
using agentrt::testing::MockResponse;
using agentrt::testing::ms_between;
using agentrt::testing::user_request;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kKey = "sk-test-0123456789abcdef";

struct Sink : agentrt::ModelStreamSink {
  std::string text, reasoning;
  std::vector<std::string> texts;
  std::map<int, std::pair<std::string, std::string>> starts;  // index -> id, name
  std::map<int, std::vector<std::string>> args;
  std::function<void()> on_first_text;
  std::function<void()> on_text_seen;  // after every text delta
  void on_text(std::string_view d) override {
    text += d;
    texts.emplace_back(d);
    if (texts.size() == 1 && on_first_text) on_first_text();
    if (on_text_seen) on_text_seen();
  }
  void on_reasoning(std::string_view d) override { reasoning += d; }
  void on_tool_call_start(int index, std::string_view id, std::string_view name) override {
    starts[index] = {std::string(id), std::string(name)};
  }
  void on_tool_call_args(int index, std::string_view d) override { args[index].emplace_back(d); }
};

OpenAIConfig config_for(const MockOpenAIServer& server) {
  return agentrt::testing::provider_test_config<OpenAIConfig>(server.base_url(), kKey, "mock-model");
}

long long ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

MockResponse error_response(int status, const json& body, std::vector<std::pair<std::string, std::string>> h = {}) {
  return MockResponse::json(status, body, std::move(h));
}

json openai_error(const std::string& message, const std::string& type, const json& code = nullptr) {
  return {{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", code}}}};
}

std::string read_fixture(const std::string& name) {
  std::ifstream f(std::filesystem::path(AGENTRT_FIXTURES_DIR) / "openai-streams" / name, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("openai provider: a streamed answer reaches the sink piece by piece and the result has text and usage") {
  MockOpenAIServer server;
  server.push_chat(MockResponse::stream(MockOpenAIServer::text_stream({"Hel", "lo", " there"}, 12, 3)));
  auto provider = agentrt::make_openai_provider(config_for(server));
  Sink sink;
  auto result = provider->complete(user_request("hi"), sink, {});

  CHECK(sink.texts == std::vector<std::string>{"Hel", "lo", " there"});
  CHECK(result.text == "Hello there");
  CHECK(result.finish_reason == "stop");
  CHECK(result.tool_calls.empty());
  REQUIRE(result.usage.has_value());
  CHECK(result.usage->provider == "openai-compatible");
  CHECK(result.usage->model == "mock-model");
  CHECK(result.usage->input_tokens == 12);
  CHECK(result.usage->output_tokens == 3);
  CHECK(result.usage->total_tokens == 15);
  CHECK(provider->name() == "openai-compatible");

  auto reqs = server.requests();
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].path == "/v1/chat/completions");
  CHECK(reqs[0].header("Authorization") == std::string("Bearer ") + kKey);
  CHECK(reqs[0].header("Content-Type") == "application/json");
  CHECK(reqs[0].header("Accept") == "text/event-stream");
  json body = reqs[0].json_body();
  CHECK(body == json{{"model", "mock-model"},
                     {"stream", true},
                     {"stream_options", {{"include_usage", true}}},
                     {"messages", json::array({{{"role", "system"}, {"content", "You are terse."}},
                                               {{"role", "user"}, {"content", "hi"}}})}});
}

TEST_CASE("openai provider: the key comes from the environment variable the config names") {
  MockOpenAIServer server;
  server.push_chat(MockResponse::stream(MockOpenAIServer::text_stream({"ok"})));
  server.push_chat(MockResponse::stream(MockOpenAIServer::text_stream({"ok"})));
  ::setenv("AGENTRT_TEST_PROVIDER_KEY", "sk-from-env-42", 1);
  auto config = config_for(server);
  config.api_key.clear();
  config.api_key_env = "AGENTRT_TEST_PROVIDER_KEY";
  Sink sink;
  agentrt::make_openai_provider(config)->complete(user_request("hi"), sink, {});
  config.api_key_env = "AGENTRT_TEST_PROVIDER_KEY_UNSET";
  agentrt::make_openai_provider(config)->complete(user_request("hi"), sink, {});
  ::unsetenv("AGENTRT_TEST_PROVIDER_KEY");
  auto reqs = server.requests();
  REQUIRE(reqs.size() == 2);
  CHECK(reqs[0].header("Authorization") == "Bearer sk-from-env-42");
  CHECK_FALSE(reqs[1].header("Authorization").has_value());
}

TEST_CASE("openai provider: roles, tool calls, tool results, tools, tool_choice and stage parameters go on the wire") {
  MockOpenAIServer server;
  server.push_chat(MockResponse::stream(MockOpenAIServer::text_stream({"done"})));
  auto config = config_for(server);
  config.params = {{"temperature", 0.5}, {"seed", 7}};
  config.stages["execution"] = agentrt::OpenAIStageModel{"stage-model", {{"temperature", 0.1}, {"top_p", 0.9}}};
  config.extra_headers = {{"X-Tenant", "acme"}};
  auto provider = agentrt::make_openai_provider(config);

  ModelRequest r;
  r.stage = "execution";
  r.params = {{"max_tokens", 100}, {"seed", nullptr}};
  agentrt::Message dev;
  dev.role = agentrt::Role::developer;
  dev.content = "rules";
  agentrt::Message user;
  user.role = agentrt::Role::user;
  user.content = "book a room";
  agentrt::Message assistant;
  assistant.role = agentrt::Role::assistant;
  assistant.has_content = false;
  assistant.content = "";
  assistant.tool_calls = {{"call_1", "book_room", "{\"room\":\"A\"}"}, {"call_2", "ping", ""}};
  agentrt::Message tool1;
  tool1.role = agentrt::Role::tool;
  tool1.tool_call_id = "call_1";
  tool1.content = "booked";
  agentrt::Message tool2;
  tool2.role = agentrt::Role::tool;
  tool2.tool_call_id = "call_2";
  tool2.error = "ping failed";
  agentrt::Message activity;
  activity.role = agentrt::Role::activity;
  activity.content = "not for the model";
  r.messages = {dev, user, assistant, tool1, tool2, activity};
  r.tools = {{"book_room", "Books a room", {{"type", "object"}, {"properties", {{"room", {{"type", "string"}}}}}}},
             {"ping", "", nullptr}};
  r.tool_choice = "required";
  r.parallel_tool_calls = false;

  Sink sink;
  provider->complete(r, sink, {});
  auto reqs = server.requests();
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].header("X-Tenant") == "acme");
  json body = reqs[0].json_body();
  json want_messages = json::array({
      {{"role", "developer"}, {"content", "rules"}},
      {{"role", "user"}, {"content", "book a room"}},
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls",
        json::array(
            {{{"id", "call_1"},
              {"type", "function"},
              {"function", {{"name", "book_room"}, {"arguments", "{\"room\":\"A\"}"}}}},
             {{"id", "call_2"}, {"type", "function"}, {"function", {{"name", "ping"}, {"arguments", "{}"}}}}})}},
      {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "booked"}},
      {{"role", "tool"}, {"tool_call_id", "call_2"}, {"content", "ping failed"}},
  });
  CHECK(body["messages"] == want_messages);
  CHECK(body["model"] == "stage-model");
  CHECK(body["temperature"] == 0.1);
  CHECK(body["top_p"] == 0.9);
  CHECK(body["max_tokens"] == 100);
  CHECK_FALSE(body.contains("seed"));  // null in the request's params removes the configured value
  CHECK(body["tools"] ==
        json::array({{{"type", "function"},
                      {"function",
                       {{"name", "book_room"},
                        {"description", "Books a room"},
                        {"parameters", {{"type", "object"}, {"properties", {{"room", {{"type", "string"}}}}}}}}}},
                     {{"type", "function"}, {"function", {{"name", "ping"}}}}}));
  CHECK(body["tool_choice"] == "required");
  CHECK(body["parallel_tool_calls"] == false);
  CHECK(body["stream"] == true);
}

TEST_CASE("openai provider: the request's own model wins over the stage's and the default") {
  MockOpenAIServer server;
  server.push_chat(MockResponse::stream(MockOpenAIServer::text_stream({"a"})));
  auto config = config_for(server);
  config.stages["execution"].model = "stage-model";
  auto r = user_request("x");
  r.model = "request-model";
  Sink sink;
  agentrt::make_openai_provider(config)->complete(r, sink, {});
  CHECK(server.requests().at(0).json_body()["model"] == "request-model");
}

TEST_CASE("openai provider: image parts go on the wire as image_url parts, never as text") {
  MockOpenAIServer server;
  server.push_chat(MockResponse::stream(MockOpenAIServer::text_stream({"a cat"})));
  auto provider = agentrt::make_openai_provider(config_for(server));
  ModelRequest r;
  agentrt::Message user;
  user.role = agentrt::Role::user;
  agentrt::ContentPart text;
  text.type = "text";
  text.text = "What is in these?";
  agentrt::ContentPart inline_image;
  inline_image.type = "image";
  inline_image.source = agentrt::PartSource{"data", "iVBORw0KGgo=", "image/png", ""};
  agentrt::ContentPart linked_image;
  linked_image.type = "image";
  linked_image.source = agentrt::PartSource{"url", "https://files.example/u/1/cat.jpg?sig=abc", "image/jpeg", ""};
  linked_image.metadata = {{"detail", "low"}};
  agentrt::ContentPart audio;
  audio.type = "audio";
  audio.source = agentrt::PartSource{"data", "UklGRg==", "audio/wav", ""};
  user.parts = {text, inline_image, linked_image, audio};
  r.messages = {user};
  Sink sink;
  provider->complete(r, sink, {});

  const auto reqs = server.requests();
  REQUIRE(reqs.size() == 1);
  CHECK(
      reqs[0].json_body()["messages"] ==
      json::array(
          {{{"role", "user"},
            {"content",
             json::array({{{"type", "text"}, {"text", "What is in these?"}},
                          {{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64,iVBORw0KGgo="}}}},
                          {{"type", "image_url"},
                           {"image_url", {{"url", "https://files.example/u/1/cat.jpg?sig=abc"}, {"detail", "low"}}}},
                          {{"type", "input_audio"}, {"input_audio", {{"data", "UklGRg=="}, {"format", "wav"}}}}})}}}));
  // The raw body holds the base64 once, inside the data URL, not pasted into a text part.
  const std::string& raw = reqs[0].body;
  CHECK(raw.find("iVBORw0KGgo=") == raw.rfind("iVBORw0KGgo="));
}

TEST_CASE("openai provider: content the API cannot carry is refused before anything is sent") {
  MockOpenAIServer server;
  auto provider = agentrt::make_openai_provider(config_for(server));
  ModelRequest r;
  agentrt::Message user;
  user.role = agentrt::Role::user;
  agentrt::ContentPart ogg;
  ogg.type = "audio";
  ogg.source = agentrt::PartSource{"data", "AAAA", "audio/ogg", ""};
  user.parts = {ogg};
  r.messages = {user};
  Sink sink;
  Error e = complete_error(*provider, r, sink);
  CHECK(e.code() == ErrorCode::unsupported);
  CHECK(std::string(e.what()) == "audio of type 'audio/ogg' cannot be sent to the model: only wav and mp3 can");
  CHECK(server.request_count() == 0);
}

TEST_CASE("openai provider: every recorded stream served over HTTP gives its expected tool calls") {
  const json expected = json::parse(read_fixture("expected.json"));
  MockOpenAIServer server;
  auto provider = agentrt::make_openai_provider(config_for(server));
  for (const auto& [name, want] : expected.items()) {
    CAPTURE(name);
    std::string body = read_fixture(name);
    if (name.find(".chunks.txt") != std::string::npos) {
      std::string sse;
      std::istringstream lines(body);
      for (std::string line; std::getline(lines, line);) {
        if (!line.empty()) sse += "data: " + line + "\n\n";
      }
      body = sse + "data: [DONE]\n\n";
    }
    // Served in 7-byte writes, so events arrive cut across reads.
    std::vector<std::string> chunks;
    for (size_t i = 0; i < body.size(); i += 7) chunks.push_back(body.substr(i, 7));
    server.push_chat(MockResponse::stream(chunks));
    Sink sink;
    auto result = provider->complete(user_request("x"), sink, {});
    REQUIRE(result.tool_calls.size() == want["tool_calls"].size());
    for (size_t i = 0; i < result.tool_calls.size(); ++i) {
      const json& w = want["tool_calls"][i];
      CHECK(result.tool_calls[i].id == w["id"]);
      CHECK(result.tool_calls[i].name == w["name"]);
      CHECK(result.tool_calls[i].arguments == w["arguments"]);
      const int index = w["index"].get<int>();
      CHECK(sink.starts[index] == std::make_pair(w["id"].get<std::string>(), w["name"].get<std::string>()));
      std::string streamed;
      for (const auto& piece : sink.args[index]) streamed += piece;
      CHECK(streamed == w["arguments"]);
    }
    CHECK(result.finish_reason == want["finish_reason"]);
    CHECK(result.text == (want["content"].is_null() ? std::string() : want["content"].get<std::string>()));
    CHECK(result.reasoning ==
          (want["reasoning_content"].is_null() ? std::string() : want["reasoning_content"].get<std::string>()));
    CHECK(result.usage.has_value() == !want["usage"].is_null());
  }
}

TEST_CASE("openai provider: 500, 502, 503, 408, 409 and 429 are retried and the next success is returned") {
  for (int status : {500, 502, 503, 408, 409, 429}) {
    CAPTURE(status);
    MockOpenAIServer server;
    server.push_chat(error_response(status, openai_error("try later", "server_error")));
    server.push_chat(MockResponse::stream(MockOpenAIServer::text_stream({"second"})));
    Sink sink;
    auto result = agentrt::make_openai_provider(config_for(server))->complete(user_request("x"), sink, {});
    CHECK(result.text == "second");
    CHECK(sink.text == "second");
    CHECK(server.request_count() == 2);
  }
}

TEST_CASE("openai provider: retries stop after max_retries and the error says how many attempts were made") {
  MockOpenAIServer server;
  for (int i = 0; i < 4; ++i) server.push_chat(error_response(503, openai_error("overloaded", "server_error")));
  Sink sink;
  auto provider = agentrt::make_openai_provider(config_for(server));
  Error e = complete_error(*provider, user_request("x"), sink);
  CHECK(e.code() == ErrorCode::model);
  CHECK(std::string(e.what()) ==
        "openai-compatible model 'mock-model': HTTP 503 (server_error): overloaded (gave up after 3 attempts)");
  CHECK(server.request_count() == 3);
}

TEST_CASE("openai provider: 4xx client errors and 429 insufficient_quota are not retried") {
  struct Case {
    int status;
    json body;
    std::string message;
    ErrorCode code;
  };
  const std::vector<Case> cases = {
      {400,
       openai_error("This model's maximum context length is 128000 tokens.", "invalid_request_error",
                    "context_length_exceeded"),
       "openai-compatible model 'mock-model': HTTP 400 (type invalid_request_error, code context_length_exceeded): "
       "This model's maximum context length is 128000 tokens.",
       ErrorCode::model},
      {429, openai_error("You exceeded your current quota", "insufficient_quota", "insufficient_quota"),
       "openai-compatible model 'mock-model': HTTP 429 (insufficient_quota): You exceeded your current quota",
       ErrorCode::model},
      {404, openai_error("The model `nope` does not exist", "invalid_request_error", "model_not_found"),
       "openai-compatible model 'mock-model': HTTP 404 (type invalid_request_error, code model_not_found): The model "
       "`nope` does not exist",
       ErrorCode::model},
      {422, openai_error("bad", "invalid_request_error"),
       "openai-compatible model 'mock-model': HTTP 422 (invalid_request_error): bad", ErrorCode::model},
  };
  for (const auto& c : cases) {
    CAPTURE(c.status);
    MockOpenAIServer server;
    server.push_chat(error_response(c.status, c.body));
    server.push_chat(MockResponse::stream(MockOpenAIServer::text_stream({"never"})));
    Sink sink;
    auto provider = agentrt::make_openai_provider(config_for(server));
    Error e = complete_error(*provider, user_request("x"), sink);
    CHECK(e.code() == c.code);
    CHECK(std::string(e.what()) == c.message);
    CHECK(server.request_count() == 1);
  }
}

TEST_CASE("openai provider: x-should-retry overrides the status rule both ways") {
  {
    MockOpenAIServer server;
    server.push_chat(error_response(503, openai_error("no", "server_error"), {{"x-should-retry", "false"}}));
    Sink sink;
    auto provider = agentrt::make_openai_provider(config_for(server));
    CHECK(complete_error(*provider, user_request("x"), sink).code() == ErrorCode::model);
    CHECK(server.request_count() == 1);
  }
  {
    MockOpenAIServer server;
    server.push_chat(error_response(400, openai_error("flaky", "invalid_request_error"), {{"x-should-retry", "true"}}));
    server.push_chat(MockResponse::stream(MockOpenAIServer::text_stream({"ok"})));
    Sink sink;
    CHECK(agentrt::make_openai_provider(config_for(server))->complete(user_request("x"), sink, {}).text == "ok");
    CHECK(server.request_count() == 2);
  }
}

TEST_CASE("openai provider: retry-after-ms and Retry-After seconds set the wait before the retry") {
  MockOpenAIServer server;
  server.push_chat(error_response(429, openai_error("slow down", "rate_limit_exceeded"), {{"retry-after-ms", "250"}}));
  server.push_chat(error_response(429, openai_error("slow down", "rate_limit_exceeded"), {{"Retry-After", "1"}}));
  server.push_chat(MockResponse::stream(MockOpenAIServer::text_stream({"ok"})));
  Sink sink;
  CHECK(agentrt::make_openai_provider(config_for(server))->complete(user_request("x"), sink, {}).text == "ok");
  auto reqs = server.requests();
  REQUIRE(reqs.size() == 3);
  const auto first_gap = ms_between(reqs[0].received, reqs[1].received);
  const auto second_gap = ms_between(reqs[1].received, reqs[2].received);
  // The upper bounds tell the server's wait from a wrong unit (seconds as ms, ms as seconds) with room for a
  // loaded machine.
  CHECK(first_gap >= 250);
  CHECK(first_gap < 2500);
  CHECK(second_gap >= 1000);
  CHECK(second_gap < 4000);
}

TEST_CASE("openai provider: a Retry-After longer than the limit is ignored in favour of the backoff") {
  MockOpenAIServer server;
  server.push_chat(error_response(503, openai_error("later", "server_error"), {{"Retry-After", "30"}}));
  server.push_chat(MockResponse::stream(MockOpenAIServer::text_stream({"ok"})));
  auto config = config_for(server);
  config.max_retry_after = 5s;
  Sink sink;
  const auto start = Clock::now();
  CHECK(agentrt::make_openai_provider(config)->complete(user_request("x"), sink, {}).text == "ok");
  CHECK(ms_since(start) < 2500);  // the backoff (ms), not the capped Retry-After (5 s)
  CHECK(server.request_count() == 2);
}

TEST_CASE("server retry delays: retry-after-ms, Retry-After seconds and HTTP dates, and what is ignored") {
  using agentrt::openai::server_retry_delay;
  using H = agentrt::net::HttpHeaders;
  const auto now = std::chrono::system_clock::from_time_t(1'700'000'000);  // Tue, 14 Nov 2023 22:13:20 GMT
  CHECK(server_retry_delay(H{{"retry-after-ms", "1500.5"}}, now, 60s) == 1501ms);
  CHECK(server_retry_delay(H{{"Retry-After", "2"}}, now, 60s) == 2000ms);
  CHECK(server_retry_delay(H{{"retry-after-ms", "100"}, {"retry-after", "9"}}, now, 60s) == 100ms);
  CHECK(server_retry_delay(H{{"Retry-After", "Tue, 14 Nov 2023 22:13:27 GMT"}}, now, 60s) == 7000ms);
  CHECK_FALSE(server_retry_delay(H{{"Retry-After", "Tue, 14 Nov 2023 22:13:00 GMT"}}, now, 60s));  // past
  CHECK_FALSE(server_retry_delay(H{{"Retry-After", "61"}}, now, 60s));
  CHECK_FALSE(server_retry_delay(H{{"Retry-After", "-1"}}, now, 60s));
  CHECK_FALSE(server_retry_delay(H{{"Retry-After", "soon"}}, now, 60s));
  CHECK_FALSE(server_retry_delay(H{}, now, 60s));
}

TEST_CASE("retry rules: the status table, insufficient_quota and x-should-retry") {
  using agentrt::openai::ApiError;
  using agentrt::openai::should_retry;
  for (long s : {408L, 409L, 429L, 500L, 502L, 503L, 504L}) CHECK(should_retry(s, {}, ApiError{}));
  for (long s : {400L, 401L, 403L, 404L, 413L, 422L}) CHECK_FALSE(should_retry(s, {}, ApiError{}));
  CHECK_FALSE(should_retry(429, {}, ApiError{"quota", "insufficient_quota", "", ""}));
  CHECK_FALSE(should_retry(429, {}, ApiError{"quota", "", "insufficient_quota", ""}));
  CHECK(should_retry(400, {{"X-Should-Retry", "true"}}, ApiError{}));
  CHECK_FALSE(should_retry(500, {{"x-should-retry", "false"}}, ApiError{}));
  using agentrt::openai::backoff_delay;
  CHECK(backoff_delay(0, 500ms, 8s, 1.0) == 500ms);
  CHECK(backoff_delay(2, 500ms, 8s, 1.0) == 2000ms);
  CHECK(backoff_delay(10, 500ms, 8s, 1.0) == 8000ms);
  CHECK(backoff_delay(1, 500ms, 8s, 0.75) == 750ms);
}

TEST_CASE("openai provider: error bodies of every server shape become one clear message") {
  struct Case {
    std::string body;
    std::string content_type;
    std::string message;
  };
  const std::vector<Case> cases = {
      {R"j({"error":{"code":400,"message":"request (9000 tokens) exceeds the available context size (4096 tokens)","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":4096}})j",
       "application/json",
       "HTTP 400 (type exceed_context_size_error, code 400): request (9000 tokens) exceeds the available context size "
       "(4096 tokens)"},
      {R"j({"error":{"message":"The model does not exist.","type":"NotFoundError","param":null,"code":404}})j",
       "application/json", "HTTP 400 (type NotFoundError, code 404): The model does not exist."},
      {R"j({"object":"error","message":"maximum context length is 2048","type":"BadRequestError","param":null,"code":400})j",
       "application/json", "HTTP 400 (type BadRequestError, code 400): maximum context length is 2048"},
      {R"j({"error":{"message":"model \"llama9\" not found, try pulling it first","type":"api_error","param":null,"code":null}})j",
       "application/json", "HTTP 400 (api_error): model \"llama9\" not found, try pulling it first"},
      {R"j({"error":"unknown model"})j", "application/json", "HTTP 400: unknown model"},
      {R"j({"detail":"Not authenticated"})j", "application/json", "HTTP 400: Not authenticated"},
      {"<html>\n<h1>400 Bad Request</h1></html>", "text/html", "HTTP 400: <html> <h1>400 Bad Request</h1></html>"},
      {"", "text/plain", "HTTP 400: (empty response body)"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.body);
    MockOpenAIServer server;
    MockResponse r;
    r.status = 400;
    r.content_type = c.content_type;
    r.body = c.body;
    server.push_chat(r);
    Sink sink;
    auto provider = agentrt::make_openai_provider(config_for(server));
    Error e = complete_error(*provider, user_request("x"), sink);
    CHECK(e.code() == ErrorCode::model);
    CHECK(std::string(e.what()) == "openai-compatible model 'mock-model': " + c.message);
  }
}

TEST_CASE("openai provider: a 401 is unauthorized, names the missing key's variable and never shows a key") {
  {
    MockOpenAIServer server;
    server.push_chat(error_response(401, openai_error("Missing bearer authentication", "invalid_request_error")));
    auto config = config_for(server);
    config.api_key.clear();
    config.api_key_env = "AGENTRT_TEST_NO_SUCH_KEY";
    Sink sink;
    auto provider = agentrt::make_openai_provider(config);
    Error e = complete_error(*provider, user_request("x"), sink);
    CHECK(e.code() == ErrorCode::unauthorized);
    CHECK(std::string(e.what()) ==
          "openai-compatible model 'mock-model': HTTP 401 (invalid_request_error): Missing bearer authentication (no "
          "API key was sent: AGENTRT_TEST_NO_SUCH_KEY is not set)");
  }
  {
    MockOpenAIServer server;
    server.push_chat(error_response(401, openai_error(std::string("Incorrect API key provided: ") + kKey,
                                                      "invalid_request_error", "invalid_api_key")));
    Sink sink;
    auto provider = agentrt::make_openai_provider(config_for(server));
    Error e = complete_error(*provider, user_request("x"), sink);
    CHECK(e.code() == ErrorCode::unauthorized);
    CHECK(std::string(e.what()).find(kKey) == std::string::npos);
    CHECK(std::string(e.what()).find("Incorrect API key provided: [redacted]") != std::string::npos);
  }
}

TEST_CASE("openai provider: a stream cut after text reached the sink fails without a retry") {
  SUBCASE("the body ends without [DONE]") {
    MockOpenAIServer server;
    auto chunks = MockOpenAIServer::text_stream({"partial"});
    chunks.resize(2);  // role chunk and one content delta
    server.push_chat(MockResponse::stream(chunks));
    server.push_chat(MockResponse::stream(MockOpenAIServer::text_stream({"never"})));
    Sink sink;
    auto provider = agentrt::make_openai_provider(config_for(server));
    Error e = complete_error(*provider, user_request("x"), sink);
    CHECK(e.code() == ErrorCode::model);
    CHECK(std::string(e.what()) ==
          "openai-compatible model 'mock-model': the model stream ended without [DONE] after 2 events: the answer was "
          "cut off");
    CHECK(sink.text == "partial");
    CHECK(server.request_count() == 1);
  }
  SUBCASE("the connection drops in the middle of the chunked body") {
    MockOpenAIServer server;
    auto chunks = MockOpenAIServer::text_stream({"partial"});
    chunks.resize(2);
    chunks.push_back("data: {\"choices\":[{\"index\":0,\"del");
    MockResponse r = MockResponse::stream(chunks);
    r.cut_connection = true;
    server.push_chat(r);
    server.push_chat(MockResponse::stream(MockOpenAIServer::text_stream({"never"})));
    Sink sink;
    auto provider = agentrt::make_openai_provider(config_for(server));
    Error e = complete_error(*provider, user_request("x"), sink);
    CHECK(e.code() == ErrorCode::io);
    CHECK(sink.text == "partial");
    CHECK(server.request_count() == 1);
  }
}

TEST_CASE("openai provider: a stream cut before anything reached the sink is retried") {
  MockOpenAIServer server;
  auto chunks = MockOpenAIServer::text_stream({"lost"});
  chunks.resize(1);  // only the role chunk: nothing for a subscriber yet
  server.push_chat(MockResponse::stream(chunks));
  server.push_chat(MockResponse::stream(MockOpenAIServer::text_stream({"whole"})));
  Sink sink;
  auto result = agentrt::make_openai_provider(config_for(server))->complete(user_request("x"), sink, {});
  CHECK(result.text == "whole");
  CHECK(sink.text == "whole");
  CHECK(server.request_count() == 2);
}

TEST_CASE("openai provider: an error event inside a 200 stream fails the call; before any text it is retried") {
  {
    MockOpenAIServer server;
    auto chunks = MockOpenAIServer::text_stream({"Hel"});
    chunks.resize(2);
    chunks.push_back(MockOpenAIServer::sse(openai_error("The server had an error", "server_error")));
    server.push_chat(MockResponse::stream(chunks));
    Sink sink;
    auto provider = agentrt::make_openai_provider(config_for(server));
    Error e = complete_error(*provider, user_request("x"), sink);
    CHECK(e.code() == ErrorCode::model);
    CHECK(std::string(e.what()) ==
          "openai-compatible model 'mock-model': error in the stream (server_error): The server had an error");
    CHECK(server.request_count() == 1);
  }
  {
    MockOpenAIServer server;
    server.push_chat(MockResponse::stream({MockOpenAIServer::sse(openai_error("overloaded", "server_error"))}));
    server.push_chat(MockResponse::stream(MockOpenAIServer::text_stream({"fine"})));
    Sink sink;
    CHECK(agentrt::make_openai_provider(config_for(server))->complete(user_request("x"), sink, {}).text == "fine");
    CHECK(server.request_count() == 2);
  }
  {
    MockOpenAIServer server;  // a request error in the stream is not the server's trouble: no retry
    server.push_chat(MockResponse::stream(
        {MockOpenAIServer::sse(openai_error("bad schema", "invalid_request_error", "invalid_schema"))}));
    Sink sink;
    auto provider = agentrt::make_openai_provider(config_for(server));
    CHECK(complete_error(*provider, user_request("x"), sink).code() == ErrorCode::model);
    CHECK(server.request_count() == 1);
  }
}

TEST_CASE("openai provider: a stream that goes silent fails with a timeout after the idle limit") {
  MockOpenAIServer server;
  auto chunks = MockOpenAIServer::text_stream({"slow"});
  chunks.resize(2);
  MockResponse r = MockResponse::stream(chunks);
  r.stall_after = 5s;
  server.push_chat(r);
  auto config = config_for(server);
  config.idle_timeout = 200ms;
  Sink sink;
  auto provider = agentrt::make_openai_provider(config);
  const auto start = Clock::now();
  Error e = complete_error(*provider, user_request("x"), sink);
  const auto took = ms_since(start);
  CHECK(e.code() == ErrorCode::timeout);
  CHECK(std::string(e.what()).find("no data received for 200 ms") != std::string::npos);
  CHECK(took >= 200);
  CHECK(took < 4000);  // the idle limit, not the end of the stall (5 s)
  CHECK(sink.text == "slow");
  CHECK(server.request_count() == 1);  // text reached the sink: no retry
}

TEST_CASE("openai provider: a silent stream that showed nothing yet is retried after the idle timeout") {
  MockOpenAIServer server;
  auto chunks = MockOpenAIServer::text_stream({"x"});
  chunks.resize(1);
  MockResponse silent = MockResponse::stream(chunks);
  silent.stall_after = 5s;
  server.push_chat(silent);
  server.push_chat(MockResponse::stream(MockOpenAIServer::text_stream({"awake"})));
  auto config = config_for(server);
  config.idle_timeout = 150ms;
  Sink sink;
  const auto start = Clock::now();
  CHECK(agentrt::make_openai_provider(config)->complete(user_request("x"), sink, {}).text == "awake");
  CHECK(ms_since(start) < 4000);  // the idle limit, not the end of the stall (5 s)
  CHECK(server.request_count() == 2);
}

TEST_CASE("openai provider: cancelling mid-stream aborts the transfer and closes the connection promptly") {
  MockOpenAIServer server;
  auto chunks = MockOpenAIServer::text_stream({"first"});
  chunks.resize(2);
  MockResponse r = MockResponse::stream(chunks);
  r.keep_sending = MockOpenAIServer::sse(MockOpenAIServer::chunk({{"content", "."}}));
  r.keep_sending_every = 5ms;
  server.push_chat(r);
  auto provider = agentrt::make_openai_provider(config_for(server));
  CancelToken cancel;
  Sink sink;
  Clock::time_point cancelled_at{};
  // Cancelled once the stream has gone on past its first text (the sink runs on this thread: the canceller
  // waits for it on a condition variable).
  std::mutex m;
  std::condition_variable cv;
  bool streaming = false;
  sink.on_text_seen = [&] {
    if (sink.text.rfind("first.", 0) != 0) return;
    {
      std::lock_guard<std::mutex> lock(m);
      streaming = true;
    }
    cv.notify_all();
  };
  std::thread canceller([&] {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return streaming; });
    cancelled_at = Clock::now();
    cancel.cancel();
  });
  Error e = complete_error(*provider, user_request("x"), sink, cancel);
  canceller.join();
  const auto returned_after = ms_since(cancelled_at);
  CHECK(e.code() == ErrorCode::cancelled);
  // Without the cancel the stream would go on for 10 s (then the request deadline): the bounds leave room
  // for a loaded machine.
  CHECK(returned_after < 3000);
  CHECK(sink.text.rfind("first.", 0) == 0);
  REQUIRE(server.wait_client_gone(10s));
  CHECK(ms_between(cancelled_at, *server.client_gone_at()) < 3000);
  CHECK(server.request_count() == 1);
}

TEST_CASE("openai provider: cancelling while waiting to retry returns at once") {
  MockOpenAIServer server;
  server.push_chat(error_response(503, openai_error("later", "server_error"), {{"retry-after-ms", "5000"}}));
  auto provider = agentrt::make_openai_provider(config_for(server));
  CancelToken cancel;
  // Cancelled once the first attempt has arrived: its 503 is on its way, and the provider then waits 5 s to
  // retry (should the cancel come before the 503, it aborts that request instead: cancelled just as well).
  std::thread canceller([&] {
    server.wait_requests(1, 60s);
    cancel.cancel();
  });
  Sink sink;
  const auto start = Clock::now();
  Error e = complete_error(*provider, user_request("x"), sink, cancel);
  canceller.join();
  CHECK(e.code() == ErrorCode::cancelled);
  CHECK(ms_since(start) < 4000);  // not the 5 s wait
  CHECK(server.request_count() == 1);
}

TEST_CASE("openai provider: an unreachable server is a connection failure, retried, then an io error") {
  OpenAIConfig config;
  config.base_url = MockOpenAIServer::closed_base_url();
  const std::string port = config.base_url.substr(17, config.base_url.size() - 20);  // "http://127.0.0.1:" <port> "/v1"
  config.api_key = kKey;
  config.retry_base_backoff = 1ms;
  config.retry_max_backoff = 2ms;
  auto provider = agentrt::make_openai_provider(config);
  Sink sink;
  Error e = complete_error(*provider, user_request("x"), sink);
  CHECK(e.code() == ErrorCode::io);
  const std::string what = e.what();
  CHECK(what.find("127.0.0.1:" + port) != std::string::npos);
  CHECK(what.find("(gave up after 3 attempts)") != std::string::npos);
  CHECK(what.find(kKey) == std::string::npos);
}

TEST_CASE("openai provider: sequential calls reuse one connection") {
  MockOpenAIServer server;
  for (int i = 0; i < 3; ++i) server.push_chat(MockResponse::stream(MockOpenAIServer::text_stream({"r"})));
  auto provider = agentrt::make_openai_provider(config_for(server));
  Sink sink;
  for (int i = 0; i < 3; ++i) provider->complete(user_request("x"), sink, {});
  auto reqs = server.requests();
  REQUIRE(reqs.size() == 3);
  CHECK(reqs[0].remote_port == reqs[1].remote_port);
  CHECK(reqs[1].remote_port == reqs[2].remote_port);
}

TEST_CASE("openai provider: calls from several threads at once each get their own whole answer") {
  MockOpenAIServer server;
  constexpr int kThreads = 4;
  for (int i = 0; i < kThreads; ++i) {
    MockResponse r = MockResponse::stream(MockOpenAIServer::text_stream({"a", "b", "c"}));
    r.delay_between = 5ms;
    server.push_chat(r);
  }
  auto provider = agentrt::make_openai_provider(config_for(server));
  std::vector<std::string> texts(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      Sink sink;
      texts[static_cast<size_t>(i)] = provider->complete(user_request("x"), sink, {}).text + "|" + sink.text;
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& t : texts) CHECK(t == "abc|abc");
  CHECK(server.request_count() == kThreads);
}

TEST_CASE("openai provider: a server that ignores stream:true and answers JSON is read as one chunk") {
  MockOpenAIServer server;
  server.push_chat(MockResponse::json(
      200, {{"id", "chatcmpl-1"},
            {"object", "chat.completion"},
            {"model", "mock-model"},
            {"choices", json::array({{{"index", 0},
                                      {"message", {{"role", "assistant"}, {"content", "whole answer"}}},
                                      {"finish_reason", "stop"}}})},
            {"usage", {{"prompt_tokens", 4}, {"completion_tokens", 2}, {"total_tokens", 6}}}}));
  Sink sink;
  auto result = agentrt::make_openai_provider(config_for(server))->complete(user_request("x"), sink, {});
  CHECK(result.text == "whole answer");
  CHECK(sink.text == "whole answer");
  CHECK(result.usage->total_tokens == 6);
}

TEST_CASE("openai config: JSON keys are read, unknown keys and an api_key are refused") {
  auto c = agentrt::openai_config_from_json(
      json{{"base_url", "http://localhost:8080/v1"},
           {"api_key_env", "MY_KEY"},
           {"model", "qwen"},
           {"params", {{"temperature", 0}}},
           {"stages", {{"intent", {{"model", "small"}, {"params", {{"max_tokens", 20}}}}}}},
           {"extra_headers", {{"X-A", "1"}}},
           {"connect_timeout_ms", 1500},
           {"request_timeout_ms", 90000},
           {"idle_timeout_ms", 30000},
           {"max_retries", 5},
           {"retry_base_backoff_ms", 100},
           {"retry_max_backoff_ms", 1000},
           {"max_retry_after_ms", 2000},
           {"transcription_model", "whisper-large"},
           {"max_audio_bytes", 1024}});
  CHECK(c.base_url == "http://localhost:8080/v1");
  CHECK(c.api_key_env == "MY_KEY");
  CHECK(c.api_key.empty());
  CHECK(c.model == "qwen");
  CHECK(c.params == json{{"temperature", 0}});
  CHECK(c.stages.at("intent").model == "small");
  CHECK(c.stages.at("intent").params == json{{"max_tokens", 20}});
  CHECK(c.extra_headers == std::vector<std::pair<std::string, std::string>>{{"X-A", "1"}});
  CHECK(c.connect_timeout == 1500ms);
  CHECK(c.request_timeout == 90s);
  CHECK(c.idle_timeout == 30s);
  CHECK(c.max_retries == 5);
  CHECK(c.retry_base_backoff == 100ms);
  CHECK(c.retry_max_backoff == 1s);
  CHECK(c.max_retry_after == 2s);
  CHECK(c.transcription_model == "whisper-large");
  CHECK(c.max_audio_bytes == 1024);

  CHECK_THROWS_WITH_AS(agentrt::openai_config_from_json(json{{"base_ur", "x"}}),
                       "OpenAI configuration: 'base_ur' is not a known key", Error);
  CHECK_THROWS_WITH_AS(agentrt::openai_config_from_json(json{{"max_retries", "2"}}),
                       "OpenAI configuration: 'max_retries' must be a non-negative integer", Error);
  CHECK_THROWS_WITH_AS(agentrt::openai_config_from_json(json{{"stages", {{"intent", {{"modle", "x"}}}}}}),
                       "OpenAI configuration: 'stages.intent.modle' is not a known key (model, params)", Error);
  try {
    agentrt::openai_config_from_json(json{{"api_key", "sk-secret-in-a-file"}});
    FAIL("an api_key in configuration was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    CHECK(std::string(e.what()).find("sk-secret-in-a-file") == std::string::npos);
  }
}

TEST_CASE("openai config: OPENAI_BASE_URL and OPENAI_MODEL override the defaults; the key stays in the environment") {
  ::setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1", 1);
  ::setenv("OPENAI_MODEL", "env-model", 1);
  auto c = agentrt::openai_config_from_env();
  ::unsetenv("OPENAI_BASE_URL");
  ::unsetenv("OPENAI_MODEL");
  CHECK(c.base_url == "http://127.0.0.1:1/v1");
  CHECK(c.model == "env-model");
  CHECK(c.api_key_env == "OPENAI_API_KEY");
  CHECK(c.api_key.empty());
  auto d = agentrt::openai_config_from_env();
  CHECK(d.base_url == "https://api.openai.com/v1");
  CHECK(d.model == "gpt-4o-mini");
}

TEST_CASE("token usage: AG-UI JSON omits zeros and empty names, and sums add up") {
  agentrt::TokenUsage u;
  u.provider = "openai-compatible";
  u.input_tokens = 10;
  u.output_tokens = 5;
  u.total_tokens = 15;
  u.cached_input_tokens = 4;
  json j = u;
  CHECK(j == json{{"provider", "openai-compatible"},
                  {"inputTokens", 10},
                  {"outputTokens", 5},
                  {"totalTokens", 15},
                  {"cachedInputTokens", 4}});
  agentrt::TokenUsage back = j.get<agentrt::TokenUsage>();
  CHECK(back.input_tokens == 10);
  CHECK(back.cached_input_tokens == 4);
  CHECK(back.model.empty());
  agentrt::TokenUsage other;
  other.model = "m";
  other.input_tokens = 1;
  other.output_tokens = 2;
  other.total_tokens = 3;
  other.reasoning_tokens = 1;
  other.cache_write_input_tokens = 7;
  u += other;
  CHECK(json(u) == json{{"provider", "openai-compatible"},
                        {"model", "m"},
                        {"inputTokens", 11},
                        {"outputTokens", 7},
                        {"totalTokens", 18},
                        {"reasoningTokens", 1},
                        {"cachedInputTokens", 4},
                        {"cacheWriteInputTokens", 7}});
  CHECK(json(agentrt::TokenUsage{}) == json::object());
  CHECK_THROWS_AS(json({{"inputTokens", "many"}}).get<agentrt::TokenUsage>(), Error);
}
