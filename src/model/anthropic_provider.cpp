// The Anthropic Messages ModelProvider, and AnthropicConfig's reader.
#include <fmt/format.h>

#include <string_view>

#include "agentrt/anthropic.hpp"
#include "agentrt/error.hpp"
#include "model/anthropic_stream.hpp"
#include "model/provider_config.hpp"
#include "model/provider_http.hpp"
#include "net/http_client.hpp"

namespace agentrt {
inline namespace v1 {
namespace {

// Whether an error event inside a 200 stream is the server's trouble (worth another attempt, when nothing was
// shown yet) rather than the request's. Anthropic's error types: https://docs.anthropic.com/en/api/errors.
bool stream_error_retryable(const provider_http::ApiError& e) {
  return e.type == "overloaded_error" || e.type == "api_error" || e.type == "rate_limit_error" ||
         e.type == "timeout_error";
}

provider_http::EndpointSettings anthropic_endpoint(const AnthropicConfig& config) {
  provider_http::EndpointSettings s = provider_http::endpoint_settings(config, "Anthropic");
  s.key_header = "x-api-key";
  s.key_prefix.clear();
  return s;
}

// Implements ModelProvider over POST {base}/v1/messages. Thread-safe: the configuration is immutable and every
// complete() call runs its own transfer on a handle of the shared pool.
class AnthropicProvider final : public ModelProvider {
 public:
  explicit AnthropicProvider(AnthropicConfig config)
      : endpoint_(anthropic_endpoint(config)), config_(std::move(config)) {
    config_.api_key.clear();  // the endpoint holds the one copy of the secret
  }

  std::string name() const override { return "anthropic"; }

  ModelResult complete(const ModelRequest& request, ModelStreamSink& sink, const CancelToken& cancel) override {
    const json body = anthropic::build_messages_body(request, config_);
    const std::string model = body.value("model", std::string());
    net::HttpHeaders headers{{"content-type", "application/json"},
                             {"accept", "text/event-stream"},
                             {"anthropic-version", config_.anthropic_version}};
    if (!request.traceparent.empty()) headers.emplace_back("traceparent", request.traceparent);
    net::HttpRequest http = endpoint_.request("/v1/messages", headers);
    // Invalid UTF-8 in a host's message must not make the request impossible.
    http.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
    return provider_http::with_retries(config_, cancel,
                                       [&]() -> ModelResult { return attempt(http, model, sink, cancel); });
  }

 private:
  ModelResult attempt(net::HttpRequest http, const std::string& model, ModelStreamSink& sink,
                      const CancelToken& cancel) const {
    anthropic::MessageStreamAccumulator acc(&sink);
    const provider_http::StreamHandlers handlers = provider_http::stream_handlers(
        acc, fmt::format("{} model '{}'", name(), model), config_.max_retry_after, stream_error_retryable);
    const provider_http::StreamedAnswer answer =
        provider_http::send_streamed(http_, endpoint_, std::move(http), cancel, handlers);

    return provider_http::finish_streamed(acc, answer, handlers, endpoint_,
                                          [&acc](const json& message) { acc.on_message(message); });
  }

  provider_http::ModelEndpoint endpoint_;
  AnthropicConfig config_;
  mutable net::HttpClient http_;
};

}  // namespace

AnthropicConfig anthropic_config_from_json(const json& j) {
  if (!j.is_object()) throw Error(ErrorCode::invalid_argument, "Anthropic configuration must be a JSON object");
  AnthropicConfig c;
  const provider_config::ConfigReader r("Anthropic");
  for (const auto& [key, v] : j.items()) {
    if (provider_config::read_common_key(c, key, v, r)) continue;
    if (key == "max_tokens") {
      c.max_tokens = r.count(v, key);
      if (c.max_tokens < 1) r.bad(key, "must be at least 1");
    } else if (key == "anthropic_version") {
      c.anthropic_version = r.string(v, key);
    } else {
      r.bad(key, "is not a known key");
    }
  }
  return c;
}

std::shared_ptr<ModelProvider> make_anthropic_provider(AnthropicConfig config) {
  return std::make_shared<AnthropicProvider>(std::move(config));
}

}  // namespace v1
}  // namespace agentrt
