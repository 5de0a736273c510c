#include "command_line.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <optional>
#include <set>

#include "agentrt/error.hpp"
#include "agentrt/ids.hpp"

namespace agentrt::cli {

namespace {

struct CommandSpec {
  const char* name;
  std::set<std::string> options;  // the command's own options (the common ones are always allowed)
  const char* positional;         // what a bare argument means: "thread", "message" or nullptr (none)
};

const std::vector<CommandSpec>& commands() {
  static const std::vector<CommandSpec> specs = {
      {"chat", {"--thread"}, nullptr},
      {"run", {"--thread", "--message", "--yes", "--no", "--reason", "--json"}, "message"},
      {"resume", {"--thread", "--yes", "--no", "--reason", "--json"}, "thread"},
      {"history", {"--thread", "--json"}, "thread"},
      {"threads", {"--json"}, nullptr},
      {"jobs", {"--thread", "--json"}, "thread"},
      {"events", {"--thread", "--after"}, "thread"},
      {"tools", {"--json"}, nullptr},
      {"help", {}, nullptr},
      {"version", {}, nullptr},
  };
  return specs;
}

const std::set<std::string> kCommon = {"--data",       "--config",    "--user", "--verbose",
                                       "--demo-tools", "--demo-jobs", "--mcp"};
const std::set<std::string> kTakesValue = {"--data",   "--config", "--user",      "--thread", "--message",
                                           "--reason", "--after",  "--demo-jobs", "--mcp"};

// `value` when all of it is an integer from lo to hi.
std::optional<int64_t> whole_integer(const std::string& value, int64_t lo, int64_t hi) {
  int64_t n = 0;
  auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || p != value.data() + value.size() || n < lo || n > hi) return std::nullopt;
  return n;
}

// Splits a command into words: blanks separate them, '...' and "..." keep blanks, a backslash escapes the next
// character (outside '...').
std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < s.size()) {
        word += s[++i];
      } else {
        word += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\' && i + 1 < s.size()) {
      word += s[++i];
      in_word = true;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quote) throw UsageError("--mcp: a quote is not closed in '" + s + "'");
  if (in_word) words.push_back(std::move(word));
  return words;
}

}  // namespace

McpOption parse_mcp_option(const std::string& value) {
  auto eq = value.find('=');
  if (eq == std::string::npos || eq == 0)
    throw UsageError("--mcp needs NAME=COMMAND (a program and its arguments) or NAME=URL, not '" + value + "'");
  McpOption m;
  m.name = value.substr(0, eq);
  const std::string rest = value.substr(eq + 1);
  if (rest.rfind("http://", 0) == 0 || rest.rfind("https://", 0) == 0) {
    m.url = rest;
  } else {
    m.command = split_words(rest);
    if (m.command.empty()) throw UsageError("--mcp " + m.name + "= names no command");
  }
  return m;
}

namespace {

// The runtime's id rule, its message (the id escaped and cut) as a usage error.
void require_cli_id(const std::string& id, const char* what) {
  try {
    require_id(id, what);
  } catch (const Error& e) {
    throw UsageError(e.message());
  }
}

}  // namespace

CliOptions parse_command_line(int argc, const char* const* argv) {
  CliOptions o;
  if (argc < 2) throw UsageError("no command given");
  std::string first = argv[1];
  if (first == "-h" || first == "--help") first = "help";
  if (first == "--version") first = "version";
  auto spec = std::find_if(commands().begin(), commands().end(), [&](const CommandSpec& c) { return first == c.name; });
  if (spec == commands().end()) throw UsageError("unknown command '" + first + "'");
  o.command = first;

  bool thread_given = false, message_given = false, yes = false, no = false;
  std::vector<std::string> positional;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      o.command = "help";
      return o;
    }
    if (arg == "-v") arg = "--verbose";
    if (arg == "--") {
      for (++i; i < argc; ++i) positional.emplace_back(argv[i]);
      break;
    }
    if (arg.size() < 2 || arg[0] != '-' || arg == "-") {
      positional.push_back(arg);
      continue;
    }
    std::string value;
    bool has_inline_value = false;
    if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_inline_value = true;
    }
    if (!kCommon.count(arg) && !spec->options.count(arg)) {
      bool known = kCommon.count(arg) > 0;
      for (const auto& c : commands()) known = known || c.options.count(arg) > 0;
      throw UsageError(known ? "'" + o.command + "' does not take " + arg : "unknown option '" + arg + "'");
    }
    if (kTakesValue.count(arg)) {
      if (!has_inline_value) {
        if (i + 1 >= argc) throw UsageError(arg + " needs a value");
        value = argv[++i];
      }
    } else if (has_inline_value) {
      throw UsageError(arg + " takes no value");
    }

    if (arg == "--data") {
      if (value.empty()) throw UsageError("--data needs a folder");
      o.data_dir = value;
      o.data_dir_given = true;
    } else if (arg == "--config") {
      o.config_file = value;
    } else if (arg == "--user") {
      if (value.empty()) throw UsageError("--user needs a user id");
      o.user = value;
    } else if (arg == "--verbose") {
      o.verbose = true;
    } else if (arg == "--demo-tools") {
      o.demo_tools = true;
    } else if (arg == "--demo-jobs") {
      auto ms = whole_integer(value, 1, 3600000);
      if (!ms) throw UsageError("--demo-jobs needs how long a demo job takes in ms (1-3600000), not '" + value + "'");
      o.demo_jobs_ms = *ms;
    } else if (arg == "--mcp") {
      o.mcp.push_back(parse_mcp_option(value));
    } else if (arg == "--thread") {
      o.thread = value;
      thread_given = true;
    } else if (arg == "--message") {
      o.message = value;
      message_given = true;
    } else if (arg == "--yes") {
      yes = true;
    } else if (arg == "--no") {
      no = true;
    } else if (arg == "--reason") {
      o.reason = value;
    } else if (arg == "--json") {
      o.json = true;
    } else if (arg == "--after") {
      auto n = whole_integer(value, 0, INT64_MAX);
      if (!n) throw UsageError("--after needs a sequence number (an integer >= 0), not '" + value + "'");
      o.after = *n;
    }
  }

  if (yes && no) throw UsageError("--yes and --no exclude each other");
  if (yes) o.approval = ApprovalMode::yes;
  if (no) o.approval = ApprovalMode::no;
  if (!o.reason.empty() && !no) throw UsageError("--reason goes with --no");

  if (!positional.empty()) {
    if (!spec->positional || positional.size() > 1)
      throw UsageError("unexpected argument '" + positional[spec->positional ? 1 : 0] + "'");
    if (std::string(spec->positional) == "thread") {
      if (thread_given) throw UsageError("the thread is given twice (argument and --thread)");
      o.thread = positional[0];
      thread_given = true;
    } else {
      if (message_given) throw UsageError("the message is given twice (argument and --message)");
      o.message = positional[0];
      message_given = true;
    }
  }

  const bool needs_thread = o.command == "run" || o.command == "resume" || o.command == "history" ||
                            o.command == "jobs" || o.command == "events";
  if (needs_thread && !thread_given) throw UsageError("'" + o.command + "' needs a thread (--thread T)");
  if (thread_given) require_cli_id(o.thread, "thread id");
  require_cli_id(o.user, "user id");
  if (o.command == "run" && !message_given) throw UsageError("'run' needs a message (--message TEXT)");
  if (o.command == "run" && o.message.empty()) throw UsageError("the message is empty");
  return o;
}

