// A fallback chain of model providers (see model_config.hpp).
#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "agentrt/model_config.hpp"

namespace agentrt {
inline namespace v1 {
namespace {

// Passes the stream on and remembers whether any of it was passed: after that a switch would show the answer
// twice. Not thread-safe (one complete() call's).
class TrackingSink final : public ModelStreamSink {
 public:
  explicit TrackingSink(ModelStreamSink& next) : next_(next) {}
  void on_text(std::string_view d) override { pass(d), next_.on_text(d); }
  void on_reasoning(std::string_view d) override { pass(d), next_.on_reasoning(d); }
  void on_tool_call_start(int index, std::string_view id, std::string_view name) override {
    streamed_ = true;
    next_.on_tool_call_start(index, id, name);
  }
  void on_tool_call_args(int index, std::string_view d) override { pass(d), next_.on_tool_call_args(index, d); }
  void on_fallback(const ModelFallback& f) override { next_.on_fallback(f); }
  bool streamed() const { return streamed_; }

 private:
  void pass(std::string_view d) { streamed_ = streamed_ || !d.empty(); }
  ModelStreamSink& next_;
  bool streamed_ = false;
};

// Thread-safe: the chain is immutable; each call keeps its own state.
class FallbackProvider final : public ModelProvider {
 public:
  explicit FallbackProvider(std::vector<FallbackChoice> chain) : chain_(std::move(chain)) {
    if (chain_.empty()) throw Error(ErrorCode::invalid_argument, "a fallback chain needs at least one provider");
    for (const auto& c : chain_)
      if (!c.provider) throw Error(ErrorCode::invalid_argument, "a fallback chain's provider is null");
  }

  std::string name() const override { return chain_.front().provider->name(); }

  ModelResult complete(const ModelRequest& request, ModelStreamSink& sink, const CancelToken& cancel) override {
    std::optional<ModelRequest> own;  // the request for the links after the first, without the stage's model
    for (size_t i = 0;; ++i) {
      const FallbackChoice& link = chain_[i];
      if (i == 1) {
        own = request;
        own->model.clear();
      }
      TrackingSink tracked(sink);
      std::string code, message;
      try {
        return link.provider->complete(i == 0 ? request : *own, tracked, cancel);
      } catch (const Error& e) {
        if (e.code() == ErrorCode::cancelled || cancel.cancelled() || tracked.streamed() || i + 1 == chain_.size())
          throw;
        code = std::string(to_string(e.code()));
        message = e.message();
      } catch (const std::exception& e) {
        if (cancel.cancelled() || tracked.streamed() || i + 1 == chain_.size()) throw;
        code = "internal";
        message = e.what();
      }
      const FallbackChoice& next = chain_[i + 1];
      sink.on_fallback(ModelFallback{link.provider_name, i == 0 && !request.model.empty() ? request.model : link.model,
                                     next.provider_name, next.model, std::move(code), std::move(message)});
    }
  }

 private:
  std::vector<FallbackChoice> chain_;
};

}  // namespace

std::shared_ptr<ModelProvider> make_fallback_provider(std::vector<FallbackChoice> chain) {
  return std::make_shared<FallbackProvider>(std::move(chain));
}

}  // namespace v1
}  // namespace agentrt
