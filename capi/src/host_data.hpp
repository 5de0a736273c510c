// HostData: a host's user_data with its destroy callback, called exactly once when the owner lets go.
#pragma once

#include "agentrt.h"

namespace agentrt::capi {

// Move-only owner. Not thread-safe itself; shared through std::shared_ptr by its holders.
class HostData {
 public:
  HostData(void* user_data, agentrt_destroy_cb destroy) noexcept : user_data_(user_data), destroy_(destroy) {}
  HostData(HostData&& o) noexcept : user_data_(o.user_data_), destroy_(o.destroy_) { o.destroy_ = nullptr; }
  HostData& operator=(HostData&&) = delete;
  HostData(const HostData&) = delete;
  HostData& operator=(const HostData&) = delete;
  ~HostData() {
    if (destroy_) destroy_(user_data_);
  }
  void* get() const noexcept { return user_data_; }

 private:
  void* user_data_;
  agentrt_destroy_cb destroy_;
};

}  // namespace agentrt::capi
