// Fallback chains and the client-side rate limit: a model that fails for good hands the call to the next (the
// switch is an event), a partial answer never does; a limited provider queues calls instead of failing them.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "agentrt/model_config.hpp"
#include "support/mock_openai_server.hpp"
#include "support/runtime_fixture.hpp"

using namespace agentrt;
using namespace agentrt::testing;
using namespace std::chrono_literals;

namespace {

// Fails every call with `code`, after streaming `partial` when it is not empty.
class FailingModel final : public ModelProvider {
 public:
  FailingModel(ErrorCode code, std::string partial = {}) : code_(code), partial_(std::move(partial)) {}
  ModelResult complete(const ModelRequest& req, ModelStreamSink& sink, const CancelToken&) override {
    ++calls;
    last_model = req.model;
    if (!partial_.empty()) sink.on_text(partial_);
    throw Error(code_, "the primary is down");
  }
  std::string name() const override { return "failing"; }
  std::atomic<int> calls{0};
  std::string last_model;

 private:
  ErrorCode code_;
  std::string partial_;
};

ModelResult answer_with_usage(const ModelRequest& req, const std::string& model) {
  ModelResult r = text_result(req.stage == "intent" ? "intent" : "answered by " + model);
  TokenUsage u;
  u.provider = "second";
  u.model = model;
  u.input_tokens = 3;
  u.output_tokens = 2;
  r.usage = u;
  return r;
}

struct Collecting final : ModelStreamSink {
  std::string text;
  std::vector<ModelFallback> fallbacks;
  void on_text(std::string_view d) override { text += d; }
  void on_reasoning(std::string_view) override {}
  void on_tool_call_start(int, std::string_view, std::string_view) override {}
  void on_tool_call_args(int, std::string_view) override {}
  void on_fallback(const ModelFallback& f) override { fallbacks.push_back(f); }
};

ModelRequest request_for(std::string model = {}) {
  ModelRequest r;
  r.stage = "execution";
  r.model = std::move(model);
  r.messages.push_back(user_message("hello"));
  return r;
}

}  // namespace

TEST_CASE("a turn whose model fails for good is answered by the next in the chain, the switch an event") {
  auto primary = std::make_shared<FailingModel>(ErrorCode::model);
  auto second = std::make_shared<ScriptedModel>([](const ModelRequest& r) { return answer_with_usage(r, "m2"); });
  auto chain = make_fallback_provider({{primary, "openai", "m1"}, {second, "anthropic", "m2"}});
  Harness h(booking_script, [&](RuntimeConfig& c) { c.model = chain; });
  auto t = h.wait(h.start("t-fb", "hello").turn_id);
  CHECK(t.status == TurnStatus::completed);
  CHECK(primary->calls == 2);  // intent and execution each tried it first
  CHECK(second->calls() == 2);
  auto evs = h.events("t-fb");
  check_agui(evs);
  std::vector<json> switches;
  for (const auto& e : evs)
    if (e["type"] == "CUSTOM" && e["name"] == "agentrt.model_fallback") switches.push_back(e["value"]);
  REQUIRE(switches.size() == 2);
  CHECK(switches[0] == json::parse(R"({"stage":"intent","from":{"provider":"openai","model":"m1"},
    "to":{"provider":"anthropic","model":"m2"},"error":{"code":"model","message":"the primary is down"}})"));
  CHECK(switches[1]["stage"] == "execution");
  // The usage names the model that answered.
  const json& usage = evs.back()["usage"];
  REQUIRE(usage.size() == 1);
  CHECK(usage[0]["model"] == "m2");
  CHECK(usage[0]["inputTokens"] == 6);
  CHECK(h.rt->history("t-fb").back().content == "answered by m2");
}

