// A finished span packed into bytes: how it waits in the export queue. The run's thread packs it as the span ends and
// keeps its SpanData for its next span (still in its cache); the export thread unpacks it into a SpanData of its own
// and encodes that. So only the packed bytes cross between the threads, once, one way: handing the SpanData itself
// over and back cost W2 about twice as much (its memory went to the other core and came back cold).
// Plain functions on the caller's buffers; the bytes are only ever read by the process that packed them.
#pragma once

#include <string>
#include <string_view>

#include "tracing/span.hpp"

namespace agentrt {
inline namespace v1 {
namespace trace {

// Appends `span` to `out`.
void pack_span(const SpanData& span, std::string& out);
// Reads the span packed at the start of `in` into `into` (whose strings and vectors keep their capacity) and returns
// the bytes it took. `in` must start with what pack_span appended.
size_t unpack_span(std::string_view in, SpanData& into);

}  // namespace trace
}  // namespace v1
}  // namespace agentrt
