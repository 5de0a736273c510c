#include "tracing/span_record.hpp"

#include <cstring>
#include <type_traits>

namespace agentrt {
inline namespace v1 {
namespace trace {
namespace {

// A span's fixed part, then its name, status message and attributes; then each event (an EventHeader, its name and
// attributes), then each link (a SpanContext).
struct Header {
  SpanContext context;
  std::array<uint8_t, 8> parent_span_id;
  int64_t start_ns, end_ns;
  int32_t kind;
  uint32_t name, status, attributes, attribute_count, events, links;
  bool error;
};
struct EventHeader {
  int64_t time_ns;
  uint32_t name, attributes, attribute_count;
};
static_assert(std::is_trivially_copyable_v<SpanContext> && std::is_trivially_copyable_v<Header> &&
              std::is_trivially_copyable_v<EventHeader>);

template <class T>
void put(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <class T>
T get(const char*& p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  p += sizeof v;
  return v;
}

std::string_view take(const char*& p, size_t n) {
  std::string_view s(p, n);
  p += n;
  return s;
}

}  // namespace

void pack_span(const SpanData& span, std::string& out) {
  const std::string_view attributes = span.attributes.packed();
  Header h{span.context,
           span.parent_span_id,
           span.start_ns,
           span.end_ns,
           static_cast<int32_t>(span.kind),
           static_cast<uint32_t>(span.name.size()),
           static_cast<uint32_t>(span.status_message.size()),
           static_cast<uint32_t>(attributes.size()),
           static_cast<uint32_t>(span.attributes.size()),
           static_cast<uint32_t>(span.events.size()),
           static_cast<uint32_t>(span.links.size()),
           span.error};
  put(out, h);
  out.append(span.name).append(span.status_message).append(attributes);
  for (const auto& e : span.events) {
    const std::string_view ea = e.attributes.packed();
    put(out, EventHeader{e.time_ns, static_cast<uint32_t>(e.name.size()), static_cast<uint32_t>(ea.size()),
                         static_cast<uint32_t>(e.attributes.size())});
    out.append(e.name).append(ea);
  }
  for (const auto& l : span.links) put(out, l);
}

size_t unpack_span(std::string_view in, SpanData& into) {
  const char* p = in.data();
  const auto h = get<Header>(p);
  into.context = h.context;
  into.parent_span_id = h.parent_span_id;
  into.start_ns = h.start_ns;
  into.end_ns = h.end_ns;
  into.kind = static_cast<SpanKind>(h.kind);
  into.error = h.error;
  into.name.assign(take(p, h.name));
  into.status_message.assign(take(p, h.status));
  into.attributes.assign_packed(take(p, h.attributes), h.attribute_count);
  into.events.resize(h.events);
  for (auto& e : into.events) {
    const auto eh = get<EventHeader>(p);
    e.time_ns = eh.time_ns;
    e.name.assign(take(p, eh.name));
    e.attributes.assign_packed(take(p, eh.attributes), eh.attribute_count);
  }
  into.links.resize(h.links);
  for (auto& l : into.links) l = get<SpanContext>(p);
  return static_cast<size_t>(p - in.data());
}

}  // namespace trace
}  // namespace v1
}  // namespace agentrt
