#include "event_printer.hpp"

#include <fmt/format.h>

namespace agentrt::cli {

std::string one_line(std::string s, size_t max) {
  for (char& c : s)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  if (s.size() > max) {
    size_t cut = max;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // keep UTF-8 whole
    s = s.substr(0, cut) + "...";
  }
  return s;
}

namespace {

std::string str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string scalar_text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

}  // namespace

std::string content_text(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string out;
  if (content.is_array()) {
    for (const auto& p : content) {
      if (!p.is_object()) continue;
      if (str(p, "type") == "text") {
        if (!out.empty()) out += "\n";
        out += str(p, "text");
      } else {
        if (!out.empty()) out += "\n";
        out += "[" + str(p, "type") + "]";
      }
    }
  }
  return out;
}

std::string describe_job(const json& job) {
  if (!job.is_object()) return {};
  const std::string head = fmt::format("{} ({})", str(job, "id"), str(job, "toolName"));
  const std::string status = str(job, "status");
  const std::string message = str(job, "message");
  const json error = job.value("error", json::object());
  std::string why;
  if (error.is_object()) {
    why = str(error, "code");
    if (!str(error, "message").empty()) why += ": " + str(error, "message");
    why = one_line(why, 200);
  }
  if (status == "succeeded") {
    std::string summary = message;
    if (summary.empty() && job.contains("result")) summary = one_line(scalar_text(job["result"]), 160);
    std::string assets;
    for (const auto& a : job.value("assets", json::array())) {
      std::string ref = a.is_object() ? (str(a, "url").empty() ? str(a, "key") : str(a, "url")) : scalar_text(a);
      if (!ref.empty()) assets += (assets.empty() ? "" : ", ") + ref;
    }
    return fmt::format("{} succeeded{}{}{}", head, summary.empty() ? "" : ": ", one_line(summary, 200),
                       assets.empty() ? "" : " [assets: " + one_line(assets, 200) + "]");
  }
  if (status == "failed") return fmt::format("{} failed: {}", head, why);
  if (status == "cancelled") {
    const bool declined = error.is_object() && str(error, "code") == "declined";
    return fmt::format("{} {}: {}", head, declined ? "declined" : "cancelled",
                       one_line(error.is_object() ? str(error, "message") : std::string(), 200));
  }
  if (str(job, "confirmation") == "pending") return head + ": waiting for confirmation";
  std::string progress;
  if (auto p = job.find("progress"); p != job.end() && p->is_number() && p->get<double>() > 0)
    progress = fmt::format(" ({:.0f}%)", p->get<double>() * 100);
  return fmt::format("{}: {}{}{}{}", head, status, message.empty() ? "" : " — ", one_line(message, 200), progress);
}

std::string describe_card(const json& ui) {
  if (!ui.is_object()) return {};
  std::string out = str(ui, "type");
  if (auto v = str(ui, "version"); !v.empty()) out += " " + v;
  if (auto d = ui.find("data"); d != ui.end() && d->is_object() && !d->empty()) {
    out += ":";
    bool first = true;
    for (auto it = d->begin(); it != d->end(); ++it) {
      out += fmt::format("{} {}={}", first ? "" : ",", it.key(), scalar_text(it.value()));
      first = false;
    }
  }
  if (auto a = ui.find("actions"); a != ui.end() && a->is_array() && !a->empty()) {
    std::string labels;
    for (const auto& act : *a) {
      std::string label = act.is_object() ? str(act, "label") : std::string();
      if (label.empty() && act.is_object()) label = str(act, "action");
      if (label.empty()) continue;
      labels += (labels.empty() ? "" : ", ") + label;
    }
    if (!labels.empty()) out += " (actions: " + labels + ")";
  }
  return out;
}

EventPrinter::EventPrinter(std::FILE* out, std::FILE* err, Mode mode, bool verbose, std::string assistant_prefix)
    : out_(out), err_(err), mode_(mode), verbose_(verbose), assistant_prefix_(std::move(assistant_prefix)) {}

json EventPrinter::print(const StoredEvent& event) {
  json e = json::parse(event.json, nullptr, false);
  if (mode_ == Mode::json) {
    // Exactly as stored: one event a line.
    std::fwrite(event.json.data(), 1, event.json.size(), out_);
    std::fputc('\n', out_);
    std::fflush(out_);
    return e;
  }
  if (e.is_object()) print_human(e);
  std::fflush(out_);
  return e;
}

void EventPrinter::end_line() {
  if (!at_line_start_) {
    std::fputc('\n', out_);
    at_line_start_ = true;
    ++writes_;
  }
  std::fflush(out_);
}

std::string EventPrinter::tool_arguments(const std::string& tool_call_id) const {
  auto it = calls_.find(tool_call_id);
  return it == calls_.end() ? std::string() : it->second.arguments;
}

void EventPrinter::write(const std::string& text) {
  if (text.empty()) return;
  std::fwrite(text.data(), 1, text.size(), out_);
  at_line_start_ = text.back() == '\n';
  ++writes_;
}

void EventPrinter::line(const std::string& text) {
  end_line();
  write(text + "\n");
}

void EventPrinter::print_human(const json& e) {
  const std::string type = str(e, "type");
  if (type == "RUN_STARTED") {
    if (verbose_) {
      std::string parent = str(e, "parentRunId");
      line(fmt::format("[run] {}{}", str(e, "runId"), parent.empty() ? "" : " (resumes " + parent + ")"));
    }
  } else if (type == "STEP_STARTED") {
    if (verbose_) line("[step] " + str(e, "stepName"));
  } else if (type == "CUSTOM") {
    const json value = e.value("value", json());
    if (str(e, "name") == "agentrt.job" && value.is_object()) {
      line("[job] " + describe_job(value));  // a job started, asks for confirmation, or ended
    } else if (verbose_) {
      if (str(e, "name") == "agentrt.intent" && value.is_object())
        line("[intent] " + str(value, "text"));
      else
        line(fmt::format("[custom] {} {}", str(e, "name"), value.dump()));
    }
  } else if (type == "TEXT_MESSAGE_START") {
    end_line();
    write(assistant_prefix_);
  } else if (type == "TEXT_MESSAGE_CONTENT" || type == "TEXT_MESSAGE_CHUNK") {
    write(str(e, "delta"));
  } else if (type == "TEXT_MESSAGE_END") {
    end_line();
  } else if (type == "REASONING_MESSAGE_START") {
    if (verbose_) line("[reasoning]");
  } else if (type == "REASONING_MESSAGE_CONTENT" || type == "REASONING_MESSAGE_CHUNK") {
    if (verbose_) write(str(e, "delta"));
  } else if (type == "REASONING_MESSAGE_END") {
    if (verbose_) end_line();
  } else if (type == "TOOL_CALL_START") {
    calls_[str(e, "toolCallId")].name = str(e, "toolCallName");
  } else if (type == "TOOL_CALL_ARGS") {
    calls_[str(e, "toolCallId")].arguments += str(e, "delta");
  } else if (type == "TOOL_CALL_CHUNK") {
    auto& c = calls_[str(e, "toolCallId")];
    if (auto n = str(e, "toolCallName"); !n.empty()) c.name = n;
    c.arguments += str(e, "delta");
  } else if (type == "TOOL_CALL_END") {
    const auto& c = calls_[str(e, "toolCallId")];
    line(fmt::format("[tool] {} {}", c.name, c.arguments.empty() ? "{}" : c.arguments));
  } else if (type == "TOOL_CALL_RESULT") {
    line("[result] " + content_text(e.value("content", json())));
    const json meta = e.value("metadata", json::object());
    if (meta.is_object() && meta.contains("ui")) line("[card] " + describe_card(meta["ui"]));
  } else if (type == "RUN_FINISHED") {
    const json outcome = e.value("outcome", json::object());
    const std::string kind = outcome.is_object() ? str(outcome, "type") : std::string();
    if (kind == "interrupt") {
      for (const auto& i : outcome.value("interrupts", json::array())) {
        const json meta = i.value("metadata", json::object());
        std::string name = meta.is_object() ? str(meta, "toolName") : std::string();
        std::string args = tool_arguments(str(i, "toolCallId"));
        if (args.empty() && meta.is_object() && meta.contains("arguments")) args = meta["arguments"].dump();
        if (str(i, "reason") == "confirmation")
          line(fmt::format("[confirmation needed] {}: {}", name, str(i, "message")));
        else
          line(fmt::format("[approval needed] {} {}", name.empty() ? str(i, "reason") : name, args));
      }
    } else if (kind == "cancelled") {
      line("[cancelled]");
    } else if (verbose_) {
      line("[run finished]");
    }
  } else if (type == "RUN_ERROR") {
    end_line();
    std::string code = str(e, "code");
    fmt::print(err_, "agentrt: the run failed: {}{}\n", str(e, "message"), code.empty() ? "" : " (" + code + ")");
    std::fflush(err_);
  } else if (verbose_ && type != "STEP_FINISHED") {
    line("[event] " + type);
  }
}

}  // namespace agentrt::cli
