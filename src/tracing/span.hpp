// Span: one operation being timed (a run, a model call, a tool call, a wait), recorded when its trace is sampled.
// An empty Span (tracing off) does nothing and costs one branch per call.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tracing/trace_context.hpp"

namespace agentrt {
inline namespace v1 {
namespace trace {

// OTLP's SpanKind numbers.
enum class SpanKind : int { internal = 1, server = 2, client = 3, producer = 4, consumer = 5 };

using AttrValue = std::variant<std::string, int64_t, double, bool, std::vector<std::string>>;

// Keys are the conventions' names, string literals: a view, not a copy (a span has a dozen of them).
struct Attribute {
  std::string_view key;  // static storage
  AttrValue value;
};

struct SpanEvent {
  std::string name;
  int64_t time_ns = 0;
  std::vector<Attribute> attributes;
};

// A finished (or recording) span's data, as the exporter sends it.
struct SpanData {
  SpanContext context;
  std::array<uint8_t, 8> parent_span_id{};  // all zero: a root span
  std::string name;
  SpanKind kind = SpanKind::internal;
  int64_t start_ns = 0;  // Unix time, nanoseconds
  int64_t end_ns = 0;
  std::vector<Attribute> attributes;
  std::vector<SpanEvent> events;
  std::vector<SpanContext> links;
  bool error = false;  // status ERROR (else UNSET)
  std::string status_message;
};

// Nanoseconds since the Unix epoch, now.
int64_t now_ns() noexcept;

// The calling thread's spent SpanData (nullptr once the thread is ending and its pool is gone). new_span_data()
// takes one and empties it (its name's and vectors' capacity kept), or makes one; recycle() keeps a spent one for
// the thread's next span (up to a bound; beyond, it is freed).
std::vector<std::unique_ptr<SpanData>>* span_pool() noexcept;
std::unique_ptr<SpanData> new_span_data();
void recycle(std::unique_ptr<SpanData> data) noexcept;

class Tracer;

// Not thread-safe: one thread uses a span at a time (it may move between threads). Ended by end() or, still open,
// by its destructor; a span that is not recording (tracing off, or its trace not sampled) ignores every call but
// still has a context to propagate when its tracer is on.
class Span {
 public:
  Span() = default;
  Span(Span&& o) noexcept;
  Span& operator=(Span&& o) noexcept;
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
  ~Span();

  // True while it records (sampled, not ended): guard costly attribute values with it.
  bool recording() const noexcept { return data_ != nullptr; }
  explicit operator bool() const noexcept { return recording(); }
  // Its context: valid when its tracer is on, sampled or not.
  const SpanContext& context() const noexcept { return ctx_; }
  // Its W3C traceparent ("" when tracing is off).
  std::string traceparent() const { return format_traceparent(ctx_); }

  // `key`: a string literal (Attribute::key keeps a view of it). set() replaces a value the key has; add() appends
  // without looking (for a key the span cannot have yet: what a span starts with).
  Span& set(std::string_view key, AttrValue value);
  Span& add(std::string_view key, AttrValue value);
  Span& add_string(std::string_view key, std::string_view value) { return add(key, std::string(value)); }
  Span& set_string(std::string_view key, std::string_view value) { return set(key, std::string(value)); }
  Span& set_int(std::string_view key, int64_t value) { return set(key, value); }
  Span& set_bool(std::string_view key, bool value) { return set(key, value); }
  void add_event(std::string name, std::vector<Attribute> attributes = {}, int64_t time_ns = 0);
  void add_link(const SpanContext& linked);
  // Status ERROR with `message`, and the attribute error.type = `type` (an error code's name, an exception class).
  void set_error(std::string_view type, std::string_view message);
  bool has_error() const noexcept { return data_ && data_->error; }
  // Ends it (now, or at `end_ns`) and hands it to the exporter. Later calls do nothing.
  void end(int64_t end_ns = 0);
  // Drops it unexported (a wait that another process will end).
  void discard() noexcept { recycle(std::move(data_)); }

 private:
  friend class Tracer;
  Tracer* tracer_ = nullptr;
  SpanContext ctx_;
  std::unique_ptr<SpanData> data_;
};

}  // namespace trace
}  // namespace v1
}  // namespace agentrt
