// schedule.cpp: one round of scheduling on g0 (Go's schedule, execute,
// resetspinning).
#include "runtime/schedule.hpp"

#include "runtime/context.hpp"
#include "runtime/lockosthread.hpp"
#include "runtime/mstart.hpp"
#include "runtime/newproc.hpp"
#include "runtime/panic.hpp"
#include "runtime/park.hpp"
#include "runtime/runq.hpp"
#include "runtime/san.hpp"
#include "runtime/sched.hpp"
#include "runtime/stackshrink.hpp"
#include "runtime/tls.hpp"
#include "runtime/trace.hpp"
#include "runtime/traceback.hpp"

namespace goro::rt {

void execute(G* gp, bool inherit_time) {
  M* mp = getm();
  P* pp = mp->p;
  // Counted before curg is published: sysmon's long-running report trusts
  // a curg it loads only while nrun is unchanged (sysmon.cpp).
  owner_add(pp->nrun, 1);
  // Release (a plain store on x86): sysmon loads curg with acquire and
  // then touches the G.
  mp->curg.store(gp, std::memory_order_release);
  gp->m = mp;
  casgstatus(gp, g_runnable, g_running);
  // A dump may be unwinding gp on its stack (traceback.cpp): the status
  // store, then this load, with the dump's heavy barrier on the other side.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (__builtin_expect(scan_g.load(std::memory_order_acquire) == gp, 0))
    scan_wait(gp);
  // Likewise sysmon may be releasing or have released gp's stack memory
  // (stackshrink.cpp): the same handshake, then it comes back first.
  if (__builtin_expect(gp->stk_saved.load(std::memory_order_relaxed) != 0, 0))
    stack_restore_slow(gp);
  trace_go_start(pp, gp);
  gp->preempt.store(false, std::memory_order_relaxed);
  // A new time slice unless gp inherits the current one (runnext).
  if (!inherit_time)
    pp->schedtick.store(pp->schedtick.load(std::memory_order_relaxed) + 1,
                        std::memory_order_relaxed);
  lockrank_assert_none("execute");
  // A goroutine that has never run gets its stack now (lazy binding).
  if (gp->sched_sp == nullptr) stack_bind(pp, gp);
  eh_restore(mp, gp);
  san_leave_g0(mp, gp);
  goro_gogo(gp->sched_sp);
}

void resetspinning() {
  M* mp = getm();
  if (!mp->spinning) fatal("resetspinning: not a spinning m");
  mp->spinning = false;
  // seq_cst RMW: the #StoreLoad barrier of the spinning protocol (our
  // decrement is visible before wakep reads nmspinning / npidle).
  std::int32_t n = sched.nmspinning.fetch_sub(1) - 1;
  if (n < 0) fatal("resetspinning: negative nmspinning");
  // The last spinner found work; submitters do nothing while someone
  // spins, so it is our job to start another spinner if Ps are idle.
  wakep();
}

namespace {

// sysmon asked this P to switch (P.preempt): the slice that the goroutine
// in runnext would inherit is over. Queue it as a preempted goroutine is
// queued (gosched_m's placement), so the local and global queues get
// their turn: without this a pair that readies each other through runnext
// would keep the slice forever, as channel operations are not preemption
// points and execute clears each link's G.preempt. Once per slice at most.
void yield_runnext(P* pp) {
  G* next = pp->runnext.load(std::memory_order_relaxed);
  if (next != nullptr && pp->runnext.compare_exchange_strong(next, nullptr))
    put_yielded(pp, next);
}

}  // namespace

void schedule() {
  M* mp = getm();
  // A runtime lock held here was taken on a goroutine's stack and will
  // never be released by it in time (the class of the blocking-region
  // park hang). Debug builds only: M.locks is kept by the lock-rank checker.
  if (mp->locks != 0) fatal("schedule: holding locks");
  lockrank_assert_none("schedule");
  if (mp->lockedg != nullptr) {
    // A locked thread runs only its goroutine: wait until it is runnable.
    stoplockedm();
    execute(mp->lockedg, false);
  }
top:
  P* pp = mp->p;
  if (pp->preempt.load(std::memory_order_relaxed)) {
    pp->preempt.store(false, std::memory_order_relaxed);
    yield_runnext(pp);
  }
  if (mp->spinning && !runqempty(pp))
    fatal("schedule: spinning with local work");
  bool inherit_time = false;
  G* gp = findrunnable(&inherit_time);  // blocks until work is available
  // This M is about to run a goroutine; if it was spinning, another M may
  // have to start spinning in its place.
  if (mp->spinning) resetspinning();
  if (gp->lockedm != nullptr) {
    // gp runs only on its own thread: hand it our P, then sleep.
    startlockedm(gp);
    goto top;
  }
  execute(gp, inherit_time);
}

}  // namespace goro::rt
