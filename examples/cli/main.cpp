// agentrt — the command-line host: chat, run, resume, history, threads and events on the embedded store.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "agentrt/clock.hpp"
#include "agentrt/config.hpp"
#include "agentrt/records.hpp"
#include "agentrt/runtime.hpp"
#include "command_line.hpp"
#include "demo_jobs.hpp"
#include "event_printer.hpp"
#include "turn_driver.hpp"

#ifndef AGENTRT_CLI_VERSION
#define AGENTRT_CLI_VERSION "0.0.0"
#endif

namespace agentrt::cli {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitWaiting = 2;
constexpr int kExitUsage = 64;  // EX_USAGE

int exit_code(TurnOutcome o) {
  switch (o) {
    case TurnOutcome::completed: return kExitOk;
    case TurnOutcome::waiting: return kExitWaiting;
    case TurnOutcome::failed: return kExitFailed;
  }
  return kExitFailed;
}

// A word as a POSIX shell reads it back (for the commands the hints suggest).
std::string shell_word(const std::string& s) {
  bool plain = !s.empty();
  for (char c : s)
    plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '/' || c == '.' || c == '_' || c == '-' ||
                      c == ':' || c == '+' || c == ',' || c == '=');
  if (plain) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string local_time(int64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

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

json read_config_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::not_found, fmt::format("cannot read the config file {}", path));
  std::stringstream ss;
  ss << in.rdbuf();
  json j = parse_json_text(ss.str(), kDefaultMaxJsonDepth, path);  // invalid_argument: not JSON, nested too deep
  if (!j.is_object()) throw Error(ErrorCode::invalid_argument, fmt::format("{} must hold a JSON object", path));
  return j;
}

void open_runtime(Host& host) {
  json cfg = host.opt.config_file.empty() ? json::object() : read_config_file(host.opt.config_file);
  if (host.opt.data_dir_given || !cfg.contains("data_dir")) cfg["data_dir"] = host.opt.data_dir;
  host.data_dir = cfg["data_dir"].is_string() ? cfg["data_dir"].get<std::string>() : host.opt.data_dir;
  RuntimeConfig config = runtime_config_from_json(cfg);
  const LogLevel threshold = host.opt.verbose ? LogLevel::info : LogLevel::warn;
  config.log_level = threshold;
  config.log = [threshold](LogLevel level, std::string_view component, std::string_view message) {
    if (level < threshold) return;
    static std::mutex mutex;
    std::lock_guard<std::mutex> lock(mutex);
    fmt::print(stderr, "agentrt: [{}] {}: {}\n", to_string(level), component, message);
  };
  const bool demo = uses_demo_model(config);
  if (host.opt.demo_jobs_ms > 0) {
    host.demo_jobs = examples::DemoJobs::create(std::chrono::milliseconds(host.opt.demo_jobs_ms),
                                                [](const std::string& m) { fmt::print(stderr, "agentrt: {}\n", m); });
    std::weak_ptr<examples::DemoJobs> jobs = host.demo_jobs;
    config.job_cancel_hook = [jobs](const JobRecord& j) {
      if (auto d = jobs.lock()) d->on_cancelled(j);
    };
    const ScriptedModelOptions streamed{8, std::chrono::milliseconds(0), true};  // as make_demo_model()'s
    if (demo) config.model = host.demo_jobs->wrap_model(config.model, streamed);
  }
  host.rt = std::make_unique<Runtime>(std::move(config));
  if (demo || host.opt.demo_tools) register_demo_tools(host.rt->tools());
  if (host.demo_jobs) {
    host.rt->tools().add(host.demo_jobs->tool());
    host.demo_jobs->attach(host.rt.get());
  }
}

// The thread when it exists and belongs to the user.
std::optional<ThreadRecord> owned_thread(Host& host, const std::string& thread_id) {
  auto t = host.rt->thread(thread_id);
  if (!t || t->deleted || t->user_id != host.opt.user) return std::nullopt;
  return t;
}

ThreadRecord require_thread(Host& host) {
  auto t = owned_thread(host, host.opt.thread);
  if (!t) throw Error(ErrorCode::not_found, fmt::format("thread {} not found in {}", host.opt.thread, host.data_dir));
  return *t;
}

TurnOutcome run_new_turn(Host& host, TurnDriver& driver, const std::string& text) {
  TurnInput in;
  in.thread_id = host.opt.thread;
  in.user_id = host.opt.user;
  in.message.role = Role::user;
  in.message.content = text;
  TurnHandle h = host.rt->start_turn(in);
  const int64_t after = std::max<int64_t>(0, h.first_seq - 1);
  auto sub = host.rt->subscribe(h.thread_id, after);
  return driver.follow(*sub, h.thread_id, h.turn_id, h.run_id, after);
}

