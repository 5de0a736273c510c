// The parts of a multipart/form-data body (RFC 7578), as POST /asr/transcriptions takes them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentrt::server {

struct FormPart {
  std::string name;          // Content-Disposition name
  std::string filename;      // Content-Disposition filename, "" when absent
  std::string content_type;  // the part's Content-Type, "" when absent
  std::string data;
};

// The boundary of a "multipart/form-data; boundary=..." Content-Type, or nullopt for another type.
std::optional<std::string> multipart_boundary(std::string_view content_type);

// Splits `body` at `boundary`. Throws Error(invalid_argument) for a body that does not follow the format
// (no opening delimiter, a part without its header block, no closing delimiter).
std::vector<FormPart> parse_multipart_form(std::string_view body, std::string_view boundary);

}  // namespace agentrt::server
