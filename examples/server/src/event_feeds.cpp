#include "event_feeds.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <deque>
#include <vector>

#include "agentrt/json.hpp"
#include "thread_namespace.hpp"

namespace agentrt::server {

namespace {

// Set while a pump is queued, cleared when it starts: one queued pump per feed, however many commits.
struct Wake {
  std::atomic<bool> scheduled{false};
};

// Whether an event ends its run (RUN_FINISHED, RUN_ERROR). The runtime writes an event's "type" first, in plain
// ASCII: read there; any other text is parsed.
bool is_terminal_event(std::string_view event_json) {
  constexpr std::string_view head = "{\"type\":\"";
  if (event_json.substr(0, head.size()) == head) {
    const size_t end = event_json.find('"', head.size());
    const std::string_view type = event_json.substr(head.size(), end - head.size());
    if (end != std::string_view::npos && type.find('\\') == std::string_view::npos)
      return type == "RUN_FINISHED" || type == "RUN_ERROR";
  }
  if (event_json.find("RUN_FINISHED") == std::string_view::npos &&
      event_json.find("RUN_ERROR") == std::string_view::npos && event_json.find("\\u") == std::string_view::npos)
    return false;
  json e = json::parse(event_json, nullptr, false);
  if (!e.is_object()) return false;
  const std::string type = e.value("type", "");
  return type == "RUN_FINISHED" || type == "RUN_ERROR";
}

// The bytes of `frames` in one chunk (its seq the last frame's, terminal if any is; no single run), or null when
// they are more than `max` bytes (such a batch goes frame by frame, and a stream's buffer limit applies to each).
SharedChunk join_frames(const std::vector<SharedChunk>& frames, size_t max) {
  size_t size = 0;
  for (const auto& f : frames) size += f->bytes.size();
  if (size > max) return nullptr;
  auto c = std::make_shared<StreamChunk>();
  c->bytes.reserve(size);
  for (const auto& f : frames) {
    c->bytes += f->bytes;
    c->terminal = c->terminal || f->terminal;
  }
  c->seq = frames.back()->seq;
  return c;
}

constexpr size_t kMaxJoinedBytes = 64 << 10;  // a pump's frames joined into one chunk up to this size
constexpr int kPumpBatch = 512;               // events per pump before the feed goes to the back of the work queue
constexpr int64_t kNearLive = 64;             // a new feed starts this close behind the live end for its first stream

}  // namespace

struct EventFeeds::Member {
  std::string internal_id;
  std::string client_id;
  std::shared_ptr<FeedSubscriber> sub;
  std::mutex mutex;  // guards the three below (taken after a feed's lock, never before)
  std::weak_ptr<Feed> feed;
  std::shared_ptr<CatchUp> catchup;
  bool left = false;
};

struct EventFeeds::Feed {
  std::string internal_id;
  std::string client_id;
  std::unique_ptr<Subscription> sub;
  std::shared_ptr<Wake> wake = std::make_shared<Wake>();
  std::mutex pump_mutex;  // one pump at a time
  std::mutex mutex;       // everything below
  int64_t base = 0;       // the cache holds the frames after base up to last
  int64_t last = 0;
  std::deque<SharedChunk> cache;
  size_t cache_bytes = 0;
  struct Entry {
    std::shared_ptr<Member> member;
    int64_t after;
  };
  std::vector<Entry> members;
  bool closed = false;
};

// A stream that joined further behind than its feed's cache: its own subscription until it reaches the cache.
struct EventFeeds::CatchUp {
  std::weak_ptr<Member> member;
  std::unique_ptr<Subscription> sub;
  std::shared_ptr<Wake> wake = std::make_shared<Wake>();
  std::mutex pump_mutex;
  int64_t delivered = 0;
  bool done = false;  // under pump_mutex
};

EventFeeds::EventFeeds(Runtime& rt, Post post, std::function<void(std::string_view)> log, size_t cache_frames,
                       size_t cache_bytes)
    : rt_(rt), post_(std::move(post)), log_(std::move(log)), cache_frames_(cache_frames), cache_bytes_(cache_bytes) {}

EventFeeds::~EventFeeds() {
  std::lock_guard<std::mutex> lock(mutex_);
  feeds_.clear();
}

SharedChunk EventFeeds::frame(const StoredEvent& e, std::string_view internal_id, std::string_view client_id,
                              const StreamChunk* previous) {
  auto c = std::make_shared<StreamChunk>();
  c->terminal = is_terminal_event(e.json);  // the type is the same after the id's translation
  char seq[24];
  const auto seq_end = std::to_chars(seq, seq + sizeof seq, e.seq).ptr;
  std::string& b = c->bytes;
  b.reserve(e.json.size() + client_id.size() + 40);
  b.append("id: ", 4).append(seq, seq_end).append("\ndata: ", 7);
  append_rewritten_json(b, e.json, internal_id, client_id);
  b.append("\n\n", 2);
  c->seq = e.seq;
  if (previous && previous->run && *previous->run == e.run_id)
    c->run = previous->run;  // a run's frames share one copy of its id
  else if (!e.run_id.empty())
    c->run = std::make_shared<const std::string>(e.run_id);
  return c;
}

size_t EventFeeds::feeds() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return feeds_.size();
}