// Answers the thread's waiting turn and follows its continuation.
TurnOutcome continue_waiting_turn(Host& host, TurnDriver& driver, const TurnRecord& turn) {
  const auto thread = host.rt->thread(turn.thread_id);
  const int64_t after = thread ? thread->last_seq : 0;
  auto sub = host.rt->subscribe(turn.thread_id, after);
  driver.show_pending(turn);
  auto run = driver.answer(turn);
  if (!run) return TurnOutcome::waiting;
  return driver.follow(*sub, turn.thread_id, turn.id, *run, after);
}

// A tool message's outcome (succeeded, failed, rejected, ...), read from its stored payload.
std::string tool_status(Host& host, const Message& m) {
  const auto& objects = host.rt->config().objects;
  const std::string path = m.metadata.is_object() ? m.metadata.value("storage_path", "") : std::string();
  if (objects && !path.empty()) {
    try {
      if (auto bytes = objects->get(path)) {
        json payload = json::parse(*bytes, nullptr, false);
        if (payload.is_object() && payload.contains("status") && payload["status"].is_string())
          return payload["status"].get<std::string>();
      }
    } catch (const std::exception&) {
      // An unreadable payload: fall back to what the message says.
    }
  }
  return m.error.empty() ? "succeeded" : "failed";
}

void print_history(Host& host, std::FILE* out) {
  for (const Message& m : host.rt->history(host.opt.thread)) {
    switch (m.role) {
      case Role::user: {
        size_t media = 0;
        for (const auto& p : m.parts) media += p.is_media() ? 1 : 0;
        fmt::print(out, "user: {}{}\n", m.text(), media ? fmt::format(" [{} attachment(s)]", media) : "");
        break;
      }
      case Role::assistant: {
        const std::string text = m.text();
        if (!text.empty() || m.tool_calls.empty()) fmt::print(out, "assistant: {}\n", text);
        for (const auto& c : m.tool_calls) fmt::print(out, "assistant: [tool call] {} {}\n", c.name, c.arguments);
        break;
      }
      case Role::tool: {
        std::string name = m.name;
        if (m.metadata.is_object() && m.metadata.contains("tool_name") && m.metadata["tool_name"].is_string())
          name = m.metadata["tool_name"].get<std::string>();
        std::string card;
        if (m.metadata.is_object() && m.metadata.contains("ui") && m.metadata["ui"].is_object())
          card = " [card: " + m.metadata["ui"].value("type", std::string("?")) + "]";
        const std::string text = m.text();
        const bool error_untold = !m.error.empty() && text.find(m.error) == std::string::npos;
        // A job's outcome (delivered after the turn that started it) says so.
        const bool job =
            m.metadata.is_object() && m.metadata.contains("job_status") && m.metadata["job_status"].is_string();
        const std::string status = job ? "job " + m.metadata["job_status"].get<std::string>() : tool_status(host, m);
        fmt::print(out, "tool {} [{}]: {}{}{}\n", name.empty() ? m.tool_call_id : name, status, text,
                   error_untold ? " (error: " + m.error + ")" : "", card);
        break;
      }
      default: fmt::print(out, "{}: {}\n", to_string(m.role), m.text());
    }
  }
}

// "12s", "5m", "3h", "2d": how long ago `ms` was.
std::string age(int64_t ms) {
  const int64_t now = now_ms();
  const int64_t s = std::max<int64_t>(0, (now - ms) / 1000);
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m", s / 60);
  if (s < 48 * 3600) return fmt::format("{}h", s / 3600);
  return fmt::format("{}d", s / 86400);
}

// One line a job: id, tool, status, progress, age, and its last word (message, result or error).
void print_jobs(Host& host, std::FILE* out) {
  const auto jobs = host.rt->jobs(host.opt.thread);
  if (jobs.empty()) {
    fmt::print(out, "no jobs on thread {}\n", host.opt.thread);
    return;
  }
  for (const JobRecord& j : jobs) {
    std::string status(to_string(j.status));
    if (j.confirmation == JobConfirmation::pending) status = "waiting for confirmation";
    if (j.error_code == "declined") status = "declined";
    std::string said = j.message;
    if (j.status == JobStatus::failed || j.status == JobStatus::cancelled)
      said = j.error_code + (j.error_message.empty() ? "" : ": " + j.error_message);
    else if (j.status == JobStatus::succeeded && said.empty() && !j.result.is_null())
      said = j.result.dump();
    if (j.status == JobStatus::queued && j.confirmation == JobConfirmation::pending && !j.confirm_message.empty())
      said = j.confirm_message;
    if (is_terminal(j.status) && !j.delivered) said += " (outcome not in history yet)";
    fmt::print(out, "{}  {}  {}  {:.0f}%  {} ago  {}\n", j.id, j.tool_name, status, j.progress * 100, age(j.created_at),
               one_line(said, 100));
  }
}

