// agentrt_transcribe against the in-process OpenAI-compatible mock server (127.0.0.1 only).
#include <doctest/doctest.h>

#include "capi_fixture.hpp"
#include "support/mock_openai_server.hpp"

using namespace capi_test;
using agentrt::testing::MockOpenAIServer;
using agentrt::testing::MockResponse;

TEST_CASE("agentrt_transcribe sends the audio to the config's service and returns the text") {
  MockOpenAIServer server;
  server.push_transcription(MockResponse::json(200, {{"text", "book room A1 on monday"}}));
  server.push_transcription(
      MockResponse::json(500, {{"error", {{"message", "the service is down"}}}}, {{"x-should-retry", "false"}}));
  TempDir dir;
  json model{{"type", "openai"}, {"base_url", server.base_url()}, {"api_key_env", "AGENTRT_CAPI_TEST_NO_KEY"},
             {"max_retries", 0}, {"request_timeout_ms", 10000},   {"transcription_model", "whisper-test"}};
  Runtime r(test_config(dir, model));
  const std::string audio = std::string("RIFF") + std::string(100, '\0') + "WAVE";
  char* out = nullptr;
  REQUIRE_MESSAGE(agentrt_transcribe(&out, r.rt, audio.data(), audio.size(), "audio/wav",
                                     R"({"language":"en","responseFormat":"json"})") == AGENTRT_OK,
                  last_error());
  CHECK(take(out) == "book room A1 on monday");
  auto reqs = server.requests();
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].path == "/v1/audio/transcriptions");
  CHECK(reqs[0].form.at("file").content == audio);
  CHECK(reqs[0].form.at("model").content == "whisper-test");
  CHECK(reqs[0].form.at("language").content == "en");

  // A failing service is AGENTRT_E_MODEL (or I/O), with the reason in the message.
  int32_t rc = agentrt_transcribe(&out, r.rt, audio.data(), audio.size(), "audio/wav", nullptr);
  CHECK((rc == AGENTRT_E_MODEL || rc == AGENTRT_E_IO));
  CHECK(out == nullptr);
  CHECK(std::string(agentrt_last_error()).rfind("agentrt_transcribe: ", 0) == 0);
}
