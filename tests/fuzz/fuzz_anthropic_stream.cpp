// The Anthropic Messages stream accumulator (src/model/anthropic_stream.*): a streamed answer (SSE bytes) or a
// whole Message (a JSON body), from a server that may send anything. It fails with Error only, and what it
// forwards to the sink is what it returns: the same text and reasoning, each tool call announced once with an id
// and a name, its streamed input adding up to the returned one; the thinking blocks it returns are the ones a next
// request sends back. Byte 0: bit 0 = a whole Message (else a stream), bit 1 = message_stop required.
#include <cstdint>
#include <map>
#include <string>

#include "agentrt/error.hpp"
#include "agentrt/json_limits.hpp"
#include "fuzz_model_sink.hpp"
#include "fuzz_support.hpp"
#include "model/anthropic_stream.hpp"
#include "net/sse_parser.hpp"

using namespace agentrt;

namespace {

[[noreturn]] void broken(const std::string& what) { agentrt_fuzz::broken("anthropic_stream", what); }

void check(const agentrt_fuzz::RecordingSink& sink, const ModelResult& r) {
  sink.check(r);
  if (!r.encrypted_value.empty()) {
    const json value = json::parse(r.encrypted_value, nullptr, false);
    if (!value.is_object() || !value.contains("blocks")) broken("the encrypted value is not the documented object");
    if (anthropic::thinking_blocks_from(r.encrypted_value).size() != value["blocks"].size())
      broken("a thinking block returned is not sent back");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool whole = (data[0] & 1) != 0;
  const std::string_view body = agentrt_fuzz::text_of(data + 1, size - 1);
  agentrt_fuzz::RecordingSink sink("anthropic_stream");
  anthropic::MessageStreamAccumulator acc(&sink);
  try {
    if (!whole) {
      net::SseParser parser;
      parser.feed(body, [&](const net::SseEvent& e) { acc.on_event(e); });
      if (auto last = parser.finish()) acc.on_last_event(*last);
    } else {
      // As the provider reads a body that is not an event stream.
      if (json_text_depth(body, kDefaultMaxJsonDepth) > kDefaultMaxJsonDepth) return 0;
      json message = json::parse(body, nullptr, false);
      if (message.is_discarded()) return 0;
      acc.on_message(message);
    }
    check(sink, acc.finish(/*require_stop=*/(data[0] & 2) != 0));
  } catch (const Error&) {
    // A model error, a cut stream: what a bad server gets.
  }
  // Anything stored as an assistant message's encrypted value is read back without failing.
  (void)anthropic::thinking_blocks_from(std::string(body));
  return 0;
}
