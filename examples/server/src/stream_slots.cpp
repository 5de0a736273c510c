#include "stream_slots.hpp"

#include <fmt/format.h>

#include "api_call.hpp"

namespace agentrt::server {

StreamSlot::~StreamSlot() {
  if (owner) owner->release(user);
}

StreamSlot StreamSlots::take(const std::string& user) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (open_ >= max_)
      throw ApiError{429, "too_many_streams",
                     fmt::format("{} streams are open, the limit of this server; retry later", open_)};
    int& mine = per_user_[user];
    if (mine >= max_per_user_)
      throw ApiError{429, "too_many_streams",
                     fmt::format("you have {} streams open, the limit per user; close one or retry later", mine)};
    ++mine;
    ++open_;
  }
  return StreamSlot{this, user};
}

void StreamSlots::release(const std::string& user) {
  std::lock_guard<std::mutex> lock(mutex_);
  --open_;
  auto it = per_user_.find(user);
  if (it != per_user_.end() && --it->second <= 0) per_user_.erase(it);
}

int StreamSlots::open() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return open_;
}

}  // namespace agentrt::server
