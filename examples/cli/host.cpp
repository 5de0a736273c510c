#include "host.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <mutex>
#include <sstream>

#include "agentrt/config.hpp"
#include "agentrt/json_limits.hpp"

namespace agentrt::cli {

namespace {

json read_config_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::not_found, fmt::format("cannot read the config file {}", path));
  std::stringstream ss;
  ss << in.rdbuf();
  json j = parse_json_text(ss.str(), kDefaultMaxJsonDepth, path);  // invalid_argument: not JSON, nested too deep
  if (!j.is_object()) throw Error(ErrorCode::invalid_argument, fmt::format("{} must hold a JSON object", path));
  return j;
}

}  // namespace

int exit_code(TurnOutcome o) {
  switch (o) {
    case TurnOutcome::completed: return kExitOk;
    case TurnOutcome::waiting: return kExitWaiting;
    case TurnOutcome::failed: return kExitFailed;
  }
  return kExitFailed;
}

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

void open_runtime(Host& host) {
  json cfg = host.opt.config_file.empty() ? json::object() : read_config_file(host.opt.config_file);
  if (host.opt.data_dir_given || !cfg.contains("data_dir")) cfg["data_dir"] = host.opt.data_dir;
  host.data_dir = cfg["data_dir"].is_string() ? cfg["data_dir"].get<std::string>() : host.opt.data_dir;
  for (const auto& m : host.opt.mcp) {
    json server = m.url.empty() ? json{{"command", m.command}} : json{{"url", m.url}};
    if (cfg.contains("mcp_servers") && cfg["mcp_servers"].is_object() && cfg["mcp_servers"].contains(m.name))
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("--mcp {}: the config file already names an MCP server {}", m.name, m.name));
    cfg["mcp_servers"][m.name] = std::move(server);
  }
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

TurnOutcome continue_waiting_turn(Host& host, TurnDriver& driver, const TurnRecord& turn) {
  const auto thread = host.rt->thread(turn.thread_id);
  const int64_t after = thread ? thread->last_seq : 0;
  auto sub = host.rt->subscribe(turn.thread_id, after);
  driver.show_pending(turn);
  auto run = driver.answer(turn);
  if (!run) return TurnOutcome::waiting;
  return driver.follow(*sub, turn.thread_id, turn.id, *run, after);
}

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

}  // namespace agentrt::cli