std::shared_ptr<EventFeeds::Feed> EventFeeds::new_feed(const std::string& internal_id, const std::string& client_id,
                                                       int64_t after) {
  auto f = std::make_shared<Feed>();
  f->internal_id = internal_id;
  f->client_id = client_id;
  f->base = f->last = after;
  f->sub = rt_.subscribe(internal_id, after);
  return f;
}

std::shared_ptr<EventFeeds::Feed> EventFeeds::open_feed_locked(const std::string& internal_id,
                                                               const std::string& client_id, int64_t after) {
  auto f = new_feed(internal_id, client_id, after);
  feeds_[internal_id] = f;
  return f;
}

// Called with no lock held (a callback that hands a pump to a work thread is a wake-up, which may run the woken
// thread in this one's place: under the map's lock, every join and leave would wait for it). Until then the feed's
// commits only queue in its subscription. The feed's first pump runs here, on the joining thread, not as a job of
// its own: the pump marked scheduled before on_ready's first call, that call queues none, and what commits before
// the pump has drained is drained by it (a commit after that queues the next).
void EventFeeds::arm_and_pump(const std::shared_ptr<Feed>& f) {
  std::weak_ptr<Feed> w = f;
  f->wake->scheduled = true;
  f->sub->on_ready([this, wake = f->wake, w] {
    if (wake->scheduled.exchange(true)) return;
    post_([this, w] {
      if (auto feed = w.lock()) pump(feed);
    });
  });
  pump(f);
}

void EventFeeds::attach_locked(const std::shared_ptr<Feed>& f, const std::shared_ptr<Member>& m, int64_t after) {
  std::lock_guard<std::mutex> ml(m->mutex);
  if (m->left) return;
  for (const auto& c : f->cache)
    if (c->seq > after) m->sub->deliver(&c, 1, nullptr);
  f->members.push_back(Feed::Entry{m, std::max(after, f->last)});
  m->feed = f;
}

std::shared_ptr<EventFeeds::Member> EventFeeds::join(const std::string& internal_id, const std::string& client_id,
                                                     int64_t after, std::shared_ptr<FeedSubscriber> sub,
                                                     bool after_is_live) {
  auto m = std::make_shared<Member>();
  m->internal_id = internal_id;
  m->client_id = client_id;
  m->sub = std::move(sub);
  int64_t live = after;
  if (!after_is_live) {
    const auto thread = rt_.thread(internal_id);
    live = thread ? thread->last_seq : 0;
  }
  const bool near = after >= live || live - after <= kNearLive;
  bool open = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = feeds_.find(internal_id);
    if (it == feeds_.end()) {
      open = true;
    } else {
      auto f = it->second;
      std::lock_guard<std::mutex> fl(f->mutex);
      if (after >= f->base) {
        attach_locked(f, m, after);
        return m;
      }
    }
  }
  if (open) {
    // The feed's subscription is made before the map's lock is taken again: subscribing allocates and takes the
    // hub's lock, and every join and leave of every thread waits for the map's. A near join starts the feed where
    // it joins; one far behind starts it at the live end and catches up to it.
    std::shared_ptr<Feed> made = new_feed(internal_id, client_id, near ? after : live);
    std::shared_ptr<Feed> opened;  // armed once the map's lock is released
    bool attached = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = feeds_.find(internal_id);
      std::shared_ptr<Feed> f = it == feeds_.end() ? made : it->second;  // another join may have opened one
      if (f == made) feeds_[internal_id] = opened = made;
      std::lock_guard<std::mutex> fl(f->mutex);
      if (after >= f->base) {
        attach_locked(f, m, after);
        attached = true;
      }
    }
    if (opened) arm_and_pump(opened);
    made.reset();  // the one not needed (its subscription goes outside the map's lock)
    if (attached) return m;
  }
  // Behind the cache: read the store on a subscription of its own until it reaches the feed.
  auto c = std::make_shared<CatchUp>();
  c->member = m;
  c->delivered = after;
  c->sub = rt_.subscribe(internal_id, after);
  {
    std::lock_guard<std::mutex> ml(m->mutex);
    m->catchup = c;
  }
  std::weak_ptr<CatchUp> w = c;
  c->sub->on_ready([this, wake = c->wake, w] {
    if (wake->scheduled.exchange(true)) return;
    post_([this, w] {
      if (auto cu = w.lock()) pump(cu);
    });
  });
  return m;
}

bool EventFeeds::try_attach(const std::shared_ptr<Member>& m, int64_t after) {
  std::shared_ptr<Feed> opened;
  bool attached = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = feeds_.find(m->internal_id);
    std::shared_ptr<Feed> f;
    if (it == feeds_.end()) {
      f = opened = open_feed_locked(m->internal_id, m->client_id, after);
    } else {
      f = it->second;
    }
    std::lock_guard<std::mutex> fl(f->mutex);
    if (after >= f->base) {
      attach_locked(f, m, after);
      attached = true;
    }
  }
  if (opened) arm_and_pump(opened);
  return attached;
}

