// CliOptions: the `agentrt` command line (command, data folder, thread, message, approval answers, output mode).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace agentrt::cli {

// A command line that cannot be run as written: the host prints the usage text and exits 64 (EX_USAGE).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// How a turn's approvals are answered when nobody is asked.
enum class ApprovalMode {
  none,  // leave the turn waiting (exit status 2)
  yes,   // approve every interrupt
  no,    // reject every interrupt
  ask,   // ask the person at the terminal (chat; resume without --yes/--no)
};

// --mcp NAME=COMMAND (stdio) or NAME=URL (streamable HTTP).
struct McpOption {
  std::string name;
  std::vector<std::string> command;
  std::string url;
};

// Parses the value of --mcp. Throws UsageError.
McpOption parse_mcp_option(const std::string& value);

struct CliOptions {
  std::string command;  // chat | run | resume | history | threads | jobs | events | tools | help | version
  std::string data_dir = "agentrt-data";
  bool data_dir_given = false;  // --data was passed (it then overrides the config file's data_dir)
  std::string config_file;
  std::string user = "local";
  std::string thread;
  std::string message;
  ApprovalMode approval = ApprovalMode::none;
  std::string reason;  // --reason: why --no rejects
  bool json = false;
  bool verbose = false;
  bool demo_tools = false;     // register the demo tools also with a real model
  int64_t demo_jobs_ms = 0;    // --demo-jobs MS: the render_preview demo tool, its jobs finishing after MS
  int64_t after = 0;           // events --after SEQ
  std::vector<McpOption> mcp;  // --mcp (added to the config's mcp_servers)
};

// Parses argv. Throws UsageError for an unknown command or option, a missing value, an option the command
// does not take, or a required option left out (run: --thread and --message; resume/history/jobs/events: a
// thread).
CliOptions parse_command_line(int argc, const char* const* argv);

// The usage text (commands, options, exit statuses), and its short form shown after a usage error.
std::string usage_text();
std::string short_usage_text();

}  // namespace agentrt::cli
