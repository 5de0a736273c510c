#include "demo_jobs.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <optional>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "agentrt/config.hpp"
#include "agentrt/error.hpp"

namespace agentrt::examples {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// "render beach confirm" -> scene "beach", confirm. The words after "render"; "confirm" among them asks first.
struct RenderRequest {
  std::string scene;
  bool confirm = false;
};

std::optional<RenderRequest> render_request(const std::string& text) {
  std::istringstream in(text);
  std::string word;
  if (!(in >> word) || lower(word) != "render") return std::nullopt;
  RenderRequest r;
  while (in >> word) {
    std::string w = lower(word);
    while (!w.empty() && std::ispunct(static_cast<unsigned char>(w.back()))) w.pop_back();
    if (w == "confirm" || w == "--confirm") {
      r.confirm = true;
      continue;
    }
    r.scene += (r.scene.empty() ? "" : " ") + word;
  }
  while (!r.scene.empty() && std::ispunct(static_cast<unsigned char>(r.scene.back()))) r.scene.pop_back();
  if (r.scene.empty()) r.scene = "a test scene";
  if (r.scene.size() > 200) r.scene.resize(200);
  return r;
}

// The demo model with one more trick: "render ..." calls render_preview, then says what the tool answered.
class DemoJobsModel final : public ModelProvider {
 public:
  DemoJobsModel(std::shared_ptr<ModelProvider> demo, ScriptedModelOptions options)
      : demo_(std::move(demo)), jobs_(std::make_shared<ScriptedModel>(script, options)) {}

  ModelResult complete(const ModelRequest& request, ModelStreamSink& sink, const CancelToken& cancel) override {
    const Message* user = last_user_message(request);
    if (user && render_request(user->text())) return jobs_->complete(request, sink, cancel);
    return demo_->complete(request, sink, cancel);
  }
  std::string name() const override { return demo_->name(); }

 private:
  static ModelResult script(const ModelRequest& req) {
    auto r = render_request(last_user_message(req)->text());
    if (req.stage == "intent") return text_result("The user wants a preview of " + r->scene + " rendered.");
    if (req.stage == "organization") return text_result("Done.");
    const Message* tool = nullptr;
    for (auto it = req.messages.rbegin(); it != req.messages.rend(); ++it) {
      if (it->role == Role::user) break;
      if (it->role == Role::tool) tool = &*it;
    }
    if (!tool) {
      static std::atomic<uint64_t> calls{0};
      json args = {{"scene", r->scene}};
      if (r->confirm) args["confirm"] = true;
      const auto now = std::chrono::system_clock::now().time_since_epoch().count();
      return tool_call_result(fmt::format("call_render_{:x}{:x}", static_cast<uint64_t>(now) & 0xffffffff, ++calls),
                              DemoJobs::kToolName, args.dump());
    }
    // What the model reads of a started job: {"jobId", "status", "message"}.
    const json started = json::parse(tool->text(), nullptr, false);
    if (!tool->error.empty() || !started.is_object() || !started.contains("jobId")) {
      std::string why = tool->error.empty() ? tool->text() : tool->error;
      if (started.is_object() && started.contains("error") && started["error"].is_object())
        why = started["error"].value("message", why);
      return text_result("The render did not start: " + why);
    }
    return text_result("The render of " + r->scene +
                       " is running as a job; its result shows up in this conversation when it is done.");
  }

  std::shared_ptr<ModelProvider> demo_;
  std::shared_ptr<ScriptedModel> jobs_;
};

}  // namespace

std::shared_ptr<DemoJobs> DemoJobs::create(std::chrono::milliseconds duration,
                                           std::function<void(const std::string&)> log) {
  if (duration.count() <= 0) throw Error(ErrorCode::invalid_argument, "the demo jobs' duration must be positive");
  std::shared_ptr<DemoJobs> d(new DemoJobs(duration, std::move(log)));
  d->thread_ = std::thread([raw = d.get()] { raw->work(); });
  return d;
}

DemoJobs::DemoJobs(std::chrono::milliseconds duration, std::function<void(const std::string&)> log)
    : duration_(duration), log_(std::move(log)) {}

DemoJobs::~DemoJobs() { stop(); }

void DemoJobs::attach(Runtime* runtime) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    rt_ = runtime;
  }
  cv_.notify_all();
}

