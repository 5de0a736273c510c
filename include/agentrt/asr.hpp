// Transcriber: speech-to-text, synchronous and separate from turns.
#pragma once

#include <string>
#include <string_view>

#include "agentrt/cancel.hpp"

namespace agentrt {
inline namespace v1 {

struct TranscribeOptions {
  std::string model;            // "" = the transcriber's default
  std::string language;         // ISO-639-1, optional
  std::string prompt;           // optional
  std::string response_format;  // "json" (default) | "text" | "srt" | "vtt" | "verbose_json"
  std::string filename;         // optional; derived from the mime type when empty
};

// Thread-safe.
class Transcriber {
 public:
  virtual ~Transcriber() = default;
  // Throws Error(too_large) / Error(invalid_argument) for audio the limits refuse, Error(model) or
  // Error(io) when the service fails, Error(cancelled) when cancelled.
  virtual std::string transcribe(std::string_view audio, std::string_view mime_type, const TranscribeOptions& options,
                                 const CancelToken& cancel = {}) = 0;
};

}  // namespace v1
}  // namespace agentrt