std::string usage_text() {
  return R"(usage: agentrt <command> [options]

Runs agent turns on an embedded store (a SQLite file and an object folder in the data folder) and shows
them as they stream. Offline it uses a built-in demo model whose tools need your approval; with
OPENAI_BASE_URL or OPENAI_API_KEY set it uses that OpenAI-compatible model.

commands:
  chat [--thread T]            interactive session: type messages, watch answers stream, and approve,
                               reject (with a reason) or edit the arguments of each tool call that needs
                               approval. A turn left waiting on the thread is asked about first.
                               /help, /history, /jobs, /quit (or Ctrl-D) inside. Ctrl-C cancels a running
                               turn. Job outcomes that arrive while you type are shown as they come.
  run --thread T --message TEXT [--yes | --no [--reason R]] [--json]
                               runs one turn and exits. --yes approves and --no rejects every tool call
                               that needs approval; without them the turn is left waiting (exit 2).
  resume THREAD [--yes | --no [--reason R]] [--json]
                               answers the turn waiting for approval on THREAD (also one left by an
                               earlier process); without --yes/--no it asks on the terminal. A resume
                               that a stopped process left half done is continued here.
  history THREAD [--json]      the thread's messages; --json prints the AG-UI messages array.
  threads [--json]             the user's threads, newest first.
  jobs THREAD [--json]         the thread's jobs (long-running tool work): status, progress, age, last
                               message; --json prints the job records.
  events THREAD [--after SEQ]  the thread's stored AG-UI events, one JSON object a line.
  tools [--json]               the tools the model is offered, per stage, with where each comes from
                               (registered by this host, or an MCP server), and MCP tools held back.
  help                         this text.

options:
  --data DIR       data folder (default ./agentrt-data)
  --config FILE    runtime configuration JSON (see include/agentrt/config.hpp); --data overrides its
                   data_dir
  --user ID        the user owning the threads (default "local")
  --mcp NAME=COMMAND, --mcp NAME=URL
                   add an MCP server (repeatable): a program speaking MCP over stdio, e.g.
                   --mcp 'everything=npx -y @modelcontextprotocol/server-everything', or a streamable
                   HTTP endpoint. Its tools are offered as NAME__TOOL and need approval (a config file's
                   mcp_servers says otherwise, see include/agentrt/mcp.hpp)
  --json           print the raw AG-UI events, one JSON object a line, instead of the human view
  --verbose, -v    also show runs, stages, the intent and reasoning, and info logs
  --demo-tools     register the demo tools (book_room, check_availability) with a real model too
  --demo-jobs MS   register the demo job tool render_preview: it starts a job that this process finishes
                   MS ms later (half-way progress, then a result). With the offline model, "render beach"
                   calls it ("render beach confirm" asks first). `run` waits for these jobs before it exits.

exit status:
  0   the turn completed (or the command succeeded)
  2   a turn is waiting for approval (answer it with `agentrt resume THREAD --yes|--no`)
  1   the turn failed, was cancelled or expired, or an error (message on stderr)
  64  the command line is wrong (usage on stderr)
)";
}

std::string short_usage_text() {
  return R"(usage: agentrt chat [--thread T]
       agentrt run --thread T --message TEXT [--yes | --no [--reason R]] [--json]
       agentrt resume THREAD [--yes | --no [--reason R]] [--json]
       agentrt history THREAD [--json]
       agentrt threads [--json]
       agentrt jobs THREAD [--json]
       agentrt events THREAD [--after SEQ]
       agentrt tools [--json]
  options for every command: --data DIR (default ./agentrt-data), --config FILE, --user ID, --verbose,
  --mcp NAME=COMMAND
  `agentrt help` explains them all.
)";
}

}  // namespace agentrt::cli
