// The OpenAI-compatible transcriber against the in-process mock server.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>

#include "agentrt/error.hpp"
#include "agentrt/openai.hpp"
#include "support/mock_openai_server.hpp"

using namespace std::chrono_literals;
using agentrt::Error;
using agentrt::ErrorCode;
using agentrt::json;
using agentrt::OpenAIConfig;
using agentrt::TranscribeOptions;
using agentrt::testing::MockOpenAIServer;
using agentrt::testing::MockResponse;

namespace {

OpenAIConfig transcriber_config(const MockOpenAIServer& server) {
  OpenAIConfig c;
  c.base_url = server.base_url();
  c.api_key = "sk-test-transcribe-0001";
  c.connect_timeout = 2s;
  c.request_timeout = 10s;
  c.idle_timeout = 3s;
  c.retry_base_backoff = 1ms;
  c.retry_max_backoff = 4ms;
  return c;
}

MockResponse plain(const std::string& body, const std::string& type = "text/plain; charset=utf-8") {
  MockResponse r;
  r.content_type = type;
  r.body = body;
  return r;
}

// Bytes that are not valid UTF-8 and contain NULs, like real audio.
std::string fake_audio(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 37 + 11) & 0xff);
  return s;
}

Error transcribe_error(agentrt::Transcriber& t, std::string_view audio, std::string_view mime,
                       const TranscribeOptions& o, const agentrt::CancelToken& cancel = {}) {
  try {
    t.transcribe(audio, mime, o, cancel);
  } catch (const Error& e) {
    return e;
  }
  FAIL("transcribe() succeeded but an error was expected");
  return Error(ErrorCode::internal, "unreachable");
}

}  // namespace

TEST_CASE("transcriber: the multipart request carries the file with a filename and type, model, language, prompt") {
  MockOpenAIServer server;
  server.push_transcription(
      MockResponse::json(200, {{"text", "hello world"}, {"usage", {{"type", "duration"}, {"seconds", 2}}}}));
  auto t = agentrt::make_openai_transcriber(transcriber_config(server));
  const std::string audio = fake_audio(3000);
  TranscribeOptions o;
  o.language = "en";
  o.prompt = "Names: Zoë";
  o.response_format = "json";
  CHECK(t->transcribe(audio, "audio/webm;codecs=opus", o) == "hello world");

  auto reqs = server.requests();
  REQUIRE(reqs.size() == 1);
  const auto& r = reqs[0];
  CHECK(r.path == "/v1/audio/transcriptions");
  CHECK(r.header("Authorization") == "Bearer sk-test-transcribe-0001");
  CHECK(r.header("Content-Type").value_or("").rfind("multipart/form-data; boundary=", 0) == 0);
  REQUIRE(r.form.count("file") == 1);
  CHECK(r.form.at("file").filename == "audio.webm");
  CHECK(r.form.at("file").content_type == "audio/webm");
  CHECK(r.form.at("file").content == audio);
  CHECK(r.form.at("model").content == "whisper-1");
  CHECK(r.form.at("model").filename.empty());
  CHECK(r.form.at("language").content == "en");
  CHECK(r.form.at("prompt").content == "Names: Zoë");
  CHECK(r.form.at("response_format").content == "json");
  CHECK(r.form.size() == 5);
}

TEST_CASE("transcriber: optional fields are left out, the model and filename can be chosen") {
  MockOpenAIServer server;
  server.push_transcription(MockResponse::json(200, {{"text", "ok"}}));
  server.push_transcription(MockResponse::json(200, {{"text", "ok"}}));
  auto t = agentrt::make_openai_transcriber(transcriber_config(server));
  TranscribeOptions o;
  o.model = "gpt-4o-mini-transcribe";
  o.filename = "memo";  // no extension: one is added from the type
  CHECK(t->transcribe(fake_audio(10), "audio/mpeg", o) == "ok");
  o.filename = "take \"2\".wav";
  CHECK(t->transcribe(fake_audio(10), "audio/x-wav", o) == "ok");
  auto reqs = server.requests();
  REQUIRE(reqs.size() == 2);
  CHECK(reqs[0].form.size() == 2);
  CHECK(reqs[0].form.at("model").content == "gpt-4o-mini-transcribe");
  CHECK(reqs[0].form.at("file").filename == "memo.mp3");
  CHECK(reqs[0].form.at("file").content_type == "audio/mpeg");
  CHECK(reqs[1].form.at("file").filename == "take _2_.wav");
}