void DemoJobs::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

size_t DemoJobs::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return jobs_.size();
}

ToolSpec DemoJobs::tool() {
  ToolSpec t;
  t.name = kToolName;
  t.description =
      "Render a preview image of a scene. Rendering takes a while: the tool starts a job and the picture arrives "
      "later in the conversation. With confirm=true the person is asked first.";
  t.parameters = json::parse(R"({"type":"object","properties":{
    "scene":{"type":"string","minLength":1,"maxLength":200,"description":"what to render"},
    "confirm":{"type":"boolean","description":"ask the person before starting"}},
    "required":["scene"],"additionalProperties":false})");
  std::weak_ptr<DemoJobs> weak = weak_from_this();
  t.handler = [weak](const ToolCallContext& call, ToolCompletion done) {
    log_demo_tool_execution(call);  // AGENTRT_DEMO_TOOL_LOG: counted outside the runtime (scripts/crashloop)
    const std::string scene = call.args.value("scene", "");
    JobStart js;
    js.metadata = {{"renderer", "agentrt demo"}, {"scene", scene}};
    if (call.args.value("confirm", false) && !call.job_confirmed) {
      js.confirm = true;
      js.confirm_message = fmt::format("Render a preview of {}? It takes a moment.", scene);
      done.start_job(js);
      return;
    }
    js.message = "rendering " + scene;
    done.start_job(js);
    if (auto self = weak.lock()) self->schedule(call.job_id, scene);
  };
  return t;
}

std::shared_ptr<ModelProvider> DemoJobs::wrap_model(std::shared_ptr<ModelProvider> demo, ScriptedModelOptions options) {
  return std::make_shared<DemoJobsModel>(std::move(demo), options);
}

void DemoJobs::on_cancelled(const JobRecord& job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.erase(job.id);
  }
  cv_.notify_all();
}

void DemoJobs::schedule(const std::string& job_id, const std::string& scene) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_[job_id] = Pending{scene, std::chrono::steady_clock::now(), false};
  }
  cv_.notify_all();
}

void DemoJobs::work() {
  using Clock = std::chrono::steady_clock;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (stop_) return;
    // The next thing due: a progress report half way, or the completion.
    auto due = Clock::time_point::max();
    for (const auto& [id, p] : jobs_) due = std::min(due, p.started + (p.progress_sent ? duration_ : duration_ / 2));
    if (!rt_ || jobs_.empty()) {
      cv_.wait(lock);
      continue;
    }
    if (Clock::now() < due) {
      cv_.wait_until(lock, due);
      continue;
    }
    const auto now = Clock::now();
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      const std::string id = it->first;
      Pending p = it->second;
      const bool finish = now >= p.started + duration_;
      const bool progress = !finish && !p.progress_sent && now >= p.started + duration_ / 2;
      if (!finish && !progress) {
        ++it;
        continue;
      }
      if (finish)
        it = jobs_.erase(it);
      else
        (it++)->second.progress_sent = true;
      Runtime* rt = rt_;
      lock.unlock();  // the runtime may call on_cancelled() or the tool from other threads meanwhile
      try {
        if (finish) {
          const std::string key = fmt::format("renders/{}.png", id);
          JobResult r;
          r.result = {{"scene", p.scene},
                      {"image", key},
                      {"width", 640},
                      {"height", 360},
                      {"summary", fmt::format("rendered {} (640x360)", p.scene)}};
          r.assets = json::array({{{"key", key}, {"mimeType", "image/png"}}});
          r.message = "rendered " + p.scene;
          rt->complete_job(id, r);
        } else {
          rt->update_job(id, JobProgress{JobStatus::running, 0.5, "rendering " + p.scene + ": half done"});
        }
      } catch (const Error& e) {
        // Cancelled or expired meanwhile, or (for the progress report) not recorded yet: nothing to do.
        if (e.code() != ErrorCode::invalid_state && e.code() != ErrorCode::not_found && log_)
          log_(fmt::format("demo job {}: {}", id, e.what()));
      } catch (const std::exception& e) {
        if (log_) log_(fmt::format("demo job {}: {}", id, e.what()));
      }
      lock.lock();
      it = jobs_.upper_bound(id);  // the map may have changed while unlocked
      if (stop_) return;
    }
  }
}

}  // namespace agentrt::examples
