// park.cpp: leaving a goroutine for the scheduler (Go's mcall, gopark,
// park_m, goready, Gosched).
#include "runtime/park.hpp"

#include <sched.h>

#include "runtime/coarseclock.hpp"
#include "runtime/context.hpp"
#include "runtime/globrunq.hpp"
#include "runtime/lockosthread.hpp"
#include "runtime/mstart.hpp"
#include "runtime/oslock.hpp"
#include "runtime/proc.hpp"
#include "runtime/runq.hpp"
#include "runtime/san.hpp"
#include "runtime/sched.hpp"
#include "runtime/schedule.hpp"
#include "runtime/syscall.hpp"
#include "runtime/tls.hpp"

namespace goro::rt {

namespace {

void mcall_impl(void (*fn)(void*), bool dying) {
  M* mp = getm();
  G* gp = mp->curg.load(std::memory_order_relaxed);
  if (gp->stk.guard == guard_kind::canary) stack_check_canary(gp);
  eh_save(mp, gp);
  san_leave_g(mp, gp, dying);
  goro_mcall(&gp->sched_sp, mp->g0_sp, fn, gp);
  // Resumed, possibly on another thread: `mp` is stale from here on.
  san_enter_g(gp, false);
}

// On g0: finish parking gp (Go's park_m).
//
// A goroutine may park inside a goro::blocking region (a channel receive in
// the callable). It then arrives here still _Gsyscall, with the lock that
// unlockf releases held, and its M without a P (the P is in _Psyscall, or
// sysmon retook it). The syscall state is left here, on g0, only after
// unlockf: leaving it earlier, on the goroutine's stack, could queue the
// goroutine or stop the thread with the lock still held (the hang of the
// hardening issue's bug 1). gopark re-enters the syscall state when the
// goroutine resumes.
void park_m(void* arg) {
  G* gp = static_cast<G*>(arg);
  M* mp = getm();
  san_enter_g0(mp);
  bool in_syscall = readgstatus(gp) == g_syscall;
  casgstatus(gp, in_syscall ? g_syscall : g_running, g_waiting);
  trace_go_park(mp->p, gp);
  dropg(mp, gp);
  bool ok = true;
  if (auto fn = mp->waitunlockf) {
    // unlockf runs after gp is _Gwaiting, so gp may already have been
    // readied by the time it returns; that is fine, we are off its stack.
    ok = fn(gp, mp->waitlock);
    mp->waitunlockf = nullptr;
    mp->waitlock = nullptr;
  }
  if (in_syscall) {
    // No runtime lock is held any more: take our P back, or any idle one
    // (exitsyscall's fast path, on g0).
    P* oldp = mp->oldp;
    mp->oldp = nullptr;
    if (!exitsyscall_takep(oldp)) {
      if (!ok) {
        // gp must run again but we have no P: queue it like exitsyscall0.
        casgstatus(gp, g_waiting, g_runnable);
        lock_guard lk(sched.lock);
        globrunqput(gp);
      }
      if (mp->lockedg != nullptr) {
        stoplockedm();  // until another M hands us a P for lockedg
        execute(mp->lockedg, false);
      }
      stopm();
      schedule();
    }
  }
  if (!ok) {
    casgstatus(gp, g_waiting, g_runnable);
    execute(gp, true);  // resume at once, same time slice
  }
  schedule();
}

// On g0: like gosched_m, but to the tail of the local run queue (Go's
// goyield_m), used after a semaphore hand-off so the woken waiter runs.
void goyield_m(void* arg) {
  G* gp = static_cast<G*>(arg);
  M* mp = getm();
  san_enter_g0(mp);
  casgstatus(gp, g_running, g_runnable);
  dropg(mp, gp);
  runqput(mp->p, gp, false);
  schedule();
}

bool unlock_mutex(G*, void* lock) {
  static_cast<mutex*>(lock)->unlock();
  return true;
}

}  // namespace

// Switches other than gopark's carry no lock to g0 (gopark's unlockf
// releases the caller's lock there, and schedule() checks that none is
// left).
void mcall(void (*fn)(void*)) {
  lockrank_assert_none("mcall");
  mcall_impl(fn, false);
}

void mcall_dying(void (*fn)(void*)) {
  lockrank_assert_none("goexit");
  mcall_impl(fn, true);
}

void gosched_m(void* arg) {
  // Go's goschedImpl: a yield (Gosched) and a preemption both put the
  // goroutine at the tail of the global queue, behind everything queued
  // anywhere. While the global queue is empty the tail of the local queue
  // gives the same order on this P (schedule drains the local queue
  // before it takes from an empty-but-refilled global one, and any other
  // P can still steal it), without taking sched.lock twice per yield.
  // The relaxed read may be stale: a G that lands in the global queue
  // concurrently is found at the 1-in-61 fairness check or when the local
  // queue runs dry, as any global G is.
  G* gp = static_cast<G*>(arg);
  M* mp = getm();
  san_enter_g0(mp);
  casgstatus(gp, g_running, g_runnable);
  dropg(mp, gp);
  put_yielded(mp->p, gp);
  wakep();
  schedule();
}

void put_yielded(P* pp, G* gp) {
  if (sched.runqsize.load(std::memory_order_relaxed) == 0) {
    runqput(pp, gp, false);
  } else {
    lock_guard lk(sched.lock);
    globrunqput(gp);
  }
}

void gopark(bool (*unlockf)(G*, void*), void* lock, wait_reason reason) {
  M* mp = getm();
  G* gp = mp->curg.load(std::memory_order_relaxed);
  // Inside a goro::blocking region park_m leaves the syscall state on g0,
  // after unlockf released the caller's lock; re-enter it on resuming.
  bool in_syscall = readgstatus(gp) == g_syscall;
  if (gp->oslocks.load(std::memory_order_relaxed) > 0)
    oslock_park_report(gp, int(reason));
  mp->waitunlockf = unlockf;
  mp->waitlock = lock;
  gp->waitreason.store(reason, std::memory_order_relaxed);
  // A relaxed load of a line that changes once a second: no clock read.
  gp->waitsince.store(coarse_clock_now(), std::memory_order_relaxed);
  mcall_impl(park_m, false);
  if (in_syscall) entersyscall();
}

void goparkunlock(mutex* lock, wait_reason reason) {
  gopark(unlock_mutex, lock, reason);
}

void goready(G* gp) {
  M* mp = getm();
  if (mp == nullptr || mp->p == nullptr) {
    ready_noP(gp);
    return;
  }
  casgstatus(gp, g_waiting, g_runnable);
  trace_go_unpark(mp->p, mp, gp);
  // Into the waker's runnext: a woken goroutine runs next on this P and
  // shares the waker's time slice (Go's ready with next=true).
  runqput(mp->p, gp, true);
  wakep();
}

void goyield() {
  if (getg() == nullptr) {
    sched_yield();
    return;
  }
  syscall_suspend sys(getg());
  lockrank_assert_none("goyield");
  mcall_impl(goyield_m, false);
}

bool sync_runtime_canspin(int i) {
  // Spin only briefly, on a multicore machine, when other Ps are running
  // (so the lock holder can make progress) and our own queue is empty
  // (Go's sync_runtime_canSpin).
  constexpr int active_spin = 4;
  if (i >= active_spin || usable_cpus_cached() <= 1) return false;
  if (gomaxprocs_now() <= sched.npidle.load() + sched.nmspinning.load() + 1)
    return false;
  M* mp = getm();
  if (mp == nullptr || mp->p == nullptr || !runqempty(mp->p)) return false;
  return true;
}

void sync_runtime_dospin() { procyield(30); }

void ready_noP(G* gp) {
  casgstatus(gp, g_waiting, g_runnable);
  trace_go_unpark(gp);
  {
    lock_guard lk(sched.lock);
    globrunqput(gp);
  }
  wakep();
}

}  // namespace goro::rt

namespace goro {

void gosched() {
  using namespace rt;
  if (getg() == nullptr) {
    sched_yield();
    return;
  }
  syscall_suspend sys(getg());
  lockrank_assert_none("gosched");
  mcall_impl(gosched_m, false);
}

}  // namespace goro
