// stw.cpp: stop-the-world and GOMAXPROCS changes (Go's stopTheWorld,
// startTheWorld, procresize).
//
// The stopper marks gcwaiting and asks every running goroutine to yield;
// Ps stop themselves at the top of findrunnable (gcstopm), idle Ps and Ps
// in syscalls are stopped directly. Preemption is cooperative, so a
// goroutine that never enters the runtime delays the stop until it does.
#include "runtime/stw.hpp"

#include "runtime/globrunq.hpp"
#include "runtime/mstart.hpp"
#include "runtime/netpoll.hpp"
#include "runtime/panic.hpp"
#include "runtime/preempt.hpp"
#include "runtime/runq.hpp"
#include "runtime/sched.hpp"
#include "runtime/schedule.hpp"
#include "runtime/sema.hpp"
#include "runtime/steal.hpp"
#include "runtime/sysmon.hpp"
#include "runtime/timers.hpp"
#include "runtime/tls.hpp"

namespace goro::rt {

namespace {

// One stop-the-world at a time; a goroutine waiting here parks, leaving
// its P free to be stopped by the current stopper.
std::uint32_t worldsema = 1;

// Every P but the caller's own (Go's preemptone skips the current M): the
// stopper keeps running after start_the_world, so asking its own
// goroutine to yield would hand its P to whatever is runnable for a whole
// time slice at its next runtime entry (at gomaxprocs 1, ~10 ms per
// goro::gomaxprocs call next to a busy goroutine; Go's
// TestStopTheWorldDeadlock, ported as StopTheWorldLatency).
void preemptall() {
  M* mp = getm();
  P* self = mp != nullptr ? mp->p : nullptr;
  std::int32_t n = gomaxprocs_now();
  for (std::int32_t i = 0; i < n; i++)
    if (allp[i] != self &&
        allp[i]->status.load(std::memory_order_relaxed) == p_running)
      preemptone(allp[i]);
}

// Moves everything pp owns to the global queue / the current P (Go's
// p.destroy). World stopped, sched.lock held.
void pdestroy(P* pp, P* dst) {
  // Run queue, tail first onto the head of the global queue so the order
  // is preserved; runnext goes in front of them.
  bool inherit;
  g_queue tmp;
  while (G* gp = runqget(pp, &inherit)) {
    if (inherit)
      tmp.push_front(gp);  // runnext first
    else
      tmp.push_back(gp);
  }
  // tmp: [runnext, ring...]; put it at the head of the global queue.
  g_queue rest = sched.runq;
  sched.runq = g_queue{};
  globrunqputbatch(&tmp);
  globrunqputbatch(&rest);
  if (dst != nullptr) timers_take(dst, pp);
  {
    lock_guard lk(sched.gfree.lock);
    while (G* gp = pp->gfree.pop()) sched.gfree.list.push(gp);
    sched.gfree.publish();
  }
  gnostack_spill(&pp->gnostack, 0);
  pp->status.store(p_dead, std::memory_order_relaxed);
}

// World stopped, sched.lock held. Returns the list of Ps with work, each
// paired with an M to start (or none: create one).
P* procresize(std::int32_t nprocs_new) {
  std::int32_t old = gomaxprocs_now();
  for (std::int32_t i = old; i < nprocs_new; i++) {
    if (allp[i] == nullptr) {
      allp[i] = new P;
      allp[i]->id = i;
    }
    allp[i]->status.store(p_gcstop, std::memory_order_relaxed);
    idlepmask.clear(i);
    timerpmask.set(i);
  }
  M* mp = getm();
  P* cur = mp ? mp->p : nullptr;
  if (cur != nullptr && cur->id >= nprocs_new) {
    // Our P goes away: take P 0 instead.
    cur->m.store(nullptr, std::memory_order_relaxed);
    mp->p = nullptr;
    cur->status.store(p_gcstop, std::memory_order_relaxed);
    cur = allp[0];
    cur->m.store(nullptr, std::memory_order_relaxed);
    cur->status.store(p_idle, std::memory_order_relaxed);
    acquirep(cur);
  }
  for (std::int32_t i = nprocs_new; i < old; i++)
    pdestroy(allp[i], cur != nullptr ? cur : allp[0]);
  steal_order.reset(std::uint32_t(nprocs_new));
  gomaxprocs_value.store(nprocs_new);
  // Rebuild the idle list; Ps with work are returned for starting.
  sched.pidle = nullptr;
  sched.npidle.store(0);
  P* runnable = nullptr;
  for (std::int32_t i = nprocs_new - 1; i >= 0; i--) {
    P* pp = allp[i];
    if (pp == cur) continue;
    pp->status.store(p_idle, std::memory_order_relaxed);
    pp->m.store(nullptr, std::memory_order_relaxed);
    if (runqempty(pp)) {
      pidleput(pp);
    } else {
      idlepmask.clear(i);
      pp->link = runnable;
      runnable = pp;
    }
  }
  return runnable;
}

}  // namespace

void stw_p_stopped() {
  sched.stopwait--;
  if (sched.stopwait == 0) sched.stopnote.wakeup();
}

void gcstopm() {
  M* mp = getm();
  if (mp->spinning) {
    mp->spinning = false;
    if (sched.nmspinning.fetch_sub(1) - 1 < 0)
      fatal("gcstopm: negative nmspinning");
  }
  P* pp = releasep();
  {
    lock_guard lk(sched.lock);
    pp->status.store(p_gcstop, std::memory_order_relaxed);
    stw_p_stopped();
  }
  stopm();
}

void stop_the_world() {
  semacquire(&worldsema, wait_reason::stopping_the_world);
  M* mp = getm();
  sched.lock.lock();
  sched.stopwait = gomaxprocs_now();
  sched.gcwaiting.store(true);
  preemptall();
  if (mp != nullptr && mp->p != nullptr) {
    mp->p->status.store(p_gcstop, std::memory_order_relaxed);
    sched.stopwait--;
  }
  // Ps in syscalls and idle Ps stop right here.
  for (std::int32_t i = 0; i < gomaxprocs_now(); i++) {
    P* pp = allp[i];
    std::uint32_t s = p_syscall;
    if (pp->status.compare_exchange_strong(s, p_gcstop)) {
      pp->syscalltick.store(pp->syscalltick.load() + 1);
      sched.stopwait--;
    }
  }
  while (P* pp = pidleget()) {
    pp->status.store(p_gcstop, std::memory_order_relaxed);
    sched.stopwait--;
  }
  bool wait = sched.stopwait > 0;
  sched.lock.unlock();
  if (wait) {
    // Re-ask every 100 us, as Go does, in case a goroutine missed it.
    while (!sched.stopnote.tsleep(100 * 1000)) preemptall();
    sched.stopnote.clear();
  }
  if (sched.stopwait != 0) fatal("stopTheWorld: not stopped");
}

void start_the_world(std::int32_t newprocs) {
  M* mp = getm();
  // Readiness that arrived while the world was stopped (nobody could
  // poll): collect it now; injectglist below queues it (Go's
  // startTheWorldWithSema polls first too).
  g_queue polled;
  if (netpollinited()) polled = netpoll(0);
  sched.lock.lock();
  std::int32_t n = newprocs > 0 ? newprocs : gomaxprocs_now();
  P* runnable = procresize(n);
  if (mp != nullptr && mp->p != nullptr)
    mp->p->status.store(p_running, std::memory_order_relaxed);
  sched.gcwaiting.store(false);
  sched.lock.unlock();
  sysmon_wake_if_waiting();
  while (runnable != nullptr) {
    P* pp = runnable;
    runnable = pp->link;
    pp->link = nullptr;
    // pp is idle but off the idle list: pair it with an M.
    lock_guard lk(sched.lock);
    M* nmp = mget();
    if (nmp != nullptr) {
      nmp->nextp = pp;
      nmp->park.wakeup();
    } else {
      std::int64_t id = mreserve_id();
      sched.lock.unlock();
      newm(pp, false, id);
      sched.lock.lock();
    }
  }
  injectglist(&polled);
  wakep();
  semrelease(&worldsema);
}

}  // namespace goro::rt
