// The OpenAI-compatible chat-completions ModelProvider, and OpenAIConfig's readers.
#include <fmt/format.h>

#include <cstdlib>
#include <string_view>

#include "agentrt/error.hpp"
#include "agentrt/openai.hpp"
#include "model/openai_stream.hpp"
#include "model/provider_config.hpp"
#include "net/http_client.hpp"
#include "net/sse_parser.hpp"

namespace agentrt {
inline namespace v1 {
namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// Whether an error reported inside a 200 stream is the server's trouble (worth another attempt) rather
// than the request's.
bool stream_error_retryable(const openai::ApiError& e) {
  long status = 0;
  try {
    status = e.code.empty() ? 0 : std::stol(e.code);
  } catch (const std::exception&) {
    status = 0;
  }
  if (status >= 400) return openai::should_retry(status, {}, e);
  return e.type == "server_error" || e.type == "internal_server_error" || e.type == "overloaded_error" ||
         e.type == "service_unavailable";
}

// Implements ModelProvider over POST {base}/chat/completions. Thread-safe: the configuration is immutable
// and every complete() call runs its own transfer on a handle of the shared pool.
class OpenAIProvider final : public ModelProvider {
 public:
  explicit OpenAIProvider(OpenAIConfig config) : endpoint_(config), config_(std::move(config)) {
    config_.api_key.clear();  // the endpoint holds the one copy of the secret
  }

  std::string name() const override { return "openai-compatible"; }

  ModelResult complete(const ModelRequest& request, ModelStreamSink& sink, const CancelToken& cancel) override {
    const json body_json = openai::build_chat_body(request, config_);
    const std::string model = body_json.value("model", std::string());
    net::HttpHeaders headers{{"Content-Type", "application/json"}, {"Accept", "text/event-stream"}};
    // The model call's span: the server's trace joins the turn's.
    if (!request.traceparent.empty()) headers.emplace_back("traceparent", request.traceparent);
    net::HttpRequest http = endpoint_.request("/chat/completions", headers);
    // Invalid UTF-8 in a host's message must not make the request impossible.
    http.body = body_json.dump(-1, ' ', false, json::error_handler_t::replace);
    return openai::with_retries(config_, cancel, [&]() -> ModelResult { return attempt(http, model, sink, cancel); });
  }

 private:
  ModelResult attempt(net::HttpRequest http, const std::string& model, ModelStreamSink& sink,
                      const CancelToken& cancel) const {
    openai::ChatStreamAccumulator acc(&sink);
    const provider_http::StreamHandlers handlers = provider_http::stream_handlers(
        acc, fmt::format("{} model '{}'", name(), model), config_.max_retry_after, stream_error_retryable);
    const provider_http::StreamedAnswer answer =
        provider_http::send_streamed(http_, endpoint_, std::move(http), cancel, handlers);

    return provider_http::finish_streamed(acc, answer, handlers, endpoint_,
                                          [&acc](const json& completion) { acc.on_completion(completion); });
  }

  openai::OpenAIEndpoint endpoint_;
  OpenAIConfig config_;
  mutable net::HttpClient http_;
};

}  // namespace

OpenAIConfig openai_config_from_env() {
  OpenAIConfig c;
  if (auto url = env_or_empty("OPENAI_BASE_URL"); !url.empty()) c.base_url = url;
  if (auto model = env_or_empty("OPENAI_MODEL"); !model.empty()) c.model = model;
  // OPENAI_API_KEY stays where it is: the provider reads it (api_key_env) when it is constructed.
  return c;
}

OpenAIConfig openai_config_from_json(const json& j) {
  if (!j.is_object()) throw Error(ErrorCode::invalid_argument, "OpenAI configuration must be a JSON object");
  OpenAIConfig c;
  const provider_config::ConfigReader r("OpenAI");
  for (const auto& [key, v] : j.items()) {
    if (provider_config::read_common_key(c, key, v, r)) continue;
    if (key == "transcription_model") {
      c.transcription_model = r.string(v, key);
    } else if (key == "max_audio_bytes") {
      c.max_audio_bytes = static_cast<size_t>(r.count(v, key));
    } else {
      r.bad(key, "is not a known key");
    }
  }
  return c;
}

std::shared_ptr<ModelProvider> make_openai_provider(OpenAIConfig config) {
  return std::make_shared<OpenAIProvider>(std::move(config));
}

}  // namespace v1
}  // namespace agentrt