TEST_CASE("a fallback chain keeps a partial answer's failure, a cancellation and the last link's failure") {
  SUBCASE("some of the answer streamed: no switch") {
    auto primary = std::make_shared<FailingModel>(ErrorCode::model, "half an ans");
    auto second = std::make_shared<ScriptedModel>([](const ModelRequest& r) { return answer_with_usage(r, "m2"); });
    auto chain = make_fallback_provider({{primary, "openai", "m1"}, {second, "openai", "m2"}});
    Collecting sink;
    CancelToken cancel;
    CHECK_THROWS_WITH_AS(chain->complete(request_for(), sink, cancel), "the primary is down", Error);
    CHECK(second->calls() == 0);
    CHECK(sink.text == "half an ans");
    CHECK(sink.fallbacks.empty());
  }
  SUBCASE("cancelled: no switch") {
    auto primary = std::make_shared<FailingModel>(ErrorCode::cancelled);
    auto second = std::make_shared<ScriptedModel>([](const ModelRequest& r) { return answer_with_usage(r, "m2"); });
    auto chain = make_fallback_provider({{primary, "openai", "m1"}, {second, "openai", "m2"}});
    Collecting sink;
    CancelToken cancel;
    CHECK_THROWS_AS(chain->complete(request_for(), sink, cancel), Error);
    CHECK(second->calls() == 0);
  }
  SUBCASE("every link fails: the last failure, after a switch for each link but the last") {
    auto a = std::make_shared<FailingModel>(ErrorCode::model);
    auto b = std::make_shared<FailingModel>(ErrorCode::timeout);
    auto chain = make_fallback_provider({{a, "openai", "m1"}, {b, "openai", "m2"}});
    Collecting sink;
    CancelToken cancel;
    try {
      chain->complete(request_for("stage-model"), sink, cancel);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::timeout);
    }
    REQUIRE(sink.fallbacks.size() == 1);
    CHECK(sink.fallbacks[0].from_model == "stage-model");  // the stage's model goes to the first link only
    CHECK(a->last_model == "stage-model");
    CHECK(b->last_model == "");
  }
}

TEST_CASE("a rate-limited provider queues calls past its requests per minute instead of failing them") {
  std::atomic<int> answered{0};
  auto inner = std::make_shared<ScriptedModel>([&](const ModelRequest&) {
    ++answered;
    return text_result("ok");
  });
  // 600 a minute: a full bucket lets 600 through at once, then one every 100 ms.
  auto limited = make_rate_limited_provider(inner, RateLimit{600, 0});
  const auto start = std::chrono::steady_clock::now();
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 151; ++i) {  // 604 calls in all
        Collecting sink;
        CancelToken cancel;
        try {
          limited->complete(request_for(), sink, cancel);
        } catch (...) {
          ++failed;
        }
      }
    });
  for (auto& th : threads) th.join();
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(failed == 0);
  CHECK(answered == 604);
  CHECK(took >= 390ms);  // the four past the bucket waited 100, 200, 300 and 400 ms (less the refill meanwhile)
}

TEST_CASE("a rate-limited provider's token budget counts the answers' usage, and a queued call can be cancelled") {
  auto inner = std::make_shared<ScriptedModel>([](const ModelRequest&) {
    ModelResult r = text_result("ok");
    TokenUsage u;
    u.input_tokens = 30100;
    r.usage = u;
    return r;
  });
  // 60,000 tokens a minute (1,000 a second): two answers of 30,100 leave the bucket 200 short.
  auto limited = make_rate_limited_provider(inner, RateLimit{0, 60000});
  Collecting sink;
  CancelToken none;
  limited->complete(request_for(), sink, none);
  limited->complete(request_for(), sink, none);
  const auto start = std::chrono::steady_clock::now();
  limited->complete(request_for(), sink, none);
  CHECK(std::chrono::steady_clock::now() - start >= 190ms);

  // The bucket is now about 30,000 below zero: the next call waits about 30 s unless cancelled.
  CancelToken cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(100ms);
    cancel.cancel();
  });
  const auto before = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(limited->complete(request_for(), sink, cancel),
                       "the model call was cancelled while it waited for the rate limit", Error);
  canceller.join();
  CHECK(std::chrono::steady_clock::now() - before < 10s);
  CHECK(inner->calls() == 3);
}

