#include "agentrt/tools.hpp"

#include "agentrt/stages.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace agentrt {
inline namespace v1 {

bool ApprovalPolicy::requires_approval(const json& args) const {
  switch (mode) {
    case Mode::never: return false;
    case Mode::always: return true;
    case Mode::predicate: return predicate ? predicate(args) : true;
  }
  return true;
}

struct ToolCompletion::State {
  mutable std::mutex mutex;
  mutable std::condition_variable cv;
  bool done = false;
  Outcome outcome;
  std::optional<json> progress;  // the latest report not yet streamed
};

ToolCompletion::ToolCompletion() : state_(std::make_shared<State>()) {}

// `set` fills the outcome under the lock, once.
template <class Set>
bool ToolCompletion::settle(Set&& set) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (state_->done) return false;
    state_->done = true;
    set(state_->outcome);
  }
  state_->cv.notify_all();
  return true;
}

bool ToolCompletion::complete(ToolResult result) {
  return settle([&](Outcome& o) {
    o.ok = true;
    o.result = std::move(result);
  });
}

bool ToolCompletion::fail(std::string code, std::string message) {
  return settle([&](Outcome& o) {
    o.ok = false;
    o.error = ToolError{std::move(code), std::move(message)};
  });
}

bool ToolCompletion::start_job(JobStart job) {
  return settle([&](Outcome& o) {
    o.ok = true;
    o.job = std::move(job);
  });
}

bool ToolCompletion::need_input(InputRequest request) {
  return settle([&](Outcome& o) {
    o.ok = true;
    o.input = std::move(request);
  });
}

bool ToolCompletion::done() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->done;
}

bool ToolCompletion::wait_until(std::chrono::steady_clock::time_point deadline, const CancelToken& cancel) const {
  std::unique_lock<std::mutex> lock(state_->mutex);
  // Poll the cancel flag in short slices: the token has its own condition variable.
  while (!state_->done) {
    if (cancel.cancelled()) return false;
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    auto slice = std::min<std::chrono::steady_clock::duration>(deadline - now, std::chrono::milliseconds(20));
    state_->cv.wait_for(lock, slice);
  }
  return true;
}

bool ToolCompletion::progress(json report) {
  if (!report.is_object()) return false;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (state_->done) return false;
    state_->progress = std::move(report);
  }
  state_->cv.notify_all();
  return true;
}

ToolCompletion::Wake ToolCompletion::wait_news(std::chrono::steady_clock::time_point deadline,
                                               const CancelToken& cancel) const {
  std::unique_lock<std::mutex> lock(state_->mutex);
  for (;;) {
    if (state_->done) return Wake::done;
    if (state_->progress) return Wake::progress;
    if (cancel.cancelled()) return Wake::cancelled;
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return Wake::deadline;
    auto slice = std::min<std::chrono::steady_clock::duration>(deadline - now, std::chrono::milliseconds(20));
    state_->cv.wait_for(lock, slice);
  }
}

std::optional<json> ToolCompletion::take_progress() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::optional<json> p;
  p.swap(state_->progress);
  return p;
}

ToolCompletion::Outcome ToolCompletion::outcome() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->outcome;
}

ToolCompletion::Outcome ToolCompletion::take_outcome() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return std::move(state_->outcome);
}

ToolHandler sync_tool(std::function<ToolResult(const ToolCallContext&)> fn) {
  return [fn = std::move(fn)](const ToolCallContext& call, ToolCompletion completion) {
    try {
      completion.complete(fn(call));
    } catch (const Error& e) {
      completion.fail("tool_error", e.message());
    } catch (const std::exception& e) {
      completion.fail("tool_error", e.what());
    } catch (...) {
      completion.fail("tool_error", "the tool threw a non-standard exception");
    }
  };
}

namespace {
bool valid_tool_name(std::string_view n) {
  if (n.empty() || n.size() > 64) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}
}  // namespace

void ToolRegistry::add(ToolSpec spec) {
  if (!valid_tool_name(spec.name))
    throw Error(ErrorCode::invalid_argument,
                fmt::format("tool name '{}' must be 1-64 characters of A-Z a-z 0-9 _ -", spec.name));
  if (!spec.handler) throw Error(ErrorCode::invalid_argument, fmt::format("tool '{}' has no handler", spec.name));
  if (!spec.parameters.is_object() || spec.parameters.value("type", "object") != "object")
    throw Error(ErrorCode::invalid_argument,
                fmt::format("tool '{}': parameters must be a JSON Schema of type object", spec.name));
  if (spec.timeout.count() <= 0)
    throw Error(ErrorCode::invalid_argument, fmt::format("tool '{}': timeout must be positive", spec.name));
  for (const auto& s : spec.stages) {
    try {
      stage_from_string(s);
    } catch (const Error& e) {
      throw Error(ErrorCode::invalid_argument, fmt::format("tool '{}': {}", spec.name, e.message()));
    }
  }
  JsonSchema schema(spec.parameters);  // throws invalid_argument for a schema we cannot check
  auto entry = std::make_shared<Entry>(Entry{std::move(spec), std::move(schema)});
  std::lock_guard<std::mutex> lock(mutex_);
  if (tools_.count(entry->spec.name))
    throw Error(ErrorCode::conflict, fmt::format("tool '{}' is already registered", entry->spec.name));
  tools_.emplace(entry->spec.name, std::move(entry));
  ++generation_;
}

bool ToolRegistry::remove(std::string_view name) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = tools_.find(name);
  if (it == tools_.end()) return false;
  tools_.erase(it);
  ++generation_;
  return true;
}

uint64_t ToolRegistry::generation() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return generation_;
}

std::shared_ptr<const ToolRegistry::Entry> ToolRegistry::find(std::string_view name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = tools_.find(name);
  return it == tools_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<const ToolRegistry::Entry>> ToolRegistry::offered(
    std::string_view stage, const std::optional<std::vector<std::string>>& allowed) const {
  std::vector<std::shared_ptr<const Entry>> out;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [name, entry] : tools_) {
    const auto& st = entry->spec.stages;
    if (std::find(st.begin(), st.end(), stage) == st.end()) continue;
    if (allowed && std::find(allowed->begin(), allowed->end(), name) == allowed->end()) continue;
    out.push_back(entry);
  }
  return out;
}

std::vector<ToolDefinition> ToolRegistry::definitions(std::string_view stage,
                                                      const std::optional<std::vector<std::string>>& allowed) const {
  std::vector<ToolDefinition> out;
  for (const auto& e : offered(stage, allowed))
    out.push_back(ToolDefinition{e->spec.name, e->spec.description, e->spec.parameters});
  return out;
}

}  // namespace v1
}  // namespace agentrt
