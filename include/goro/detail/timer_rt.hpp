// detail/timer_rt.hpp: the runtime timer interface under goro::timer,
// goro::ticker, goro::after and goro::after_func.
#pragma once

#include <cstdint>

namespace goro::rt {
struct timer;
}

namespace goro::detail {

// What a user-level timer does when it fires; owned by the timer.
struct timer_task {
  virtual void fire(std::int64_t now_ns) = 0;
  virtual ~timer_task() = default;
};

// A timer holding `task`, not yet started; the caller owns one reference.
rt::timer* timer_new(timer_task* task);
// (Re)starts it: fires at now + d ns, then every period ns (0: once).
// Returns whether it was pending before.
bool timer_start(rt::timer* t, std::int64_t d_ns, std::int64_t period_ns);
bool timer_cancel(rt::timer* t);  // true if it was pending
void timer_drop(rt::timer* t);    // releases the caller's reference
std::int64_t monotonic_now_ns();

}  // namespace goro::detail
