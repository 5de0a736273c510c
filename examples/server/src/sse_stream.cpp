#include "sse_stream.hpp"

#include <vector>

#include <fmt/format.h>

#include "server_context.hpp"

namespace agentrt::server {

bool speaks_pre_1_0(const json& in) {
  auto v = in.is_object() ? in.find("protocolVersion") : in.end();
  if (v == in.end() || !v->is_string()) return true;
  const std::string& s = v->get_ref<const std::string&>();
  return s.rfind("0.", 0) == 0;
}

std::optional<std::string> pre_1_0_run_finished(std::string_view event_json) {
  if (event_json.find("\"RUN_FINISHED\"") == std::string_view::npos) return std::nullopt;
  // Only a cancelled outcome or one with pendingToolCallIds is rewritten: without either word (nor an escape
  // that could spell one) the event stays as it is, unparsed.
  if (event_json.find("cancelled") == std::string_view::npos &&
      event_json.find("pendingToolCallIds") == std::string_view::npos &&
      event_json.find("\\u") == std::string_view::npos)
    return std::nullopt;
  json e = json::parse(event_json, nullptr, false);
  if (!e.is_object() || e.value("type", "") != "RUN_FINISHED") return std::nullopt;
  auto o = e.find("outcome");
  if (o == e.end() || !o->is_object()) return std::nullopt;
  if (o->value("type", "") == "cancelled") {
    e.erase("outcome");
  } else if (o->contains("pendingToolCallIds")) {
    o->erase("pendingToolCallIds");
  } else {
    return std::nullopt;
  }
  return e.dump();
}

SharedChunk pre_1_0_frame(const SharedChunk& f) {
  const size_t data = f->bytes.find("data: ");
  if (data == std::string::npos) return f;
  const size_t end = f->bytes.find('\n', data);
  auto rewritten = pre_1_0_run_finished(std::string_view(f->bytes).substr(data + 6, end - data - 6));
  if (!rewritten) return f;
  auto c = std::make_shared<StreamChunk>(*f);
  c->bytes = f->bytes.substr(0, data + 6) + *rewritten + f->bytes.substr(end);
  return c;
}

void SseStream::deliver(const SharedChunk* frames, size_t n, const SharedChunk* joined) {
  auto w = writer();
  if (!w || n == 0) return;
  // The whole batch as one chunk, unless one_run must leave some of it out: another run's frames, or frames
  // after the terminal one that ends the stream; or a client before AG-UI 1.0 needs a run's end rewritten.
  bool whole = joined != nullptr;
  for (size_t i = 0; whole && pre_1_0_ && i < n; ++i) whole = !frames[i]->terminal;
  for (size_t i = 0; whole && mode_ == Mode::one_run && i < n; ++i)
    whole = frames[i]->run_id() == run_id_ && (!frames[i]->terminal || i + 1 == n);
  bool terminal = false;
  if (whole) {
    terminal = (*joined)->terminal;
    if (!w->push(*joined)) return;
  } else {
    // This run's frames only (one_run), up to and with the first terminal one that ends the stream.
    std::vector<SharedChunk> mine;
    mine.reserve(n);
    for (size_t i = 0; i < n && !(terminal && mode_ == Mode::one_run); ++i) {
      if (mode_ == Mode::one_run && frames[i]->run_id() != run_id_) continue;
      mine.push_back(pre_1_0_ && frames[i]->terminal ? pre_1_0_frame(frames[i]) : frames[i]);
      terminal = terminal || frames[i]->terminal;
    }
    if (!mine.empty() && !w->push(mine.data(), mine.size())) return;
  }
  delivered_ = frames[n - 1]->seq;
  if (!terminal) return;
  terminal_sent_ = true;
  if (mode_ == Mode::one_run) w->finish();
  if (mode_ == Mode::until_idle) end_sse_stream_if_idle(owner_, shared_from_this());
}

void SseStream::on_tick() {
  if (mode_ == Mode::until_idle) end_sse_stream_if_idle(owner_, shared_from_this());
}

bool SseStream::has_room() {
  auto w = writer();
  return w && !w->ended() && w->has_room();
}

void SseStream::on_drained() {
  std::shared_ptr<EventFeeds::Member> m;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    m = member_;
  }
  owner_.feeds->wake(m);
}

