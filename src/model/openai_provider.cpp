// The OpenAI-compatible chat-completions ModelProvider, and OpenAIConfig's readers.
#include <fmt/format.h>

#include <cstdlib>
#include <string_view>

#include "agentrt/error.hpp"
#include "agentrt/json_limits.hpp"
#include "agentrt/openai.hpp"
#include "model/openai_stream.hpp"
#include "net/http_client.hpp"
#include "net/sse_parser.hpp"

namespace agentrt {
inline namespace v1 {
namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

constexpr size_t kMaxEventBytes = 16u << 20;

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
  std::string redact(std::string text) const { return endpoint_.redact(std::move(text)); }

  ModelResult attempt(net::HttpRequest http, const std::string& model, ModelStreamSink& sink,
                      const CancelToken& cancel) const {
    openai::ChatStreamAccumulator acc(&sink);
    net::SseParser parser;
    bool streaming = false;
    http.on_headers = [&](const net::HttpResponse& head) {
      if (head.status / 100 != 2) return false;  // an error body: read it whole
      // A server that ignores stream:true answers with one JSON completion.
      const std::string type = head.header("content-type").value_or("");
      streaming = type.find("application/json") == std::string::npos;
      return streaming;
    };
    http.on_body = [&](std::string_view bytes) {
      parser.feed(bytes, [&](const net::SseEvent& ev) { acc.on_event(ev); });
      // A server that never ends its event must not grow our memory without bound.
      if (parser.pending_bytes() > kMaxEventBytes) {
        throw Error(ErrorCode::model, fmt::format("the model stream sent an event over {} bytes", kMaxEventBytes));
      }
    };

    net::HttpResponse response;
    try {
      response = http_.send(http, cancel);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::cancelled) throw;
      Error failure(e.code(), redact(fmt::format("{} model '{}': {}", name(), model, e.message())));
      // Once a subscriber saw part of this answer, another attempt would show it a second, different one.
      if (acc.emitted()) throw failure;
      if (const auto& se = acc.stream_error()) {
        if (stream_error_retryable(*se)) throw openai::RetryableError(std::move(failure), std::nullopt);
        throw failure;
      }
      if (e.code() == ErrorCode::timeout || e.code() == ErrorCode::io) {
        throw openai::RetryableError(std::move(failure), std::nullopt);
      }
      throw failure;
    }

    if (response.status / 100 != 2)
      endpoint_.throw_failure(response, fmt::format("{} model '{}'", name(), model), config_.max_retry_after);

    try {
      if (!streaming) {
        if (json_text_depth(response.body, kDefaultMaxJsonDepth) > kDefaultMaxJsonDepth)
          throw Error(ErrorCode::model,
                      fmt::format("the answer is nested deeper than {} levels", kDefaultMaxJsonDepth));
        json completion = json::parse(response.body, nullptr, false);
        if (completion.is_discarded()) {
          throw Error(ErrorCode::model, "the answer is neither an event stream nor JSON");
        }
        acc.on_completion(completion);
      } else {
        if (auto last = parser.finish()) acc.on_last_event(*last);
      }
      return acc.finish(/*require_done=*/true);
    } catch (const Error& e) {
      Error failure(e.code(), redact(fmt::format("{} model '{}': {}", name(), model, e.message())));
      // A cut stream that showed nothing yet is a connection failure like any other.
      if (!acc.emitted() && !acc.done() && streaming) throw openai::RetryableError(std::move(failure), std::nullopt);
      throw failure;
    }
  }

  openai::OpenAIEndpoint endpoint_;
  OpenAIConfig config_;
  mutable net::HttpClient http_;
};

// ---- configuration readers ---------------------------------------------------------------------------

[[noreturn]] void bad_config(std::string_view key, std::string_view what) {
  throw Error(ErrorCode::invalid_argument, fmt::format("OpenAI configuration: '{}' {}", key, what));
}

std::string config_string(const json& v, std::string_view key) {
  if (!v.is_string()) bad_config(key, "must be a string");
  return v.get<std::string>();
}

int64_t config_count(const json& v, std::string_view key) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0) bad_config(key, "must be a non-negative integer");
  return v.get<int64_t>();
}

const json& config_object(const json& v, std::string_view key) {
  if (!v.is_object()) bad_config(key, "must be an object");
  return v;
}

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
  using std::chrono::milliseconds;
  for (const auto& [key, v] : j.items()) {
    if (key == "base_url") {
      c.base_url = config_string(v, key);
    } else if (key == "api_key_env") {
      c.api_key_env = config_string(v, key);
    } else if (key == "api_key") {
      bad_config(key, "is not read from configuration: put the key in the environment variable named by api_key_env");
    } else if (key == "model") {
      c.model = config_string(v, key);
    } else if (key == "params") {
      c.params = config_object(v, key);
    } else if (key == "stages") {
      for (const auto& [stage, sv] : config_object(v, key).items()) {
        const std::string where = "stages." + stage;
        OpenAIStageModel sm;
        for (const auto& [skey, svv] : config_object(sv, where).items()) {
          if (skey == "model") {
            sm.model = config_string(svv, where + ".model");
          } else if (skey == "params") {
            sm.params = config_object(svv, where + ".params");
          } else {
            bad_config(where + "." + skey, "is not a known key (model, params)");
          }
        }
        c.stages[stage] = std::move(sm);
      }
    } else if (key == "extra_headers") {
      for (const auto& [name, hv] : config_object(v, key).items()) {
        c.extra_headers.emplace_back(name, config_string(hv, "extra_headers." + name));
      }
    } else if (key == "connect_timeout_ms") {
      c.connect_timeout = milliseconds(config_count(v, key));
    } else if (key == "request_timeout_ms") {
      c.request_timeout = milliseconds(config_count(v, key));
    } else if (key == "idle_timeout_ms") {
      c.idle_timeout = milliseconds(config_count(v, key));
    } else if (key == "max_retries") {
      c.max_retries = static_cast<int>(config_count(v, key));
    } else if (key == "retry_base_backoff_ms") {
      c.retry_base_backoff = milliseconds(config_count(v, key));
    } else if (key == "retry_max_backoff_ms") {
      c.retry_max_backoff = milliseconds(config_count(v, key));
    } else if (key == "max_retry_after_ms") {
      c.max_retry_after = milliseconds(config_count(v, key));
    } else if (key == "transcription_model") {
      c.transcription_model = config_string(v, key);
    } else if (key == "max_audio_bytes") {
      c.max_audio_bytes = static_cast<size_t>(config_count(v, key));
    } else {
      bad_config(key, "is not a known key");
    }
  }
  return c;
}

std::shared_ptr<ModelProvider> make_openai_provider(OpenAIConfig config) {
  return std::make_shared<OpenAIProvider>(std::move(config));
}

}  // namespace v1
}  // namespace agentrt
