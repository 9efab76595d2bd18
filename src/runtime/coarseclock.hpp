// coarseclock.hpp: a clock in whole seconds that the park path reads
// without a system call (for G.waitsince, the ", N minutes" of goroutine
// dumps). sched.coarse_s is refreshed by sysmon every round and by every M
// coming back from a sleep (stopm, stoplockedm, a blocking netpoll), i.e. on
// paths that are slow anyway; it is stored only when the second changed, so
// readers on other CPUs miss on its cache line at most once a second. It lags
// the real clock by at most sysmon's sleep while some P is busy; while
// everything is idle nothing parks.
#pragma once

#include <atomic>
#include <cstdint>

#include "runtime/nanotime.hpp"
#include "runtime/sched.hpp"
#include "runtime/testhook.hpp"

namespace goro::rt {

// Seconds of the monotonic clock, plus the tests' offset, plus 1 (so that
// 0 means "not set").
inline std::int64_t coarse_clock_exact() {
  return nanotime() / 1000000000 + 1 +
         testhooks.clock_offset_s.load(std::memory_order_relaxed);
}

inline void coarse_clock_update() {
  std::int64_t now = coarse_clock_exact();
  if (sched.coarse_s.load(std::memory_order_relaxed) != now)
    sched.coarse_s.store(now, std::memory_order_relaxed);
}

inline std::int64_t coarse_clock_now() {
  return sched.coarse_s.load(std::memory_order_relaxed);
}

}  // namespace goro::rt
