#include "chat.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <random>
#include <string>

#include <fmt/format.h>

#include "thread_report.hpp"

namespace agentrt::cli {

namespace {

std::string new_thread_id() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  std::random_device rd;
  return fmt::format("chat-{}-{:04x}", buf, rd() & 0xffff);
}

void print_chat_help() {
  fmt::print(
      "Type a message and press Enter. Commands: /history (this thread's messages), /jobs (its jobs:\n"
      "long-running tool work, with status, progress and age), /thread (its id), /quit (or Ctrl-D) to\n"
      "leave. Ctrl-C cancels a running turn. When a tool needs approval, answer a (approve), r (reject,\n"
      "then give a reason) or e (edit the arguments as JSON). A job's outcome is shown when it arrives.\n");
}

}  // namespace

int cmd_chat(Host& host) {
  open_runtime(host);
  if (host.opt.thread.empty()) host.opt.thread = new_thread_id();
  auto existing = host.rt->thread(host.opt.thread);
  if (existing && (existing->deleted || existing->user_id != host.opt.user))
    throw Error(ErrorCode::not_found, fmt::format("thread {} belongs to another user", host.opt.thread));

  EventPrinter printer(stdout, stderr, EventPrinter::Mode::human, host.opt.verbose, "assistant> ");
  LinePrompter prompter(stdout);
  TurnDriver driver(*host.rt, printer, ApprovalMode::ask, &prompter, stdout);
  const std::string model = host.rt->config().model ? host.rt->config().model->name() : "?";
  fmt::print("agentrt chat: thread {} (data {}, model {}{})\n", host.opt.thread, host.data_dir, model,
             model == "scripted" ? ", offline demo" : "");
  if (existing) {
    size_t n = host.rt->history(host.opt.thread).size();
    fmt::print("{} earlier message(s) on this thread; /history shows them.\n", n);
  }
  fmt::print("Type /help for help, /quit or Ctrl-D to leave.\n");
  std::fflush(stdout);

  auto left_waiting = [&] {
    fmt::print(
        "\nThe turn is still waiting for your approval. Answer it later with `agentrt chat --thread {} --data "
        "{}`\nor `{}`.\n",
        shell_word(host.opt.thread), shell_word(host.data_dir), host.resume_command());
    std::fflush(stdout);
    return kExitWaiting;
  };

  // What arrives on the thread while nobody's turn is being followed — the runs that deliver job outcomes,
  // turns of other processes — is shown while the prompt waits.
  int64_t shown = existing ? existing->last_seq : 0;
  std::unique_ptr<Subscription> watch;
  int64_t watch_from = -1;
  auto show_arrivals = [&]() -> bool {
    if (!watch || watch_from != shown) {
      watch = host.rt->subscribe(host.opt.thread, shown);
      watch_from = shown;
    }
    const size_t before = printer.writes();
    printer.set_line_open(true);  // the prompt
    while (auto e = watch->next(std::chrono::milliseconds(1))) {
      if (e->seq <= shown) continue;
      printer.print(*e);
      shown = watch_from = e->seq;
    }
    const bool printed = printer.writes() != before;
    if (printed) printer.end_line();
    printer.set_line_open(false);
    return printed;
  };
  auto followed = [&] { shown = std::max(shown, driver.last_seen()); };

  if (auto active = host.rt->active_turn(host.opt.thread)) {
    if (active->status == TurnStatus::waiting_approval) {
      fmt::print("A turn from an earlier session is waiting for your approval:\n");
      try {
        const TurnOutcome o = continue_waiting_turn(host, driver, *active);
        followed();
        if (o == TurnOutcome::waiting) return left_waiting();
      } catch (const Error& e) {
        fmt::print(stderr, "agentrt: {}\n", e.what());
      }
    } else {
      fmt::print("A turn on this thread is {} in another process ({}); new messages wait until it ends.\n",
                 to_string(active->status), active->id);
    }
  }

  for (;;) {
    auto line = prompter.ask("you> ", show_arrivals);
    if (!line) {
      fmt::print("\n");
      return kExitOk;
    }
    std::string text = *line;
    const auto first = text.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    text = text.substr(first, text.find_last_not_of(" \t") - first + 1);
    if (text == "/quit" || text == "/exit") return kExitOk;
    if (text == "/help") {
      print_chat_help();
      continue;
    }
    if (text == "/thread") {
      fmt::print("{}\n", host.opt.thread);
      continue;
    }
    if (text == "/history") {
      print_history(host, stdout);
      continue;
    }
    if (text == "/jobs") {
      print_jobs(host, stdout);
      continue;
    }
    if (text[0] == '/') {
      fmt::print("Unknown command {}; /help lists the commands.\n", text);
      continue;
    }
    try {
      const TurnOutcome o = run_new_turn(host, driver, text);
      followed();
      if (o == TurnOutcome::waiting) return left_waiting();
    } catch (const Error& e) {
      followed();
      printer.end_line();
      fmt::print(stderr, "agentrt: {}\n", e.what());
    }
    std::fflush(stdout);
  }
}

}  // namespace agentrt::cli
