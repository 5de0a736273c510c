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
  if (tracer_) tracer_->submit(*data_);
  data_.reset();
}

}  // namespace trace
}  // namespace v1
}  // namespace agentrt
