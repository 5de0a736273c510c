// EventPrinter: shows a thread's AG-UI events in a terminal (the human view) or as JSON lines.
#pragma once

#include <cstdio>
#include <map>
#include <string>

#include "agentrt/json.hpp"
#include "agentrt/storage.hpp"

namespace agentrt::cli {

// Not thread-safe: one printer per output, used from one thread.
class EventPrinter {
 public:
  enum class Mode { human, json };

  // `out` receives the view; run errors go to `err`. `assistant_prefix` starts each streamed answer.
  EventPrinter(std::FILE* out, std::FILE* err, Mode mode, bool verbose, std::string assistant_prefix = {});

  // Shows one event (streamed text is flushed at once) and returns its parsed JSON.
  json print(const StoredEvent& event);

  // Ends a half-written line, so that what comes next starts at the beginning of a line.
  void end_line();

  // Tells the printer whether the cursor is in the middle of a line someone else wrote (a prompt): its next
  // line then starts on a new one. `writes()` counts what it has written, to tell whether a call printed.
  void set_line_open(bool open) { at_line_start_ = !open; }
  size_t writes() const { return writes_; }

  // The arguments a tool call streamed, as the model wrote them ("" when the call was not seen).
  std::string tool_arguments(const std::string& tool_call_id) const;

  Mode mode() const { return mode_; }

 private:
  void print_human(const json& e);
  void write(const std::string& text);  // text in the middle of a line
  void line(const std::string& text);   // a whole line of its own

  struct ToolCallView {
    std::string name;
    std::string arguments;
  };

  std::FILE* out_;
  std::FILE* err_;
  Mode mode_;
  bool verbose_;
  std::string assistant_prefix_;
  bool at_line_start_ = true;
  size_t writes_ = 0;
  std::map<std::string, ToolCallView> calls_;
};

// One line about a UiSchema card: "booking_confirmation v1: booking_id=BK-1, day=mon, room=A1 (actions: Cancel)".
std::string describe_card(const json& ui);

// The text of an AG-UI content value (a string, or the text parts of a part list).
std::string content_text(const json& content);

// One line about a job record (agentrt::job_to_json, the value of a CUSTOM "agentrt.job" event):
// "job_x (render_preview): running — rendering beach (50%)", "job_x (render_preview) succeeded: rendered
// beach [assets: renders/job_x.png]", "job_x (render_preview) failed: timeout: ...", "job_x (render_preview):
// waiting for confirmation".
std::string describe_job(const json& job);

// `s` on one line (newlines and tabs become spaces), cut to `max` bytes (UTF-8 kept whole) with "...".
std::string one_line(std::string s, size_t max);

}  // namespace agentrt::cli
