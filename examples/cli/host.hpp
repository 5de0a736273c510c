// Host: what one `agentrt` command works with (its options and the runtime they open on the data folder), the
// exit statuses, and the turn steps the commands share: start a turn, answer a waiting one, wait for demo jobs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "agentrt/runtime.hpp"
#include "command_line.hpp"
#include "demo_jobs.hpp"
#include "event_printer.hpp"
#include "turn_driver.hpp"

namespace agentrt::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitWaiting = 2;
inline constexpr int kExitUsage = 64;  // EX_USAGE

int exit_code(TurnOutcome o);

// A word as a POSIX shell reads it back (for the commands the hints suggest).
std::string shell_word(const std::string& s);

// The host: the options and the runtime they open.
struct Host {
  CliOptions opt;
  std::string data_dir;  // the data folder in effect (from --data, the config file, or the default)
  std::unique_ptr<Runtime> rt;
  std::shared_ptr<examples::DemoJobs> demo_jobs;  // --demo-jobs: finishes render_preview jobs in this process

  Host() = default;
  Host(const Host&) = delete;
  Host& operator=(const Host&) = delete;
  ~Host() {
    if (demo_jobs) demo_jobs->stop();  // its thread reports to the runtime: stop it first
    rt.reset();
  }

  std::string resume_command() const {
    return fmt::format("agentrt resume {} --data {} --yes|--no", shell_word(opt.thread), shell_word(data_dir));
  }
};

// Opens host.rt from the options (and the config file they name); sets host.data_dir.
void open_runtime(Host& host);

// The thread when it exists and belongs to the user.
std::optional<ThreadRecord> owned_thread(Host& host, const std::string& thread_id);
// The options' thread; Error(not_found) unless it exists and belongs to the user.
ThreadRecord require_thread(Host& host);

// Starts a turn on the options' thread with `text` and follows it.
TurnOutcome run_new_turn(Host& host, TurnDriver& driver, const std::string& text);
// Answers the thread's waiting turn and follows its continuation.
TurnOutcome continue_waiting_turn(Host& host, TurnDriver& driver, const TurnRecord& turn);

// --demo-jobs: the jobs a turn started finish in this process. Shows their outcomes as they arrive (the runs
// that deliver them) and returns once none is left to finish.
void follow_demo_jobs(Host& host, EventPrinter& printer, int64_t seen);

}  // namespace agentrt::cli
