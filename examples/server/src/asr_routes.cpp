// The speech-to-text route.
#include "routes.hpp"

#include <string>
#include <vector>

#include <fmt/format.h>

#include "agentrt/attachments.hpp"
#include "agentrt/error.hpp"
#include "multipart_form.hpp"

namespace agentrt::server {

// POST /asr/transcriptions: multipart (file, optional language and prompt) or a raw audio body -> {transcript}
void post_transcription(ServerContext& s, ApiCall& c) {
  if (!s.transcriber)
    throw ApiError{501, "unsupported", "speech-to-text is not configured on this server ('asr' in the config)"};
  const HttpRequest& req = c.req;
  std::string audio;
  std::string mime;
  TranscribeOptions options;
  if (auto boundary = multipart_boundary(req.header("Content-Type"))) {
    std::vector<FormPart> parts;
    try {
      parts = parse_multipart_form(req.body, *boundary);
    } catch (const Error& e) {
      throw ApiError{400, "bad_request", e.message()};
    }
    const FormPart* file = nullptr;
    for (const auto& p : parts) {
      if (p.name == "file" && !file) file = &p;
      if (p.name == "language") options.language = p.data;
      if (p.name == "prompt") options.prompt = p.data;
    }
    if (!file) throw ApiError{422, "invalid_argument", "the multipart form needs a 'file' part"};
    audio = file->data;
    mime = normalize_mime(file->content_type);
    options.filename = file->filename;
  } else {
    audio = req.body;
    mime = normalize_mime(req.header("Content-Type"));
    options.language = req.param("language");
  }
  if (audio.size() > s.cfg.limits.max_audio_bytes)
    throw ApiError{413, "too_large",
                   fmt::format("the audio is {} bytes; the limit is {}", audio.size(), s.cfg.limits.max_audio_bytes)};
  std::string text;
  try {
    text = s.transcriber->transcribe(audio, mime, options);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::io || e.code() == ErrorCode::model || e.code() == ErrorCode::timeout) {
      s.log(LogLevel::warn, fmt::format("transcription: {}", e.message()));
      throw ApiError{502, "upstream_error", "the transcription service failed"};
    }
    throw;
  }
  c.send_json(200, json{{"transcript", text}});
}

}  // namespace agentrt::server