TEST_CASE("transcriber: text, srt and vtt answers are plain text; json answers carry text") {
  MockOpenAIServer server;
  server.push_transcription(plain("plain words\n"));
  server.push_transcription(plain("1\n00:00:00,000 --> 00:00:01,000\nHi\n\n"));
  server.push_transcription(plain("WEBVTT\n\n00:00.000 --> 00:01.000\nHi\n"));
  server.push_transcription(MockResponse::json(
      200, {{"task", "transcribe"}, {"duration", 1.5}, {"text", "verbose"}, {"segments", json::array()}}));
  server.push_transcription(MockResponse::json(200, {{"text", "default json"}}));
  auto t = agentrt::make_openai_transcriber(transcriber_config(server));
  const std::string audio = fake_audio(100);
  TranscribeOptions o;
  o.response_format = "text";
  CHECK(t->transcribe(audio, "audio/wav", o) == "plain words");
  o.response_format = "srt";
  CHECK(t->transcribe(audio, "audio/wav", o) == "1\n00:00:00,000 --> 00:00:01,000\nHi\n\n");
  o.response_format = "vtt";
  CHECK(t->transcribe(audio, "audio/wav", o) == "WEBVTT\n\n00:00.000 --> 00:01.000\nHi\n");
  o.response_format = "verbose_json";
  CHECK(t->transcribe(audio, "audio/wav", o) == "verbose");
  o.response_format = "";
  CHECK(t->transcribe(audio, "audio/wav", o) == "default json");
}

TEST_CASE("transcriber: a JSON answer without text is a model error") {
  MockOpenAIServer server;
  server.push_transcription(MockResponse::json(200, {{"task", "transcribe"}}));
  auto t = agentrt::make_openai_transcriber(transcriber_config(server));
  Error e = transcribe_error(*t, fake_audio(10), "audio/wav", {});
  CHECK(e.code() == ErrorCode::model);
  CHECK(std::string(e.what()) == "transcription with model 'whisper-1': the answer has no \"text\" string");
}

TEST_CASE("transcriber: size and type limits are clear errors and nothing is sent") {
  MockOpenAIServer server;
  auto config = transcriber_config(server);
  config.max_audio_bytes = 1000;
  auto t = agentrt::make_openai_transcriber(config);
  Error big = transcribe_error(*t, fake_audio(1001), "audio/wav", {});
  CHECK(big.code() == ErrorCode::too_large);
  CHECK(std::string(big.what()) == "the audio is 1001 bytes, over the transcription limit of 1000 bytes");
  Error empty = transcribe_error(*t, "", "audio/wav", {});
  CHECK(empty.code() == ErrorCode::invalid_argument);
  Error type = transcribe_error(*t, fake_audio(10), "application/pdf", {});
  CHECK(type.code() == ErrorCode::invalid_argument);
  CHECK(std::string(type.what())
            .rfind("audio of type 'application/pdf' cannot be transcribed; accepted types: audio/flac", 0) == 0);
  TranscribeOptions o;
  o.response_format = "xml";
  CHECK(transcribe_error(*t, fake_audio(10), "audio/wav", o).code() == ErrorCode::invalid_argument);
  CHECK(server.request_count() == 0);
}

TEST_CASE("transcriber: server errors are retried like chat calls and reported with their type and message") {
  MockOpenAIServer server;
  server.push_transcription(MockResponse::json(503, {{"error", {{"message", "busy"}, {"type", "server_error"}}}}));
  server.push_transcription(plain("after retry"));
  server.push_transcription(MockResponse::json(
      400, {{"error", {{"message", "Invalid file format."}, {"type", "invalid_request_error"}, {"code", nullptr}}}}));
  auto t = agentrt::make_openai_transcriber(transcriber_config(server));
  TranscribeOptions o;
  o.response_format = "text";
  CHECK(t->transcribe(fake_audio(10), "audio/ogg", o) == "after retry");
  Error e = transcribe_error(*t, fake_audio(10), "audio/ogg", o);
  CHECK(e.code() == ErrorCode::model);
  CHECK(std::string(e.what()) ==
        "transcription with model 'whisper-1': HTTP 400 (invalid_request_error): Invalid file format.");
  CHECK(server.request_count() == 3);
}

TEST_CASE("transcriber: a cancelled token stops a slow transcription promptly") {
  MockOpenAIServer server;
  MockResponse slow = MockResponse::stream({"{\"te"});
  slow.content_type = "application/json";
  slow.stall_after = 5s;
  server.push_transcription(slow);
  auto t = agentrt::make_openai_transcriber(transcriber_config(server));
  agentrt::CancelToken cancel;
  // Cancelled once the request has arrived (the answer then stalls for 5 s).
  std::thread canceller([&] {
    server.wait_requests(1, 60s);
    cancel.cancel();
  });
  const auto start = std::chrono::steady_clock::now();
  Error e = transcribe_error(*t, fake_audio(10), "audio/wav", {}, cancel);
  canceller.join();
  CHECK(e.code() == ErrorCode::cancelled);
  CHECK(std::chrono::steady_clock::now() - start < 4s);  // not the 5 s stall
}
