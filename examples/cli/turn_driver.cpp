#include "turn_driver.hpp"

#include <poll.h>
#include <unistd.h>
#include <algorithm>
#include <cctype>

#include <cerrno>
#include <csignal>
#include <iostream>

#include <fmt/format.h>

namespace agentrt::cli {

namespace {

volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void on_interrupt(int) {
  g_interrupted = 1;
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process
}

// Ctrl-C cancels the turn while a run streams; outside, it keeps its default meaning.
class InterruptScope {
 public:
  InterruptScope() {
    g_interrupted = 0;
    std::signal(SIGINT, on_interrupt);
  }
  ~InterruptScope() { std::signal(SIGINT, SIG_DFL); }
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;
  bool interrupted() const { return g_interrupted != 0; }
};

std::string trim(std::string s) {
  auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool settled(TurnStatus s) { return s != TurnStatus::running && s != TurnStatus::resuming; }

}  // namespace

std::optional<std::string> LinePrompter::ask(const std::string& prompt, const std::function<bool()>& idle) {
  std::fputs(prompt.c_str(), out_);
  std::fflush(out_);
  // A terminal in canonical mode hands over one whole line per read, so nothing typed can sit unseen in
  // stdin's buffer while we wait for the descriptor to become readable.
  if (idle && ::isatty(STDIN_FILENO)) {
    for (;;) {
      pollfd p{STDIN_FILENO, POLLIN, 0};
      const int r = ::poll(&p, 1, 200);
      if (r > 0 || (r < 0 && errno != EINTR)) break;  // a line (or the end, or an error getline will see)
      if (r == 0 && idle()) {
        std::fputs(prompt.c_str(), out_);
        std::fflush(out_);
      }
    }
  }
  std::string line;
  if (!std::getline(std::cin, line)) return std::nullopt;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

TurnDriver::TurnDriver(Runtime& runtime, EventPrinter& printer, ApprovalMode mode, LinePrompter* prompter,
                       std::FILE* info, std::string reject_reason)
    : rt_(runtime),
      printer_(printer),
      mode_(mode),
      prompter_(prompter),
      info_(info),
      reject_reason_(reject_reason.empty() ? std::string("rejected by the user") : std::move(reject_reason)) {}

TurnOutcome TurnDriver::follow(Subscription& sub, const std::string& thread_id, const std::string& turn_id,
                               std::string run_id, int64_t seen_seq) {
  for (;;) {
    {
      InterruptScope scope;
      bool cancel_sent = false;
      for (;;) {
        if (scope.interrupted() && !cancel_sent) {
          printer_.end_line();
          fmt::print(info_, "cancelling the turn...\n");
          std::fflush(info_);
          rt_.cancel(turn_id);
          cancel_sent = true;
        }
        auto e = sub.next(std::chrono::milliseconds(200));
        if (!e) {
          if (sub.closed()) throw Error(ErrorCode::internal, "the event subscription closed");
          // A settled turn whose events have all been seen is done, even if this run's end went unseen.
          auto t = rt_.turn(turn_id);
          if (t && settled(t->status)) {
            auto th = rt_.thread(thread_id);
            if (th && th->last_seq <= seen_seq) break;
          }
          continue;
        }
        seen_seq = e->seq;
        last_seen_ = std::max(last_seen_, seen_seq);
        json ev = printer_.print(*e);
        const std::string type = ev.is_object() ? ev.value("type", "") : std::string();
        if (e->run_id == run_id && (type == "RUN_FINISHED" || type == "RUN_ERROR")) break;
      }
    }
    printer_.end_line();

    TurnRecord t = rt_.wait(turn_id, std::chrono::seconds(30));
    while (!settled(t.status)) t = rt_.wait(turn_id, std::chrono::seconds(30));
    switch (t.status) {
      case TurnStatus::completed: return TurnOutcome::completed;
      case TurnStatus::waiting_approval: {
        auto next = answer(t);
        if (!next) return TurnOutcome::waiting;
        run_id = *next;
        break;
      }
      default:
        fmt::print(stderr, "agentrt: the turn ended {}{}\n", to_string(t.status),
                   t.error.empty() ? "" : ": " + t.error);
        std::fflush(stderr);
        return TurnOutcome::failed;
    }
  }
}

std::vector<TurnDriver::Pending> TurnDriver::pending(const TurnRecord& turn) {
  std::vector<LedgerEntry> ledger = rt_.tool_calls(turn.id);
  std::vector<Pending> out;
  for (const auto& i : turn.interrupts) {
    if (!i.is_object()) continue;
    Pending p;
    p.interrupt_id = i.value("id", "");
    p.tool_call_id = i.value("toolCallId", "");
    const json meta = i.value("metadata", json::object());
    if (meta.is_object()) p.tool_name = meta.value("toolName", "");
    for (const auto& l : ledger)
      if (l.tool_call_id == p.tool_call_id) {
        p.arguments = l.arguments;
        if (p.tool_name.empty()) p.tool_name = l.tool_name;
      }
    if (p.arguments.empty() && meta.is_object() && meta.contains("arguments")) p.arguments = meta["arguments"].dump();
    if (p.tool_name.empty()) p.tool_name = i.value("reason", "interrupt");
    p.confirmation = i.value("reason", "") == "confirmation";
    p.message = i.value("message", "");
    out.push_back(std::move(p));
  }
  return out;
}

void TurnDriver::show_pending(const TurnRecord& turn) {
  if (printer_.mode() != EventPrinter::Mode::human) return;
  for (const auto& p : pending(turn)) {
    if (p.confirmation)
      fmt::print(info_, "[confirmation needed] {}: {}\n", p.tool_name, p.message);
    else
      fmt::print(info_, "[approval needed] {} {}\n", p.tool_name, p.arguments);
  }
  std::fflush(info_);
}

std::optional<Decision> TurnDriver::ask_one(const Pending& p) {
  while (p.confirmation) {
    // A job asks to be started: yes or no (its arguments are not editable).
    auto line = prompter_->ask(fmt::format("{} {}: start the job? [y]es / [n]o? ", p.tool_name, p.arguments));
    if (!line) return std::nullopt;
    const std::string a = lower(trim(*line));
    if (a == "y" || a == "yes" || a == "a" || a == "approve")
      return Decision{p.interrupt_id, Decision::Action::approve, std::nullopt, ""};
    if (a == "n" || a == "no" || a == "r" || a == "reject")
      return Decision{p.interrupt_id, Decision::Action::reject, std::nullopt, "declined by the user"};
    fmt::print(info_, "Please answer y (start the job) or n (do not start it).\n");
  }
  for (;;) {
    auto line = prompter_->ask(fmt::format("{} {}: [a]pprove / [r]eject / [e]dit? ", p.tool_name, p.arguments));
    if (!line) return std::nullopt;
    const std::string a = lower(trim(*line));
    if (a == "a" || a == "approve" || a == "y" || a == "yes")
      return Decision{p.interrupt_id, Decision::Action::approve, std::nullopt, ""};
    if (a == "r" || a == "reject" || a == "n" || a == "no") {
      auto reason = prompter_->ask("Reason (told to the model): ");
      if (!reason) return std::nullopt;
      std::string r = trim(*reason);
      return Decision{p.interrupt_id, Decision::Action::reject, std::nullopt, r.empty() ? reject_reason_ : r};
    }
    if (a == "e" || a == "edit") {
      auto entry = rt_.tools().find(p.tool_name);
      for (;;) {
        auto text = prompter_->ask("New arguments as JSON (empty line: back): ");
        if (!text) return std::nullopt;
        std::string t = trim(*text);
        if (t.empty()) break;
        const size_t max_depth = rt_.config().max_json_depth;
        if (json_text_depth(t, max_depth) > max_depth) {
          fmt::print(info_, "Those arguments are nested deeper than {} levels; try again.\n", max_depth);
          continue;
        }
        json args = json::parse(t, nullptr, false);
        if (args.is_discarded()) {
          fmt::print(info_, "That is not valid JSON; try again.\n");
          continue;
        }
        if (!args.is_object()) {
          fmt::print(info_, "The arguments must be a JSON object; try again.\n");
          continue;
        }
        if (entry) {
          if (auto v = entry->schema.validate(args)) {
            fmt::print(info_, "{} refuses these arguments: {}{}{}; try again.\n", p.tool_name, v->path,
                       v->path.empty() ? "" : ": ", v->message);
            continue;
          }
        }
        return Decision{p.interrupt_id, Decision::Action::approve, std::move(args), ""};
      }
      continue;
    }
    fmt::print(info_, "Please answer a (approve), r (reject) or e (edit the arguments).\n");
  }
}

std::optional<std::string> TurnDriver::answer(const TurnRecord& turn) {
  if (mode_ == ApprovalMode::none) return std::nullopt;
  const auto items = pending(turn);
  for (;;) {
    std::vector<Decision> decisions;
    for (const auto& p : items) {
      if (mode_ == ApprovalMode::yes) {
        decisions.push_back(Decision{p.interrupt_id, Decision::Action::approve, std::nullopt, ""});
      } else if (mode_ == ApprovalMode::no) {
        decisions.push_back(Decision{p.interrupt_id, Decision::Action::reject, std::nullopt, reject_reason_});
      } else {
        if (!prompter_) return std::nullopt;
        auto d = ask_one(p);
        if (!d) return std::nullopt;
        decisions.push_back(std::move(*d));
      }
    }
    try {
      json answer = rt_.resume(turn.id, turn.approval_request_id, decisions);
      for (size_t i = 0; i < decisions.size() && i < items.size(); ++i) {
        const Decision& d = decisions[i];
        if (items[i].confirmation)
          fmt::print(info_, "[{}] {}\n", d.action == Decision::Action::approve ? "confirmed" : "declined",
                     items[i].tool_name);
        else if (d.action == Decision::Action::approve)
          fmt::print(info_, "[approved] {} {}\n", items[i].tool_name,
                     d.edited_args ? d.edited_args->dump() : items[i].arguments);
        else
          fmt::print(info_, "[rejected] {}: {}\n", items[i].tool_name, d.reason);
      }
      std::fflush(info_);
      return answer.value("runId", "");
    } catch (const Error& e) {
      // The runtime validates edited arguments again; in a conversation, let the person answer again.
      if (mode_ != ApprovalMode::ask || e.code() != ErrorCode::invalid_argument) throw;
      fmt::print(info_, "The runtime refused the answer: {}\nAnswer again.\n", e.what());
    }
  }
}

}  // namespace agentrt::cli