// --demo-jobs: the jobs a turn started finish in this process. Shows their outcomes as they arrive (the runs
// that deliver them) and returns once none is left to finish.
void follow_demo_jobs(Host& host, EventPrinter& printer, int64_t seen) {
  if (!host.demo_jobs) return;
  auto settled = [&] {
    if (host.demo_jobs->pending() > 0) return false;
    for (const auto& j : host.rt->jobs(host.opt.thread))
      if (is_terminal(j.status) && !j.delivered) return false;  // its delivery run is about to be committed
    const auto thread = host.rt->thread(host.opt.thread);
    return !thread || thread->last_seq <= seen;
  };
  std::unique_ptr<Subscription> sub;
  while (!settled()) {
    if (!sub) sub = host.rt->subscribe(host.opt.thread, seen);
    while (auto e = sub->next(std::chrono::milliseconds(200))) {
      if (e->seq > seen) printer.print(*e);
      seen = std::max(seen, e->seq);
    }
  }
  printer.end_line();
}

// ------------------------------------------------------------------------------------------------ commands

int cmd_run(Host& host) {
  open_runtime(host);
  if (auto active = host.rt->active_turn(host.opt.thread)) {
    if (active->status == TurnStatus::waiting_approval)
      fmt::print(stderr,
                 "agentrt: thread {} has a turn waiting for approval ({}); one turn at a time per thread.\n"
                 "Answer it first with: {}\n",
                 host.opt.thread, active->id, host.resume_command());
    else
      fmt::print(stderr, "agentrt: thread {} has a turn {} ({}) in another process; try again when it has ended\n",
                 host.opt.thread, to_string(active->status), active->id);
    return kExitFailed;
  }
  const bool json_mode = host.opt.json;
  EventPrinter printer(stdout, stderr, json_mode ? EventPrinter::Mode::json : EventPrinter::Mode::human,
                       host.opt.verbose);
  TurnDriver driver(*host.rt, printer, host.opt.approval, nullptr, json_mode ? stderr : stdout, host.opt.reason);
  TurnOutcome outcome;
  try {
    outcome = run_new_turn(host, driver, host.opt.message);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::conflict) throw;
    fmt::print(stderr, "agentrt: {}\nIf a turn is waiting for approval, answer it with: {}\n", e.what(),
               host.resume_command());
    return kExitFailed;
  }
  if (outcome == TurnOutcome::waiting)
    fmt::print(stderr, "agentrt: the turn is waiting for approval. Answer it with: {}\n", host.resume_command());
  if (outcome == TurnOutcome::completed) follow_demo_jobs(host, printer, driver.last_seen());
  return exit_code(outcome);
}

int cmd_resume(Host& host) {
  open_runtime(host);
  require_thread(host);
  const std::string& mine = host.rt->config().instance_id;
  auto active = host.rt->active_turn(host.opt.thread);
  const auto thread_before = host.rt->thread(host.opt.thread);
  const int64_t seen_before = thread_before ? thread_before->last_seq : 0;
  if (active && active->status != TurnStatus::waiting_approval && active->owner != mine) {
    // A turn left running or resuming by a process that stopped: once that process's lease has passed, a
    // recovery pass fails the run it left running, or takes over the resume it left half done (the decision
    // is durable) and continues it here.
    host.rt->sweep();
    active = host.rt->active_turn(host.opt.thread);
  }
  if (!active) {
    fmt::print(stderr, "agentrt: thread {} has no turn waiting for approval\n", host.opt.thread);
    return kExitFailed;
  }
  const bool taken_over = active->status != TurnStatus::waiting_approval && active->owner == mine;
  if (active->status != TurnStatus::waiting_approval && !taken_over) {
    fmt::print(stderr, "agentrt: the turn {} on thread {} is {} (in another process), not waiting for approval\n",
               active->id, host.opt.thread, to_string(active->status));
    return kExitFailed;
  }
  const bool json_mode = host.opt.json;
  std::FILE* info = json_mode ? stderr : stdout;
  EventPrinter printer(stdout, stderr, json_mode ? EventPrinter::Mode::json : EventPrinter::Mode::human,
                       host.opt.verbose);
  LinePrompter prompter(info);
  const ApprovalMode mode = host.opt.approval == ApprovalMode::none ? ApprovalMode::ask : host.opt.approval;
  TurnDriver driver(*host.rt, printer, mode, &prompter, info, host.opt.reason);
  TurnOutcome outcome;
  if (taken_over) {
    fmt::print(info, "[continuing] the resume of turn {} that a stopped process left half done\n", active->id);
    std::fflush(info);
    auto sub = host.rt->subscribe(host.opt.thread, seen_before);
    outcome = driver.follow(*sub, host.opt.thread, active->id, active->run_id, seen_before);
  } else {
    outcome = continue_waiting_turn(host, driver, *active);
  }
  if (outcome == TurnOutcome::waiting)
    fmt::print(stderr, "agentrt: the turn is still waiting for approval. Answer it with: {}\n", host.resume_command());
  if (outcome == TurnOutcome::completed) follow_demo_jobs(host, printer, driver.last_seen());
  return exit_code(outcome);
}