void SseStream::on_closed() {
  std::shared_ptr<EventFeeds::Member> m;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return;
    closed_ = true;
    m = std::move(member_);
  }
  owner_.feeds->leave(m);
  owner_.stream_slots.release(user_);
  if (mode_ != Mode::one_run || cancel_turn_.empty() || terminal_sent_) return;
  // The client left while its run was going: stop it, unless the run has ended (or paused) meanwhile, or the
  // turn has moved on to another run.
  ServerContext& s = owner_;
  s.pool->post([&s, turn_id = cancel_turn_, run_id = run_id_] {
    try {
      auto t = s.rt->turn(turn_id);
      if (!t || t->run_id != run_id || (t->status != TurnStatus::running && t->status != TurnStatus::resuming)) return;
      s.rt->cancel(turn_id);
      s.log(LogLevel::info, fmt::format("turn {}: cancelled, its client left run {}", turn_id, run_id));
    } catch (const std::exception& e) {
      s.log(LogLevel::warn, fmt::format("turn {}: cancel on disconnect failed: {}", turn_id, e.what()));
    }
  });
}

bool SseStream::attach(std::shared_ptr<EventStreamWriter> writer, std::shared_ptr<EventFeeds::Member> member) {
  std::lock_guard<std::mutex> lock(mutex_);
  writer_ = std::move(writer);
  if (closed_) return false;
  member_ = std::move(member);
  return true;
}

void SseStream::set_writer(std::shared_ptr<EventStreamWriter> w) {
  std::lock_guard<std::mutex> lock(mutex_);
  writer_ = std::move(w);
}

std::shared_ptr<EventStreamWriter> SseStream::writer() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return writer_;
}

void open_sse_stream(ServerContext& s, ApiCall& c, StreamSlot& slot, SseStream::Mode mode, std::string run_id,
                     int64_t after, SseOptions options) {
  auto st = std::make_shared<SseStream>(s, c.user, c.internal_thread, mode, std::move(run_id), after);
  st->cancel_on_disconnect(std::move(options.cancel_turn));
  st->pre_1_0(options.pre_1_0);
  auto& prelude = options.prelude;
  Headers headers = {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}};
  for (auto& h : c.extra) headers.push_back(h);
  log_access(c.access_log, c.req, 200);
  const auto tick =
      mode == SseStream::Mode::until_idle ? std::chrono::milliseconds(1000) : std::chrono::milliseconds(0);
  auto writer = c.out->start_stream(std::move(headers), st, s.cfg.limits.keepalive, tick);
  slot.owner = nullptr;  // the stream gives it back (on_closed)
  st->set_writer(writer);
  if (!prelude.empty()) writer->push(prelude.data(), prelude.size());
  std::shared_ptr<EventFeeds::Member> member;
  try {
    member = s.feeds->join(c.internal_thread, c.client_thread, after, st, options.after_is_live);
  } catch (const std::exception& e) {
    s.log(LogLevel::error, fmt::format("stream on thread {}: {}", c.client_thread, e.what()));
    writer->finish();
    return;
  }
  if (!st->attach(writer, member)) {
    s.feeds->leave(member);
    return;
  }
  if (mode == SseStream::Mode::until_idle) end_sse_stream_if_idle(s, st);
}

void end_sse_stream_if_idle(ServerContext& s, const std::shared_ptr<SseStream>& st) {
  std::weak_ptr<SseStream> w = st;
  s.pool->post([&s, w] {
    auto stream = w.lock();
    if (!stream) return;
    auto writer = stream->writer();
    if (!writer || writer->ended()) return;
    const int64_t delivered = stream->delivered();
    auto t = s.rt->thread(stream->internal_id());
    if (t && t->last_seq > delivered) return;
    auto a = s.rt->active_turn(stream->internal_id());
    if (a && (a->status == TurnStatus::running || a->status == TurnStatus::resuming)) return;
    writer->finish();
  });
}

}  // namespace agentrt::server
