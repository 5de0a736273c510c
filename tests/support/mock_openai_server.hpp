// MockOpenAIServer: an in-process OpenAI-compatible HTTP server for tests (Boost.Beast on 127.0.0.1).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agentrt/json.hpp"

// In agentrt::testing like the other test support (not in v1: test helpers are not versioned API).
namespace agentrt::testing {

// One scripted answer. With `chunks` the body is streamed (chunked encoding), one write per chunk;
// otherwise `body` is sent whole with a Content-Length.
struct MockResponse {
  int status = 200;
  std::string content_type = "text/event-stream";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::vector<std::string> chunks;
  std::chrono::milliseconds delay_between{0};  // before every chunk but the first
  std::chrono::milliseconds stall_after{0};    // after the last chunk, before ending the body
  // After the chunks, send this again every keep_sending_every until the client goes away (at most 10 s).
  std::optional<std::string> keep_sending;
  std::chrono::milliseconds keep_sending_every{10};
  bool cut_connection = false;  // end by closing the connection instead of ending the chunked body

  static MockResponse json(int status, const agentrt::json& body,
                           std::vector<std::pair<std::string, std::string>> headers = {});
  static MockResponse stream(std::vector<std::string> chunks);
};

// What the server received.
struct RecordedRequest {
  struct File {
    std::string filename;
    std::string content_type;
    std::string content;
  };
  std::string method;
  std::string path;
  std::multimap<std::string, std::string> headers;  // names as sent
  std::string body;
  std::map<std::string, File> form;  // multipart fields by name (plain fields have an empty filename)
  int remote_port = 0;               // tells connections apart
  std::chrono::steady_clock::time_point received;

  std::optional<std::string> header(const std::string& name) const;  // case-insensitive
  agentrt::json json_body() const;                                   // throws when the body is not JSON
};

// Serves POST /v1/chat/completions, POST /v1/audio/transcriptions and POST /v1/messages (Anthropic) from a
// queue of scripted responses each (an empty queue answers 500 with x-should-retry: false) and records every
// request.
// Thread-safe: script and inspect from the test's threads while the server's I/O thread answers.
class MockOpenAIServer {
 public:
  MockOpenAIServer();  // binds 127.0.0.1 on a free port and starts serving
  ~MockOpenAIServer();
  MockOpenAIServer(const MockOpenAIServer&) = delete;
  MockOpenAIServer& operator=(const MockOpenAIServer&) = delete;

  int port() const;
  // "http://127.0.0.1:<port>/v1" of a port that was just free and is closed again: a server that cannot be reached.
  static std::string closed_base_url();
  std::string base_url() const;  // "http://127.0.0.1:<port>/v1"
  std::string origin() const;    // "http://127.0.0.1:<port>" (Anthropic's base URL: it appends /v1/messages)

  void push_chat(MockResponse r);
  void push_transcription(MockResponse r);
  void push_messages(MockResponse r);

  std::vector<RecordedRequest> requests() const;
  size_t request_count() const;
  // Blocks until `n` requests have arrived (their responses may still be on their way) or the timeout passes.
  bool wait_requests(size_t n, std::chrono::milliseconds timeout) const;
  // When a streamed write first failed because the client had gone (cancellation tests).
  std::optional<std::chrono::steady_clock::time_point> client_gone_at() const;
  // Blocks until client_gone_at() is set or the timeout passes.
  bool wait_client_gone(std::chrono::milliseconds timeout) const;

  // SSE helpers: "data: <json>\n\n" and "data: [DONE]\n\n".
  static std::string sse(const agentrt::json& chunk);
  static std::string sse_done();
  // A chat.completion.chunk with one choice whose delta is `delta`.
  static agentrt::json chunk(const agentrt::json& delta, const agentrt::json& finish_reason = nullptr,
                             const std::string& model = "mock-model");
  // A whole text answer: role chunk, one content delta per piece, finish "stop", usage chunk, [DONE].
  static std::vector<std::string> text_stream(const std::vector<std::string>& pieces, int prompt_tokens = 7,
                                              int completion_tokens = 5);
  // One tool call: header fragment (id, name, arguments ""), one fragment per piece, finish
  // "tool_calls", usage chunk, [DONE].
  static std::vector<std::string> tool_call_stream(const std::string& id, const std::string& name,
                                                   const std::vector<std::string>& argument_pieces);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace agentrt::testing
