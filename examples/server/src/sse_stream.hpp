// SseStream: one SSE stream of a thread's events (POST /agent/runs, GET .../events) — a feed's subscriber that
// filters, ends and gives back its slot — and how one is opened on an API call.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "api_call.hpp"
#include "event_feeds.hpp"
#include "http_server.hpp"
#include "stream_slots.hpp"

namespace agentrt::server {

struct ServerContext;

// A feed's subscriber that filters (one run), ends (after its run, or once the thread is idle) and gives back its
// slot when the connection is over. Thread-safe.
class SseStream final : public FeedSubscriber,
                        public EventStreamListener,
                        public std::enable_shared_from_this<SseStream> {
 public:
  enum class Mode {
    one_run,     // this run's events until its RUN_FINISHED / RUN_ERROR (POST /agent/runs)
    until_idle,  // the thread's events until nothing runs and everything committed was sent
    follow,      // the thread's events until the client leaves
  };
  SseStream(ServerContext& owner, std::string user, std::string internal_id, Mode mode, std::string run_id,
            int64_t after)
      : owner_(owner),
        user_(std::move(user)),
        internal_id_(std::move(internal_id)),
        mode_(mode),
        run_id_(std::move(run_id)),
        delivered_(after) {}

  void deliver(const SharedChunk* frames, size_t n, const SharedChunk* joined) override;
  void on_tick() override;
  bool has_room() override;
  void on_drained() override;
  void on_closed() override;

  // After start_stream and join: false when the connection was already over (the member must go).
  bool attach(std::shared_ptr<EventStreamWriter> writer, std::shared_ptr<EventFeeds::Member> member);
  // one_run: the client leaving before the run's last event cancels turn `turn_id` (while this run is its run).
  void cancel_on_disconnect(std::string turn_id) { cancel_turn_ = std::move(turn_id); }
  // Set before the stream starts: RUN_FINISHED written for a client before AG-UI 1.0.
  void pre_1_0(bool on) { pre_1_0_ = on; }
  void set_writer(std::shared_ptr<EventStreamWriter> w);
  std::shared_ptr<EventStreamWriter> writer() const;

  const std::string& internal_id() const { return internal_id_; }
  int64_t delivered() const { return delivered_; }

 private:
  ServerContext& owner_;
  const std::string user_;
  const std::string internal_id_;
  const Mode mode_;
  const std::string run_id_;
  std::atomic<int64_t> delivered_;
  std::string cancel_turn_;                 // set before the stream starts; read once it is closed
  bool pre_1_0_ = false;                    // set before the stream starts
  std::atomic<bool> terminal_sent_{false};  // one_run: the run's last event was handed to the connection
  mutable std::mutex mutex_;
  std::shared_ptr<EventStreamWriter> writer_;
  std::shared_ptr<EventFeeds::Member> member_;
  bool closed_ = false;
};

struct SseOptions {
  // A one_run stream whose client leaves before the run's end cancels this turn (cancel on disconnect); empty: the
  // run goes on.
  std::string cancel_turn;
  // Frames written first, before the feed's (a connect's snapshots).
  std::vector<SharedChunk> prelude;
  // The client speaks AG-UI before 1.0 (its RunAgentInput names no protocolVersion 1 or later): RUN_FINISHED
  // outcomes are written the way it reads them (see pre_1_0_run_finished).
  bool pre_1_0 = false;
  // `after` is the live end as the caller just saw it (a run it started): the feed is joined there without
  // reading the thread's end first.
  bool after_is_live = false;
};

// Answers 200 text/event-stream and joins the thread's feed after `after`: the stream's events as
// `id: <seq>` + `data: <json>` frames (LF only), ": keep-alive" during silence. The stream takes over `slot`.
void open_sse_stream(ServerContext& s, ApiCall& c, StreamSlot& slot, SseStream::Mode mode, std::string run_id,
                     int64_t after, SseOptions options = {});

// Whether a RunAgentInput comes from a client of AG-UI before 1.0: no protocolVersion, or a 0.x one.
bool speaks_pre_1_0(const json& run_agent_input);
// A RUN_FINISHED event's JSON as a client before AG-UI 1.0 reads it (its outcome schema is closed and knows only
// success and interrupt): pendingToolCallIds left out (absent means the client derives them from the stream, as
// 1.0 allows), a cancelled outcome left out (a plain end). nullopt: the event needs no change.
std::optional<std::string> pre_1_0_run_finished(std::string_view event_json);
// A frame of a RUN_FINISHED rewritten so (the same frame when it needs no change).
SharedChunk pre_1_0_frame(const SharedChunk& frame);

// Nothing runs on the thread and every committed event up to what the stream was given was sent: ends it (checked
// on a work thread).
void end_sse_stream_if_idle(ServerContext& s, const std::shared_ptr<SseStream>& st);

}  // namespace agentrt::server
