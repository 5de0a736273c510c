// The OpenAI-compatible speech-to-text Transcriber (POST /audio/transcriptions, multipart).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <utility>

#include "agentrt/error.hpp"
#include "agentrt/openai.hpp"
#include "model/openai_stream.hpp"
#include "net/http_client.hpp"

namespace agentrt {
inline namespace v1 {
namespace {

struct AudioType {
  std::string_view mime;
  std::string_view extension;
};

// The formats the API names (flac, mp3, mp4, mpeg, mpga, m4a, ogg, wav, webm) under the MIME types that
// browsers and recorders actually label them with.
constexpr std::array<AudioType, 17> kAudioTypes{{
    {"audio/flac", "flac"},
    {"audio/x-flac", "flac"},
    {"audio/mpeg", "mp3"},
    {"audio/mp3", "mp3"},
    {"audio/mpga", "mpga"},
    {"audio/mp4", "m4a"},
    {"audio/m4a", "m4a"},
    {"audio/x-m4a", "m4a"},
    {"audio/ogg", "ogg"},
    {"audio/opus", "ogg"},
    {"audio/wav", "wav"},
    {"audio/x-wav", "wav"},
    {"audio/wave", "wav"},
    {"audio/webm", "webm"},
    {"video/webm", "webm"},
    {"video/mp4", "mp4"},
    {"video/mpeg", "mpeg"},
}};

// "Audio/WebM; codecs=opus" -> "audio/webm"
std::string base_mime(std::string_view mime) {
  std::string out;
  for (char c : mime.substr(0, mime.find(';'))) {
    if (c == ' ' || c == '\t') continue;
    out.push_back((c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c);
  }
  return out;
}

std::string accepted_types() {
  std::string out;
  for (const auto& t : kAudioTypes) {
    if (!out.empty()) out += ", ";
    out += t.mime;
  }
  return out;
}

// A filename safe inside a Content-Disposition header, with an extension the server can go by.
std::string upload_filename(std::string_view wanted, std::string_view extension) {
  std::string name;
  for (char c : wanted) {
    const auto u = static_cast<unsigned char>(c);
    name.push_back(u < 0x20 || u == 0x7f || c == '"' || c == '\\' || c == '/' ? '_' : c);
  }
  if (name.empty()) name = "audio";
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == name.size()) {
    name += '.';
    name += extension;
  }
  return name;
}

// Implements Transcriber over POST {base}/audio/transcriptions. Thread-safe: immutable configuration,
// one pooled HTTP handle per call.
class OpenAITranscriber final : public Transcriber {
 public:
  explicit OpenAITranscriber(OpenAIConfig config) : endpoint_(config), config_(std::move(config)) {
    config_.api_key.clear();
  }

  std::string transcribe(std::string_view audio, std::string_view mime_type, const TranscribeOptions& options,
                         const CancelToken& cancel) override {
    if (audio.empty()) throw Error(ErrorCode::invalid_argument, "the audio to transcribe is empty");
    if (audio.size() > config_.max_audio_bytes) {
      throw Error(ErrorCode::too_large, fmt::format("the audio is {} bytes, over the transcription limit of {} bytes",
                                                    audio.size(), config_.max_audio_bytes));
    }
    const std::string mime = base_mime(mime_type);
    auto type =
        std::find_if(kAudioTypes.begin(), kAudioTypes.end(), [&](const AudioType& t) { return t.mime == mime; });
    if (type == kAudioTypes.end()) {
      throw Error(
          ErrorCode::invalid_argument,
          fmt::format("audio of type '{}' cannot be transcribed; accepted types: {}", mime_type, accepted_types()));
    }
    const std::string& format = options.response_format;
    static constexpr std::array<std::string_view, 7> kFormats{"",    "json",         "text",         "srt",
                                                              "vtt", "verbose_json", "diarized_json"};
    if (std::find(kFormats.begin(), kFormats.end(), format) == kFormats.end()) {
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("transcription response_format '{}' is not one of json, text, srt, vtt, verbose_json, "
                              "diarized_json",
                              format));
    }
    const std::string model = options.model.empty() ? config_.transcription_model : options.model;

    net::HttpRequest http = endpoint_.request("/audio/transcriptions", {});
    http.multipart.push_back({"file", std::string(audio), upload_filename(options.filename, type->extension), mime});
    http.multipart.push_back({"model", model, {}, {}});
    // Only the fields asked for: compatible servers differ in which optional fields they accept.
    if (!options.language.empty()) http.multipart.push_back({"language", options.language, {}, {}});
    if (!options.prompt.empty()) http.multipart.push_back({"prompt", options.prompt, {}, {}});
    if (!format.empty()) http.multipart.push_back({"response_format", format, {}, {}});

    return openai::with_retries(config_, cancel, [&]() -> std::string { return attempt(http, model, format, cancel); });
  }

 private:
  std::string attempt(const net::HttpRequest& http, const std::string& model, const std::string& format,
                      const CancelToken& cancel) {
    net::HttpResponse response;
    try {
      response = http_.send(http, cancel);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::timeout || e.code() == ErrorCode::io) {
        throw openai::RetryableError(Error(e.code(), endpoint_.redact("transcription: " + e.message())), std::nullopt);
      }
      throw;
    }
    if (response.status / 100 != 2)
      endpoint_.throw_failure(response, fmt::format("transcription with model '{}'", model), config_.max_retry_after);

    // The parser follows the format asked for (text, srt and vtt are plain text, not JSON); when none
    // was asked for, the server's default is json, but its Content-Type decides.
    bool is_json = format == "json" || format == "verbose_json" || format == "diarized_json";
    if (format.empty()) {
      is_json = response.header("content-type").value_or("").find("json") != std::string::npos;
    }
    if (!is_json) {
      std::string text = std::move(response.body);
      if (format.empty() || format == "text") {
        while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
      }
      return text;
    }
    json j = json::parse(response.body, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("text") || !j["text"].is_string()) {
      throw Error(ErrorCode::model,
                  fmt::format("transcription with model '{}': the answer has no \"text\" string", model));
    }
    return j["text"].get<std::string>();
  }

  openai::OpenAIEndpoint endpoint_;
  OpenAIConfig config_;
  net::HttpClient http_;
};

}  // namespace

std::shared_ptr<Transcriber> make_openai_transcriber(OpenAIConfig config) {
  return std::make_shared<OpenAITranscriber>(std::move(config));
}

}  // namespace v1
}  // namespace agentrt
