// Names the calling thread for `top -H`, perf and debuggers ("agentrt-<part>"; Linux keeps 15 bytes).
#pragma once

#include <pthread.h>

namespace agentrt {
inline namespace v1 {

inline void name_this_thread(const char* name) { pthread_setname_np(pthread_self(), name); }

}  // namespace v1
}  // namespace agentrt
