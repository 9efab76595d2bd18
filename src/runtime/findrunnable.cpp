// findrunnable.cpp: find a goroutine to run, in Go's order (proc.go
// findRunnable): this P's timers, fairness poll of the global queue, local
// queue, global queue, non-blocking netpoll, stealing (with other Ps'
// timers on the last pass), then give up the P, re-check everything, and
// sleep in the poller until the next timer, or on the M's note.
#include "runtime/coarseclock.hpp"
#include "runtime/globrunq.hpp"
#include "runtime/mstart.hpp"
#include "runtime/nanotime.hpp"
#include "runtime/netpoll.hpp"
#include "runtime/panic.hpp"
#include "runtime/runq.hpp"
#include "runtime/sched.hpp"
#include "runtime/schedule.hpp"
#include "runtime/steal.hpp"
#include "runtime/stw.hpp"
#include "runtime/timers.hpp"
#include "runtime/tls.hpp"

namespace goro::rt {

void become_spinning(M* mp) {
  mp->spinning = true;
  sched.nmspinning.fetch_add(1);
  sched.needspinning.store(0);
}

void injectglist(g_queue* list) {
  // Go's injectglist: with no P, everything goes to the global queue and
  // idle Ps are started for it; with a P, as many as there are idle Ps go
  // global (and get Ms), the rest to our local queue.
  if (list->empty()) return;
  for (G* gp = list->head; gp; gp = gp->schedlink)
    casgstatus(gp, g_waiting, g_runnable);
  M* mp = getm();
  P* pp = mp ? mp->p : nullptr;
  if (pp == nullptr) {
    std::int32_t n = list->size;
    {
      lock_guard lk(sched.lock);
      globrunqputbatch(list);
    }
    for (; n > 0 && sched.npidle.load() != 0; n--) startm(nullptr, false);
    return;
  }
  std::int32_t npidle = sched.npidle.load();
  g_queue global;
  for (std::int32_t i = 0; i < npidle && !list->empty(); i++)
    global.push_back(list->pop());
  if (!global.empty()) {
    std::int32_t n = global.size;
    {
      lock_guard lk(sched.lock);
      globrunqputbatch(&global);
    }
    for (; n > 0 && sched.npidle.load() != 0; n--) startm(nullptr, false);
  }
  while (G* gp = list->pop()) runqput(pp, gp, false);
  wakep();
}

G* findrunnable(bool* inherit_time) {
  M* mp = getm();
top:
  *inherit_time = false;
  if (sched.gcwaiting.load(std::memory_order_relaxed)) {
    gcstopm();  // returns with a P once the world restarts
    goto top;
  }
  P* pp = mp->p;

  // This P's expired timers; they may ready goroutines into our queue.
  bool ran = false;
  std::int64_t poll_until = check_timers(pp, 0, &ran);

  // Fairness: every 61st time slice look at the global queue first, so
  // two goroutines that keep readying each other through runnext cannot
  // starve it.
  if (pp->schedtick.load(std::memory_order_relaxed) % 61 == 0 &&
      sched.runqsize.load(std::memory_order_relaxed) > 0) {
    lock_guard lk(sched.lock);
    if (G* gp = globrunqget(pp, 1)) return gp;
  }

  // Local run queue (the only source that can inherit the time slice).
  if (G* gp = runqget(pp, inherit_time)) return gp;

  // Global run queue.
  if (sched.runqsize.load(std::memory_order_relaxed) != 0) {
    lock_guard lk(sched.lock);
    if (G* gp = globrunqget(pp, 0)) return gp;
  }

  // Non-blocking netpoll, if someone waits on descriptors and no M is
  // already blocked in the poller.
  if (netpollinited() && netpoll_any_waiters() && sched.last_poll.load() != 0) {
    g_queue list = netpoll(0);
    trace_netpoll(list.head, list.size);
    if (!list.empty()) {
      G* gp = list.pop();
      casgstatus(gp, g_waiting, g_runnable);
      injectglist(&list);
      return gp;
    }
  }

  // Steal, but limit the number of spinning Ms to half the busy Ps:
  // with low parallelism, more spinners only burn CPU.
  if (mp->spinning ||
      2 * sched.nmspinning.load() < gomaxprocs_now() - sched.npidle.load()) {
    if (!mp->spinning) become_spinning(mp);
    bool new_work = false, ran_timers = false;
    if (G* gp = stealwork(pp, &new_work, &ran_timers)) return gp;
    if (new_work || ran_timers) goto top;
  }

  // Nothing found: prepare to give up the P. Snapshot allp first; it can
  // change once we no longer hold a P.
  {
    std::int32_t n = gomaxprocs_now();
    P** allp_snapshot = allp;
    sched.lock.lock();
    if (sched.gcwaiting.load(std::memory_order_relaxed)) {
      sched.lock.unlock();
      goto top;
    }
    if (sched.runq.size != 0) {
      G* gp = globrunqget(pp, 0);
      sched.lock.unlock();
      return gp;
    }
    if (!mp->spinning && sched.needspinning.load() == 1) {
      // A spinner found work but no idle P for it (see below); become a
      // spinner ourselves instead of going idle.
      become_spinning(mp);
      sched.lock.unlock();
      goto top;
    }
    if (releasep() != pp) fatal("findrunnable: wrong p");
    pidleput(pp);
    sched.lock.unlock();

    // Spinning -> non-spinning. Decrement nmspinning, then (after the
    // seq_cst RMW, our #StoreLoad) re-check every source of work: a
    // submitter publishes work, then reads nmspinning (wakep); either it
    // sees no spinner and wakes someone, or we see its work here. (As in
    // Go, a local-runq submitter has no fence of its own: at worst its
    // work waits for its own P, it is never lost.)
    bool was_spinning = mp->spinning;
    if (was_spinning) {
      mp->spinning = false;
      if (sched.nmspinning.fetch_sub(1) - 1 < 0)
        fatal("findrunnable: negative nmspinning");

      // Global queue.
      sched.lock.lock();
      if (sched.runq.size != 0) {
        if (P* p2 = pidleget_spinning()) {
          G* gp = globrunqget(p2, 0);
          sched.lock.unlock();
          if (gp == nullptr)
            fatal("findrunnable: global runq empty with non-zero runqsize");
          acquirep(p2);
          become_spinning(mp);
          return gp;
        }
      }
      sched.lock.unlock();

      // Other Ps' local queues.
      if (P* p2 = check_runqs_noP(allp_snapshot, n)) {
        acquirep(p2);
        become_spinning(mp);
        goto top;
      }
    }
    // The earliest timer of any P bounds the idle sleep (Go's
    // checkTimersNoP).
    std::int64_t next = timer_sleep_until();
    if (next != 0 && (poll_until == 0 || next < poll_until)) poll_until = next;

    // Become the poller: block in netpoll until the next timer.
    if (netpollinited() && (netpoll_any_waiters() || poll_until != 0) &&
        sched.last_poll.exchange(0) != 0) {
      sched.poll_until.store(poll_until);
      std::int64_t delay = -1;
      if (poll_until != 0) {
        std::int64_t now = nanotime();
        delay = poll_until - now;
        if (delay < 0) delay = 0;
      }
      g_queue list = netpoll(delay);
      trace_netpoll(list.head, list.size);
      std::int64_t now = nanotime();
      coarse_clock_update();
      sched.poll_until.store(0);
      sched.last_poll.store(now);
      sched.lock.lock();
      P* p2 = pidleget();
      sched.lock.unlock();
      if (p2 == nullptr) {
        injectglist(&list);
      } else {
        acquirep(p2);
        if (!list.empty()) {
          G* gp = list.pop();
          casgstatus(gp, g_waiting, g_runnable);
          injectglist(&list);
          return gp;
        }
        if (was_spinning) become_spinning(mp);
        goto top;  // a timer is probably due
      }
    } else if (poll_until != 0 && netpollinited()) {
      // Someone else polls; make sure it wakes in time for our timer.
      std::int64_t until = sched.poll_until.load();
      if (until == 0 || until > poll_until) netpollbreak();
    }
    stopm();
    goto top;
  }
}

}  // namespace goro::rt