TEST_CASE("model configurations: fallbacks, rate limits, and what they refuse") {
  auto p = model_provider_from_json(json::parse(
      R"({"type":"demo","rate_limit":{"requests_per_minute":100},"fallbacks":[{"type":"openai","base_url":"http://127.0.0.1:9","model":"x"}]})"));
  REQUIRE(p);
  Collecting sink;
  CancelToken cancel;
  auto r = p->complete(request_for(), sink, cancel);  // the demo model answers first
  CHECK(!r.text.empty());
  CHECK_THROWS_WITH_AS(model_provider_from_json(json::parse(R"({"type":"nope"})")),
                       doctest::Contains("type 'nope' is unknown"), Error);
  CHECK_THROWS_WITH_AS(
      model_provider_from_json(json::parse(R"({"type":"demo","fallbacks":[{"type":"demo","fallbacks":[]}]})")),
      doctest::Contains("no fallbacks of its own"), Error);
  CHECK_THROWS_AS(model_provider_from_json(json::parse(R"({"type":"demo","rate_limit":{"requests_per_minute":-1}})")),
                  Error);
  CHECK_THROWS_AS(model_provider_from_json(json::parse(R"({"type":"demo","rate_limit":{"rpm":1}})")), Error);
  CHECK_THROWS_AS(model_provider_from_json(json::parse(R"({"type":"demo","model":"x"})")), Error);
  CHECK_THROWS_AS(model_provider_from_json(json::parse(R"({"type":"demo","fallbacks":{}})")), Error);
  json many = {{"type", "demo"}, {"fallbacks", json::array()}};
  for (int i = 0; i < 17; ++i) many["fallbacks"].push_back({{"type", "demo"}});
  CHECK_THROWS_WITH_AS(model_provider_from_json(many), "model: 'fallbacks' lists 17 models; at most 16 are tried",
                       Error);
  many["fallbacks"].erase(16);
  CHECK(model_provider_from_json(many) != nullptr);
}

TEST_CASE("a configured chain: an OpenAI-compatible server that cannot be reached hands over to Anthropic") {
  agentrt::testing::MockOpenAIServer server;
  auto event = [](const json& e) { return "event: " + e["type"].get<std::string>() + "\ndata: " + e.dump() + "\n\n"; };
  server.push_messages(agentrt::testing::MockResponse::stream(
      {event({{"type", "message_start"},
              {"message",
               {{"id", "m"},
                {"type", "message"},
                {"role", "assistant"},
                {"model", "claude-test"},
                {"content", json::array()},
                {"usage", {{"input_tokens", 5}}}}}}),
       event({{"type", "content_block_start"}, {"index", 0}, {"content_block", {{"type", "text"}, {"text", ""}}}}),
       event({{"type", "content_block_delta"},
              {"index", 0},
              {"delta", {{"type", "text_delta"}, {"text", "from claude"}}}}),
       event({{"type", "content_block_stop"}, {"index", 0}}),
       event({{"type", "message_delta"}, {"delta", {{"stop_reason", "end_turn"}}}, {"usage", {{"output_tokens", 2}}}}),
       event({{"type", "message_stop"}})}));
  ::setenv("AGENTRT_TEST_CHAIN_KEY", "sk-ant-chain-test", 1);
  auto p = model_provider_from_json(json{{"type", "openai"},
                                         {"base_url", "http://127.0.0.1:1/v1"},
                                         {"model", "gpt-down"},
                                         {"max_retries", 0},
                                         {"fallbacks",
                                          {{{"type", "anthropic"},
                                            {"base_url", server.origin()},
                                            {"api_key_env", "AGENTRT_TEST_CHAIN_KEY"},
                                            {"model", "claude-test"},
                                            {"max_retries", 0}}}}});
  Collecting sink;
  CancelToken cancel;
  auto r = p->complete(request_for(), sink, cancel);
  CHECK(r.text == "from claude");
  CHECK(sink.text == "from claude");
  REQUIRE(sink.fallbacks.size() == 1);
  CHECK(sink.fallbacks[0].from_provider == "openai");
  CHECK(sink.fallbacks[0].from_model == "gpt-down");
  CHECK(sink.fallbacks[0].to_provider == "anthropic");
  CHECK(sink.fallbacks[0].to_model == "claude-test");
  REQUIRE(r.usage);
  CHECK(r.usage->provider == "anthropic");
  CHECK(r.usage->model == "claude-test");
  REQUIRE(server.requests().size() == 1);
  CHECK(server.requests()[0].header("x-api-key").value_or("") == "sk-ant-chain-test");
}
