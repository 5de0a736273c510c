// The CLI's filter of control characters (examples/cli/terminal_output.cpp).
#include <doctest/doctest.h>

#include <string>

#include "terminal_output.hpp"

using agentrt::cli::terminal_text;

namespace {

std::string shown(std::string_view text) {
  std::string pending;
  std::string out = terminal_text(text, pending);
  CHECK(pending.empty());
  return out;
}

}  // namespace

TEST_CASE("cli terminal_text: text as it is, control characters written out") {
  CHECK(shown("plain text, é and 日本\n\ttabbed") == "plain text, é and 日本\n\ttabbed");
  CHECK(shown("\x1b]0;title\x07 \x1b[2J") == "\\x1b]0;title\\x07 \\x1b[2J");
  CHECK(shown(std::string("a\0b\x7f", 4)) == "a\\x00b\\x7f");
  CHECK(shown("line\r\nover\rwritten") == "line\noverwritten");  // a carriage return is dropped
  // C1 controls (U+0080-U+009F: 0xC2 0x80-0x9F in UTF-8), such as CSI (U+009B), are written out; U+00A0 on is text.
  CHECK(shown("\xc2\x9b"
              "2J \xc2\x80 \xc2\xa0 \xc2\xbf") == "\\xc2\\x9b2J \\xc2\\x80 \xc2\xa0 \xc2\xbf");
  CHECK(shown("\xff\xfe invalid") == "\xff\xfe invalid");  // invalid UTF-8 is left as it is
}

TEST_CASE("cli terminal_text: a 0xC2 at the end of a piece waits for the next") {
  std::string pending;
  CHECK(terminal_text("ab\xc2", pending) == "ab");
  CHECK(pending == "\xc2");
  CHECK(terminal_text("\x9b"
                      "2J",
                      pending) == "\\xc2\\x9b2J");
  CHECK(pending.empty());
  CHECK(terminal_text("x\xc2", pending) == "x");
  CHECK(terminal_text("\xa9 y", pending) == "\xc2\xa9 y");  // U+00A9 (c) across the two pieces
  CHECK(terminal_text("\xc2", pending).empty());
  CHECK(terminal_text("", pending).empty());  // an empty piece: still waiting
  CHECK(pending == "\xc2");
  CHECK(terminal_text("\xc2", pending) == "\xc2");  // the first one was text (no C1 after it), this one waits
  CHECK(pending == "\xc2");
}
