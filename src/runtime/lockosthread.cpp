// lockosthread.cpp: wiring a goroutine to its thread (Go's LockOSThread,
// stoplockedm, startlockedm).
//
// A locked thread runs only its goroutine. When that goroutine blocks, the
// thread hands its P to another thread and sleeps; whoever later finds the
// goroutine runnable hands its P to the locked thread and sleeps in turn.
// A locked goroutine that exits takes its thread with it (the thread may
// be in a state the goroutine changed, so it is not reused).
#include "runtime/lockosthread.hpp"

#include <pthread.h>

#include <goro/runtime.hpp>
#include <stdexcept>

#include "runtime/checkdead.hpp"
#include "runtime/coarseclock.hpp"
#include "runtime/mstart.hpp"
#include "runtime/panic.hpp"
#include "runtime/sched.hpp"
#include "runtime/syscall.hpp"
#include "runtime/tls.hpp"

namespace goro::rt {

void incidlelocked(std::int32_t v) {
  sched.nmidlelocked += v;
  if (v > 0) checkdead();
}

void stoplockedm() {
  M* mp = getm();
  if (mp->lockedg == nullptr || mp->lockedg->lockedm != mp)
    fatal("stoplockedm: inconsistent locking");
  if (mp->p != nullptr) handoffp(releasep());
  {
    lock_guard lk(sched.lock);
    incidlelocked(1);
  }
  lockrank_assert_none("stoplockedm");
  mp->blocked = true;
  mp->park.sleep();
  mp->park.clear();
  mp->blocked = false;
  coarse_clock_update();  // back from a sleep, as in stopm
  // The waker (startlockedm) took us out of nmidlelocked before waking us.
  acquirep(mp->nextp);
  mp->nextp = nullptr;
}

void startlockedm(G* gp) {
  M* mp = getm();
  M* lmp = gp->lockedm;
  if (lmp == mp) fatal("startlockedm: locked to me");
  if (lmp->nextp != nullptr) fatal("startlockedm: m has p");
  // Hand our P to the locked thread and go idle ourselves. The locked
  // thread stops counting as idle before it is woken, as in Go: counted
  // after, there would be a moment where no thread counts as running while
  // its goroutine is runnable, and checkdead (stopm below) would see it.
  {
    lock_guard lk(sched.lock);
    incidlelocked(-1);
  }
  P* pp = releasep();
  lmp->nextp = pp;
  lmp->park.wakeup();
  stopm();
}

}  // namespace goro::rt

namespace goro {

void lock_os_thread() {
  rt::G* gp = rt::getg();
  if (gp == nullptr) return;  // a plain thread is its own thread already
  rt::M* mp = rt::getm();
  if (mp->locked_ext == UINT32_MAX)
    throw std::overflow_error("goro::lock_os_thread nesting overflow");
  mp->locked_ext++;
  mp->lockedg = gp;
  gp->lockedm = mp;
}

void unlock_os_thread() {
  rt::G* gp = rt::getg();
  if (gp == nullptr) return;
  rt::M* mp = rt::getm();
  if (mp->locked_ext == 0) return;  // as Go: a no-op when not locked
  if (--mp->locked_ext == 0) {
    mp->lockedg = nullptr;
    gp->lockedm = nullptr;
  }
}

}  // namespace goro