void EventFeeds::leave(const std::shared_ptr<Member>& m) {
  if (!m) return;
  std::shared_ptr<Feed> f;
  std::shared_ptr<CatchUp> c;
  {
    std::lock_guard<std::mutex> ml(m->mutex);
    m->left = true;
    f = m->feed.lock();
    c = std::move(m->catchup);
  }
  std::shared_ptr<Feed> closed;
  if (f) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::lock_guard<std::mutex> fl(f->mutex);
    f->members.erase(
        std::remove_if(f->members.begin(), f->members.end(), [&](const Feed::Entry& e) { return e.member == m; }),
        f->members.end());
    if (f->members.empty() && !f->closed) {
      f->closed = true;
      auto it = feeds_.find(f->internal_id);
      if (it != feeds_.end() && it->second == f) feeds_.erase(it);
      closed = f;
    }
  }
  // The subscriptions go on a work thread: their destructors may wait for a runtime lock.
  if (closed || c)
    post_([closed = std::move(closed), c = std::move(c)]() mutable {
      closed.reset();
      c.reset();
    });
}

void EventFeeds::wake(const std::shared_ptr<Member>& m) {
  if (!m) return;
  std::shared_ptr<CatchUp> c;
  {
    std::lock_guard<std::mutex> ml(m->mutex);
    c = m->catchup;
  }
  if (!c || c->wake->scheduled.exchange(true)) return;
  std::weak_ptr<CatchUp> w = c;
  post_([this, w] {
    if (auto cu = w.lock()) pump(cu);
  });
}

void EventFeeds::pump(const std::shared_ptr<Feed>& f) {
  std::lock_guard<std::mutex> pl(f->pump_mutex);
  f->wake->scheduled = false;  // a commit from here on queues another pump
  {
    std::lock_guard<std::mutex> fl(f->mutex);
    if (f->closed) return;
  }
  // Everything committed so far, made into frames once, then handed to each stream in one piece.
  std::vector<SharedChunk> batch;
  f->sub->drain(static_cast<size_t>(kPumpBatch), [&](const StoredEvent& e) {
    batch.push_back(frame(e, f->internal_id, f->client_id, batch.empty() ? nullptr : batch.back().get()));
  });
  if (batch.empty()) return;
  const SharedChunk joined = batch.size() > 1 ? join_frames(batch, kMaxJoinedBytes) : nullptr;
  {
    StreamPushBatch writes;  // the streams' writes go to the I/O threads together, after the feed's lock
    std::lock_guard<std::mutex> fl(f->mutex);
    if (f->closed) return;
    for (const auto& fr : batch) {
      f->cache.push_back(fr);
      f->cache_bytes += fr->bytes.size();
      f->last = fr->seq;
    }
    while (!f->cache.empty() && (f->cache.size() > cache_frames_ || f->cache_bytes > cache_bytes_)) {
      f->base = f->cache.front()->seq;
      f->cache_bytes -= f->cache.front()->bytes.size();
      f->cache.pop_front();
    }
    for (auto& entry : f->members) {
      size_t from = 0;
      while (from < batch.size() && batch[from]->seq <= entry.after) ++from;
      if (from == batch.size()) continue;
      entry.after = batch.back()->seq;
      entry.member->sub->deliver(batch.data() + from, batch.size() - from, from == 0 && joined ? &joined : nullptr);
    }
  }
  if (batch.size() == static_cast<size_t>(kPumpBatch) && !f->wake->scheduled.exchange(true)) {
    std::weak_ptr<Feed> w = f;
    post_([this, w] {
      if (auto feed = w.lock()) pump(feed);
    });
  }
}

void EventFeeds::pump(const std::shared_ptr<CatchUp>& c) {
  std::unique_ptr<Subscription> finished;  // destroyed after the lock is released
  {
    std::lock_guard<std::mutex> pl(c->pump_mutex);
    c->wake->scheduled = false;
    if (c->done) return;
    auto m = c->member.lock();
    if (!m) return;
    bool more = false;
    for (int n = 0;; ++n) {
      {
        std::lock_guard<std::mutex> ml(m->mutex);
        if (m->left) {
          c->done = true;
          break;
        }
      }
      if (try_attach(m, c->delivered)) {
        std::lock_guard<std::mutex> ml(m->mutex);
        m->catchup.reset();
        c->done = true;
        break;
      }
      if (n == kPumpBatch) {
        more = true;
        break;
      }
      if (!m->sub->has_room()) break;  // wake() goes on once the stream has written some
      auto e = c->sub->next(std::chrono::milliseconds(0));
      if (!e) break;
      const SharedChunk fr = frame(*e, m->internal_id, m->client_id);
      m->sub->deliver(&fr, 1, nullptr);
      c->delivered = e->seq;
    }
    if (c->done) finished = std::move(c->sub);
    if (more && !c->wake->scheduled.exchange(true)) {
      std::weak_ptr<CatchUp> w = c;
      post_([this, w] {
        if (auto cu = w.lock()) pump(cu);
      });
    }
  }
}

}  // namespace agentrt::server
