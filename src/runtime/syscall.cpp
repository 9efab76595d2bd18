// syscall.cpp: blocking calls (Go's entersyscall / exitsyscall /
// entersyscallblock, and handoffp).
//
// Entering a syscall does not give the P away: it stays _Psyscall,
// unwired, and the thread keeps a note of it (oldp). A short call then
// costs two atomic operations: on return the thread takes its P back with
// one CAS. Only if the call lasts (sysmon sees the same syscalltick for a
// whole tick, >= 20 us) and the P is useful elsewhere does sysmon retake it
// and hand it to another thread (handoffp). A call known to block long
// hands the P off at once.
#include "runtime/syscall.hpp"

#include <errno.h>

#include <goro/runtime.hpp>

#include "runtime/globrunq.hpp"
#include "runtime/lockosthread.hpp"
#include "runtime/mstart.hpp"
#include "runtime/netpoll.hpp"
#include "runtime/panic.hpp"
#include "runtime/park.hpp"
#include "runtime/preempt.hpp"
#include "runtime/runq.hpp"
#include "runtime/san.hpp"
#include "runtime/sched.hpp"
#include "runtime/schedule.hpp"
#include "runtime/stats.hpp"
#include "runtime/stw.hpp"
#include "runtime/sysmon.hpp"
#include "runtime/timers.hpp"
#include "runtime/tls.hpp"

namespace goro::rt {

void handoffp(P* pp) {
  stat_inc(stats_counters.handoffs);
  trace_handoff(pp);
  // Local or global work: start an M for it right away.
  if (!runqempty(pp) || sched.runqsize.load() != 0) {
    startm(pp, false);
    return;
  }
  // No work, and nobody spinning or idle to pick up future work: become
  // the spinner ourselves (through a new M).
  if (sched.nmspinning.load() + sched.npidle.load() == 0) {
    std::int32_t zero = 0;
    if (sched.nmspinning.compare_exchange_strong(zero, 1)) {
      sched.needspinning.store(0);
      startm(pp, true);
      return;
    }
  }
  sched.lock.lock();
  if (sched.gcwaiting.load()) {
    pp->status.store(p_gcstop);
    stw_p_stopped();
    sched.lock.unlock();
    return;
  }
  if (sched.runq.size != 0) {
    sched.lock.unlock();
    startm(pp, false);
    return;
  }
  // The last running P, with nobody polling: someone must service timers
  // and the poller.
  if (sched.npidle.load() == gomaxprocs_now() - 1 &&
      sched.last_poll.load() != 0) {
    sched.lock.unlock();
    startm(pp, false);
    return;
  }
  std::int64_t when = pp->tm.min_when.load();
  pidleput(pp);
  sched.lock.unlock();
  if (when != 0) wake_netpoller(when);
}

namespace {

void exitsyscall0(void* arg) {
  M* mp = getm();
  san_enter_g0(mp);
  exitsyscall_nop(mp, static_cast<G*>(arg));
}

}  // namespace

void exitsyscall_nop(M* mp, G* gp) {
  casgstatus(gp, g_syscall, g_runnable);
  trace_sys_exit(gp, false);
  dropg(mp, gp);
  P* pp;
  {
    lock_guard lk(sched.lock);
    pp = sched.gcwaiting.load() ? nullptr : pidleget();
    if (pp == nullptr) globrunqput(gp);
  }
  if (pp != nullptr) {
    acquirep(pp);
    execute(gp, false);
  }
  if (mp->lockedg != nullptr) {
    // Wait until another M schedules lockedg for us.
    stoplockedm();
    execute(gp, false);
  }
  stopm();
  schedule();
  __builtin_unreachable();
}

namespace {

void acquirep_after_syscall(P* pp) {
  acquirep(pp);
  // sysmon's view of this P's syscall is over.
  pp->syscalltick.store(pp->syscalltick.load(std::memory_order_relaxed) + 1,
                        std::memory_order_relaxed);
}

}  // namespace

bool exitsyscall_takep(P* oldp) {
  if (sched.gcwaiting.load()) return false;
  // Our own P, if sysmon did not take it meanwhile.
  if (oldp != nullptr &&
      oldp->status.load(std::memory_order_relaxed) == p_syscall) {
    std::uint32_t s = p_syscall;
    if (oldp->status.compare_exchange_strong(s, p_idle)) {
      acquirep_after_syscall(oldp);
      return true;
    }
  }
  // Any idle P.
  if (sched.npidle.load() != 0) {
    P* pp;
    {
      lock_guard lk(sched.lock);
      pp = pidleget();
    }
    if (pp != nullptr) {
      acquirep_after_syscall(pp);
      return true;
    }
  }
  return false;
}

void entersyscall() {
  // sysmon must watch this P (Go's entersyscall_sysmon).
  if (sysmonwait.load(std::memory_order_relaxed)) sysmon_wake_if_waiting();
  M* mp = getm();
  G* gp = mp->curg.load(std::memory_order_relaxed);
  P* pp = mp->p;
  mp->syscalltick = pp->syscalltick.load(std::memory_order_relaxed);
  casgstatus(gp, g_running, g_syscall);
  owner_add(pp->nsyscall, 1);
  trace_sys_enter(gp);
  pp->m.store(nullptr, std::memory_order_relaxed);
  mp->oldp = pp;
  mp->p = nullptr;
  // seq_cst store (XCHG): sysmon (acquire CAS) may take the P from here on,
  // and it is also our #StoreLoad against stop_the_world, which stores
  // gcwaiting and then CASes _Psyscall Ps to _Pgcstop. With a release store
  // the gcwaiting load below could be satisfied before the status store is
  // visible: the stopper would miss our P and we would miss its request.
  pp->status.store(p_syscall, std::memory_order_seq_cst);
  if (sched.gcwaiting.load(std::memory_order_seq_cst)) {
    // A stop-the-world is waiting for our P: give it up now.
    std::uint32_t s = p_syscall;
    if (pp->status.compare_exchange_strong(s, p_gcstop)) {
      lock_guard lk(sched.lock);
      stw_p_stopped();
    }
  }
}

void entersyscallblock() {
  M* mp = getm();
  G* gp = mp->curg.load(std::memory_order_relaxed);
  P* pp = mp->p;
  pp->syscalltick.store(pp->syscalltick.load() + 1);
  casgstatus(gp, g_running, g_syscall);
  owner_add(pp->nsyscall, 1);
  trace_sys_block(gp);
  mp->oldp = nullptr;
  handoffp(releasep());
}

void exitsyscall() {
  M* mp = getm();
  G* gp = mp->curg.load(std::memory_order_relaxed);
  P* oldp = mp->oldp;
  mp->oldp = nullptr;
  if (exitsyscall_takep(oldp)) {
    casgstatus(gp, g_syscall, g_running);
    trace_sys_exit(gp, true);
    preempt_check();
    return;
  }
  // No P: queue ourselves and park the thread (exitsyscall0 on g0).
  mcall(exitsyscall0);
}

}  // namespace goro::rt

