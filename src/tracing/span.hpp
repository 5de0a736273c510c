// Span: one operation being timed (a run, a model call, a tool call, a wait), recorded when its trace is sampled.
// An empty Span (tracing off) does nothing and costs one branch per call.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
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

// An attribute given as a value (a span event's, a test's).
struct Attribute {
  std::string_view key;
  AttrValue value;
};

enum class AttrType : uint8_t { string, int64, real, boolean, string_list };

// A span's attributes packed one after another in one byte string, each a header (type, key's and value's sizes),
// the key's bytes and the value's: adding one copies bytes and, once the buffer has grown (a pooled SpanData keeps
// its capacity), allocates nothing; and the set is a few cache lines when the span crosses to the export thread.
// Not thread-safe.
class Attributes {
 public:
  struct View {
    std::string_view key;
    AttrType type;
    // A string's bytes; an int64's or a double's 8 bytes; a bool's 1; a list's items, each a 4-byte size and bytes.
    std::string_view payload;
    int64_t as_int() const noexcept;
    double as_real() const noexcept;
    bool as_bool() const noexcept { return !payload.empty() && payload[0] != 0; }
    template <class F>
    void for_each_item(F&& f) const {
      for (size_t at = 0; at + 4 <= payload.size();) {
        const uint32_t n = read_u32(payload.data() + at);
        f(payload.substr(at + 4, n));
        at += 4 + n;
      }
    }
  };

  Attributes() = default;
  Attributes(std::initializer_list<Attribute> list) {
    for (const auto& a : list) add(a.key, a.value);
  }

  void add_string(std::string_view key, std::string_view value) { put(AttrType::string, key, value); }
  void add_int(std::string_view key, int64_t value);
  void add_real(std::string_view key, double value);
  void add_bool(std::string_view key, bool value);
  void add_list(std::string_view key, const std::vector<std::string>& items);
  void add(std::string_view key, const AttrValue& value);
  // Removes every attribute named `key`.
  void remove(std::string_view key);
  void reserve(size_t bytes) { bytes_.reserve(bytes); }
  // The packed bytes, and a set made of bytes packed() gave with the count of attributes in them.
  std::string_view packed() const noexcept { return bytes_; }
  void assign_packed(std::string_view bytes, size_t count) {
    bytes_.assign(bytes);
    count_ = count;
  }
  void clear() noexcept {
    bytes_.clear();
    count_ = 0;
  }
  size_t size() const noexcept { return count_; }
  bool empty() const noexcept { return count_ == 0; }
  std::optional<View> find(std::string_view key) const;
  template <class F>
  void for_each(F&& f) const {
    for (size_t at = 0; at < bytes_.size(); at = next(at)) f(view_at(at));
  }

 private:
  static constexpr size_t kHeader = 1 + 2 + 4;  // type, key size (u16), value size (u32)
  static uint32_t read_u32(const char* p) noexcept {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  View view_at(size_t at) const noexcept;
  size_t next(size_t at) const noexcept;
  char* put_header(AttrType type, std::string_view key, size_t value_size);
  void put(AttrType type, std::string_view key, std::string_view value);

  std::string bytes_;
  size_t count_ = 0;
};

struct SpanEvent {
  std::string name;
  int64_t time_ns = 0;
  Attributes attributes;
};

// A finished (or recording) span's data, as the exporter sends it.
struct SpanData {
  SpanContext context;
  std::array<uint8_t, 8> parent_span_id{};  // all zero: a root span
  std::string name;
  SpanKind kind = SpanKind::internal;
  int64_t start_ns = 0;  // Unix time, nanoseconds
  int64_t end_ns = 0;
  Attributes attributes;
  std::vector<SpanEvent> events;
  std::vector<SpanContext> links;
  bool error = false;  // status ERROR (else UNSET)
  std::string status_message;
};

// Nanoseconds since the Unix epoch, now.
int64_t now_ns() noexcept;

// The calling thread's spent SpanData: new_span_data() takes one and empties it (its name's and vectors' capacity
// kept), or makes one; recycle() keeps a spent one for the thread's next span (up to a bound, and while the thread's
// pool lives; else it is freed).
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

  // set() replaces a value the key has (the attribute moves to the end); add() appends without looking (for a key
  // the span cannot have yet: what a span starts with).
  Span& set(std::string_view key, const AttrValue& value);
  Span& add(std::string_view key, const AttrValue& value);
  Span& add_string(std::string_view key, std::string_view value) {
    if (data_) data_->attributes.add_string(key, value);
    return *this;
  }
  Span& set_string(std::string_view key, std::string_view value);
  Span& set_int(std::string_view key, int64_t value) { return set(key, value); }
  Span& set_bool(std::string_view key, bool value) { return set(key, value); }
  void add_event(std::string name, Attributes attributes = {}, int64_t time_ns = 0);
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
