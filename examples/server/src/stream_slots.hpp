// StreamSlots: the open SSE streams counted against max_streams in all and max_streams_per_user for each user.
#pragma once

#include <mutex>
#include <string>
#include <unordered_map>

namespace agentrt::server {

class StreamSlots;

// A reserved slot, given back when it goes unless a stream took it over (owner = nullptr). Not thread-safe.
struct StreamSlot {
  StreamSlots* owner = nullptr;
  std::string user;
  StreamSlot(StreamSlots* o, std::string u) : owner(o), user(std::move(u)) {}
  StreamSlot(StreamSlot&& o) noexcept : owner(o.owner), user(std::move(o.user)) { o.owner = nullptr; }
  StreamSlot(const StreamSlot&) = delete;
  StreamSlot& operator=(const StreamSlot&) = delete;
  ~StreamSlot();
};

// Thread-safe (one mutex).
class StreamSlots {
 public:
  StreamSlots(int max_streams, int max_streams_per_user) : max_(max_streams), max_per_user_(max_streams_per_user) {}

  // A slot for one more stream of `user`, or ApiError 429 too_many_streams at once.
  StreamSlot take(const std::string& user);
  void release(const std::string& user);
  int open() const;  // streams open now (GET /health)

 private:
  const int max_;
  const int max_per_user_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, int> per_user_;
  int open_ = 0;
};

}  // namespace agentrt::server
