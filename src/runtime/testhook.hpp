// testhook.hpp: points on cold paths where a test can stop a thread inside
// a race window and make the other side of the race happen there, so a
// race the runtime must tolerate is reproduced deterministically instead of
// by luck. Each hook is one relaxed load and a not-taken branch when unset.
#pragma once

#include <atomic>
#include <cstdint>

namespace goro::rt {

struct P;
struct timer;
struct poll_desc;

struct test_hooks {
  // pidleput decided whether the P keeps its timer-mask bit (stage 0) and
  // updated the mask (stage 1); sched.lock held.
  std::atomic<void (*)(P*, int)> pidleput_timers{nullptr};
  // A due timer was taken off (or re-armed in) its heap and is about to
  // fire; the heap lock is still held.
  std::atomic<void (*)(timer*)> timer_unlinked{nullptr};
  // netpoll took an event for pd off epoll_wait and is about to check its
  // sequence tag (the close-and-reuse window of poll_desc.info).
  std::atomic<void (*)(poll_desc*)> netpoll_event{nullptr};
  // Seconds added to the coarse clock (coarseclock.hpp), so that a test
  // sees goroutines that waited minutes without waiting; set through
  // coarse_clock_advance_for_test.
  std::atomic<std::int64_t> clock_offset_s{0};
};
extern test_hooks testhooks;

// Moves the coarse clock forward by `seconds` (tests only) and refreshes it.
void coarse_clock_advance_for_test(std::int64_t seconds);

template <class... A>
inline void run_test_hook(const std::atomic<void (*)(A...)>& h, A... a) {
  if (auto f = h.load(std::memory_order_relaxed)) [[unlikely]]
    f(a...);
}

}  // namespace goro::rt