int cmd_history(Host& host) {
  open_runtime(host);
  require_thread(host);
  if (host.opt.json) {
    json messages = json::array();
    for (const Message& m : host.rt->history(host.opt.thread)) messages.push_back(m);
    fmt::print("{}\n", messages.dump(2, ' ', false, json::error_handler_t::replace));
    return kExitOk;
  }
  print_history(host, stdout);
  if (auto active = host.rt->active_turn(host.opt.thread); active && active->status == TurnStatus::waiting_approval)
    fmt::print("(a turn is waiting for approval: {})\n", host.resume_command());
  return kExitOk;
}

int cmd_threads(Host& host) {
  open_runtime(host);
  auto threads = host.rt->threads(host.opt.user);
  json out = json::array();
  for (const auto& t : threads) {
    std::string title = t.title;
    if (title.empty()) {
      for (const auto& m : host.rt->history(t.id))
        if (m.role == Role::user) {
          title = m.text();
          break;
        }
    }
    auto active = host.rt->active_turn(t.id);
    if (host.opt.json) {
      json j = thread_to_json(t);
      j["title"] = title;
      if (active) j["activeTurn"] = {{"id", active->id}, {"status", to_string(active->status)}};
      out.push_back(std::move(j));
    } else {
      std::string state;
      if (active)
        state = active->status == TurnStatus::waiting_approval ? "  [waiting for approval]"
                                                               : fmt::format("  [{}]", to_string(active->status));
      fmt::print("{}  {}  {}{}\n", t.id, local_time(t.updated_at), one_line(title, 60), state);
    }
  }
  if (host.opt.json)
    fmt::print("{}\n", out.dump(2, ' ', false, json::error_handler_t::replace));
  else if (threads.empty())
    fmt::print(stderr, "agentrt: no threads yet in {} (start one with `agentrt chat`)\n", host.data_dir);
  return kExitOk;
}

int cmd_jobs(Host& host) {
  open_runtime(host);
  require_thread(host);
  if (host.opt.json) {
    json out = json::array();
    for (const auto& j : host.rt->jobs(host.opt.thread)) out.push_back(job_to_json(j));
    fmt::print("{}\n", out.dump(2, ' ', false, json::error_handler_t::replace));
    return kExitOk;
  }
  print_jobs(host, stdout);
  return kExitOk;
}

int cmd_events(Host& host) {
  open_runtime(host);
  require_thread(host);
  int64_t after = host.opt.after;
  for (;;) {
    auto page = host.rt->events_page(host.opt.thread, host.opt.user, after, 500);
    if (page.empty()) break;
    for (const auto& e : page) fmt::print("{}\n", e.json);
    after = page.back().seq;
  }
  return kExitOk;
}

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

}  // namespace
}  // namespace agentrt::cli

int main(int argc, char** argv) {
  using namespace agentrt::cli;
  Host host;
  try {
    host.opt = parse_command_line(argc, argv);
  } catch (const UsageError& e) {
    fmt::print(stderr, "agentrt: {}\n{}", e.what(), short_usage_text());
    return kExitUsage;
  }
  try {
    const std::string& c = host.opt.command;
    if (c == "help") {
      fmt::print("{}", usage_text());
      return kExitOk;
    }
    if (c == "version") {
      fmt::print("agentrt {}\n", AGENTRT_CLI_VERSION);
      return kExitOk;
    }
    if (c == "chat") return cmd_chat(host);
    if (c == "run") return cmd_run(host);
    if (c == "resume") return cmd_resume(host);
    if (c == "history") return cmd_history(host);
    if (c == "threads") return cmd_threads(host);
    if (c == "jobs") return cmd_jobs(host);
    if (c == "events") return cmd_events(host);
    fmt::print(stderr, "agentrt: unknown command '{}'\n", c);
    return kExitUsage;
  } catch (const agentrt::Error& e) {
    std::fflush(stdout);
    fmt::print(stderr, "agentrt: error: {}\n", e.what());
    return kExitFailed;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "agentrt: error: {}\n", e.what());
    return kExitFailed;
  }
}
