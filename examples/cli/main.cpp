// agentrt — the command-line host: chat, run, resume, history, threads and events on the embedded store.
// The one-shot commands live here; `chat` in chat.cpp.
#include <cstdio>
#include <map>
#include <string>

#include <fmt/format.h>

#include "agentrt/records.hpp"
#include "chat.hpp"
#include "command_line.hpp"
#include "event_printer.hpp"
#include "host.hpp"
#include "terminal_output.hpp"
#include "thread_report.hpp"

#ifndef AGENTRT_CLI_VERSION
#define AGENTRT_CLI_VERSION "0.0.0"
#endif

namespace agentrt::cli {
namespace {

// --json: the answer on stdout, indented.
void print_json(const json& j) { fmt::print("{}\n", j.dump(2, ' ', false, json::error_handler_t::replace)); }

const char* approval_word(const ApprovalPolicy& p) {
  switch (p.mode) {
    case ApprovalPolicy::Mode::never: return "never";
    case ApprovalPolicy::Mode::always: return "always";
    case ApprovalPolicy::Mode::predicate: return "sometimes";
  }
  return "always";
}

// What the model is offered, stage by stage, and where each tool comes from; the MCP servers and what they hold back.
int cmd_tools(Host& host) {
  open_runtime(host);
  std::map<std::string, McpToolInfo> mcp;
  for (auto& t : host.rt->mcp_tools()) mcp.emplace(t.name, t);
  json tools = json::array();
  std::map<std::string, size_t> index;  // name -> position in `tools`
  for (const char* stage : {"intent", "execution", "organization"})
    for (const auto& e : host.rt->tools().offered(stage, std::nullopt)) {
      auto [it, fresh] = index.emplace(e->spec.name, tools.size());
      if (!fresh) {
        tools[it->second]["stages"].push_back(stage);
        continue;
      }
      auto m = mcp.find(e->spec.name);
      json t = {{"name", e->spec.name},
                {"source", m == mcp.end() ? std::string("host") : "mcp:" + m->second.server},
                {"stages", json::array({stage})},
                {"approval", approval_word(e->spec.approval)},
                {"idempotent", e->spec.idempotent},
                {"description", e->spec.description},
                {"parameters", e->spec.parameters}};
      tools.push_back(std::move(t));
    }
  json servers = json::array();
  for (const auto& s : host.rt->mcp_servers()) servers.push_back(mcp_server_to_json(s));
  json held = json::array();
  for (const auto& [name, t] : mcp)
    if (!t.offered)
      held.push_back({{"name", name},
                      {"server", t.server},
                      {"reason", t.changed_hash.empty() ? t.problem : "its definition changed since it was approved"}});
  if (host.opt.json) {
    print_json({{"tools", tools}, {"mcpServers", servers}, {"heldBack", held}});
    return kExitOk;
  }
  if (tools.empty()) fmt::print("no tools are offered\n");
  for (const auto& t : tools) {
    std::string stages;
    for (const auto& st : t["stages"]) stages += (stages.empty() ? "" : ",") + st.get<std::string>();
    fmt::print("{:<40} {:<16} {:<10} approval:{:<9} {}\n", t["name"].get<std::string>(), t["source"].get<std::string>(),
               stages, t["approval"].get<std::string>(), one_line(t["description"].get<std::string>(), 60));
  }
  for (const auto& s : servers)
    fmt::print(
        "mcp server {}: {} {}{}{}\n", s["name"].get<std::string>(), s["transport"].get<std::string>(),
        s["state"].get<std::string>(),
        s["protocolVersion"].get<std::string>().empty() ? "" : " (MCP " + s["protocolVersion"].get<std::string>() + ")",
        s["error"].get<std::string>().empty() ? "" : ": " + s["error"].get<std::string>());
  for (const auto& h : held)
    fmt::print("held back: {} ({})\n", h["name"].get<std::string>(), h["reason"].get<std::string>());
  return kExitOk;
}

int cmd_run(Host& host) {
  open_runtime(host);
  if (auto active = host.rt->active_turn(host.opt.thread)) {
    if (active->status == TurnStatus::waiting_approval)
      fmt::print(stderr,
                 "agentrt: thread {} has a turn waiting for approval ({}); one turn at a time per thread.\n"
                 "Answer it first with: {}\n",
                 host.opt.thread, active->id, host.resume_command());
    else if (active->status == TurnStatus::waiting_client)
      fmt::print(stderr,
                 "agentrt: thread {} has a turn waiting for a client's tool answers ({}): the client that offered "
                 "the tools answers it, or it expires at its deadline\n",
                 host.opt.thread, active->id);
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
    print_json(messages);
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
    print_json(out);
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
    print_json(out);
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

}  // namespace
}  // namespace agentrt::cli

int main(int argc, char** argv) {
  using namespace agentrt::cli;
  // What is shown comes from models, tools, MCP servers and stored threads: no control characters reach the
  // terminal. JSON output (--json, `events`) goes out exactly as written.
  filter_terminal_output(stderr);
  Host host;
  try {
    host.opt = parse_command_line(argc, argv);
  } catch (const UsageError& e) {
    fmt::print(stderr, "agentrt: {}\n{}", e.what(), short_usage_text());
    return kExitUsage;
  }
  if (!host.opt.json && host.opt.command != "events") filter_terminal_output(stdout);
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
    if (c == "tools") return cmd_tools(host);
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
