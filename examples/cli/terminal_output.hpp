// What this program prints passes a filter of control characters: the text it shows comes from models, tools,
// MCP servers and stored threads, and a terminal takes some of their bytes as commands (ESC sequences set the
// title, rewrite the screen, write the clipboard; a CR overwrites the line shown).
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace agentrt::cli {

// `text` as the terminal should get it: a line feed and a tab as they are, a carriage return dropped, every other
// C0 control, DEL and each C1 control (U+0080-U+009F, two bytes in UTF-8) written out as \xNN; everything else
// (UTF-8 text, invalid bytes alike) unchanged. `pending` carries a 0xC2 that ended one piece into the next.
std::string terminal_text(std::string_view text, std::string& pending);

// Puts `stream` (stdout or stderr) behind terminal_text() for the rest of the process: stdout buffered as it was,
// stderr unbuffered. Call once per stream, before anything is written to it. Returns false, leaving the stream as
// it was, when it cannot. JSON output is left unfiltered: it must reach its reader exactly (it escapes C0 itself).
bool filter_terminal_output(FILE*& stream);

}  // namespace agentrt::cli
