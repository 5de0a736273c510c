// Written straight to bytes: the export thread encodes every span the runtime makes, so a span is first measured (an
// upper bound of its text), then written with a pointer into that much room at the end of the request — no growth
// checks per character. Strings are copied as they are when they need no escaping, else written by the
// event log's writer (append_json_string: escaping, invalid UTF-8 replaced). Encoding a span this way costs about a
// fifth of appending it piece by piece to a std::string.
#include "tracing/otlp_json.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <memory>

#include "agentrt/events.hpp"

namespace agentrt {
inline namespace v1 {
namespace trace {
namespace {

constexpr char kHex[] = "0123456789abcdef";
// The most a number takes: int64 in decimal (20), a double's shortest form (24), and some room.
constexpr size_t kNumber = 32;
// A JSON string's bound: each byte escaped as \u00XX (6), the quotes.
size_t string_bound(std::string_view s) { return 6 * s.size() + 2; }

size_t attributes_bound(const Attributes& attrs) {
  constexpr size_t kWrapper = 32;  // {"key":,"value":{"arrayValue":{"values":[...]}}} and the like
  size_t n = 2;
  attrs.for_each([&](const Attributes::View& a) {
    n += 24 + kWrapper + string_bound(a.key);
    switch (a.type) {
      case AttrType::string: n += string_bound(a.payload); break;
      case AttrType::string_list:
        a.for_each_item([&](std::string_view item) { n += kWrapper + string_bound(item) + 1; });
        break;
      default: n += kNumber;
    }
  });
  return n;
}

size_t span_bound(const SpanData& s) {
  size_t n = 256 + 3 * kNumber + string_bound(s.name) + attributes_bound(s.attributes) + string_bound(s.status_message);
  for (const auto& e : s.events) n += 64 + kNumber + string_bound(e.name) + attributes_bound(e.attributes);
  n += s.links.size() * 96;
  return n;
}

// True when `s` needs no escaping in JSON: no control character, quote, backslash or byte above 0x7f. Eight bytes
// at a time (a byte is flagged when it is below 0x20, equal to '"' or '\\', or has its high bit set).
bool plain(std::string_view s) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
  auto flagged = [](uint64_t w) {
    const uint64_t below_space = (w - kOnes * 0x20) & ~w;
    const uint64_t q = w ^ (kOnes * '"'), b = w ^ (kOnes * '\\');
    const uint64_t quote = (q - kOnes) & ~q, backslash = (b - kOnes) & ~b;
    return ((below_space | quote | backslash) & kHigh) | (w & kHigh);
  };
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    if (flagged(w)) return false;
  }
  for (; i < s.size(); ++i) {
    const auto u = static_cast<unsigned char>(s[i]);
    if (u < 0x20 || u >= 0x80 || u == '"' || u == '\\') return false;
  }
  return true;
}

// A writer into a buffer that span_bound sized. Not thread-safe: one per encoding.
class Out {
 public:
  explicit Out(char* p) : p_(p) {}
  char* end() const { return p_; }

  template <size_t N>
  void lit(const char (&s)[N]) {
    std::memcpy(p_, s, N - 1);
    p_ += N - 1;
  }
  void ch(char c) { *p_++ = c; }
  void str(std::string_view s) {
    if (plain(s)) {
      *p_++ = '"';
      std::memcpy(p_, s.data(), s.size());
      p_ += s.size();
      *p_++ = '"';
      return;
    }
    std::string escaped;
    append_json_string(escaped, s);  // at most string_bound(s) bytes
    std::memcpy(p_, escaped.data(), escaped.size());
    p_ += escaped.size();
  }
  void num(int64_t v) { p_ = std::to_chars(p_, p_ + kNumber, v).ptr; }
  void quoted(int64_t v) {
    *p_++ = '"';
    num(v);
    *p_++ = '"';
  }
  void real(double d) {
    // JSON has no NaN or infinity: OTLP's JSON mapping writes them as strings.
    if (std::isnan(d)) return lit("\"NaN\"");
    if (std::isinf(d)) return d > 0 ? lit("\"Infinity\"") : lit("\"-Infinity\"");
    p_ = std::to_chars(p_, p_ + kNumber, d).ptr;
  }
  template <size_t N>
  void hex(const std::array<uint8_t, N>& bytes) {
    *p_++ = '"';
    for (uint8_t b : bytes) {
      *p_++ = kHex[b >> 4];
      *p_++ = kHex[b & 15];
    }
    *p_++ = '"';
  }

 private:
  char* p_;
};

void write_string_value(Out& out, std::string_view s) {
  out.lit("{\"stringValue\":");
  out.str(s);
  out.ch('}');
}

void write_value(Out& out, const Attributes::View& v) {
  switch (v.type) {
    case AttrType::string: return write_string_value(out, v.payload);
    case AttrType::int64:
      out.lit("{\"intValue\":");
      out.quoted(v.as_int());
      return out.ch('}');
    case AttrType::real:
      out.lit("{\"doubleValue\":");
      out.real(v.as_real());
      return out.ch('}');
    case AttrType::boolean: return v.as_bool() ? out.lit("{\"boolValue\":true}") : out.lit("{\"boolValue\":false}");
    case AttrType::string_list: {
      out.lit("{\"arrayValue\":{\"values\":[");
      bool first = true;
      v.for_each_item([&](std::string_view item) {
        if (!first) out.ch(',');
        first = false;
        write_string_value(out, item);
      });
      return out.lit("]}}");
    }
  }
  out.lit("{}");  // not reached: the types above are all there are
}

void write_attributes(Out& out, const Attributes& attrs) {
  out.ch('[');
  bool first = true;
  attrs.for_each([&](const Attributes::View& a) {
    if (!first) out.ch(',');
    first = false;
    out.lit("{\"key\":");
    out.str(a.key);
    out.lit(",\"value\":");
    write_value(out, a);
    out.ch('}');
  });
  out.ch(']');
}

void write_ids(Out& out, const SpanContext& c) {
  out.lit("\"traceId\":");
  out.hex(c.trace_id);
  out.lit(",\"spanId\":");
  out.hex(c.span_id);
}

void write_span(Out& out, const SpanData& s) {
  out.ch('{');
  write_ids(out, s.context);
  if (std::any_of(s.parent_span_id.begin(), s.parent_span_id.end(), [](uint8_t b) { return b != 0; })) {
    out.lit(",\"parentSpanId\":");
    out.hex(s.parent_span_id);
  }
  out.lit(",\"flags\":");
  out.ch(s.context.sampled ? '1' : '0');
  out.lit(",\"name\":");
  out.str(s.name);
  out.lit(",\"kind\":");
  out.num(static_cast<int>(s.kind));
  out.lit(",\"startTimeUnixNano\":");
  out.quoted(s.start_ns);
  out.lit(",\"endTimeUnixNano\":");
  out.quoted(s.end_ns);
  out.lit(",\"attributes\":");
  write_attributes(out, s.attributes);
  if (!s.events.empty()) {
    out.lit(",\"events\":[");
    for (size_t i = 0; i < s.events.size(); ++i) {
      if (i) out.ch(',');
      out.lit("{\"timeUnixNano\":");
      out.quoted(s.events[i].time_ns);
      out.lit(",\"name\":");
      out.str(s.events[i].name);
      out.lit(",\"attributes\":");
      write_attributes(out, s.events[i].attributes);
      out.ch('}');
    }
    out.ch(']');
  }
  if (!s.links.empty()) {
    out.lit(",\"links\":[");
    for (size_t i = 0; i < s.links.size(); ++i) {
      if (i) out.ch(',');
      out.ch('{');
      write_ids(out, s.links[i]);
      out.ch('}');
    }
    out.ch(']');
  }
  // STATUS_CODE_ERROR = 2; UNSET (0, an empty status) otherwise, as the conventions ask of spans that did not fail.
  if (s.error) {
    out.lit(",\"status\":{\"code\":2,\"message\":");
    out.str(s.status_message);
    out.lit("}}");
  } else {
    out.lit(",\"status\":{}}");
  }
}

}  // namespace

void append_span_json(std::string& out, const SpanData& span) {
  const size_t at = out.size();
  out.resize(at + span_bound(span));  // room for the longest text the span can make; cut to what it made below
  Out w(out.data() + at);
  write_span(w, span);
  out.resize(static_cast<size_t>(w.end() - out.data()));
}

std::string otlp_prefix(const std::string& service_name) {
  std::string out =
      "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":";
  append_json_string(out, service_name);
  out += "}}]},\"scopeSpans\":[{\"scope\":{\"name\":\"agentrt\"},\"spans\":[";
  return out;
}

std::string otlp_json(const std::vector<std::unique_ptr<SpanData>>& spans, const std::string& service_name) {
  std::string out = otlp_prefix(service_name);
  bool first = true;
  for (const auto& s : spans) {
    if (!s) continue;
    if (!first) out += ',';
    first = false;
    append_span_json(out, *s);
  }
  out += kOtlpSuffix;
  return out;
}

}  // namespace trace
}  // namespace v1
}  // namespace agentrt
