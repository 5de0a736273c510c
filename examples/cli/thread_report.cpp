#include "thread_report.hpp"

#include <algorithm>
#include <ctime>

#include <fmt/format.h>

#include "agentrt/clock.hpp"

namespace agentrt::cli {

namespace {

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

// "12s", "5m", "3h", "2d": how long ago `ms` was.
std::string age(int64_t ms) {
  const int64_t now = now_ms();
  const int64_t s = std::max<int64_t>(0, (now - ms) / 1000);
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m", s / 60);
  if (s < 48 * 3600) return fmt::format("{}h", s / 3600);
  return fmt::format("{}d", s / 86400);
}

}  // namespace

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

std::string local_time(int64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

}  // namespace agentrt::cli
