#include "net/sse_parser.hpp"

#include <charconv>
#include <cstring>

namespace agentrt {
inline namespace v1 {
namespace net {
namespace {

// The position of the first CR or LF in `bytes`, or its size.
size_t line_end(std::string_view bytes) {
  const char* begin = bytes.data();
  const void* lf = std::memchr(begin, '\n', bytes.size());
  const size_t limit = lf ? static_cast<size_t>(static_cast<const char*>(lf) - begin) : bytes.size();
  const void* cr = std::memchr(begin, '\r', limit);
  return cr ? static_cast<size_t>(static_cast<const char*>(cr) - begin) : limit;
}

}  // namespace

size_t SseParser::feed(std::string_view bytes, const Callback& on_event) {
  if (at_start_) {
    static constexpr std::string_view kBom = "\xEF\xBB\xBF";
    while (!bytes.empty() && bom_matched_ < 3 && bytes.front() == kBom[static_cast<size_t>(bom_matched_)]) {
      ++bom_matched_;
      bytes.remove_prefix(1);
    }
    if (bom_matched_ == 3) {
      at_start_ = false;
    } else if (!bytes.empty()) {
      // Not a BOM after all: the bytes matched so far are the start of the first line.
      at_start_ = false;
      line_.append(kBom.substr(0, static_cast<size_t>(bom_matched_)));
    } else {
      return 0;
    }
  }

  size_t dispatched = 0;
  while (!bytes.empty()) {
    if (skip_lf_) {
      skip_lf_ = false;
      if (bytes.front() == '\n') {
        bytes.remove_prefix(1);
        continue;
      }
    }
    // Two memchr calls, not find_first_of, which costs a call per byte: this runs for every token.
    const size_t pos = line_end(bytes);
    if (pos == bytes.size()) {
      line_.append(bytes);
      break;
    }
    std::string joined;
    std::string_view line = bytes.substr(0, pos);
    if (!line_.empty()) {
      joined = std::move(line_);
      line_.clear();
      joined.append(line);
      line = joined;
    }
    skip_lf_ = bytes[pos] == '\r';
    bytes.remove_prefix(pos + 1);
    process_line(line, on_event, dispatched);
  }
  return dispatched;
}

void SseParser::process_line(std::string_view line, const Callback& on_event, size_t& dispatched) {
  if (line.empty()) {
    if (!has_data_) {
      // The spec's rule: an event without data is not dispatched, and its type is forgotten.
      event_.clear();
      retry_.reset();
      return;
    }
    SseEvent ev;
    ev.data = std::move(data_);
    ev.data.pop_back();  // the "\n" after the last data line
    ev.event = std::move(event_);
    ev.id = last_id_;
    ev.retry = retry_;
    data_.clear();
    event_.clear();
    retry_.reset();
    has_data_ = false;
    ++dispatched;
    on_event(ev);
    return;
  }
  if (line.front() == ':') return;  // a comment, e.g. a keep-alive

  std::string_view field = line;
  std::string_view value;
  if (const size_t colon = line.find(':'); colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    data_.append(value);
    data_.push_back('\n');
    has_data_ = true;
  } else if (field == "event") {
    event_.assign(value);
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) last_id_.assign(value);
  } else if (field == "retry") {
    int64_t ms = 0;
    // The spec allows ASCII digits only; from_chars alone would also take a minus sign.
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), ms);
    if (!value.empty() && value.front() != '-' && ec == std::errc() && end == value.data() + value.size()) {
      retry_ = ms;
    }
  }
}

std::optional<SseEvent> SseParser::finish() {
  if (!line_.empty()) {
    std::string last = std::move(line_);
    line_.clear();
    size_t ignored = 0;
    process_line(last, Callback(), ignored);  // not a blank line, so nothing is dispatched
  }
  std::optional<SseEvent> out;
  if (has_data_) {
    out.emplace();
    out->data = std::move(data_);
    out->data.pop_back();
    out->event = std::move(event_);
    out->id = last_id_;
    out->retry = retry_;
  }
  data_.clear();
  event_.clear();
  last_id_.clear();
  retry_.reset();
  has_data_ = false;
  skip_lf_ = false;
  at_start_ = true;
  bom_matched_ = 0;
  return out;
}

}  // namespace net
}  // namespace v1
}  // namespace agentrt
