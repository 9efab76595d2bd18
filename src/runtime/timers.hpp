// timers.hpp: per-P timer heaps (Go's time.go). Each P keeps a 4-ary
// min-heap of its timers under its own lock; timers are run by the P's
// scheduler (findrunnable), by thieves on their last steal pass, and the
// earliest one bounds how long an idle thread sleeps in the poller.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "runtime/g.hpp"
#include "runtime/lock.hpp"

namespace goro::detail {
struct timer_task;
}

namespace goro::rt {

struct P;

struct timer {
  // Serialises user operations (stop/reset) on this timer. Lock order:
  // timer.mu, then the heap's lock. Running a timer takes only the heap
  // lock.
  mutex mu{lock_rank::timer_user};
  // The P whose heap holds the timer (changed under that heap's lock).
  std::atomic<P*> pp{nullptr};
  std::int32_t index = -1;  // position in the heap
  std::int64_t when = 0;
  std::int64_t period = 0;  // > 0: periodic
  // What firing does: either f(arg) (runtime timers such as sleep) or the
  // user-level task (channel timers, after_func).
  void (*f)(void* arg) = nullptr;
  void* arg = nullptr;
  goro::detail::timer_task* task = nullptr;
  // References: the user handle, plus one while in a heap, plus one while
  // it runs. The last release deletes task and timer (refcounted timers
  // only; a G's sleep timer lives as long as the G).
  std::atomic<std::int32_t> refs{1};
  // Firings in progress: stop/reset wait until it is 0 (as Go's deltimer
  // waits for timerRunning) so nothing fires after they return. A count,
  // not a flag: a ticker due again can be fired by its P's owner and by a
  // thief at the same time. Raised under the heap lock before the timer
  // leaves the heap (see check_timers).
  std::atomic<std::int32_t> firing{0};
};

struct timers {
  mutex lock{lock_rank::timers};
  std::vector<timer*> heap;
  // heap[0]->when or 0 when empty; read without the lock.
  std::atomic<std::int64_t> min_when{0};
};

// Adds t (not in any heap) to the current P's heap (or P 0's from a plain
// thread) to fire at `when`; wakes the poller if it sleeps longer.
void timer_add(timer* t, std::int64_t when);
// Removes t from its heap. True if it was pending (so it will not fire).
bool timer_stop(timer* t);
// Stops t and re-adds it at `when` with `period`. True if it was pending.
bool timer_reset(timer* t, std::int64_t when, std::int64_t period);
void timer_retain(timer* t);
void timer_release(timer* t);

// Runs pp's expired timers (Go's checkTimers). Returns the time of pp's
// next timer (0: none); *ran tells whether any ran. now == 0: read clock.
std::int64_t check_timers(P* pp, std::int64_t now, bool* ran);
// The earliest timer over all Ps (0: none) (Go's timeSleepUntil).
std::int64_t timer_sleep_until();
// Moves all of pp's timers to the current P (GOMAXPROCS shrink).
void timers_take(P* dst, P* src);

// Sleep support: parks the goroutine until `when`.
void timesleep(std::int64_t ns);

}  // namespace goro::rt
