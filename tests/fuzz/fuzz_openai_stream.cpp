// The OpenAI stream accumulator (src/model/openai_stream.*): a streamed answer (SSE bytes) or a whole one (a
// JSON body), from a server that may send anything. It fails with Error only, and what it forwards to the sink
// is what it returns: the same text and reasoning, tool-call arguments only for announced calls, each call
// announced once, the streamed arguments adding up to the returned ones.
#include <cstdint>
#include <map>
#include <string>

#include "agentrt/error.hpp"
#include "agentrt/json_limits.hpp"
#include "fuzz_model_sink.hpp"
#include "fuzz_support.hpp"
#include "model/openai_stream.hpp"
#include "net/sse_parser.hpp"

using namespace agentrt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool streamed = (data[0] & 1) == 0;
  const std::string_view body = agentrt_fuzz::text_of(data + 1, size - 1);
  agentrt_fuzz::RecordingSink sink("openai_stream");
  openai::ChatStreamAccumulator acc(&sink);
  try {
    if (streamed) {
      net::SseParser parser;
      bool done = false;
      parser.feed(body, [&](const net::SseEvent& e) {
        if (!done) done = acc.on_event(e);
      });
      if (auto last = parser.finish()) acc.on_last_event(*last);
    } else {
      // As the provider reads a body that is not an event stream.
      if (json_text_depth(body, kDefaultMaxJsonDepth) > kDefaultMaxJsonDepth) return 0;
      json completion = json::parse(body, nullptr, false);
      if (completion.is_discarded()) return 0;
      acc.on_completion(completion);
    }
    sink.check(acc.finish(/*require_done=*/(data[0] & 2) != 0));
  } catch (const Error&) {
    // A model error, a cut stream: what a bad server gets.
  }
  // Error bodies are read from anything a server sends.
  const auto e = openai::parse_api_error(body);
  (void)openai::describe_api_error(400, e);
  return 0;
}
