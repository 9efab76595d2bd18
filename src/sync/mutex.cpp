// mutex.cpp: the contended paths of goro::mutex (Go's sync.Mutex lockSlow
// and unlockSlow). The fast paths are inline in <goro/sync.hpp>.
//
// The state word packs the locked, woken and starving flags with the count
// of queued waiters; every transition is one compare-and-swap on it, and the
// queued waiters sleep on the runtime semaphore sema_. See sync.hpp for the
// normal / starvation mode contract.
#include <goro/sync.hpp>

#include "runtime/nanotime.hpp"
#include "runtime/panic.hpp"
#include "runtime/park.hpp"
#include "runtime/sema.hpp"

namespace goro {

namespace {

// A waiter that has waited longer than this asks for starvation mode.
constexpr std::int64_t starvation_threshold_ns = 1'000'000;

rt::wait_reason reason_for(detail::lock_kind kind) {
  switch (kind) {
    case detail::lock_kind::rwmutex:
      return rt::wait_reason::sync_rwmutex_lock;
    case detail::lock_kind::once:
      return rt::wait_reason::sync_once;
    case detail::lock_kind::mutex:
      break;
  }
  return rt::wait_reason::sync_mutex_lock;
}

}  // namespace

void mutex::lock_slow(detail::lock_kind kind) {
  constexpr std::int32_t one_waiter = 1 << waiter_shift;
  std::int64_t wait_start = 0;  // when we first queued; 0 = never queued
  bool starving = false;        // we have waited longer than the threshold
  bool awoke = false;           // we own the woken flag
  int spins = 0;
  std::int32_t old = state_.load(std::memory_order_relaxed);
  for (;;) {
    // Spin while the lock is held in normal mode and spinning may pay off:
    // a few rounds, only with other Ps running (the holder may be on one of
    // them) and nothing else runnable here. In starvation mode the lock is
    // going to the head waiter, so spinning for it is pointless.
    if ((old & (locked_bit | starving_bit)) == locked_bit &&
        rt::sync_runtime_canspin(spins)) {
      // Claim the woken flag if nobody has, so that unlock does not wake a
      // sleeper to compete with us.
      if (!awoke && (old & woken_bit) == 0 && (old >> waiter_shift) != 0 &&
          state_.compare_exchange_strong(old, old | woken_bit,
                                         std::memory_order_relaxed)) {
        awoke = true;
      }
      rt::sync_runtime_dospin();
      spins++;
      old = state_.load(std::memory_order_relaxed);
      continue;
    }

    // Work out the state we want.
    std::int32_t next = old;
    // In normal mode, try to take the lock; in starvation mode it belongs to
    // the queue, so we only join the queue.
    if ((old & starving_bit) == 0) next |= locked_bit;
    // Going to sleep: count ourselves as a waiter.
    if ((old & (locked_bit | starving_bit)) != 0) next += one_waiter;
    // Ask for starvation mode, but only while the lock is held: with the lock
    // free there is nobody whose unlock would do the hand-off.
    if (starving && (old & locked_bit) != 0) next |= starving_bit;
    if (awoke) {
      // We hold the woken flag (we were woken or claimed it while spinning);
      // we are about to take the lock or sleep again, so give it back.
      if ((next & woken_bit) == 0) rt::fatal("sync: inconsistent mutex state");
      next &= ~woken_bit;
    }

    if (!state_.compare_exchange_strong(old, next, std::memory_order_acq_rel,
                                        std::memory_order_relaxed)) {
      continue;  // `old` has been reloaded
    }
    if ((old & (locked_bit | starving_bit)) == 0) return;  // ours

    // Sleep. A waiter that has slept before goes back to the head of the
    // queue, so it is not overtaken by the others a second time.
    const bool requeue = wait_start != 0;
    if (wait_start == 0) wait_start = rt::nanotime();
    rt::semacquire(&sema_, reason_for(kind), requeue);
    starving =
        starving || rt::nanotime() - wait_start > starvation_threshold_ns;

    old = state_.load(std::memory_order_relaxed);
    if ((old & starving_bit) != 0) {
      // Starvation mode: the unlocker handed the lock to us and left the
      // locked bit clear. Take it and drop our waiter count in one add.
      if ((old & (locked_bit | woken_bit)) != 0 || (old >> waiter_shift) == 0)
        rt::fatal("sync: inconsistent mutex state");
      std::int32_t delta = locked_bit - one_waiter;
      // Leave starvation mode if we did not really starve or nobody waits
      // behind us: strict hand-offs cost throughput, and a last waiter
      // left in starvation mode would make the mutex unusable for
      // newcomers until someone else waited.
      if (!starving || (old >> waiter_shift) == 1) delta -= starving_bit;
      state_.fetch_add(delta, std::memory_order_acq_rel);
      return;
    }
    // Normal mode: we were woken to compete for the lock, and we own the
    // woken flag now.
    awoke = true;
    spins = 0;
  }
}

void mutex::unlock_slow(std::int32_t now) {
  constexpr std::int32_t one_waiter = 1 << waiter_shift;
  if (((now + locked_bit) & locked_bit) == 0)
    rt::fatal("sync: unlock of unlocked mutex");
  if ((now & starving_bit) != 0) {
    // Starvation mode: give the lock and our time slice straight to the head
    // waiter. The locked bit stays clear until it runs, but the starving bit
    // keeps newcomers away meanwhile.
    rt::semrelease(&sema_, true);
    return;
  }
  std::int32_t old = now;
  for (;;) {
    // Nobody to wake, or somebody is already dealing with the lock (it was
    // taken again, a waiter is awake or a spinner claimed the woken flag,
    // or it went into starvation mode): nothing to do.
    if ((old >> waiter_shift) == 0 ||
        (old & (locked_bit | woken_bit | starving_bit)) != 0)
      return;
    // Take one waiter off the count and wake it, marked woken so that no
    // other unlock wakes a second one meanwhile.
    const std::int32_t next = (old - one_waiter) | woken_bit;
    if (state_.compare_exchange_strong(old, next, std::memory_order_relaxed)) {
      rt::semrelease(&sema_, false);
      return;
    }
  }
}

}  // namespace goro
