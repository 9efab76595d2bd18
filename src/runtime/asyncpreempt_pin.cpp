// asyncpreempt_pin.cpp: what happens to an asynchronously preempted
// goroutine once it is off its thread (Go's gopreempt_m, from
// asyncPreempt2), and preemption deferred to an OS lock's unlock.
//
// A preempted goroutine is requeued as a yield would, plus a pin: it is
// locked to this thread (as lock_os_thread does) until it resumes here,
// because the interrupted code may hold addresses of this thread's
// thread_locals (or malloc's per-thread caches) in registers. The pin
// (G.async_pinned) is for that one resumption; unpin drops it, leaving a
// goroutine that lock_os_thread locked as it was. GORO_DEBUG=
// asyncpreemptmigrate=1 drops the pin (a test of the check).
//
// Deferred preemption: a signal that finds the goroutine inside an OS
// lock's critical section leaves G.preempt set; the unlock that releases
// the last lock calls oslock_preempt_point, which preempts there with an
// ordinary mcall under the handler's other conditions.
#include "runtime/asyncpreempt_internal.hpp"
#include "runtime/globrunq.hpp"
#include "runtime/lockosthread.hpp"
#include "runtime/mstart.hpp"
#include "runtime/oslock.hpp"
#include "runtime/panic.hpp"
#include "runtime/park.hpp"
#include "runtime/preempt.hpp"
#include "runtime/proc.hpp"
#include "runtime/runq.hpp"
#include "runtime/san.hpp"
#include "runtime/sched.hpp"
#include "runtime/schedule.hpp"
#include "runtime/tls.hpp"

namespace goro::rt {

// On g0, with gp just switched out (still _Grunning): requeue it pinned to
// this thread, as a yield (Go's gopreempt_m) plus the pin. Registers may
// hold addresses of this thread's thread_locals (or malloc's per-thread
// caches), so gp resumes here; a goroutine already locked by
// lock_os_thread stays locked as it was.
[[noreturn]] void requeue_pinned(M* mp, G* gp) {
  casgstatus(gp, g_running, g_runnable);
  trace_go_preempt(gp, true);
  dropg(mp, gp);
  if (gp->lockedm == nullptr && debug.asyncpreemptmigrate == 0) {
    gp->lockedm = mp;
    mp->lockedg = gp;
    gp->async_pinned = true;
  }
  put_yielded(mp->p, gp);
  // schedule() sees the locked goroutine: it hands the P (with gp queued)
  // to another thread and waits until someone finds gp and hands a P back.
  schedule();
  __builtin_unreachable();
}

// On gp's stack, resumed: the pin was for this one resumption.
void unpin(M* mp, G* gp) {
  if (gp->async_pinned) {
    gp->async_pinned = false;
    if (mp->locked_ext == 0) {
      mp->lockedg = nullptr;
      gp->lockedm = nullptr;
    }
  }
}

namespace {

// mcall target of a preemption deferred to an unlock.
void deferred_preempt_m(void* arg) {
  M* mp = getm();
  san_enter_g0(mp);
  requeue_pinned(mp, static_cast<G*>(arg));
}

}  // namespace

void oslock_preempt_point(G* gp, void* ra) {
  // The same conditions as the handler's, checked in ordinary context: the
  // unlock was called from preemptible code (the user's, not goro's, libc's
  // or libstdc++'s), by a running goroutine outside any preempt_guard and
  // runtime lock, with a P.
  if (!async_preempt_on.load(std::memory_order_relaxed)) return;
  M* mp = getm();
  if (mp == nullptr || mp->curg.load(std::memory_order_relaxed) != gp ||
      mp->locks != 0 || goro_tls_nlocks != 0 || mp->p == nullptr ||
      gp->atomicstatus.load(std::memory_order_relaxed) != g_running ||
      gp->preempt_off.load(std::memory_order_relaxed) != 0 ||
      !pc_preemptible(reinterpret_cast<std::uintptr_t>(ra)))
    return;
  gp->preempt.store(false, std::memory_order_relaxed);
  async_preempt_stats.at_unlock.fetch_add(1, std::memory_order_relaxed);
  async_preempt_stats.preempted.fetch_add(1, std::memory_order_relaxed);
  // An ordinary call: the caller-saved registers are dead, mcall saves the
  // rest. Resumes on this thread (the pin).
  mcall(deferred_preempt_m);
  M* now = getm();
  if (now != mp && debug.asyncpreemptmigrate == 0)
    fatal("async preemption: goroutine resumed on another thread");
  unpin(now, gp);
}

}  // namespace goro::rt
