// EventFeeds: the fan-out of a thread's committed events to every SSE stream open on it. One runtime
// subscription per thread with open streams; each event is made into its SSE frame once (the thread id
// translated to the client's) and the same bytes go to every stream.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "agentrt/runtime.hpp"
#include "http_server.hpp"

namespace agentrt::server {

// One stream's side of a feed. deliver() is called with the thread's frames in sequence order, each once (a
// batch at a time), starting after the sequence number the stream joined at; from a work thread, under the feed's
// lock: it must be quick (queue the bytes) and must not call the feeds back. `joined`, when not null, is the same
// bytes as frames[0..n) in one chunk, made once for every stream that takes the whole batch: one buffer to queue
// and write instead of n.
class FeedSubscriber {
 public:
  virtual ~FeedSubscriber() = default;
  virtual void deliver(const SharedChunk* frames, size_t n, const SharedChunk* joined) = 0;
  // A stream behind the live tail reads the store at its own pace: no more while this is false (then
  // EventFeeds::wake() goes on). The live tail does not wait: a stream too slow for it is the writer's to drop.
  virtual bool has_room() { return true; }
};

// Thread-safe.
class EventFeeds {
 public:
  using Post = std::function<void(std::function<void()>)>;  // runs a job on a work thread
  // `cache_frames`/`cache_bytes`: a feed keeps its newest frames so that a stream joining a little behind it is
  // served from memory; one further behind reads the store until it reaches them (its frames are its own).
  EventFeeds(Runtime& rt, Post post, std::function<void(std::string_view)> log, size_t cache_frames = 256,
             size_t cache_bytes = 256 << 10);
  ~EventFeeds();
  EventFeeds(const EventFeeds&) = delete;
  EventFeeds& operator=(const EventFeeds&) = delete;

  struct Member;
  // Joins `sub` to the events of runtime thread `internal_id` after `after` (client id `client_id` in the
  // frames). Keep the returned handle while the stream is open; leave() (or dropping it) ends delivery.
  // `after_is_live`: the caller knows `after` to be at (or just behind) the thread's live end, such as the
  // sequence number before a run it just started; the thread's end is then not read first. Throws what
  // Runtime::subscribe throws.
  std::shared_ptr<Member> join(const std::string& internal_id, const std::string& client_id, int64_t after,
                               std::shared_ptr<FeedSubscriber> sub, bool after_is_live = false);
  void leave(const std::shared_ptr<Member>& member);
  // The member's stream has room again: a catch-up that waited for it goes on.
  void wake(const std::shared_ptr<Member>& member);

  size_t feeds() const;  // threads with a runtime subscription (tests, stats)

  // The SSE frame of one stored event: "id: <seq>\ndata: <json, internal id -> client id>\n\n". `previous`: the
  // frame made before it, whose run id it shares when it is the same run's.
  static SharedChunk frame(const StoredEvent& e, std::string_view internal_id, std::string_view client_id,
                           const StreamChunk* previous = nullptr);

  struct Feed;
  struct CatchUp;

 private:
  void attach_locked(const std::shared_ptr<Feed>& feed, const std::shared_ptr<Member>& m, int64_t after);
  void pump(const std::shared_ptr<Feed>& feed);
  void pump(const std::shared_ptr<CatchUp>& c);
  // A new feed in the map, its subscription made but not armed: arm_and_pump() it once the map's lock is released.
  std::shared_ptr<Feed> open_feed_locked(const std::string& internal_id, const std::string& client_id, int64_t after);
  // A feed with its subscription from `after`, not in the map yet.
  std::shared_ptr<Feed> new_feed(const std::string& internal_id, const std::string& client_id, int64_t after);
  void arm_and_pump(const std::shared_ptr<Feed>& f);
  bool try_attach(const std::shared_ptr<Member>& m, int64_t after);

  Runtime& rt_;
  Post post_;
  std::function<void(std::string_view)> log_;
  const size_t cache_frames_;
  const size_t cache_bytes_;
  mutable std::mutex mutex_;  // the map; taken before any feed's lock
  std::map<std::string, std::shared_ptr<Feed>, std::less<>> feeds_;
};

}  // namespace agentrt::server
