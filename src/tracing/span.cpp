#include "tracing/span.hpp"

#include <algorithm>
#include <chrono>
#include <limits>

#include "tracing/tracer.hpp"

namespace agentrt {
inline namespace v1 {
namespace trace {

int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t Attributes::View::as_int() const noexcept {
  int64_t v = 0;
  if (payload.size() == sizeof v) std::memcpy(&v, payload.data(), sizeof v);
  return v;
}

double Attributes::View::as_real() const noexcept {
  double v = 0;
  if (payload.size() == sizeof v) std::memcpy(&v, payload.data(), sizeof v);
  return v;
}

Attributes::View Attributes::view_at(size_t at) const noexcept {
  const char* p = bytes_.data() + at;
  uint16_t key_size;
  std::memcpy(&key_size, p + 1, 2);
  const uint32_t value_size = read_u32(p + 3);
  return View{std::string_view(p + kHeader, key_size), static_cast<AttrType>(p[0]),
              std::string_view(p + kHeader + key_size, value_size)};
}

size_t Attributes::next(size_t at) const noexcept {
  uint16_t key_size;
  std::memcpy(&key_size, bytes_.data() + at + 1, 2);
  return at + kHeader + key_size + read_u32(bytes_.data() + at + 3);
}

char* Attributes::put_header(AttrType type, std::string_view key, size_t value_size) {
  // Keys are the conventions' names; values are bounded by what a span may carry (a string is cut at 4 GiB).
  key = key.substr(0, std::numeric_limits<uint16_t>::max());
  const auto key_size = static_cast<uint16_t>(key.size());
  const auto size = static_cast<uint32_t>(value_size);
  const size_t at = bytes_.size();
  bytes_.resize(at + kHeader + key_size + size);
  char* p = bytes_.data() + at;
  p[0] = static_cast<char>(type);
  std::memcpy(p + 1, &key_size, 2);
  std::memcpy(p + 3, &size, 4);
  std::memcpy(p + kHeader, key.data(), key_size);
  ++count_;
  return p + kHeader + key_size;
}

void Attributes::put(AttrType type, std::string_view key, std::string_view value) {
  value = value.substr(0, std::numeric_limits<uint32_t>::max());
  char* p = put_header(type, key, value.size());
  if (!value.empty()) std::memcpy(p, value.data(), value.size());
}

void Attributes::add_int(std::string_view key, int64_t value) {
  std::memcpy(put_header(AttrType::int64, key, sizeof value), &value, sizeof value);
}

void Attributes::add_real(std::string_view key, double value) {
  std::memcpy(put_header(AttrType::real, key, sizeof value), &value, sizeof value);
}

void Attributes::add_bool(std::string_view key, bool value) { *put_header(AttrType::boolean, key, 1) = value ? 1 : 0; }

void Attributes::add_list(std::string_view key, const std::vector<std::string>& items) {
  // The items that fit a value's 4 GiB, whole, in order (the list is cut after the last of them).
  constexpr size_t kMaxValue = std::numeric_limits<uint32_t>::max();
  size_t size = 0, kept = 0;
  for (; kept < items.size() && items[kept].size() + 4 <= kMaxValue - size; ++kept) size += 4 + items[kept].size();
  char* p = put_header(AttrType::string_list, key, size);
  for (size_t i = 0; i < kept; ++i) {
    const auto n = static_cast<uint32_t>(items[i].size());
    std::memcpy(p, &n, 4);
    std::memcpy(p + 4, items[i].data(), n);
    p += 4 + n;
  }
}

void Attributes::add(std::string_view key, const AttrValue& value) {
  struct Visit {
    Attributes& a;
    std::string_view key;
    void operator()(const std::string& s) const { a.add_string(key, s); }
    void operator()(int64_t i) const { a.add_int(key, i); }
    void operator()(double d) const { a.add_real(key, d); }
    void operator()(bool b) const { a.add_bool(key, b); }
    void operator()(const std::vector<std::string>& l) const { a.add_list(key, l); }
  };
  std::visit(Visit{*this, key}, value);
}

void Attributes::remove(std::string_view key) {
  for (size_t at = 0; at < bytes_.size();) {
    const size_t after = next(at);
    if (view_at(at).key == key) {
      bytes_.erase(at, after - at);
      --count_;
    } else {
      at = after;
    }
  }
}

std::optional<Attributes::View> Attributes::find(std::string_view key) const {
  std::optional<View> found;
  for_each([&](const View& v) {
    if (v.key == key) found = v;
  });
  return found;
}

namespace {

constexpr size_t kPooled = 64;  // spans kept per thread by recycle()

// Set when the thread's pool is destroyed (a trivial thread_local, valid until the thread ends): a span that ends
// later in the thread's exit (a runtime destroyed with the statics) is freed, not pooled.
thread_local bool t_pool_gone = false;

struct Pool {
  std::vector<std::unique_ptr<SpanData>> spent;
  ~Pool() { t_pool_gone = true; }
};

void reset(SpanData& d) noexcept {
  d.context = {};
  d.parent_span_id = {};
  d.name.clear();
  d.kind = SpanKind::internal;
  d.start_ns = d.end_ns = 0;
  d.attributes.clear();
  d.events.clear();
  d.links.clear();
  d.error = false;
  d.status_message.clear();
}

// The calling thread's pool (nullptr once the thread is ending and its pool is gone).
std::vector<std::unique_ptr<SpanData>>* span_pool() noexcept {
  if (t_pool_gone) return nullptr;
  thread_local Pool p;
  return &p.spent;
}

}  // namespace

std::unique_ptr<SpanData> new_span_data() {
  auto* pool = span_pool();
  if (!pool || pool->empty()) return std::make_unique<SpanData>();
  auto d = std::move(pool->back());
  pool->pop_back();
  reset(*d);  // here, on the thread that fills it: the strings it held are freed where spans are made
  return d;
}

void recycle(std::unique_ptr<SpanData> data) noexcept {
  auto* pool = span_pool();
  if (!data || !pool || pool->size() >= kPooled) return;  // freed here
  try {
    pool->push_back(std::move(data));
  } catch (...) {  // out of memory: the span is freed instead
  }
}

Span::Span(Span&& o) noexcept : tracer_(o.tracer_), ctx_(o.ctx_), data_(std::move(o.data_)) {
  o.tracer_ = nullptr;
  o.ctx_ = {};
}

Span& Span::operator=(Span&& o) noexcept {
  if (this != &o) {
    end();
    tracer_ = o.tracer_;
    ctx_ = o.ctx_;
    data_ = std::move(o.data_);
    o.tracer_ = nullptr;
    o.ctx_ = {};
  }
  return *this;
}

Span::~Span() { end(); }

Span& Span::set(std::string_view key, const AttrValue& value) {
  if (!data_) return *this;
  data_->attributes.remove(key);
  data_->attributes.add(key, value);
  return *this;
}

Span& Span::add(std::string_view key, const AttrValue& value) {
  if (data_) data_->attributes.add(key, value);
  return *this;
}

Span& Span::set_string(std::string_view key, std::string_view value) {
  if (!data_) return *this;
  data_->attributes.remove(key);
  data_->attributes.add_string(key, value);
  return *this;
}

void Span::add_event(std::string name, Attributes attributes, int64_t time_ns) {
  if (!data_) return;
  data_->events.push_back(SpanEvent{std::move(name), time_ns ? time_ns : now_ns(), std::move(attributes)});
}

void Span::add_link(const SpanContext& linked) {
  if (data_ && linked.valid()) data_->links.push_back(linked);
}

void Span::set_error(std::string_view type, std::string_view message) {
  if (!data_) return;
  set_string("error.type", type.empty() ? std::string_view("_OTHER") : type);
  data_->error = true;
  data_->status_message = std::string(message.substr(0, 1024));
}

void Span::end(int64_t end_ns) {
  if (!data_) return;
  data_->end_ns = end_ns ? end_ns : now_ns();
  if (data_->end_ns < data_->start_ns) data_->end_ns = data_->start_ns;
  if (tracer_) tracer_->submit(*data_);  // packed into the export queue
  recycle(std::move(data_));
}

}  // namespace trace
}  // namespace v1
}  // namespace agentrt
