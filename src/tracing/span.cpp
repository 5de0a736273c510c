#include "tracing/span.hpp"

#include <chrono>

#include "tracing/tracer.hpp"

namespace agentrt {
inline namespace v1 {
namespace trace {

int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
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

}  // namespace

std::vector<std::unique_ptr<SpanData>>* span_pool() noexcept {
  if (t_pool_gone) return nullptr;
  thread_local Pool p;
  return &p.spent;
}

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

Span& Span::set(std::string_view key, AttrValue value) {
  if (!data_) return *this;
  for (auto& a : data_->attributes)
    if (a.key == key) {
      a.value = std::move(value);
      return *this;
    }
  data_->attributes.push_back(Attribute{key, std::move(value)});
  return *this;
}

Span& Span::add(std::string_view key, AttrValue value) {
  if (data_) data_->attributes.push_back(Attribute{key, std::move(value)});
  return *this;
}

void Span::add_event(std::string name, std::vector<Attribute> attributes, int64_t time_ns) {
  if (!data_) return;
  data_->events.push_back(SpanEvent{std::move(name), time_ns ? time_ns : now_ns(), std::move(attributes)});
}

void Span::add_link(const SpanContext& linked) {
  if (data_ && linked.valid()) data_->links.push_back(linked);
}

void Span::set_error(std::string_view type, std::string_view message) {
  if (!data_) return;
  set("error.type", std::string(type.empty() ? "_OTHER" : type));
  data_->error = true;
  data_->status_message = std::string(message.substr(0, 1024));
}

void Span::end(int64_t end_ns) {
  if (!data_) return;
  data_->end_ns = end_ns ? end_ns : now_ns();
  if (data_->end_ns < data_->start_ns) data_->end_ns = data_->start_ns;
  if (tracer_) tracer_->submit(data_);  // takes it when queued
  recycle(std::move(data_));
}

}  // namespace trace
}  // namespace v1
}  // namespace agentrt
