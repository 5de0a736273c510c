// util/printable: how caller text is quoted in errors and logs.
#include <doctest/doctest.h>

#include <string>

#include "util/printable.hpp"

using namespace agentrt;

TEST_CASE("printable and escape_controls: what quotes caller text shows of it") {
  CHECK(printable("ok \x1b[2J caf\xc3\xa9", 100) == "ok \\x1b[2J caf\\xc3\\xa9");
  CHECK(printable("abcdef", 3) == "abc...");
  // escape_controls keeps text (UTF-8 or not) and writes out C0, DEL and C1 controls: one line, no commands.
  CHECK_FALSE(has_controls("plain, caf\xc3\xa9, \xc2\xa0 and \xff"));
  CHECK(escape_controls("plain, caf\xc3\xa9, \xc2\xa0 and \xff") == "plain, caf\xc3\xa9, \xc2\xa0 and \xff");
  for (const std::string& text : {std::string("a\nb"), std::string("\x1b"), std::string("x\x7f"),
                                  std::string("\xc2\x9b"), std::string("a\0b", 3), std::string("\r")})
    CHECK(has_controls(text));
  CHECK(escape_controls(std::string("line\nforged \x1b]0;t\x07 \x7f \xc2\x9b \xc2\x80\xc2 \t\r\0", 31)) ==
        "line\\x0aforged \\x1b]0;t\\x07 \\x7f \\xc2\\x9b \\xc2\\x80\xc2 \\x09\\x0d\\x00");
}