namespace goro {

blocking_scope::blocking_scope(bool long_call) {
  rt::G* gp = rt::getg();
  active_ = gp != nullptr;
  if (!active_) return;
  if (gp->syscall_depth++ != 0) return;  // nested: the outer region rules
  if (long_call)
    rt::entersyscallblock();
  else
    rt::entersyscall();
}

namespace {

// errno's address on the calling thread, computed afresh on every call.
// glibc declares __errno_location const, so a compiler may keep the address
// it computed before a goroutine switch and use it after, on another
// thread; the asm makes the result opaque, so every call recomputes it.
__attribute__((noinline)) int* errno_here() {
  int* p = &errno;
  asm volatile("" : "+r"(p));
  return p;
}

}  // namespace

blocking_scope::~blocking_scope() {
  if (!active_) return;
  rt::G* gp = rt::getg();
  if (--gp->syscall_depth != 0) return;
  // exitsyscall may move the goroutine to another thread (and the runtime
  // may make system calls of its own): carry the errno the blocking call
  // left on this thread over to the one the goroutine continues on.
  int err = *errno_here();
  rt::exitsyscall();
  *errno_here() = err;
}

int set_max_threads(int n) {
  if (n <= 0) throw std::invalid_argument("goro::set_max_threads: need n > 0");
  if (!rt::runtime_started.load(std::memory_order_acquire))
    detail::ensure_started(nullptr);
  rt::lock_guard lk(rt::sched.lock);
  int prev = rt::sched.maxmcount;
  rt::sched.maxmcount = n;
  if (rt::mcount() > n) {
    std::fprintf(stderr, "runtime: program exceeds %d-thread limit\n", n);
    rt::fatal("thread exhaustion");
  }
  return prev;
}

}  // namespace goro
