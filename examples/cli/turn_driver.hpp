// TurnDriver: follows one turn's runs on a subscription, printing them, and answers its approvals.
#pragma once

#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agentrt/runtime.hpp"
#include "command_line.hpp"
#include "event_printer.hpp"

namespace agentrt::cli {

enum class TurnOutcome { completed, waiting, failed };

// Reads a person's answers, one line each, from stdin. Prompts go to `out`. Not thread-safe.
class LinePrompter {
 public:
  explicit LinePrompter(std::FILE* out) : out_(out) {}
  // The next line without its line end, or nullopt at the end of the input (Ctrl-D, a closed pipe).
  // On a terminal, `idle` (when given) is called about every 200 ms while nothing was typed; when it returns
  // true (it printed something) the prompt is shown again.
  std::optional<std::string> ask(const std::string& prompt, const std::function<bool()>& idle = {});

 private:
  std::FILE* out_;
};

// Not thread-safe: one driver per terminal. Ctrl-C while a run streams cancels the turn; a second Ctrl-C
// ends the process (the turn is recovered by the next process on the store).
class TurnDriver {
 public:
  // `prompter` is needed for ApprovalMode::ask; `info` receives the driver's own messages.
  TurnDriver(Runtime& runtime, EventPrinter& printer, ApprovalMode mode, LinePrompter* prompter, std::FILE* info,
             std::string reject_reason = {});

  // Prints the thread's events from `sub` until the run `run_id` of turn `turn_id` ends, answers the turn's
  // approvals as the mode says, follows the runs that continue it, and returns how the turn ended.
  // `seen_seq`: the last sequence number already shown (the subscription's start).
  TurnOutcome follow(Subscription& sub, const std::string& thread_id, const std::string& turn_id, std::string run_id,
                     int64_t seen_seq);

  // Answers a waiting turn's open interrupts. Returns the continuation's run id, or nullopt when no answer
  // was given (mode none, or the input ended while asking): the turn then stays waiting.
  std::optional<std::string> answer(const TurnRecord& turn);

  // Shows a waiting turn's open interrupts ("[approval needed] book_room {...}").
  void show_pending(const TurnRecord& turn);

  // The sequence number of the last event follow() printed (0 before).
  int64_t last_seen() const { return last_seen_; }

 private:
  struct Pending {
    std::string interrupt_id;
    std::string tool_call_id;
    std::string tool_name;
    std::string arguments;      // as the model wrote them
    bool confirmation = false;  // a job asks to be started (reason "confirmation"), not a call's approval
    std::string message;        // the interrupt's question
  };
  std::vector<Pending> pending(const TurnRecord& turn);
  std::optional<Decision> ask_one(const Pending& p);

  Runtime& rt_;
  EventPrinter& printer_;
  ApprovalMode mode_;
  LinePrompter* prompter_;
  std::FILE* info_;
  std::string reject_reason_;
  int64_t last_seen_ = 0;
};

}  // namespace agentrt::cli
