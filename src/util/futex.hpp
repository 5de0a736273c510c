// Sleeping on a 32-bit atomic until it changes, and waking its sleepers: the futex where there is one (Linux),
// std::atomic's wait and notify elsewhere. libstdc++'s wait first yields the core a few times (sched_yield), which
// costs system calls for nothing when the sleeper is sure to sleep; the futex goes straight to sleep.
//
// Waking touches only the address: a sleeper may already have seen the change, returned and let the word's memory
// go (a waiter's word on its stack), and the wake finds nobody there. A sleeper wakes spuriously too: callers loop.
#pragma once

#include <atomic>
#include <climits>
#include <cstdint>

#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace agentrt {
inline namespace v1 {

// Sleeps while `word` holds `seen` (returns at once when it does not; may return spuriously).
inline void futex_wait(std::atomic<uint32_t>& word, uint32_t seen) {
#ifdef __linux__
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, seen, nullptr, nullptr, 0);
#else
  word.wait(seen);
#endif
}

// Wakes one sleeper on `word` (all of them with `all`).
inline void futex_wake(std::atomic<uint32_t>& word, bool all = false) {
#ifdef __linux__
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, all ? INT_MAX : 1, nullptr, nullptr, 0);
#else
  if (all)
    word.notify_all();
  else
    word.notify_one();
#endif
}

}  // namespace v1
}  // namespace agentrt
